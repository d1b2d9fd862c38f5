package cli

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/internal/temporaltest"
	"github.com/nid-dev/nid/workflows"
)

// The rotate policy's guards, reproduced with the sim agent set up as a
// vendor that defeats a plain percent threshold, and seen the way a user
// sees them: nid group show, nid inbox, nid rotate.

// takeTurns has a session take n turns, one message each.
func takeTurns(t *testing.T, s *site, group, name string, n int) workflows.SessionView {
	t.Helper()
	var v workflows.SessionView
	for i := range n {
		v = temporaltest.TakeTurns(t, s.c, group, name, fmt.Sprintf("step %d", i+1))
	}
	return v
}

func methods(rots []workflows.RotationEvent) []string {
	var out []string
	for _, r := range rots {
		out = append(out, r.Method+" ("+r.Reason+")")
	}
	return out
}

func rotationsOf(v workflows.SessionView) []workflows.RotationEvent {
	var out []workflows.RotationEvent
	for _, e := range v.Events {
		if e.Kind == workflows.EventRotation {
			out = append(out, *e.Rotation)
		}
	}
	return out
}

// A sim that compacts itself at 83%, below the group's 85%, teaches the
// group its point: the feed and the inbox say so once, nid group show lists
// it, its sibling of the same kind and model rotates before it too, nid's
// own rotation comes first from then on, and nid group set overrides it.
func TestTheGroupLearnsWhereTheSimCompactsItself(t *testing.T) {
	t.Parallel()
	s := newSite(t, `  web:
    rotate: {mode: compact, contextPercent: 85}
    sessions:
      - {agent: sim, name: lead, sim: {window: 100000, tokensPerTurn: 8300, compactAt: 83, turnDelay: 0s}}
      - {agent: sim, name: worker, sim: {turnDelay: 0s}}
`)
	// Ten turns reach 83%; the eleventh starts with the sim's compaction.
	v := takeTurns(t, s, "web", "lead", 11)
	const said = "the sim agent compacted itself at 83% of 100k; nid now rotates sim sessions at 80%"
	require.Equal(t, []string{"learned: " + said}, eventTexts(v, workflows.EventPolicy))
	require.Equal(t, []string{"compact (vendor)"}, methods(rotationsOf(v)))
	temporaltest.WaitGroup(t, s.c, "web", "to learn the point", func(g workflows.GroupView) bool { return len(g.Learned) == 1 })

	inbox := s.mustNid("inbox", "web")
	require.Equal(t, 1, strings.Count(inbox, said), inbox)
	temporaltest.TakeTurns(t, s.c, "web", "worker", "hello")
	temporaltest.Settle(t, s.c)
	show := s.mustNid("group", "show", "web")
	require.Contains(t, show, "learned     sim/sim at 80% (it compacted itself at 83% of 100k)\n")
	require.Contains(t, show, "thresholds  lead 80% = 80k of 100k (learned); worker 80% = 160k of 200k (learned)\n",
		"the sibling of the same kind and model rotates before the vendor too")

	// From 8.3k, eight more turns reach 83k: past nid's 80% and before the
	// sim's next compaction, so nid's rotation comes first.
	v = takeTurns(t, s, "web", "lead", 8)
	v = temporaltest.WaitSession(t, s.c, "web", "lead", "to rotate", func(v workflows.SessionView) bool {
		return v.Context.Rotations == 2 && v.Status == workflows.StatusIdle
	})
	require.Equal(t, []string{"compact (vendor)", "compact (context)"}, methods(rotationsOf(v)))
	require.Len(t, eventTexts(v, workflows.EventPolicy), 1, "said once")

	require.Equal(t, "web learned: sim/sim at 75% (set)\n", s.mustNid("group", "set", "web", `learned={"sim/sim": 75}`))
	temporaltest.WaitSession(t, s.c, "web", "worker", "to hear of it", func(v workflows.SessionView) bool {
		return v.Context.Threshold != nil && v.Context.Threshold.Percent == 75
	})
}

// A compaction that leaves the context near the threshold is followed by a
// handoff, not by another compaction on the next turn.
func TestAnIneffectiveSimCompactionIsFollowedByAHandoff(t *testing.T) {
	t.Parallel()
	s := newSite(t, `  web:
    rotate: {mode: compact, contextPercent: 80}
    sessions:
      - {agent: sim, name: lead, sim: {window: 100000, tokensPerTurn: 10000, compactKeeps: 90, turnDelay: 0s}}
`)
	takeTurns(t, s, "web", "lead", 9)
	v := temporaltest.WaitSession(t, s.c, "web", "lead", "to rotate twice", func(v workflows.SessionView) bool {
		return v.Context.Rotations == 2 && v.Status == workflows.StatusIdle
	})
	require.Equal(t, []string{"compact (context)", "handoff (context)"}, methods(rotationsOf(v)))
	require.Contains(t, strings.Join(eventTexts(v, workflows.EventPolicy), "\n"),
		"the compaction left 72k, not well below the threshold 80% = 80k of 100k (contextPercent): the next policy rotation is a handoff")
	require.False(t, v.HandoffNext, "the handoff helped")
}

// A sim whose tools and prompt fill a fresh conversation past the threshold
// cannot be helped by rotating: after one handoff the policy stops for it,
// it keeps working, and the inbox says what to change.
func TestASimTooFullToRotateStopsThePolicy(t *testing.T) {
	t.Parallel()
	s := newSite(t, `  web:
    rotate: {mode: handoff, contextPercent: 50}
    sessions:
      - {agent: sim, name: lead, sim: {window: 100000, tokensPerTurn: 10000, startTokens: 45000, turnDelay: 0s}}
`)
	v := takeTurns(t, s, "web", "lead", 4)
	require.Equal(t, 4, v.Context.TotalTurns, "it keeps working")
	require.Equal(t, []string{"handoff (context)"}, methods(rotationsOf(v)))
	require.Contains(t, v.PolicyHalted, "web/lead's fresh conversation starts at")
	inbox := s.mustNid("inbox", "web")
	require.Contains(t, inbox, "not well below its rotate threshold 50% = 50k of 100k")
	require.Contains(t, inbox, "Raise contextPercent or contextTokens (nid group set web rotate=...)")

	s.mustNid("group", "set", "web", `rotate={"contextPercent":90}`)
	v = temporaltest.WaitSession(t, s.c, "web", "lead", "to take the new policy", func(v workflows.SessionView) bool { return v.PolicyHalted == "" })
	require.Contains(t, eventTexts(v, workflows.EventPolicy), "policy rotations start again under the new policy")
}

// A sim that asks for a fresh start every turn trips the breaker: its
// policy rotations stop, with an inbox item, and nid rotate still rotates
// it, with the handoff it wrote.
func TestTheBreakerStopsASimThatThrashes(t *testing.T) {
	t.Parallel()
	s := newSite(t, `  web:
    rotate: {mode: auto, contextPercent: 85}
    sessions:
      - {agent: sim, name: lead, sim: {window: 200000, tokensPerTurn: 100, handoffAfterTurns: 2, turnDelay: 0s}}
`)
	takeTurns(t, s, "web", "lead", 6)
	v := temporaltest.WaitSession(t, s.c, "web", "lead", "to stop thrashing", func(v workflows.SessionView) bool {
		return v.PolicyHalted != "" && v.Status == workflows.StatusIdle
	})
	require.Len(t, rotationsOf(v), 4)
	require.Contains(t, v.PolicyHalted, "web/lead rotated by itself 4 times in 3 turns: it is thrashing")
	require.Contains(t, s.mustNid("inbox", "web"), "it is thrashing")
	v = takeTurns(t, s, "web", "lead", 3)
	require.Len(t, rotationsOf(v), 4, "the policy no longer rotates it")
	require.True(t, v.HandoffPending, "its own handoff waits")

	out := s.mustNid("rotate", "web/lead")
	require.Contains(t, out, "with the handoff its agent wrote")
	v = temporaltest.WaitSession(t, s.c, "web", "lead", "to rotate by hand", func(v workflows.SessionView) bool {
		return len(rotationsOf(v)) == 5 && v.Status == workflows.StatusIdle
	})
	last := rotationsOf(v)[4]
	require.Equal(t, workflows.ReasonManual, last.Reason)
	require.Equal(t, config.ModeHandoff, last.Method)
	require.Equal(t, workflows.SummaryFromAgent, last.SummarySource)
	require.Contains(t, last.Summary, "My context is cluttered")
}
