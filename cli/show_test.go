package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/internal/temporaltest"
	"github.com/nid-dev/nid/workflows"
)

func TestShow(t *testing.T) {
	t.Parallel()
	s := newTeam(t)
	temporaltest.Rotate(t, s.c, "web", "lead", config.ModeHandoff)
	temporaltest.Settle(t, s.c)
	show := func(name string) string {
		var out bytes.Buffer
		require.NoError(t, runShow(context.Background(), s.c, showOptions{Group: "web", Name: name, Now: time.Now()}, &out, io.Discard))
		// The time of the last rotation is the test's own.
		return regexp.MustCompile(`at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d, \d+s ago`).ReplaceAllString(out.String(), "at TIME, Ns ago")
	}

	require.Equal(t, ""+
		"session       web/worker\n"+
		"agent         sim, model sim\n"+
		"status        idle\n"+
		"host          testhost\n"+
		"context       44% of 200k, 88.8k used (reported)\n"+
		"rotates at    never by the policy: rotate mode is off (nid rotate, the agent's handoff_write or a full window still rotate)\n"+
		"turns         3 in all, 1 since the last rotation\n"+
		"rotations     2; the last compact (manual) ok at TIME, Ns ago\n"+
		"conversation  sim-1 (the session's first)\n"+
		"next          —\n"+
		"queued        no messages\n"+
		"task          none\n"+
		"locks         none\n"+
		"worktree      none (its group has no repo)\n"+
		"workflow      nid/web/worker\n"+
		"last output   sim turn 3 of conversation sim-1: worked on \"w3\"\n", show("worker"))

	lead := show("lead")
	require.Contains(t, lead, "rotations     1; the last handoff (manual) ok at TIME, Ns ago\n")
	require.Contains(t, lead, "conversation  sim-2 (after 1 handoff)\n")
	require.Contains(t, lead, "turns         2 in all, 0 since the last rotation\n")

	var answer struct {
		workflows.SessionView
		WorkflowID string `json:"workflowID"`
	}
	require.NoError(t, json.Unmarshal([]byte(s.mustNid("show", "web/worker", "--json")), &answer))
	require.Equal(t, "nid/web/worker", answer.WorkflowID)
	require.Equal(t, temporaltest.Session(t, s.c, "web", "worker").Context, answer.Context, "the session's own record, as session.get answers")

	_, errOut, err := s.nid("show", "web/nobody")
	require.Error(t, err)
	require.Contains(t, errOut+err.Error(), `no session "web/nobody"; sessions in web: lead, worker`)
	for _, args := range [][]string{{"show"}, {"show", "web"}, {"show", "web/lead", "web/worker"}} {
		_, errOut, err := s.nid(args...)
		require.Error(t, err, "nid %v", args)
		require.Regexp(t, `nid show takes one GROUP/SESSION|is not a session`, errOut+err.Error())
	}
}

func TestShowWorktree(t *testing.T) {
	require.Equal(t, "none yet (made before its first turn when its group has a repo)", showWorktree(workflows.SessionView{}))
	done := workflows.SessionView{Context: workflows.ContextRecord{TotalTurns: 3}}
	require.Equal(t, "none (its group has no repo)", showWorktree(done))
	done.Worktree, done.Branch = "/repo/.nid/worktrees/web/lead", "nid/web/lead"
	require.Equal(t, "/repo/.nid/worktrees/web/lead (branch nid/web/lead)", showWorktree(done))
}

// What comes next, as the session's view says it: each thing pending is
// named, in the order it happens.
func TestShowNext(t *testing.T) {
	tests := []struct {
		name string
		view workflows.SessionView
		want string
	}{
		{"nothing", workflows.SessionView{}, "—"},
		{"a rotation running and one asked for", workflows.SessionView{
			Rotating:      &workflows.RotateRequest{Mode: config.ModeCompact, Reason: "context"},
			PendingRotate: &workflows.RotateRequest{Reason: "manual"},
		}, "rotating now: compact (context); a rotation asked for: the group's mode (manual)"},
		{"a handoff written", workflows.SessionView{HandoffPending: true}, "the agent wrote its handoff: it hands off"},
		{"the window full", workflows.SessionView{ContextFull: true}, "the vendor refused a turn as too long for its window: it hands off"},
		{"the policy", workflows.SessionView{HandoffNext: true, PolicyHalted: "two compactions did not help"},
			"the policy's next rotation is a handoff, a compaction having not helped; the policy no longer rotates it (two compactions did not help); nid rotate still does"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, showNext(tt.view))
		})
	}
	require.False(t, strings.Contains(showStatus(workflows.SessionView{Status: "idle"}, time.Time{}), "down"))
	require.Equal(t, "host-down (host box-a is down: it waits for it), moving to box-b",
		showStatus(workflows.SessionView{Status: "host-down", Host: "box-a", HostDown: true, Moving: "box-b"}, time.Time{}))
}

// With no worker to answer, nid show shows what the session's listing
// keeps of it, and says so on stderr; it does not fail.
func TestShowWithoutWorker(t *testing.T) {
	t.Parallel()
	s := newSite(t, teamGroups)
	temporaltest.TakeTurns(t, s.c, "web", "lead", "l1")
	temporaltest.Settle(t, s.c)
	s.down()
	out, errOut, err := s.nid("show", "web/lead")
	require.NoError(t, err)
	require.Equal(t, ""+
		"session    web/lead\n"+
		"agent      sim\n"+
		"status     idle\n"+
		"host       testhost\n"+
		"context    31% of 200k, 62k used (reported)\n"+
		"turns      1 in all, 1 since the last rotation\n"+
		"rotations  0\n"+
		"workflow   nid/web/lead\n", out)
	require.Regexp(t, `^no worker is running \(the last one asked Temporal for nid's work at \d\d:\d\d:\d\d, \d+s ago\), so this is what web/lead last wrote \(nid ls's record of it\): start nid up or nid worker\n$`, errOut)

	_, _, err = s.nid("show", "web/lead", "--json")
	require.ErrorContains(t, err, "web/lead did not answer: no worker is running", "the API's answer is the session's own, or none")
}

// Where the agent works is shown beside the worktree, not after the
// workflow's id.
func TestShowWorkdirBesideWorktree(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := newSite(t, "  web:\n    workdir: "+dir+"\n    sessions:\n      - {agent: sim, name: lead}\n")
	out := s.mustNid("show", "web/lead")
	require.Regexp(t, `(?m)^worktree +none yet .*\nworkdir +`+regexp.QuoteMeta(dir)+`\nworkflow +nid/web/lead\n`, out)
}

// nid show says who holds an attached session and since when, what it
// waits for, and what the last hand-back found.
func TestShowAttached(t *testing.T) {
	since := time.Date(2026, 3, 1, 15, 2, 0, 0, time.Local)
	v := workflows.SessionView{Status: workflows.StatusAttached, Attach: &workflows.AttachView{Who: "alice@box", Since: since, WaitingForTurn: 7}}
	require.Equal(t, "attached by alice@box since 15:02:00 (1m30s ago), waiting for turn 7 to end", showStatus(v, since.Add(90*time.Second)))
	v.Attach.WaitingForTurn, v.Attach.Ready = 0, true
	require.Equal(t, "attached by alice@box since 15:02:00 (1m30s ago)", showStatus(v, since.Add(90*time.Second)))
	p := func(f float64) *float64 { return &f }
	h := workflows.Handback{Who: "alice@box", Before: workflows.ContextRecord{Percent: p(41)}, After: workflows.ContextRecord{Percent: p(58)}, HandTurns: 3}
	require.Equal(t, "handed back by alice@box: context 41% → 58%, 3 turns by hand", h.Text())
	h.HandTurns, h.Compactions = 1, 1
	require.Equal(t, "handed back by alice@box: context 41% → 58%, 1 turn by hand, 1 compaction", h.Text())
	h.HandTurns, h.Compactions = 3, 0
	h.Expired, h.Note = true, "an exec agent keeps no records nid can read"
	require.Equal(t, "taken back from alice@box (nid attach stopped renewing its lease): context 41% → 58%, 3 turns by hand (an exec agent keeps no records nid can read)", h.Text())
}
