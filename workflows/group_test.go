package workflows

import (
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/nid-dev/nid/config"
)

type groupHarness struct {
	t      *testing.T
	env    *testsuite.TestWorkflowEnvironment
	mu     sync.Mutex
	pushed map[string][]config.Rotate
}

func newGroupHarness(t *testing.T) *groupHarness {
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	h := &groupHarness{t: t, env: suite.NewTestWorkflowEnvironment(), pushed: map[string][]config.Rotate{}}
	h.env.RegisterWorkflowWithOptions(GroupWorkflow, workflow.RegisterOptions{Name: GroupWorkflowName})
	h.env.OnSignalExternalWorkflow(mock.Anything, mock.Anything, "", SignalPolicy, mock.Anything).Return(
		func(_, id, _, _ string, arg interface{}) error {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.pushed[id] = append(h.pushed[id], arg.(PolicyChange).Rotate)
			return nil
		})
	return h
}

// update runs an update at d and records its outcome.
type updateResult struct {
	rejected error
	err      error
	value    interface{}
	done     bool
}

func (h *groupHarness) update(d time.Duration, name string, arg interface{}, out interface{}) *updateResult {
	r := &updateResult{}
	h.env.RegisterDelayedCallback(func() {
		h.env.UpdateWorkflow(name, "", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { r.rejected, r.done = err, true },
			OnAccept: func() {},
			OnComplete: func(v interface{}, err error) {
				r.err, r.done = err, true
				if err == nil && out != nil {
					r.value = v
				}
			},
		}, arg)
	}, d)
	return r
}

func (h *groupHarness) run(in GroupInput, end time.Duration) GroupView {
	var v GroupView
	h.env.RegisterDelayedCallback(func() {
		q, err := h.env.QueryWorkflow(QueryGroup)
		require.NoError(h.t, err)
		require.NoError(h.t, q.Get(&v))
		h.env.CancelWorkflow()
	}, end)
	h.env.ExecuteWorkflow(GroupWorkflowName, in)
	var canceled *temporal.CanceledError
	require.True(h.t, errors.As(h.env.GetWorkflowError(), &canceled), "group ended with %v", h.env.GetWorkflowError())
	return v
}

func groupInput() GroupInput {
	return GroupInput{Name: "web", Goal: "Add dark mode", Policy: config.DefaultRotate(), Sessions: []string{"lead", "worker"}}
}

func TestGroupSetPolicyValidatesStoresAndPushes(t *testing.T) {
	h := newGroupHarness(t)
	good := h.update(time.Minute, UpdateSetPolicy, SetPolicy{RotateJSON: `{"mode":"handoff","maxTurns":40}`}, &config.Rotate{})
	bad := h.update(2*time.Minute, UpdateSetPolicy, SetPolicy{RotateJSON: `{"mode":"fast"}`}, nil)
	unknown := h.update(3*time.Minute, UpdateSetPolicy, SetPolicy{RotateJSON: `{"maxturns":3}`}, nil)
	v := h.run(groupInput(), time.Hour)

	require.True(t, good.done)
	require.NoError(t, good.rejected)
	require.NoError(t, good.err)
	want := config.Rotate{Mode: config.ModeHandoff, ContextPercent: 85, MaxTurns: 40}
	require.Equal(t, want, v.Policy)
	require.Equal(t, []config.Rotate{want}, h.pushed[SessionID("web", "lead")])
	require.Equal(t, []config.Rotate{want}, h.pushed[SessionID("web", "worker")])

	require.Error(t, bad.rejected, "a bad mode is refused before anything changes")
	require.Contains(t, bad.rejected.Error(), "fast")
	require.Contains(t, bad.rejected.Error(), "auto, compact, handoff, off")
	require.Error(t, unknown.rejected)
	require.Contains(t, unknown.rejected.Error(), "maxturns")
}

func TestGroupSyncAppliesTheFileOnlyWhenItChanged(t *testing.T) {
	h := newGroupHarness(t)
	in := groupInput()
	h.update(time.Minute, UpdateSetPolicy, SetPolicy{RotateJSON: `{"maxTurns":7}`}, nil)
	// nid up again with the same file: the policy set by hand stays.
	h.update(2*time.Minute, UpdateSync, GroupSync{Goal: in.Goal, Rotate: in.Policy, Sessions: []string{"lead", "worker", "critic"}}, nil)
	v1 := GroupView{}
	h.env.RegisterDelayedCallback(func() {
		q, err := h.env.QueryWorkflow(QueryGroup)
		require.NoError(t, err)
		require.NoError(t, q.Get(&v1))
	}, 3*time.Minute)
	// The file changed its policy: the file wins.
	edited := config.Rotate{Mode: config.ModeCompact, ContextPercent: 70}
	h.update(4*time.Minute, UpdateSync, GroupSync{Goal: "Dark mode, everywhere", Rotate: edited, Sessions: []string{"lead"}}, nil)
	bad := h.update(5*time.Minute, UpdateSync, GroupSync{Rotate: config.Rotate{Mode: "sometimes", ContextPercent: 85}}, nil)
	v := h.run(in, time.Hour)

	require.Equal(t, 7, v1.Policy.MaxTurns)
	require.Equal(t, []string{"critic", "lead", "worker"}, v1.Sessions)
	require.Equal(t, edited, v.Policy)
	require.Equal(t, "Dark mode, everywhere", v.Goal)
	require.Equal(t, []string{"critic", "lead", "worker"}, v.Sessions, "sessions are never dropped by a sync")
	require.Error(t, bad.rejected)
	require.Contains(t, h.pushed[SessionID("web", "critic")], edited)
}

func TestGroupInboxKeepsItemsInOrder(t *testing.T) {
	h := newGroupHarness(t)
	h.env.RegisterDelayedCallback(func() {
		h.env.SignalWorkflow(SignalInbox, InboxItem{Group: "web", Session: "lead", Kind: EventRotationFailed, Text: "compact failed"})
		h.env.SignalWorkflow(SignalInbox, InboxItem{Group: "web", Session: "worker", Kind: EventTurnFailed, Text: "3 turns failed"})
	}, time.Minute)
	v := h.run(groupInput(), time.Hour)
	require.Len(t, v.Inbox, 2)
	require.Equal(t, int64(1), v.Inbox[0].Seq)
	require.Equal(t, "compact failed", v.Inbox[0].Text)
	require.Equal(t, "worker", v.Inbox[1].Session)
}

func TestGroupContinuesAsNewWithItsState(t *testing.T) {
	h := newGroupHarness(t)
	h.update(time.Minute, UpdateSetPolicy, SetPolicy{RotateJSON: `{"mode":"off"}`}, nil)
	h.env.RegisterDelayedCallback(func() {
		h.env.SignalWorkflow(SignalInbox, InboxItem{Group: "web", Kind: EventRotationFailed, Text: "x"})
	}, 2*time.Minute)
	h.env.RegisterDelayedCallback(func() { h.env.SetContinueAsNewSuggested(true) }, 3*time.Minute)
	h.env.ExecuteWorkflow(GroupWorkflowName, groupInput())
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(h.env.GetWorkflowError(), &can))
	var next GroupInput
	require.NoError(t, decodeFirst(can, &next))
	require.Equal(t, config.ModeOff, next.State.Policy.Mode)
	require.Len(t, next.State.Inbox, 1)
	require.Equal(t, []string{"lead", "worker"}, next.State.Sessions)
}

func TestBoardTextNamesGoalAndBoard(t *testing.T) {
	text := BoardText(GroupView{Name: "web", Goal: "Add dark mode"})
	require.Contains(t, text, "Group: web")
	require.Contains(t, text, "Goal: Add dark mode")
	require.Contains(t, text, "Tasks:")
}
