package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/nid-dev/nid/workflows"
)

// TestRecordReplayHistories records the histories that workflows.TestReplay
// replays after every change. It runs only when asked:
//
//	RECORD_HISTORIES=v3 go test ./e2e -run TestRecordReplayHistories
//
// where v3 names the workflow version being recorded (see
// workflows/versions.go). Record once per version, never over an existing
// file: the old histories are what running sessions look like.
func TestRecordReplayHistories(t *testing.T) {
	version := os.Getenv("RECORD_HISTORIES")
	if version == "" {
		t.Skip("set RECORD_HISTORIES=vN to record workflows/testdata histories of version N")
	}
	require.Regexp(t, `^v[0-9]+$`, version)
	s := newSite(t, `  rec:
    goal: Record every path
    rotate: {mode: auto, contextPercent: 50}
    budget: {turns: 4000}
    tasks:`+recordTasks(24)+`
    sessions:
      - agent: sim
        name: compact
        sim: {window: 100000, tokensPerTurn: 20000, turnDelay: 10ms}
      - agent: sim
        name: fallback
        sim: {window: 100000, tokensPerTurn: 20000, turnDelay: 10ms, failCompact: true}
      - agent: sim
        name: agent
        sim: {window: 1000000, tokensPerTurn: 1000, turnDelay: 10ms, handoffAfterTurns: 3}
      - agent: sim
        name: silent
        sim: {window: 100000, tokensPerTurn: 20000, turnDelay: 10ms, noHandoff: true, failCompact: true}
`)
	s.up()
	s.eventually("rotations everywhere", 3*time.Minute, func() bool {
		rows := s.ls()
		for _, name := range []string{"compact", "fallback", "agent", "silent"} {
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

	c := s.client()
	dir := filepath.Join("..", "workflows", "testdata")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	ids := []string{workflows.GroupID("rec")}
	for _, name := range []string{"compact", "fallback", "agent", "silent"} {
		ids = append(ids, workflows.SessionID("rec", name), workflows.RotationID("rec", name, 1))
	}
	for _, id := range ids {
		h := firstRunHistory(t, c, id)
		b, err := temporalproto.CustomJSONMarshalOptions{}.Marshal(h)
		require.NoError(t, err)
		name := version + "-" + strings.ReplaceAll(strings.TrimPrefix(id, "nid/"), "/", "-") + ".json"
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), b, 0o644))
	}
}

// maxRecordedEvents keeps fixtures small; a history cut just before a
// workflow task is scheduled (so the last task's commands are all in it)
// replays like the whole one up to there.
const maxRecordedEvents = 1500

// firstRunHistory is the history of a workflow's first run (later runs start
// from continue-as-new), cut before the last workflow task scheduled within
// maxRecordedEvents.
func firstRunHistory(t *testing.T, c client.Client, id string) *historypb.History {
	resp, err := c.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{
		Query: fmt.Sprintf("WorkflowId = '%s'", id),
	})
	require.NoError(t, err)
	require.NotEmpty(t, resp.Executions, id)
	first := resp.Executions[0]
	for _, e := range resp.Executions {
		if e.GetStartTime().AsTime().Before(first.GetStartTime().AsTime()) {
			first = e
		}
	}
	iter := c.GetWorkflowHistory(context.Background(), id, first.GetExecution().GetRunId(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	h := &historypb.History{}
	cut := 0
	for iter.HasNext() && len(h.Events) < maxRecordedEvents {
		e, err := iter.Next()
		require.NoError(t, err)
		if e.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED {
			cut = len(h.Events)
		}
		h.Events = append(h.Events, e)
	}
	if len(h.Events) >= maxRecordedEvents {
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
