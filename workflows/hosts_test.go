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

type hostsHarness struct {
	t   *testing.T
	env *testsuite.TestWorkflowEnvironment
	mu  sync.Mutex
	// told is what each session workflow was told of its host, in order.
	told map[string][]HostState
}

func newHostsHarness(t *testing.T) *hostsHarness {
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	h := &hostsHarness{t: t, env: suite.NewTestWorkflowEnvironment(), told: map[string][]HostState{}}
	h.env.RegisterWorkflowWithOptions(HostsWorkflow, workflow.RegisterOptions{Name: HostsWorkflowName})
	h.env.OnSignalExternalWorkflow(mock.Anything, mock.Anything, "", SignalHost, mock.Anything).Return(
		func(_, id, _, _ string, arg interface{}) error {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.told[id] = append(h.told[id], arg.(HostState))
			return nil
		})
	return h
}

func (h *hostsHarness) beat(d time.Duration, b HostBeat) {
	h.env.RegisterDelayedCallback(func() { h.env.SignalWorkflow(SignalHeartbeat, b) }, d)
}

// place asks at d where session runs.
func (h *hostsHarness) place(d time.Duration, session, want string) *updateResult {
	r := &updateResult{}
	h.env.RegisterDelayedCallback(func() {
		h.env.UpdateWorkflow(UpdatePlace, "", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { r.rejected, r.done = err, true },
			OnAccept: func() {},
			OnComplete: func(v interface{}, err error) {
				r.err, r.done = err, true
				if err == nil {
					r.value = v.(Placement).Host
				}
			},
		}, PlaceRequest{Session: session, Want: want})
	}, d)
	return r
}

func (h *hostsHarness) view() HostsView {
	q, err := h.env.QueryWorkflow(QueryHosts)
	require.NoError(h.t, err)
	var v HostsView
	require.NoError(h.t, q.Get(&v))
	return v
}

func (h *hostsHarness) at(d time.Duration, fn func()) { h.env.RegisterDelayedCallback(fn, d) }

func (h *hostsHarness) run(end time.Duration) {
	h.at(end, h.env.CancelWorkflow)
	h.env.ExecuteWorkflow(HostsWorkflowName, HostsInput{})
	var canceled *temporal.CanceledError
	require.True(h.t, errors.As(h.env.GetWorkflowError(), &canceled), "registry ended with %v", h.env.GetWorkflowError())
}

func (h *hostsHarness) toldOf(session string) []HostState {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]HostState(nil), h.told[session]...)
}

// keepBeating beats for b every b.Every from d until end.
func (h *hostsHarness) keepBeating(b HostBeat, from, end time.Duration) {
	for at := from; at < end; at += b.Every {
		h.beat(at, b)
	}
}

func TestHostsPlaceOnTheLiveHostWithMostRoom(t *testing.T) {
	h := newHostsHarness(t)
	a := HostBeat{Host: "a", MaxSessions: 2, Every: 10 * time.Second}
	b := HostBeat{Host: "b", MaxSessions: 3, Every: 10 * time.Second}
	gone := HostBeat{Host: "gone", MaxSessions: 50, Every: 10 * time.Second}
	h.keepBeating(a, time.Second, 10*time.Minute)
	h.keepBeating(b, time.Second, 10*time.Minute)
	h.beat(time.Second, gone) // beats once: down long before the placements
	first := h.place(time.Minute, "web/one", "")
	second := h.place(time.Minute+time.Second, "web/two", "")
	third := h.place(time.Minute+2*time.Second, "web/three", "")
	again := h.place(time.Minute+3*time.Second, "web/one", "")
	pinned := h.place(time.Minute+4*time.Second, "api/solo", "c")
	bad := h.place(time.Minute+5*time.Second, "not a session", "")
	var v HostsView
	h.at(2*time.Minute, func() { v = h.view() })
	h.run(10 * time.Minute)

	require.Equal(t, "b", first.value, "b has the most room (3)")
	require.Equal(t, "a", second.value, "a and b both have 2 left: the first by name")
	require.Equal(t, "b", third.value)
	require.Equal(t, "b", again.value, "a placed session stays where it is")
	require.Equal(t, "c", pinned.value, "host: in nid.yaml wins, known or not")
	require.ErrorContains(t, bad.rejected, `"not a session" is not a session`)

	require.Len(t, v.Hosts, 4)
	byName := map[string]HostView{}
	for _, hv := range v.Hosts {
		byName[hv.Name] = hv
	}
	require.Equal(t, []string{"web/two"}, byName["a"].Sessions)
	require.Equal(t, []string{"web/one", "web/three"}, byName["b"].Sessions)
	require.Equal(t, 1, byName["b"].Free)
	require.True(t, byName["a"].Alive)
	require.False(t, byName["gone"].Alive, "three beats missed")
	require.False(t, byName["c"].Alive, "never beat")
	require.Equal(t, []string{"api/solo"}, byName["c"].Sessions)
}

func TestHostsWithNoLiveHostPlaceNothing(t *testing.T) {
	h := newHostsHarness(t)
	h.beat(time.Second, HostBeat{Host: "a", MaxSessions: 0, Every: 10 * time.Second})
	r := h.place(2*time.Second, "web/lead", "")
	h.run(time.Minute)
	require.ErrorContains(t, r.err, "no live host takes sessions")
}

func TestHostsTellSessionsWhenTheirHostGoesAndComesBack(t *testing.T) {
	h := newHostsHarness(t)
	a := HostBeat{Host: "a", MaxSessions: 4, Every: 10 * time.Second}
	h.keepBeating(a, time.Second, 2*time.Minute) // then a is killed
	h.place(5*time.Second, "web/lead", "")
	h.at(6*time.Second, func() { h.env.SignalWorkflow(SignalHostAssign, HostAssign{Session: "web/lead", Host: "a"}) })
	var down HostsView
	h.at(3*time.Minute, func() { down = h.view() })
	h.keepBeating(a, 5*time.Minute, 6*time.Minute) // restarted, then stopped
	h.run(10 * time.Minute)

	require.Equal(t, []HostState{
		{Host: "a", Alive: true},  // the answer to its assignment
		{Host: "a", Alive: false}, // its beats stopped
		{Host: "a", Alive: true},  // back
		{Host: "a", Alive: false}, // stopped: no news until its beats are missed
	}, h.toldOf(SessionID("web", "lead")))
	require.False(t, down.Hosts[0].Alive)
	require.Equal(t, []string{"web/lead"}, down.Hosts[0].Sessions, "a down host keeps its sessions")
}

func TestHostsCarryEverythingAcrossContinueAsNew(t *testing.T) {
	h := newHostsHarness(t)
	a := HostBeat{Host: "a", MaxSessions: 4, Every: 10 * time.Second}
	h.keepBeating(a, time.Second, 30*time.Minute)
	h.place(5*time.Second, "web/lead", "")
	h.at(3*time.Minute, func() { h.env.SetContinueAsNewSuggested(true) })
	h.env.ExecuteWorkflow(HostsWorkflowName, HostsInput{})
	require.True(t, h.env.IsWorkflowCompleted())
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(h.env.GetWorkflowError(), &can), "registry ended with %v", h.env.GetWorkflowError())
	var next HostsInput
	require.NoError(t, decodeFirst(can, &next))
	require.Len(t, next.State.Hosts, 1)
	require.Equal(t, []string{"web/lead"}, next.State.Hosts[0].Sessions)
	require.True(t, next.State.Hosts[0].Alive)
}

func TestSessionRunsOnItsHostAndWaitsWhileItIsDown(t *testing.T) {
	h := newHarness(t)
	var assigned []HostAssign
	h.env.OnSignalExternalWorkflow(mock.Anything, HostsID, "", SignalHostAssign, mock.Anything).Return(
		func(_, _, _, _ string, arg interface{}) error {
			assigned = append(assigned, arg.(HostAssign))
			return nil
		})
	in := sessionInput(policy(config.ModeOff, 85, 0))
	in.Host = "b"
	h.send(time.Minute, 2)
	h.at(10*time.Minute, func() { h.env.SignalWorkflow(SignalHost, HostState{Host: "a", Alive: false}) })
	var otherHost SessionView
	h.at(10*time.Minute+time.Second, func() { otherHost = h.view() })
	h.at(11*time.Minute, func() { h.env.SignalWorkflow(SignalHost, HostState{Host: "b", Alive: false}) })
	h.send(12*time.Minute, 2)
	var down SessionView
	h.at(20*time.Minute, func() { down = h.view() })
	h.at(30*time.Minute, func() { h.env.SignalWorkflow(SignalHost, HostState{Host: "b", Alive: true}) })
	v := h.run(in, time.Hour)

	require.Equal(t, []HostAssign{{Session: "web/lead", Host: "b"}}, assigned, "the run tells the registry where it is")
	require.Equal(t, StatusIdle, otherHost.Status, "another host's news is not this session's")
	require.Equal(t, StatusHostDown, down.Status)
	require.True(t, down.HostDown)
	require.Equal(t, 2, down.Context.TotalTurns, "no turn runs while the host is down")
	require.Equal(t, 2, down.QueuedMessages, "the messages wait for it")
	require.Len(t, h.inbox, 1, "the inbox hears of a host down for minutes, once")
	require.Contains(t, h.inbox[0].Text, "web/lead waits for host b, down since")
	require.Contains(t, h.inbox[0].Text, "nid move web/lead HOST")

	require.Equal(t, StatusIdle, v.Status)
	require.Equal(t, "b", v.Host)
	require.Equal(t, 4, v.Context.TotalTurns, "it resumes where it was")
	require.Equal(t, []string{"host b is down: waiting for it", "host b is back: resuming"}, eventTexts(v, EventHost))
	for _, q := range h.agent.queues {
		require.Equal(t, HostQueue("b"), q, "every turn runs on the session's host")
	}
}

func TestSessionOfBeforeHostsTakesTheHostOfItsQueue(t *testing.T) {
	h := newHarness(t)
	h.env.OnSignalExternalWorkflow(mock.Anything, HostsID, "", SignalHostAssign, mock.Anything).Return(nil)
	in := sessionInput(policy(config.ModeOff, 85, 0))
	in.ActivityQueue = HostQueue("old-box")
	h.send(time.Minute, 1)
	v := h.run(in, time.Hour)
	require.Equal(t, "old-box", v.Host)
	require.Equal(t, []string{HostQueue("old-box")}, h.agent.queues)
}
