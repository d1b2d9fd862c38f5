package worker

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/internal/temporaltest"
	"github.com/nid-dev/nid/nidclient"
	"github.com/nid-dev/nid/workflows"
)

// A session that joins a running group (nid up with a session added to
// nid.yaml) starts with the policy the group runs and what it has learned,
// as its siblings do, not with the file's policy until the group next
// pushes one.
func TestASessionThatJoinsLaterRunsTheGroupsPolicy(t *testing.T) {
	env := temporaltest.New(t)
	c := env.Client(t)
	const lead = "      - {agent: sim, name: lead, sim: {turnDelay: 0s}}\n"
	n := startNode(t, env.Config(t, "  web:\n    rotate: {mode: compact}\n    sessions:\n"+lead))
	_, err := nidclient.SetGroup(t.Context(), c, "web", nidclient.GroupSettings{
		RotateJSON: `{"mode":"handoff","contextPercent":70}`, LearnedJSON: `{"sim/sim": 50}`,
	})
	require.NoError(t, err)
	group := temporaltest.Group(t, c, "web")
	require.Equal(t, config.ModeHandoff, group.Policy.Mode)

	joined := env.Config(t, "  web:\n    rotate: {mode: compact}\n    sessions:\n"+lead+"      - {agent: sim, name: late, sim: {turnDelay: 0s}}\n")
	_, err = n.Reload(t.Context(), joined, false)
	require.NoError(t, err)
	v := temporaltest.TakeTurns(t, c, "web", "late", "hello")
	require.Equal(t, group.Policy, v.Policy, "the group's policy, not the file's")
	require.Equal(t, &workflows.Threshold{Tokens: 100_000, Percent: 50, By: "learned"}, v.Context.Threshold,
		"what the group learned of its kind and model")

	// The group's first session started with the board the new group
	// started with; one that joins a running group with the board it
	// answered nid up with.
	for _, name := range []string{"lead", "late"} {
		board := startInput(t, c, workflows.SessionID("web", name)).Board
		require.NotNil(t, board, name)
		require.Equal(t, "web", board.Group, "%s: the group's board, not an empty one", name)
	}
}

// A new group sends its first board to no session nid up starts with one,
// and a board it sent a session before that session ran is sent again
// once nid up says it started (workflows.VersionQuietStart).
func TestABoardSentBeforeASessionRanReachesItOnceNidUpStartsIt(t *testing.T) {
	env := temporaltest.New(t)
	c := env.Client(t)
	const lead = "      - {agent: sim, name: lead, sim: {turnDelay: 0s}}\n"
	startNode(t, env.Config(t, "  web:\n    sessions:\n"+lead))
	temporaltest.TakeTurns(t, c, "web", "lead", "hello")
	require.Zero(t, temporaltest.Signals(t, c, workflows.SessionID("web", "lead"), workflows.SignalBoard), "started with its board, and sent none")

	// The group learns of a session that does not run yet (nid up tells
	// a running group the file's sessions before it starts them), and
	// sends it the board, which finds no one.
	both := env.Config(t, "  web:\n    sessions:\n"+lead+"      - {agent: sim, name: late, sim: {turnDelay: 0s}}\n")
	g := both.Groups["web"]
	var view workflows.GroupView
	require.NoError(t, nidclient.UpdateGroup(t.Context(), c, "web", workflows.UpdateSync, workflows.GroupSync{
		Rotate: g.Rotate, Budget: g.Budget, Prompts: g.Prompts, Sessions: []string{"lead", "late"},
	}, &view))
	require.Eventually(t, func() bool {
		return temporaltest.Signals(t, c, workflows.SessionID("web", "lead"), workflows.SignalBoard) > 0
	}, time.Minute, 100*time.Millisecond, "the board reached the session that runs")

	board := workflows.SeatOf(view, "late")
	require.NoError(t, startSession(t.Context(), c, both, "web", g, g.Sessions[1], view, &board, workflows.Placement{Host: temporaltest.Host}))
	temporaltest.TakeTurns(t, c, "web", "late", "hello")
	require.Zero(t, temporaltest.Signals(t, c, workflows.SessionID("web", "late"), workflows.SignalBoard), "nothing sent it the board it missed")

	require.NoError(t, TellStarted(t.Context(), c, both))
	require.Eventually(t, func() bool {
		return temporaltest.Signals(t, c, workflows.SessionID("web", "late"), workflows.SignalBoard) == 1
	}, time.Minute, 100*time.Millisecond, "the board that found no one is sent again once the session runs")
}

// A group started afresh while its sessions run (it was terminated by
// hand) sends its first board to those nid up found running: they keep
// running with the input they started with, not the starting board.
func TestAGroupStartedAgainSendsItsBoardToTheSessionsThatRun(t *testing.T) {
	env := temporaltest.New(t)
	c := env.Client(t)
	cfg := env.Config(t, "  web:\n    sessions:\n      - {agent: sim, name: lead, sim: {turnDelay: 0s}}\n")
	startNode(t, cfg)
	temporaltest.TakeTurns(t, c, "web", "lead", "hello")
	temporaltest.Listed(t, c, cfg)
	require.Zero(t, temporaltest.Signals(t, c, workflows.SessionID("web", "lead"), workflows.SignalBoard))

	require.NoError(t, c.TerminateWorkflow(t.Context(), workflows.GroupID("web"), "", "terminated by hand"))
	require.NoError(t, StartGroups(t.Context(), c, cfg))
	require.Eventually(t, func() bool {
		return temporaltest.Signals(t, c, workflows.SessionID("web", "lead"), workflows.SignalBoard) > 0
	}, time.Minute, 100*time.Millisecond, "the running session is sent the new group's board")
}

// startInput is the input the first run of session workflow id started with.
func startInput(t *testing.T, c client.Client, id string) workflows.SessionInput {
	t.Helper()
	iter := c.GetWorkflowHistory(t.Context(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	e, err := iter.Next()
	require.NoError(t, err)
	var in workflows.SessionInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(e.GetWorkflowExecutionStartedEventAttributes().GetInput(), &in))
	return in
}

// Right after a kill -9 a group may not answer for a while: the workflow
// task the killed worker had taken must time out, and the new worker replay
// the group's history, before a query gets through. Applying the file (nid
// up's start) waits for it rather than failing with "did not answer".
func TestApplyingTheFileWaitsForAGroupThatDoesNotAnswerYet(t *testing.T) {
	env := temporaltest.New(t)
	c := env.Client(t)
	cfg := env.Config(t, "  web:\n    sessions:\n      - {agent: sim, name: lead}\n")
	// The group runs, and no worker serves it yet.
	_, err := c.ExecuteWorkflow(t.Context(), client.StartWorkflowOptions{
		ID: workflows.GroupID("web"), TaskQueue: workflows.TaskQueue, TypedSearchAttributes: workflows.GroupSearchAttributes("web"),
	}, workflows.GroupWorkflowName, workflows.GroupInput{Name: "web", Policy: cfg.Groups["web"].Rotate, Sessions: []string{"lead"}})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		groups, err := nidclient.ListGroups(t.Context(), c)
		return err == nil && slices.Contains(groups, "web")
	}, time.Minute, 100*time.Millisecond)

	// A worker comes up only after a query would have given up.
	started := make(chan *Node, 1)
	late := time.AfterFunc(nidclient.QueryTimeout+2*time.Second, func() {
		n, err := Start(t.Context(), Options{Config: cfg, Logger: temporaltest.Logger()})
		if err != nil {
			t.Errorf("worker: %v", err)
		}
		started <- n
	})
	defer late.Stop()
	plan, err := PlanGroups(t.Context(), c, cfg, nil, false)
	require.NoError(t, err)
	require.Equal(t, []string{"nothing to change: the running groups are as the file says"}, plan.Lines())
	if n := <-started; n != nil {
		require.NoError(t, n.Stop())
	}
}

// A restart places no session that runs already: placing is an update of
// the hosts registry each, and a couple of hundred of them held nid up's
// start for minutes. A session new to the file is placed.
func TestApplyingTheFileAgainPlacesOnlyNewSessions(t *testing.T) {
	env := temporaltest.New(t)
	c := env.Client(t)
	const two = "  web:\n    sessions:\n      - {agent: sim, name: lead, sim: {turnDelay: 0s}}\n      - {agent: sim, name: worker, sim: {turnDelay: 0s}}\n"
	startNode(t, env.Config(t, two))
	require.Eventually(t, func() bool {
		list, err := nidclient.ListSessions(t.Context(), c, "web")
		return err == nil && len(list) == 2 && list[0].Host != "" && list[1].Host != ""
	}, time.Minute, 100*time.Millisecond, "both sessions listed with their host")
	placed := placements(t, c)
	require.Equal(t, 2, placed)

	require.NoError(t, StartGroups(t.Context(), c, env.Config(t, two)))
	require.Equal(t, placed, placements(t, c), "running sessions keep their host without asking")

	require.NoError(t, StartGroups(t.Context(), c, env.Config(t, two+"      - {agent: sim, name: late, sim: {turnDelay: 0s}}\n")))
	require.Equal(t, placed+1, placements(t, c), "a new session is placed")
}

// placements counts the sessions the hosts registry was asked to place,
// one at a time or in batches.
func placements(t *testing.T, c client.Client) int {
	t.Helper()
	n := 0
	iter := c.GetWorkflowHistory(t.Context(), workflows.HostsID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iter.HasNext() {
		e, err := iter.Next()
		require.NoError(t, err)
		input := e.GetWorkflowExecutionUpdateAcceptedEventAttributes().GetAcceptedRequest().GetInput()
		switch input.GetName() {
		case workflows.UpdatePlace:
			n++
		case workflows.UpdatePlaceAll:
			var batch workflows.PlaceBatch
			require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(input.GetArgs(), &batch))
			n += len(batch.Sessions)
		}
	}
	return n
}

// A large group run rebuilt by replay in the task that would continue it as
// new waits for its next task first, since a continue-as-new sent from a
// task as long as a replay is refused while signals keep coming; a run
// that reaches its limit in a task its cached instance takes continues at
// once. The group's first task here is its instance's first (as after a
// refused attempt, or a worker's restart), and finds the history past its
// limit already: the inbox items sent before any worker ran. Three hundred
// done tasks with long details make it large, and leave its session idle.
func TestAGroupRebuiltByReplayContinuesAsNewFromItsNextTask(t *testing.T) {
	env := temporaltest.New(t)
	c := env.Client(t)
	st := &workflows.GroupState{Sessions: []string{"lead"}, HistoryLimit: 30, Board: workflows.BoardState{NextTask: workflows.MaxTasks + 1}}
	for i := range workflows.MaxTasks {
		st.Board.Tasks = append(st.Board.Tasks, workflows.Task{ID: fmt.Sprintf("t%d", i+1), Title: "done before",
			Detail: strings.Repeat("d", workflows.MaxTaskDetail), Status: workflows.TaskDone})
	}
	note := workflows.InboxItem{Session: "lead", Kind: "note", Text: "a note"}
	first, err := c.SignalWithStartWorkflow(t.Context(), workflows.GroupID("web"), workflows.SignalInbox, note,
		client.StartWorkflowOptions{ID: workflows.GroupID("web"), TaskQueue: workflows.TaskQueue},
		workflows.GroupWorkflowName, workflows.GroupInput{Name: "web", State: st})
	require.NoError(t, err)
	for range 40 {
		require.NoError(t, c.SignalWorkflow(t.Context(), workflows.GroupID("web"), "", workflows.SignalInbox, note))
	}
	startNode(t, env.Config(t, "  web:\n    sessions:\n      - {agent: sim, name: lead}\n"))

	second := nextRun(t, c, workflows.GroupID("web"), first.GetRunID())
	require.Equal(t, []string{"rebuilt: true", "TimerStarted", "TimerFired", "rebuilt: false", "ContinuedAsNew"},
		continueSteps(t, c, workflows.GroupID("web"), first.GetRunID()), "the rebuilt run waits one task, then continues")

	// The second run's instance is cached from its first task on: items
	// one at a time, each taken before the next, bring it to its limit.
	for {
		d, err := c.DescribeWorkflowExecution(t.Context(), workflows.GroupID("web"), "")
		require.NoError(t, err)
		if d.GetWorkflowExecutionInfo().GetExecution().GetRunId() != second {
			break
		}
		require.NoError(t, c.SignalWorkflow(t.Context(), workflows.GroupID("web"), second, workflows.SignalInbox, note))
		require.Eventually(t, func() bool {
			d, err := c.DescribeWorkflowExecution(t.Context(), workflows.GroupID("web"), second)
			return err == nil && d.GetPendingWorkflowTask() == nil
		}, time.Minute, 5*time.Millisecond, "the group did not take its item")
	}
	require.Equal(t, []string{"rebuilt: false", "ContinuedAsNew"}, continueSteps(t, c, workflows.GroupID("web"), second),
		"the cached run continues at once")
}

// nextRun waits for the run after run of workflow id and returns its id.
func nextRun(t *testing.T, c client.Client, id, run string) string {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		d, err := c.DescribeWorkflowExecution(t.Context(), id, "")
		require.NoError(t, err)
		if now := d.GetWorkflowExecutionInfo().GetExecution().GetRunId(); now != run {
			return now
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("run %s of %s did not continue as new within a minute", run, id)
	return ""
}

// continueSteps is how run of workflow id ended, from its first side
// effect on: each side effect as what it recorded, timers and the
// continue-as-new by their event types.
func continueSteps(t *testing.T, c client.Client, id, run string) []string {
	t.Helper()
	var steps []string
	iter := c.GetWorkflowHistory(t.Context(), id, run, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iter.HasNext() {
		e, err := iter.Next()
		require.NoError(t, err)
		step := ""
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_MARKER_RECORDED:
			m := e.GetMarkerRecordedEventAttributes()
			if m.GetMarkerName() != "SideEffect" {
				continue
			}
			var rebuilt bool
			require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(m.GetDetails()["data"], &rebuilt))
			steps = append(steps, fmt.Sprintf("rebuilt: %v", rebuilt))
		case enumspb.EVENT_TYPE_TIMER_STARTED:
			step = "TimerStarted"
		case enumspb.EVENT_TYPE_TIMER_FIRED:
			step = "TimerFired"
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
			step = "ContinuedAsNew"
		}
		if step != "" && len(steps) > 0 {
			steps = append(steps, step)
		}
	}
	return steps
}
