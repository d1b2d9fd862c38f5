package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/nid-dev/nid/activities"
	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/transcript"
	"github.com/nid-dev/nid/workflows"
)

// crashLock is the lock web/lead holds through every crash.
const crashLock = "src/settings.tsx"

// crashSite is a group whose one session, web/lead, holds task t1 for good
// (the sim never finishes it) and the lock crashLock, with turns (and
// compactions) of turnDelay each and rotation left to `nid rotate`.
func crashSite(t *testing.T, turnDelay string) (*site, *upProcess) {
	s := newSite(t, `  web:
    goal: Add dark mode
    rotate: {mode: off}
    tasks:
      - title: Dark mode toggle
    sessions:
      - agent: sim
        name: lead
        sim: {turnDelay: `+turnDelay+`, taskTurns: 100000}
`)
	up := s.up()
	s.eventually("lead to claim t1", time.Minute, func() bool { return s.board("web").Tasks[0].Holder == "lead" })
	res := s.mcpCall("web", "lead", agents.ToolLockAcquire, map[string]any{"name": crashLock})
	require.False(t, res.IsError, "lead takes the lock")
	return s, up
}

// requireClaimAndLock checks that web/lead still holds t1 and crashLock, as
// the session and the group's board both say.
func (s *site) requireClaimAndLock(c client.Client) {
	s.t.Helper()
	v := s.session(c, "web", "lead")
	require.NotNil(s.t, v.Task, "the claim survives the crash")
	require.Equal(s.t, "t1", v.Task.ID)
	require.Equal(s.t, []string{crashLock}, v.Locks, "so does the lock")
	board := s.board("web")
	require.Equal(s.t, "lead", board.Tasks[0].Holder)
	require.Equal(s.t, workflows.TaskClaimed, board.Tasks[0].Status)
	require.Len(s.t, board.Locks, 1)
	require.Equal(s.t, crashLock, board.Locks[0].Name)
	require.Equal(s.t, "lead", board.Locks[0].Holder)
}

// requireTurnsCountedOnce checks that the session's turn events number its
// turns 1, 2, ... with none missing and none twice: a turn cut by the crash
// counts once, when its retry completes.
func requireTurnsCountedOnce(t *testing.T, v workflows.SessionView) {
	t.Helper()
	var got []string
	for _, e := range v.Events {
		if e.Kind == workflows.EventTurn {
			got = append(got, e.Text)
		}
	}
	var want []string
	for n := 1; n <= v.Context.TotalTurns; n++ {
		want = append(want, fmt.Sprintf("turn %d", n))
	}
	require.Equal(t, want, got)
}

// rotationRuns lists the executions of a session's n-th rotation workflow.
func rotationRuns(t *testing.T, c client.Client, n int) []enumspb.WorkflowExecutionStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		Query: "WorkflowId = '" + workflows.RotationID("web", "lead", n) + "'",
	})
	require.NoError(t, err)
	var out []enumspb.WorkflowExecutionStatus
	for _, e := range resp.Executions {
		out = append(out, e.GetStatus())
	}
	return out
}

// requireOneRotation checks that exactly one rotation is recorded, as
// rotation 1 with the given method, and that it ran as one child workflow.
func requireOneRotation(t *testing.T, c client.Client, v workflows.SessionView, method string) workflows.RotationEvent {
	t.Helper()
	rots := rotationEvents(v)
	require.Len(t, rots, 1, "the rotation is recorded exactly once")
	r := rots[0]
	require.Equal(t, 1, r.Number)
	require.Equal(t, method, r.Method)
	require.Equal(t, workflows.ReasonManual, r.Reason)
	require.True(t, r.OK, r.Error)
	require.Equal(t, 1, v.Context.Rotations)
	require.Equal(t, []enumspb.WorkflowExecutionStatus{enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED}, rotationRuns(t, c, 1),
		"the interrupted rotation resumed rather than ran twice")
	require.Empty(t, rotationRuns(t, c, 2), "no second rotation was started")
	return r
}

// simConversation reads a sim conversation's file.
func (s *site) simConversation(id string) map[string]any {
	s.t.Helper()
	b, err := os.ReadFile(filepath.Join(s.dir, ".nid", "sim", "web", "lead", id+".json"))
	require.NoError(s.t, err)
	var conv map[string]any
	require.NoError(s.t, json.Unmarshal(b, &conv))
	return conv
}

// simConversations lists the sim conversations web/lead has started.
func (s *site) simConversations() []string {
	s.t.Helper()
	entries, err := os.ReadDir(filepath.Join(s.dir, ".nid", "sim", "web", "lead"))
	require.NoError(s.t, err)
	var ids []string
	for _, e := range entries {
		// Temporary files of a write the kill cut short start with a dot.
		if id, ok := strings.CutSuffix(e.Name(), ".json"); ok && !strings.HasPrefix(id, ".") {
			ids = append(ids, id)
		}
	}
	return ids
}

// lead is web/lead's view once its workflow answers queries again: for a
// few seconds after a restart the query may wait on the stopped worker.
func (s *site) lead(c client.Client) (workflows.SessionView, bool) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, err := c.QueryWorkflow(ctx, workflows.SessionID("web", "lead"), "", workflows.QuerySession)
	if err != nil {
		return workflows.SessionView{}, false
	}
	var view workflows.SessionView
	require.NoError(s.t, v.Get(&view))
	return view, true
}

// keepsWorking waits for web/lead to complete turns after the restart.
func (s *site) keepsWorking(c client.Client) {
	s.t.Helper()
	from := -1
	s.eventually("more turns after the restart", 2*time.Minute, func() bool {
		v, ok := s.lead(c)
		if ok && from < 0 {
			from = v.Context.TotalTurns
		}
		return ok && v.Context.TotalTurns >= from+2
	})
}

func TestCrashDuringCompactionCompactsOnce(t *testing.T) {
	s, up := crashSite(t, "3s")
	c := s.client()
	require.Contains(t, s.mustNid("rotate", "web/lead", "--mode", "compact"), "web/lead")
	s.eventually("the compaction in flight", 2*time.Minute, func() bool {
		return s.session(c, "web", "lead").Status == workflows.StatusRotating
	})
	before := s.session(c, "web", "lead")
	require.Equal(t, 0, before.Context.Rotations)
	up.kill()

	s.up()
	c = s.client()
	s.eventually("the compaction to finish after the restart", 3*time.Minute, func() bool {
		v, ok := s.lead(c)
		return ok && v.Context.Rotations == 1 && v.Status != workflows.StatusRotating
	})
	v := s.session(c, "web", "lead")
	r := requireOneRotation(t, c, v, config.ModeCompact)
	require.Equal(t, before.Conversation, r.OldConversation)
	require.Equal(t, before.Conversation, v.Conversation, "compaction keeps the conversation")
	require.EqualValues(t, 1, s.simConversation(v.Conversation)["compactions"], "the agent compacted once")
	require.GreaterOrEqual(t, v.Context.TotalTurns, before.Context.TotalTurns)
	requireTurnsCountedOnce(t, v)
	s.requireClaimAndLock(c)
	s.keepsWorking(c)
}

func TestCrashAfterHandoffWriteStartsOneFreshConversation(t *testing.T) {
	s, up := crashSite(t, "4s")
	c := s.client()
	s.mustNid("rotate", "web/lead", "--mode", "handoff")
	s.eventually("handoff_write to reach the running rotation", 2*time.Minute, func() bool {
		for _, e := range s.session(c, "web", "lead").Events {
			if e.Kind == workflows.EventHandoffWritten && e.Text == "handoff written for the running rotation" {
				return true
			}
		}
		return false
	})
	before := s.session(c, "web", "lead")
	up.kill()
	require.Equal(t, 0, before.Context.Rotations, "killed before the fresh conversation started")

	s.up()
	c = s.client()
	s.eventually("the handoff to finish after the restart", 3*time.Minute, func() bool {
		v, ok := s.lead(c)
		return ok && v.Context.Rotations == 1 && v.Status != workflows.StatusRotating
	})
	v := s.session(c, "web", "lead")
	r := requireOneRotation(t, c, v, config.ModeHandoff)
	require.Equal(t, workflows.SummaryFromAgent, r.SummarySource, "the handoff the agent wrote before the crash is the one used")
	require.NotEmpty(t, r.Summary)
	require.Equal(t, before.Conversation, r.OldConversation)
	require.NotEqual(t, r.OldConversation, r.NewConversation)
	require.Equal(t, r.NewConversation, v.Conversation)
	require.Equal(t, []string{"sim-1", "sim-2"}, s.simConversations(), "one fresh conversation, started once")
	require.Contains(t, s.simConversation(r.NewConversation)["firstMessage"], r.Summary, "it starts from the agent's handoff")
	requireTurnsCountedOnce(t, v)
	s.requireClaimAndLock(c)
	s.keepsWorking(c)
}

func TestCrashWithRotateAndMessagePendingLosesNeither(t *testing.T) {
	s, up := crashSite(t, "5s")
	c := s.client()
	// Right after a turn ends the next one has just begun: the requests
	// below arrive with most of it still to run.
	from := s.session(c, "web", "lead").Context.TotalTurns
	s.eventually("a new turn to begin", time.Minute, func() bool {
		v := s.session(c, "web", "lead")
		return v.Context.TotalTurns > from && v.Status == workflows.StatusWorking
	})
	const msg = "Also persist the choice in localStorage"
	s.mustNid("send", "web/lead", msg)
	require.Contains(t, s.mustNid("rotate", "web/lead", "--mode", "handoff"), "when the current turn ends")
	before := s.session(c, "web", "lead")
	up.kill()
	require.NotNil(t, before.PendingRotate, "the rotation was pending at the kill")
	require.Equal(t, 1, before.QueuedMessages, "so was the message")
	require.Equal(t, 0, before.Context.Rotations)

	s.up()
	c = s.client()
	s.eventually("the rotation and the message turn after the restart", 3*time.Minute, func() bool {
		v, ok := s.lead(c)
		return ok && v.Context.Rotations == 1 && v.QueuedMessages == 0 && len(messageOutputs(t, s, msg)) == 1
	})
	v := s.session(c, "web", "lead")
	r := requireOneRotation(t, c, v, config.ModeHandoff)
	require.Equal(t, before.Conversation, r.OldConversation)
	require.Nil(t, v.PendingRotate)
	require.Len(t, messageOutputs(t, s, msg), 1, "the message turn ran once")
	requireTurnsCountedOnce(t, v)
	s.requireClaimAndLock(c)
	s.keepsWorking(c)
}

// messageOutputs is the transcript's outputs of turns whose prompt was msg.
func messageOutputs(t *testing.T, s *site, msg string) []transcript.Entry {
	t.Helper()
	var out []transcript.Entry
	for _, line := range strings.Split(strings.TrimSpace(s.mustNid("transcript", "web/lead", "--json")), "\n") {
		if line == "" {
			continue
		}
		var e transcript.Entry
		require.NoError(t, json.Unmarshal([]byte(line), &e), line)
		if e.Kind == transcript.KindOutput && strings.Contains(e.Text, fmt.Sprintf("worked on %q", msg)) {
			out = append(out, e)
		}
	}
	return out
}

func TestCrashShutdownOnSIGTERMIsClean(t *testing.T) {
	s, up := crashSite(t, "3s")
	c := s.client()
	s.eventually("a turn in flight", time.Minute, func() bool {
		return s.session(c, "web", "lead").Status == workflows.StatusWorking
	})
	require.NoError(t, up.signal(t, syscall.SIGTERM), "nid up exits 0 on SIGTERM:\n%s", up.out.String())
	require.NotContains(t, up.out.String(), "panic")

	next := s.up()
	c = s.client()
	s.keepsWorking(c)
	s.requireClaimAndLock(c)
	requireTurnsCountedOnce(t, s.session(c, "web", "lead"))
	out := next.out.String()
	for _, bad := range []string{"ERROR", "level=ERROR", "panic"} {
		require.NotContains(t, out, bad, "the start after a clean shutdown shows no errors:\n%s", out)
	}
}

// hangingAgentSite is a group whose one exec session, web/lead, hangs in
// its first turn with a helper it started, and answers "answered" from
// then on. pidOf reads the pid of the agent ("leader") or of its helper
// ("child") once the first turn has them running.
func hangingAgentSite(t *testing.T) (s *site, pidOf func(name string) int) {
	dir := t.TempDir()
	agent := filepath.Join(dir, "agent.sh")
	require.NoError(t, os.WriteFile(agent, []byte(`#!/bin/sh
if [ ! -e `+dir+`/leader ]; then
  sleep 300 &
  echo $! > `+dir+`/child
  echo $$ > `+dir+`/leader
  wait
fi
echo "answered"
`), 0o755))
	s = newSite(t, `  web:
    rotate: {mode: off}
    sessions:
      - agent: exec
        name: lead
        command: `+agent+`
        permissions: full
`)
	pidOf = func(name string) int {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return 0
		}
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		return pid
	}
	return s, pidOf
}

// requireGone waits for the agent and its helper to be gone.
func (s *site) requireGone(pidOf func(string) int) {
	s.t.Helper()
	for _, name := range []string{"leader", "child"} {
		pid := pidOf(name)
		s.eventually(name+" to be gone", 10*time.Second, func() bool { return syscall.Kill(pid, 0) != nil })
	}
}

func (s *site) recordedAgents() []os.DirEntry {
	s.t.Helper()
	pids, err := os.ReadDir(agents.PidDir(filepath.Join(s.dir, ".nid")))
	require.NoError(s.t, err)
	return pids
}

// An agent runs in a process group of its own, so killing nid up leaves it
// running; the next start finds it through its pid file and kills it, with
// everything it started, before the turn runs again. The turn runs again at
// that start: nid fails the attempt the killed worker left, rather than
// leaving it to the server to notice the missing heartbeats.
func TestCrashLeavesNoAgentProcessRunning(t *testing.T) {
	s, pidOf := hangingAgentSite(t)
	up := s.up()
	s.mustNid("send", "web/lead", "Write the parser")
	s.eventually("the agent to start its helper", time.Minute, func() bool { return pidOf("leader") > 0 && pidOf("child") > 0 })
	require.Len(t, s.recordedAgents(), 1, "the running agent is recorded")
	up.kill()
	require.NoError(t, syscall.Kill(pidOf("leader"), 0), "killing nid up leaves the agent running")
	require.NoError(t, syscall.Kill(pidOf("child"), 0), "and what it started")

	next := s.up()
	require.Contains(t, next.out.String(), "Killed agent processes left running")
	s.requireGone(pidOf)
	c := s.client()
	s.eventually("the turn to run again and answer", 2*time.Minute, func() bool {
		v, err := querySessionView(c, "web", "lead")
		return err == nil && v.Context.TotalTurns == 1 && v.Status == workflows.StatusIdle
	})
	require.Equal(t, "answered", s.session(c, "web", "lead").LastOutput)
	require.Empty(t, s.recordedAgents(), "no record outlives its process")
	require.Contains(t, next.out.String(), "Failed at once what a worker that did not stop cleanly left unfinished: each session runs it again")
	require.Equal(t, []string{activities.ErrWorkerStopped}, retriedTurns(t, c, "web", "lead"),
		"the cut attempt was failed by the next start, not timed out")
	attempts, err := os.ReadDir(activities.AttemptDir(filepath.Join(s.dir, ".nid")))
	require.NoError(t, err)
	require.Empty(t, attempts, "no attempt's record outlives it")
}

// retriedTurns is, for each try of the session's turns that did not
// complete and was tried again, why it ended: the failure's type, or
// "timeout". A turn's tries are the session's own (workflows'
// VersionLostTurns): each is an activity of one attempt.
func retriedTurns(t *testing.T, c client.Client, group, name string) []string {
	t.Helper()
	tries := turnTries(t, c, group, name)
	var why []string
	for i, end := range tries {
		if end != "completed" && i+1 < len(tries) {
			why = append(why, end)
		}
	}
	return why
}

// turnTries is how each try of the session's turns ended, in order:
// "completed", "timeout", "cancelled", or the failure's type.
func turnTries(t *testing.T, c client.Client, group, name string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	iter := c.GetWorkflowHistory(ctx, workflows.SessionID(group, name), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	turns := map[int64]bool{}
	var ends []string
	for iter.HasNext() {
		e, err := iter.Next()
		require.NoError(t, err)
		if a := e.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == activities.RunTurnName {
			turns[e.GetEventId()] = true
		}
		switch {
		case turns[e.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()]:
			ends = append(ends, "completed")
		case turns[e.GetActivityTaskTimedOutEventAttributes().GetScheduledEventId()]:
			ends = append(ends, "timeout")
		case turns[e.GetActivityTaskCanceledEventAttributes().GetScheduledEventId()]:
			ends = append(ends, "cancelled")
		case turns[e.GetActivityTaskFailedEventAttributes().GetScheduledEventId()]:
			ends = append(ends, e.GetActivityTaskFailedEventAttributes().GetFailure().GetApplicationFailureInfo().GetType())
		}
	}
	return ends
}

// SIGTERM stops the agent of a turn in flight, and what it started, before
// nid up exits; the next start finds nothing to clean up.
func TestShutdownStopsAgentProcesses(t *testing.T) {
	s, pidOf := hangingAgentSite(t)
	up := s.up()
	s.mustNid("send", "web/lead", "Write the parser")
	s.eventually("the agent to start its helper", time.Minute, func() bool { return pidOf("leader") > 0 && pidOf("child") > 0 })
	require.NoError(t, up.signal(t, syscall.SIGTERM), "nid up exits 0 on SIGTERM:\n%s", up.out.String())
	s.requireGone(pidOf)
	require.Empty(t, s.recordedAgents())

	next := s.up()
	require.NotContains(t, next.out.String(), "Killed agent processes")
	c := s.client()
	s.eventually("the cut turn to run again and answer", 2*time.Minute, func() bool {
		v, err := querySessionView(c, "web", "lead")
		return err == nil && v.Context.TotalTurns == 1 && v.Status == workflows.StatusIdle
	})
}
