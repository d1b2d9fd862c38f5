package e2e

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/workflows"
)

// The soak that found two budget bugs, as a test: a team of sim sessions
// working a board, rotating by policy and by their own handoffs, with a
// turns budget; nid up is killed with kill -9 at random moments, then the
// budget is lowered to a little above what was spent while they ran. The
// group then spends exactly its budget, no turn charged past the limit
// (rotation turns, the agents' own handoffs, grants made before the limit
// was lowered, turns retried after a kill), and every session, those
// holding a task too, shows paused, as the group's own line says.
func TestKillNineSoakSpendsExactlyTheLoweredBudget(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	const sessions = 4
	var yaml strings.Builder
	for i := range sessions {
		// One in two writes its own handoff now and then, besides the
		// policy's rotations by context and by turns; s0 never finishes
		// its task, so one session surely holds a task when the budget
		// runs out, and the others finish theirs out of step.
		taskTurns := 2 + i
		if i == 0 {
			taskTurns = 100000
		}
		fmt.Fprintf(&yaml, "      - {agent: sim, name: s%d, sim: {window: 100000, tokensPerTurn: 15000, turnDelay: 50ms, taskTurns: %d, handoffAfterTurns: %d}}\n", i, taskTurns, 4*(i%2))
	}
	s := newSite(t, `  soak:
    goal: Work the board
    rotate: {mode: auto, contextPercent: 60, maxTurns: 5}
    budget: {turns: 100000}
    tasks:`+recordTasks(80)+`
    sessions:
`+yaml.String())
	up := s.up()
	spent := func() int64 { return s.board("soak").Spent.Turns }
	for kill := range 3 {
		// Kill at a random moment once the team is working again: mid-turn,
		// mid-rotation, or between the two.
		from := spent()
		s.eventually(fmt.Sprintf("work before kill %d", kill+1), 3*time.Minute, func() bool { return spent() >= from+4 })
		time.Sleep(time.Duration(rng.IntN(1500)) * time.Millisecond)
		up.kill()
		up = s.up()
	}
	from := spent()
	s.eventually("work after the last kill", 3*time.Minute, func() bool { return spent() >= from+4 })

	// Lower the budget to a little above what is spent: turns already
	// granted are in it, and the rest must stop at the new limit.
	limit := spent() + 6 + int64(rng.IntN(6))
	s.mustNid("group", "set", "soak", fmt.Sprintf(`budget={"turns":%d}`, limit))
	s.eventually("every session paused", 3*time.Minute, func() bool {
		rows := s.ls()
		for _, r := range rows {
			if r.Status != workflows.StatusPaused {
				return false
			}
		}
		return len(rows) == sessions
	})

	var view workflows.GroupView
	require.NoError(t, json.Unmarshal([]byte(s.mustNid("group", "show", "soak", "--json")), &view))
	require.Equal(t, limit, view.Board.Spent.Turns, "exactly the budget: no turn charged past it (seed %d)", seed)
	show := s.mustNid("group", "show", "soak")
	require.Contains(t, show, fmt.Sprintf("turns %d of %d spent (0 left)", limit, limit))
	require.Contains(t, show, "exhausted (turns): sessions paused")
	require.NotNil(t, view.Board.HeldBy("s0"), "s0 holds its task while paused (seed %d):\n%s", seed, show)

	// Every turn and rotation that ran was counted; a grant a kill cut
	// short may be counted without running, never the other way round.
	c := s.client()
	var ran int64
	for i := range sessions {
		v := s.session(c, "soak", fmt.Sprintf("s%d", i))
		require.Equal(t, workflows.StatusPaused, v.Status)
		ran += int64(v.Context.TotalTurns)
		for _, r := range v.Receipts {
			if r.Reason != workflows.ReasonVendor && r.Reason != workflows.ReasonManual {
				ran++
			}
		}
	}
	require.LessOrEqual(t, ran, limit, "turns and rotations run (seed %d)", seed)
}
