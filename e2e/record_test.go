package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/nid-dev/nid/nidclient"
	"github.com/nid-dev/nid/workflows"
)

// TestRecordReplayHistories records the histories that workflows.TestReplay
// replays after every change. It runs only when asked:
//
//	RECORD_HISTORIES=rung20 go test ./e2e -run TestRecordReplayHistories
//
// where rung20 names the rung of the version ladder being recorded, the
// newest (workflows.Latest; see workflows/versions.go): the fixtures are
// named after the rung their histories record. Record once per rung, never
// over an existing file: the old histories are what running sessions look
// like.
func TestRecordReplayHistories(t *testing.T) {
	version := os.Getenv("RECORD_HISTORIES")
	if version == "" {
		t.Skip("set RECORD_HISTORIES=rungN to record workflows/testdata histories of rung N")
	}
	require.Equal(t, fmt.Sprintf("rung%d", workflows.Latest), version,
		"a build of nid records histories of its newest rung only")
	// An exec agent: it cannot compact or call tools, so its rotations take
	// the paths only such kinds take.
	counts := t.TempDir()
	tool := filepath.Join(t.TempDir(), "tool.sh")
	require.NoError(t, os.WriteFile(tool, []byte(`#!/bin/sh
cat >/dev/null
f="`+counts+`/$NIDAGENT_CONVERSATION"
n=$(cat "$f" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$f"
echo "turn $n of $NIDAGENT_CONVERSATION ($NIDAGENT_TURN_KIND)"
echo "{\"nid\":\"usage\",\"used\":$((n*20000)),\"window\":100000}"
`), 0o755))
	// held/tool is held by a person (VersionAttach): a turn of it takes
	// long enough for nid attach to wait for it.
	slow := filepath.Join(t.TempDir(), "slow.sh")
	require.NoError(t, os.WriteFile(slow, []byte(`#!/bin/sh
cat >/dev/null
sleep 3
echo "worked on $NIDAGENT_CONVERSATION"
echo "{\"nid\":\"usage\",\"used\":30000,\"window\":100000}"
`), 0o755))
	s := newSite(t, `  rec:
    goal: Record every path
    rotate: {mode: auto, contextPercent: 50}
    budget: {turns: 4000}
    tasks:`+recordTasks(24)+`
    sessions:
      - agent: sim
        name: compact
        sim: {window: 100000, tokensPerTurn: 20000, turnDelay: 10ms, taskTurns: 100000}
      - agent: sim
        name: fallback
        sim: {window: 100000, tokensPerTurn: 20000, turnDelay: 10ms, failCompact: true}
      - agent: sim
        name: agent
        sim: {window: 1000000, tokensPerTurn: 1000, turnDelay: 10ms, handoffAfterTurns: 3}
      - agent: sim
        name: silent
        sim: {window: 100000, tokensPerTurn: 20000, turnDelay: 10ms, noHandoff: true, failCompact: true}
      - agent: exec
        name: tool
        command: `+tool+`
        permissions: full
  held:
    rotate: {mode: handoff, contextPercent: 90}
    sessions:
      - agent: exec
        name: tool
        command: `+slow+`
        permissions: full
  pace:
    goal: Turn after turn
    rotate: {mode: compact, maxTurns: 30}
    sessions:
      - agent: sim
        name: fast
        sim: {window: 1000000, tokensPerTurn: 1000, turnDelay: 0s}
`)
	s.up()
	c := s.client()
	// What a client other than nid's could send straight to Temporal
	// (early, so that the cut histories hold it): signals past the caps
	// (VersionCheckedInput), refused in the sessions' and the group's
	// histories, and a session whose name is not a name, which fails at
	// once.
	ctx := context.Background()
	huge := boardOfTasks(workflows.MaxTasks + 1)
	require.NoError(t, c.SignalWorkflow(ctx, workflows.SessionID("rec", "agent"), "", workflows.SignalHandoffWrite,
		workflows.HandoffWrite{Summary: strings.Repeat("x", workflows.MaxSummaryBytes+1)}))
	require.NoError(t, c.SignalWorkflow(ctx, workflows.SessionID("rec", "compact"), "", workflows.SignalBoard, huge))
	require.NoError(t, c.SignalWorkflow(ctx, workflows.GroupID("rec"), "", workflows.SignalInbox,
		workflows.InboxItem{Group: "rec", Session: "../../etc", Kind: "forged", Text: "forged"}))
	refused := workflows.SessionID("rec", "refused")
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: refused, TaskQueue: workflows.TaskQueue},
		workflows.SessionWorkflowName, workflows.SessionInput{Group: "../../home/.config/git", Name: "lead"})
	require.NoError(t, err)
	require.ErrorContains(t, run.Get(ctx, nil), `group "../../home/.config/git" is not a name`)
	s.eventually("the refusals in the feed", time.Minute, func() bool {
		return slices.ContainsFunc(s.session(c, "rec", "agent").Events, func(e workflows.Event) bool {
			return strings.HasPrefix(e.Text, "handoff not taken")
		})
	})
	s.eventually("rotations everywhere", 3*time.Minute, func() bool {
		rows := s.ls()
		for _, name := range []string{"compact", "fallback", "agent", "silent", "tool"} {
			if rows["rec/"+name].Context.Rotations < 2 {
				return false
			}
		}
		return true
	})
	s.mustNid("group", "set", "rec", `rotate={"maxTurns":5}`)
	s.mustNid("group", "set", "rec", `budget={"turns":5000}`)
	s.mustNid("board", "add", "rec", "Added by hand")
	s.mcpCall("rec", "compact", "lock_acquire", map[string]any{"name": "src/app.go"})
	s.mustNid("send", "rec/compact", "A message from the human")
	s.mustNid("rotate", "rec/compact", "--mode", "handoff")
	s.eventually("the manual handoff", time.Minute, func() bool {
		for _, r := range rotationEvents(s.session(s.client(), "rec", "compact")) {
			if r.Reason == workflows.ReasonManual {
				return true
			}
		}
		return false
	})
	s.mustNid("stop", "rec/silent")
	attachAndHandBack(t, s, c)

	dir := filepath.Join("..", "workflows", "testdata")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	ids := []string{workflows.GroupID("rec"), workflows.HostsID}
	for _, name := range []string{"compact", "fallback", "agent", "silent", "tool"} {
		ids = append(ids, workflows.SessionID("rec", name), workflows.RotationID("rec", name, 1))
	}
	// With no budget to wait on, pace/fast takes turn after turn: the paced
	// listing of its context (VersionPacedListing) is in its history.
	ids = append(ids, workflows.SessionID("pace", "fast"), refused, workflows.SessionID("held", "tool"))
	for _, id := range ids {
		runs := runsOf(t, c, id)
		writeHistory(t, filepath.Join(dir, fixtureName(version, id, ".json.gz")), cutHistory(t, c, id, runs[0]))
	}

	// A session's first run whole, ending in continue-as-new, and the start
	// of the run that took its state over: compressed, for the first is
	// thousands of events. rec/compact never finishes its task, so it works
	// until its history is full.
	compact := workflows.SessionID("rec", "compact")
	s.eventually("rec/compact to continue as new", 5*time.Minute, func() bool { return len(runsOf(t, c, compact)) >= 2 })
	runs := runsOf(t, c, compact)
	first := wholeHistory(t, c, compact, runs[0])
	require.Equal(t, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW, first.Events[len(first.Events)-1].GetEventType())
	writeHistory(t, filepath.Join(dir, fixtureName(version, compact, "-can.json.gz")), first)
	writeHistory(t, filepath.Join(dir, fixtureName(version, compact, "-run-2.json.gz")), cutHistory(t, c, compact, runs[1]))
}

// attachAndHandBack has a person hold held/tool (VersionAttach) while it
// works: the hold waits for the turn, a renewal and one naming another
// lease, a message and a rotate request queued meanwhile, the hand-back
// that lets them run; then a second hold whose nid attach dies, taken back
// when its lease runs out.
func attachAndHandBack(t *testing.T, s *site, c client.Client) {
	t.Helper()
	ctx := context.Background()
	host := s.session(c, "held", "tool").Host
	s.mustNid("send", "held/tool", "Work a while")
	s.eventually("held/tool to work", time.Minute, func() bool { return s.session(c, "held", "tool").Status == workflows.StatusWorking })
	a, err := nidclient.Attach(ctx, c, "held", "tool", workflows.AttachRequest{Who: "rec@host", Host: host, Lease: "lease-1"})
	require.NoError(t, err)
	require.Equal(t, 1, a.WaitingForTurn)
	s.eventually("the hold to be ready", time.Minute, func() bool {
		a := s.session(c, "held", "tool").Attach
		return a != nil && a.Ready
	})
	require.NoError(t, nidclient.RenewAttach(ctx, c, "held", "tool", "lease-1"))
	require.NoError(t, nidclient.RenewAttach(ctx, c, "held", "tool", "lease-old"))
	s.mustNid("send", "held/tool", "After the hand-back")
	s.mustNid("rotate", "held/tool")
	h, err := nidclient.ReleaseAttach(ctx, c, "held", "tool", "lease-1")
	require.NoError(t, err)
	require.Equal(t, "rec@host", h.Who)
	s.eventually("the queued message and rotation", 2*time.Minute, func() bool {
		v := s.session(c, "held", "tool")
		return v.Context.TotalTurns >= 2 && v.Context.Rotations >= 1 && v.Status == workflows.StatusIdle
	})
	_, err = nidclient.Attach(ctx, c, "held", "tool", workflows.AttachRequest{Who: "rec@host", Host: host, Lease: "lease-2"})
	require.NoError(t, err)
	s.eventually("the lease to run out", 2*workflows.AttachLease+time.Minute, func() bool {
		h := s.session(c, "held", "tool").LastHandback
		return h != nil && h.Expired
	})
}

// boardOfTasks is a board push holding n tasks, as a client other than the
// group could forge one.
func boardOfTasks(n int) workflows.BoardView {
	b := workflows.BoardView{Group: "rec", Rev: 1 << 40}
	for i := range n {
		b.Tasks = append(b.Tasks, workflows.Task{ID: fmt.Sprintf("f%d", i), Title: "forged", Status: workflows.TaskTodo})
	}
	return b
}

func fixtureName(version, id, suffix string) string {
	return version + "-" + strings.ReplaceAll(strings.TrimPrefix(id, "nid/"), "/", "-") + suffix
}

// writeHistory writes h as JSON, gzipped when the name says so; a fixture
// already there is kept, for it is what running sessions look like.
func writeHistory(t *testing.T, path string, h *historypb.History) {
	t.Helper()
	if _, err := os.Stat(path); err == nil {
		t.Logf("kept %s", path)
		return
	}
	b, err := temporalproto.CustomJSONMarshalOptions{}.Marshal(h)
	require.NoError(t, err)
	if strings.HasSuffix(path, ".gz") {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		_, err = zw.Write(b)
		require.NoError(t, err)
		require.NoError(t, zw.Close())
		b = buf.Bytes()
	}
	require.NoError(t, os.WriteFile(path, b, 0o644))
}

// maxRecordedEvents keeps fixtures small; a history cut just before a
// workflow task is scheduled (so the last task's commands are all in it)
// replays like the whole one up to there.
const maxRecordedEvents = 1500

// runsOf lists a workflow's runs, oldest first.
func runsOf(t *testing.T, c client.Client, id string) []string {
	t.Helper()
	resp, err := c.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{
		Query: fmt.Sprintf("WorkflowId = '%s'", id),
	})
	require.NoError(t, err)
	execs := resp.GetExecutions()
	slices.SortFunc(execs, func(a, b *workflowpb.WorkflowExecutionInfo) int {
		return a.GetStartTime().AsTime().Compare(b.GetStartTime().AsTime())
	})
	var runs []string
	for _, e := range execs {
		runs = append(runs, e.GetExecution().GetRunId())
	}
	return runs
}

// wholeHistory is every event of one run.
func wholeHistory(t *testing.T, c client.Client, id, run string) *historypb.History {
	t.Helper()
	iter := c.GetWorkflowHistory(context.Background(), id, run, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	h := &historypb.History{}
	for iter.HasNext() {
		e, err := iter.Next()
		require.NoError(t, err)
		h.Events = append(h.Events, e)
	}
	return h
}

// cutHistory is one run's history cut before the last workflow task
// scheduled within maxRecordedEvents.
func cutHistory(t *testing.T, c client.Client, id, run string) *historypb.History {
	t.Helper()
	h := wholeHistory(t, c, id, run)
	if len(h.Events) >= maxRecordedEvents {
		cut := 0
		for i, e := range h.Events[:maxRecordedEvents] {
			if e.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED {
				cut = i
			}
		}
		h.Events = h.Events[:cut]
	}
	require.Greater(t, len(h.Events), 3, id)
	return h
}

// recordTasks is n tasks in nid.yaml's shape, enough work for every session.
func recordTasks(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "\n      - title: Task number %d", i)
	}
	return b.String()
}
