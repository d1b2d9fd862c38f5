package workflows

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/nid-dev/nid/activities"
	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/config"
)

type hostsHarness struct {
	t   *testing.T
	env *testsuite.TestWorkflowEnvironment
	mu  sync.Mutex
	// told is what each session workflow was told of its host, in order.
	told map[string][]HostState
	// onTell, if set, runs after each session is told.
	onTell func()
	// beatsByUpdate sends beat's beats as UpdateHeartbeat, as nid's
	// workers do since VersionBeatUpdate, rather than the signal.
	beatsByUpdate bool
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
			if h.onTell != nil {
				h.onTell()
			}
			return nil
		})
	return h
}

func (h *hostsHarness) beat(d time.Duration, b HostBeat) {
	if h.beatsByUpdate {
		r := h.update(d, UpdateHeartbeat, b, func(v any) any { return v })
		h.t.Cleanup(func() {
			if !h.t.Failed() {
				require.True(h.t, r.done && r.rejected == nil && r.err == nil, "a beat of %s at %v: done %v, rejected %v, failed %v", b.Host, d, r.done, r.rejected, r.err)
			}
		})
		return
	}
	h.env.RegisterDelayedCallback(func() { h.env.SignalWorkflow(SignalHeartbeat, b) }, d)
}

// forEachBeat runs test with beats sent as the signal older workers send
// and as the update workers send since VersionBeatUpdate: the registry
// takes both alike.
func forEachBeat(t *testing.T, test func(t *testing.T, h *hostsHarness)) {
	for _, byUpdate := range []bool{false, true} {
		name := "signal"
		if byUpdate {
			name = "update"
		}
		t.Run(name, func(t *testing.T) {
			h := newHostsHarness(t)
			h.beatsByUpdate = byUpdate
			test(t, h)
		})
	}
}

// recordAssigns has env keep every host assignment a session sends the
// registry in assigned.
func recordAssigns(env *testsuite.TestWorkflowEnvironment, assigned *[]HostAssign) {
	env.OnSignalExternalWorkflow(mock.Anything, HostsID, "", SignalHostAssign, mock.Anything).Return(
		func(_, _, _, _ string, arg interface{}) error {
			*assigned = append(*assigned, arg.(HostAssign))
			return nil
		})
}

// place asks at d where session runs.
func (h *hostsHarness) place(d time.Duration, session, want string) *updateResult {
	return h.update(d, UpdatePlace, PlaceRequest{Session: session, Want: want}, func(v any) any { return v.(Placement).Host })
}

// update sends the registry the update name with arg at d; its answer, as
// answer turns it, is the result's value.
func (h *hostsHarness) update(d time.Duration, name string, arg any, answer func(any) any) *updateResult {
	r := &updateResult{}
	h.env.RegisterDelayedCallback(func() {
		h.env.UpdateWorkflow(name, "", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { r.rejected, r.done = err, true },
			OnAccept: func() {},
			OnComplete: func(v interface{}, err error) {
				r.err, r.done = err, true
				if err == nil {
					r.value = answer(v)
				}
			},
		}, arg)
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
	forEachBeat(t, testHostsPlaceOnTheLiveHostWithMostRoom)
}

func testHostsPlaceOnTheLiveHostWithMostRoom(t *testing.T, h *hostsHarness) {
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

// A beat sent as an update that the registry does not take is refused,
// saying what was wrong and what is allowed, and changes nothing; the
// same beats sent as the signal are dropped as they always were.
func TestHostsRefuseBadBeatsByUpdate(t *testing.T) {
	h := newHostsHarness(t)
	good := HostBeat{Host: "a", MaxSessions: 2, Every: 10 * time.Second}
	h.beat(time.Second, good)
	bad := map[string]HostBeat{
		`host "../a": a host name is letters`:             {Host: "../a", MaxSessions: 1, Every: time.Second},
		`host "": a host name is`:                         {MaxSessions: 1, Every: time.Second},
		"host b beats every 0s: the period must be above": {Host: "b", MaxSessions: 1},
		"host a gives an HTTP address of 513 bytes; the limit is 512": {Host: "a", MaxSessions: 9, Every: time.Second,
			HTTP: strings.Repeat("h", MaxHostHTTP+1)},
	}
	answers := map[string]*updateResult{}
	for want, b := range bad {
		answers[want] = h.update(time.Minute, UpdateHeartbeat, b, func(v any) any { return v })
	}
	var v HostsView
	h.at(2*time.Minute, func() { v = h.view() })
	h.run(3 * time.Minute)

	for want, r := range answers {
		require.ErrorContains(t, r.rejected, want)
	}
	require.Len(t, v.Hosts, 1, "no refused beat made a host")
	require.Equal(t, 2, v.Hosts[0].MaxSessions, "a's refused beat changed nothing")
	require.Empty(t, v.Hosts[0].HTTP)
}

// A registry that keeps MaxHosts hosts refuses a beat from one more,
// sent as an update, and keeps beating the ones it has.
func TestHostsRefuseABeatPastMaxHosts(t *testing.T) {
	h := newHostsHarness(t)
	h.beatsByUpdate = true
	for i := range MaxHosts {
		h.beat(time.Second, HostBeat{Host: fmt.Sprintf("h%04d", i), MaxSessions: 1, Every: time.Hour})
	}
	more := h.update(time.Minute, UpdateHeartbeat, HostBeat{Host: "more", MaxSessions: 1, Every: time.Hour}, func(v any) any { return v })
	again := h.update(time.Minute, UpdateHeartbeat, HostBeat{Host: "h0000", MaxSessions: 5, Every: time.Hour}, func(v any) any { return v })
	var v HostsView
	h.at(2*time.Minute, func() { v = h.view() })
	h.run(3 * time.Minute)

	require.ErrorContains(t, more.rejected, fmt.Sprintf("host more is not taken: the registry keeps %d hosts, the most it may", MaxHosts))
	require.NoError(t, again.rejected)
	require.True(t, again.done)
	require.Len(t, v.Hosts, MaxHosts)
	require.Equal(t, 5, v.Hosts[0].MaxSessions)
}

func TestHostsWithNoLiveHostPlaceNothing(t *testing.T) {
	h := newHostsHarness(t)
	h.beat(time.Second, HostBeat{Host: "a", MaxSessions: 0, Every: 10 * time.Second})
	r := h.place(2*time.Second, "web/lead", "")
	h.run(time.Minute)
	require.ErrorContains(t, r.err, "no live host takes sessions")
}

func TestHostsTellSessionsWhenTheirHostGoesAndComesBack(t *testing.T) {
	forEachBeat(t, testHostsTellSessionsWhenTheirHostGoesAndComesBack)
}

func testHostsTellSessionsWhenTheirHostGoesAndComesBack(t *testing.T, h *hostsHarness) {
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

// The registry keeps one timer for its hosts' deadlines: beats and
// placements do not each leave one running (VersionRegistryAtScale), and
// a host with a sooner deadline than the timer's still counts as down on
// time, its beat sent as a signal or as an update (which wakes the
// registry's loop too: VersionBeatUpdate).
func TestHostsKeepOneTimerForTheirDeadlines(t *testing.T) {
	forEachBeat(t, testHostsKeepOneTimerForTheirDeadlines)
}

func testHostsKeepOneTimerForTheirDeadlines(t *testing.T, h *hostsHarness) {
	var scheduled, fired int
	h.env.SetOnTimerScheduledListener(func(string, time.Duration) { scheduled++ })
	h.env.SetOnTimerFiredListener(func(string) { fired++ })
	a := HostBeat{Host: "a", MaxSessions: 100, Every: 10 * time.Second}
	h.keepBeating(a, time.Second, 10*time.Minute)
	for i := range 100 {
		h.place(time.Minute+time.Duration(i)*time.Second, fmt.Sprintf("web/s%d", i), "")
	}
	// b beats once, every 2 s: down 6 s later, well before a's deadline.
	h.beat(5*time.Minute+time.Second, HostBeat{Host: "b", MaxSessions: 1, Every: 2 * time.Second})
	var bDown HostsView
	h.at(5*time.Minute+8*time.Second, func() { bDown = h.view() })
	h.run(10 * time.Minute)

	require.False(t, bDown.Hosts[1].Alive, "b missed three beats of 2 s")
	require.True(t, bDown.Hosts[0].Alive)
	// 60 beats and 100 placements; a's deadline, 30 s past its last beat,
	// is looked at about every 20 s, and b's once.
	require.LessOrEqual(t, scheduled, 35, "timers scheduled over 10 minutes")
	require.GreaterOrEqual(t, fired, scheduled-2, "every timer but the running one (and b's, replaced) fires rather than piling up")
}

// Hosts of thousands of sessions going down together: every session hears
// it once, across the batches tell sends them in (VersionRegistryAtScale;
// TestHostsCarryWhatTheyHaveNotToldAcrossContinueAsNew sees a batch's
// size).
func TestHostsTellEverySessionOfHostsThatGoDown(t *testing.T) {
	h := newHostsHarness(t)
	var sessions []string
	for i, host := range []string{"a", "b", "c"} {
		h.beat(time.Second, HostBeat{Host: host, MaxSessions: 1000, Every: 10 * time.Second})
		var reqs []PlaceRequest
		for n := range 900 {
			ref := fmt.Sprintf("g%d/s%03d", i, n)
			reqs = append(reqs, PlaceRequest{Session: ref, Want: host})
			sessions = append(sessions, ref)
		}
		h.placeAll(5*time.Second, reqs...)
	}
	h.run(2 * time.Minute)

	for _, ref := range sessions {
		group, name, err := ParseSessionRef(ref)
		require.NoError(t, err)
		host := string("abc"[ref[1]-'0']) // g0 on a, g1 on b, g2 on c
		require.Equal(t, []HostState{{Host: host, Alive: false}}, h.toldOf(SessionID(group, name)), ref)
	}
}

// A registry whose history fills while it tells its sessions leaves the
// rest to its next run, one notice a session.
func TestHostsCarryWhatTheyHaveNotToldAcrossContinueAsNew(t *testing.T) {
	h := newHostsHarness(t)
	h.beat(time.Second, HostBeat{Host: "a", MaxSessions: 2000, Every: 10 * time.Second})
	var reqs []PlaceRequest
	for n := range 1000 {
		reqs = append(reqs, PlaceRequest{Session: fmt.Sprintf("web/s%04d", n)})
	}
	h.placeAll(5*time.Second, reqs...)
	// The history fills as the first signal goes out.
	h.onTell = func() { h.env.SetContinueAsNewSuggested(true) }
	h.env.ExecuteWorkflow(HostsWorkflowName, HostsInput{})
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(h.env.GetWorkflowError(), &can), "registry ended with %v", h.env.GetWorkflowError())
	var next HostsInput
	require.NoError(t, decodeFirst(can, &next))
	told := 0
	for n := range 1000 {
		told += len(h.toldOf(SessionID("web", fmt.Sprintf("s%04d", n))))
	}
	require.Equal(t, tellBatch, told, "one batch fits the history")
	require.Len(t, next.State.Pending, 1000-tellBatch)
	require.Equal(t, HostNotice{Session: "web/s0500", State: HostState{Host: "a", Alive: false}}, next.State.Pending[0])
}

// A run finds the sessions its state carried where they are, and moves
// them off every host that held them, the stopped ones too.
func TestHostsFindTheSessionsTheirStateCarried(t *testing.T) {
	h := newHostsHarness(t)
	h.keepBeating(HostBeat{Host: "a", MaxSessions: 10, Every: 10 * time.Second}, time.Second, 5*time.Minute)
	h.keepBeating(HostBeat{Host: "b", MaxSessions: 10, Every: 10 * time.Second}, time.Second, 5*time.Minute)
	stays := h.place(10*time.Second, "web/one", "")
	h.at(20*time.Second, func() { h.env.SignalWorkflow(SignalHostAssign, HostAssign{Session: "web/two", Host: "b"}) })
	var after HostsView
	h.at(30*time.Second, func() { after = h.view() })
	h.at(time.Minute, h.env.CancelWorkflow)
	h.at(25*time.Second, func() { h.env.SignalWorkflow(SignalHostAssign, HostAssign{Session: "web/three", Host: "b"}) })
	h.env.ExecuteWorkflow(HostsWorkflowName, HostsInput{State: &HostsState{Hosts: []HostRecord{
		{Name: "a", MaxSessions: 10, Every: 10 * time.Second, Sessions: []string{"web/one", "web/two"}, Stopped: []string{"web/two"}},
		// A state that left web/two on two hosts, and web/three stopped on
		// one without being placed there: a move takes each off them all.
		{Name: "c", MaxSessions: 10, Every: 10 * time.Second, Sessions: []string{"web/two"}, Stopped: []string{"web/three"}},
	}}})

	require.Equal(t, "a", stays.value)
	require.Equal(t, map[string][]string{"a": {"web/one"}, "b": {"web/three", "web/two"}, "c": {}}, sessionsByHost(after))
	require.Empty(t, after.Hosts[0].Stopped)
	require.Empty(t, after.Hosts[2].Stopped)
}

// A beat and a batch that come while the registry tells its sessions, in a
// run whose history is then full: the batch is answered and the run
// continues as new (the batch waits for the beat to be taken, and the
// continue-as-new for the batch).
func TestHostsContinueAsNewWithABatchWaitingForABeat(t *testing.T) {
	h := newHostsHarness(t)
	beat := HostBeat{Host: "a", MaxSessions: 10, Every: 10 * time.Second}
	h.beat(time.Second, beat)
	h.at(5*time.Second, func() { h.env.SignalWorkflow(SignalHostAssign, HostAssign{Session: "web/one", Host: "a"}) })
	batch := &updateResult{}
	h.onTell = func() {
		h.onTell = nil
		h.env.SetContinueAsNewSuggested(true)
		h.env.SignalWorkflow(SignalHeartbeat, beat)
		h.env.UpdateWorkflow(UpdatePlaceAll, "", &testsuite.TestUpdateCallback{
			OnReject:   func(err error) { batch.rejected, batch.done = err, true },
			OnAccept:   func() {},
			OnComplete: func(v interface{}, err error) { batch.value, batch.err, batch.done = v, err, true },
		}, PlaceBatch{Sessions: []PlaceRequest{{Session: "web/two"}}})
	}
	h.at(time.Hour, h.env.CancelWorkflow)
	h.env.ExecuteWorkflow(HostsWorkflowName, HostsInput{})

	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(h.env.GetWorkflowError(), &can), "registry ended with %v", h.env.GetWorkflowError())
	require.True(t, batch.done)
	require.NoError(t, batch.err)
	require.Equal(t, Placements{Placed: []Placement{{Host: "a", Alive: true}}}, batch.value)
}

// A run that grew by registryRunBytes continues as new, woken by an
// update when no signal comes.
func TestHostsContinueAsNewOnceARunGrewByAMegabyte(t *testing.T) {
	h := newHostsHarness(t)
	h.beat(time.Second, HostBeat{Host: "a", MaxSessions: 10, Every: 10 * time.Minute})
	placed := &updateResult{}
	h.at(10*time.Second, func() {
		h.env.UpdateWorkflow(UpdatePlaceAll, "", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { placed.rejected, placed.done = err, true },
			// The batch's request and answer are what filled the run.
			OnAccept:   func() { h.env.SetCurrentHistorySize(registryRunBytes) },
			OnComplete: func(v interface{}, err error) { placed.err, placed.done = err, true },
		}, PlaceBatch{Sessions: []PlaceRequest{{Session: "web/one"}}})
	})
	// Before a's deadline, the registry's next wake without the update.
	h.at(20*time.Minute, h.env.CancelWorkflow)
	h.env.ExecuteWorkflow(HostsWorkflowName, HostsInput{})

	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(h.env.GetWorkflowError(), &can), "registry ended with %v", h.env.GetWorkflowError())
	require.True(t, placed.done)
	require.NoError(t, placed.err)
	var next HostsInput
	require.NoError(t, decodeFirst(can, &next))
	require.Equal(t, []string{"web/one"}, next.State.Hosts[0].Sessions)
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

// A session continues as new onto its host's queue (VersionHostQueue),
// where its turns run: one started on the shared queue before nid up
// started sessions on their host's, or one that moved since, ends up
// beside its activities. With no host it stays on the shared queue; at an
// older rung it keeps the queue it ran on.
func TestASessionContinuesAsNewOntoItsHostsQueue(t *testing.T) {
	tests := []struct {
		name string
		rung Version
		host string
		want string
	}{
		{"placed on b", VersionHostQueue, "b", HostQueue("b")},
		{"no host", VersionHostQueue, "", TaskQueue},
		{"an older rung", VersionQuietStart, "b", "default-test-taskqueue"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			var assigned []HostAssign
			recordAssigns(h.env, &assigned)
			h.env.OnGetVersion(versionChangeID, workflow.DefaultVersion, workflow.Version(versionLatest)).Return(workflow.Version(tt.rung))
			in := sessionInput(policy(config.ModeOff, 85, 0))
			in.Host = tt.host
			h.send(time.Minute, 2)
			h.at(2*time.Minute, func() { h.env.SetContinueAsNewSuggested(true) })
			h.env.ExecuteWorkflow(SessionWorkflowName, in)
			require.True(t, h.env.IsWorkflowCompleted())
			var can *workflow.ContinueAsNewError
			require.True(t, errors.As(h.env.GetWorkflowError(), &can), "session ended with %v", h.env.GetWorkflowError())
			require.Equal(t, tt.want, can.TaskQueueName)
			var next SessionInput
			require.NoError(t, decodeFirst(can, &next))
			require.Equal(t, 2, next.State.Context.TotalTurns, "the state goes along")
		})
	}
}

func TestSessionRunsOnItsHostAndWaitsWhileItIsDown(t *testing.T) {
	h := newHarness(t)
	var assigned []HostAssign
	recordAssigns(h.env, &assigned)
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

// moveHarness is a session harness whose host registry and git activities
// are recorded: which queue each activity ran on, and what it was given.
type moveHarness struct {
	*harness
	assigned []HostAssign
	saves    []activities.SaveWorkInput
	prepares []activities.WorkspaceInput
	queues   map[string][]string // by activity
	// onSave runs inside the move's save of the work, on the old host.
	onSave func()
}

func newMoveHarness(t *testing.T) *moveHarness {
	h := &moveHarness{harness: newHarness(t), queues: map[string][]string{}}
	recordAssigns(h.env, &h.assigned)
	h.env.RegisterActivityWithOptions(func(ctx context.Context, in activities.SaveWorkInput) (activities.SaveWorkResult, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.saves = append(h.saves, in)
		h.queues["save"] = append(h.queues["save"], activity.GetInfo(ctx).TaskQueue)
		if h.onSave != nil {
			h.onSave()
		}
		return activities.SaveWorkResult{Salvage: activities.SalvageRef(in.Session, in.Number)}, nil
	}, activity.RegisterOptions{Name: activities.SaveWorkName})
	h.env.RegisterActivityWithOptions(func(ctx context.Context, in activities.WorkspaceInput) (activities.WorkspaceResult, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.prepares = append(h.prepares, in)
		q := activity.GetInfo(ctx).TaskQueue
		h.queues["prepare"] = append(h.queues["prepare"], q)
		return activities.WorkspaceResult{Worktree: "/worktrees/" + q + "/web/lead", Branch: "nid/web/lead"}, nil
	}, activity.RegisterOptions{Name: activities.PrepareWorkspaceName})
	return h
}

func TestMoveHandsOffOntoTheOtherHostWithTheWork(t *testing.T) {
	h := newMoveHarness(t)
	in := sessionInput(policy(config.ModeOff, 85, 0))
	in.Host, in.Repo = "a", "/repo"
	h.send(time.Minute, 2)
	h.at(10*time.Minute, func() { h.env.SignalWorkflow(SignalMove, MoveRequest{Host: "b"}) })
	h.send(20*time.Minute, 1)
	h.at(30*time.Minute, func() { h.env.SignalWorkflow(SignalMove, MoveRequest{Host: "b"}) })
	v := h.run(in, time.Hour)

	require.Equal(t, "b", v.Host)
	require.Empty(t, v.Moving)
	require.Equal(t, "/worktrees/nid@b/web/lead", v.Worktree, "a fresh worktree on the new host")
	rots := rotations(v)
	require.Len(t, rots, 1, "the second request found the session on b already")
	r := rots[0]
	require.Equal(t, config.ModeHandoff, r.Method)
	require.Equal(t, ReasonMove, r.Reason)
	require.Equal(t, "a", r.FromHost)
	require.Equal(t, "b", r.ToHost)
	require.Equal(t, "refs/nid/salvage/web/lead/1", r.Salvage)
	require.Equal(t, []string{HostQueue("a")}, h.queues["save"], "the work is saved where it was")
	require.Equal(t, []activities.SaveWorkInput{{Session: agents.SessionRef{Group: "web", Name: "lead", WorkflowID: "nid/web/lead"}, Number: 1}}, h.saves)
	require.Equal(t, []string{HostQueue("a"), HostQueue("b")}, h.queues["prepare"])
	require.Equal(t, "refs/nid/salvage/web/lead/1", h.prepares[1].Salvage, "the salvage is laid over the fresh worktree")
	require.Equal(t, []HostAssign{{Session: "web/lead", Host: "a"}, {Session: "web/lead", Host: "b"}}, h.assigned)

	var kinds, queues []string
	for i, turn := range h.agent.turns {
		kinds = append(kinds, turn.Kind)
		queues = append(queues, h.agent.queues[i])
	}
	require.Equal(t, []string{agents.TurnWork, agents.TurnWork, agents.TurnHandoffRequest, agents.TurnFresh, agents.TurnWork}, kinds)
	require.Equal(t, []string{HostQueue("a"), HostQueue("a"), HostQueue("a"), HostQueue("b"), HostQueue("b")}, queues,
		"the handoff is asked on the old host, the fresh conversation and what follows run on the new one")
	require.Contains(t, eventTexts(v, EventRotation), "↻ handoff (move) host a → b")
	require.Equal(t, []string{"moving from host a to host b: it hands off when its current turn ends", "moved from host a to host b",
		"web/lead is on host b already"}, eventTexts(v, EventHost))
}

func TestMoveOffAHostThatIsDown(t *testing.T) {
	h := newMoveHarness(t)
	in := sessionInput(policy(config.ModeOff, 85, 0))
	in.Host = "a"
	h.send(time.Minute, 1)
	h.at(10*time.Minute, func() { h.env.SignalWorkflow(SignalHost, HostState{Host: "a", Alive: false}) })
	h.at(11*time.Minute, func() { h.env.SignalWorkflow(SignalMove, MoveRequest{Host: "b"}) })
	h.send(20*time.Minute, 1)
	v := h.run(in, time.Hour)

	require.Equal(t, "b", v.Host)
	require.Equal(t, StatusIdle, v.Status, "on a live host again")
	require.Equal(t, 2, v.Context.TotalTurns)
	require.Empty(t, h.saves, "nothing can be saved on a host that is down")
	for i, turn := range h.agent.turns {
		require.NotEqual(t, agents.TurnHandoffRequest, turn.Kind, "a host that is down is asked nothing")
		if i > 0 {
			require.Equal(t, HostQueue("b"), h.agent.queues[i])
		}
	}
	require.Equal(t, SummaryFromLastOutput, rotations(v)[0].SummarySource)
}

func TestATaskDonePushesTheBranchOfAURLRepo(t *testing.T) {
	for _, tt := range []struct {
		repo   string
		pushes int
	}{{"https://git.example.com/app.git", 2}, {"/srv/app", 0}} {
		t.Run(tt.repo, func(t *testing.T) {
			h := newMoveHarness(t)
			var pushes []string
			h.env.RegisterActivityWithOptions(func(ctx context.Context, in activities.PushBranchInput) (string, error) {
				pushes = append(pushes, activity.GetInfo(ctx).TaskQueue)
				return "origin", nil
			}, activity.RegisterOptions{Name: activities.PushBranchName})
			h.group.board.add("Dark mode toggle", "")
			h.group.board.add("Settings page", "")
			h.agent.onTurn = func(in activities.TurnInput) {
				if strings.HasPrefix(in.Prompt, "Continue with task ") {
					id := strings.TrimSuffix(strings.Fields(in.Prompt)[3], ":")
					h.group.update(func(b *BoardState) { b.done(id, time.Time{}) })
				}
			}
			in := sessionInput(policy(config.ModeOff, 85, 0))
			in.Host, in.Repo, in.Goal = "a", tt.repo, "Add dark mode"
			v := h.run(in, time.Hour)

			require.Len(t, pushes, tt.pushes, "one push per task done, only to a remote")
			for _, q := range pushes {
				require.Equal(t, HostQueue("a"), q, "pushed from the host whose clone has the work")
			}
			if tt.pushes > 0 {
				require.Contains(t, eventTexts(v, EventTask), "task done: branch nid/web/lead pushed to origin")
			}
		})
	}
}

func TestHostsCountNoCapacityForStoppedSessions(t *testing.T) {
	h := newHostsHarness(t)
	a := HostBeat{Host: "a", MaxSessions: 2, Every: 10 * time.Second}
	b := HostBeat{Host: "b", MaxSessions: 1, Every: 10 * time.Second}
	h.keepBeating(a, time.Second, 10*time.Minute)
	h.keepBeating(b, time.Second, 10*time.Minute)
	h.place(time.Minute, "web/one", "a")
	h.place(time.Minute+time.Second, "web/two", "a")
	h.at(2*time.Minute, func() {
		h.env.SignalWorkflow(SignalHostAssign, HostAssign{Session: "web/one", Host: "a", Stopped: true})
	})
	placed := h.place(3*time.Minute, "web/three", "")
	var v HostsView
	h.at(4*time.Minute, func() { v = h.view() })
	h.run(10 * time.Minute)

	require.Equal(t, "a", placed.value, "a's stopped session freed a place: a has 1 left, like b, and comes first")
	require.Equal(t, []string{"web/one", "web/three", "web/two"}, v.Hosts[0].Sessions, "a stopped session keeps its place")
	require.Equal(t, []string{"web/one"}, v.Hosts[0].Stopped)
	require.Equal(t, 0, v.Hosts[0].Free)
}

func TestAStoppedSessionGivesItsHostsCapacityBack(t *testing.T) {
	h := newMoveHarness(t)
	in := sessionInput(policy(config.ModeOff, 85, 0))
	in.Host = "a"
	h.send(time.Minute, 1)
	h.at(10*time.Minute, func() { h.env.SignalWorkflow(SignalStop, StopRequest{}) })
	h.at(20*time.Minute, func() { h.env.SignalWorkflow(SignalStart, SessionStart{Session: "lead"}) })
	h.run(in, time.Hour)
	require.Equal(t, []HostAssign{
		{Session: "web/lead", Host: "a"},
		{Session: "web/lead", Host: "a", Stopped: true},
		{Session: "web/lead", Host: "a"},
	}, h.assigned)
}

// placeAll asks at d where each of reqs runs, in one batch.
func (h *hostsHarness) placeAll(d time.Duration, reqs ...PlaceRequest) *updateResult {
	return h.update(d, UpdatePlaceAll, PlaceBatch{Sessions: reqs}, func(v any) any { return v.(Placements).Placed })
}

// A batch places its sessions in order exactly as one placement each
// would; a batch with a bad entry, or one whose sessions need a live host
// when there is none, is refused whole, names what was wrong, and changes
// nothing the registry holds.
func TestHostsPlaceABatchInOrderOrNoneOfIt(t *testing.T) {
	h := newHostsHarness(t)
	a := HostBeat{Host: "a", MaxSessions: 2, Every: 10 * time.Second}
	b := HostBeat{Host: "b", MaxSessions: 3, Every: 10 * time.Second}
	h.keepBeating(a, time.Second, 10*time.Minute)
	h.keepBeating(b, time.Second, 10*time.Minute)
	early := h.place(30*time.Second, "web/one", "")
	h.at(40*time.Second, func() {
		h.env.SignalWorkflow(SignalHostAssign, HostAssign{Session: "web/paused", Host: "a", Stopped: true})
	})
	batch := h.placeAll(time.Minute,
		PlaceRequest{Session: "web/one"}, PlaceRequest{Session: "web/two"}, PlaceRequest{Session: "web/three"},
		PlaceRequest{Session: "api/solo", Want: "c"}, PlaceRequest{Session: "web/two"}, PlaceRequest{Session: "web/paused"})
	var before HostsView
	h.at(2*time.Minute, func() { before = h.view() })
	bad := h.placeAll(3*time.Minute, PlaceRequest{Session: "web/four"}, PlaceRequest{Session: "not a session"})
	badHost := h.placeAll(3*time.Minute, PlaceRequest{Session: "web/four"}, PlaceRequest{Session: "web/five", Want: "no such host!"})
	empty := h.placeAll(3 * time.Minute)
	tooMany := h.placeAll(3*time.Minute, make([]PlaceRequest, MaxPlaceBatch+1)...)
	var after HostsView
	h.at(4*time.Minute, func() { after = h.view() })
	h.run(5 * time.Minute)

	require.Equal(t, "b", early.value)
	require.NoError(t, batch.err)
	require.Equal(t, []Placement{
		{Host: "b", Alive: true}, // placed already: it stays
		{Host: "a", Alive: true}, // a and b both have 2 left: the first by name
		{Host: "b", Alive: true},
		{Host: "c"},              // pinned to a host that never beat
		{Host: "a", Alive: true}, // asked twice: placed once
		{Host: "a"},              // stopped there: its first run must say it runs again
	}, batch.value)
	require.ErrorContains(t, bad.rejected, `session 2 of 2 in the batch ("not a session")`)
	require.ErrorContains(t, bad.rejected, `"not a session" is not a session`)
	require.ErrorContains(t, badHost.rejected, `session 2 of 2 in the batch ("web/five"): host "no such host!"`)
	require.ErrorContains(t, empty.rejected, "the batch places no session")
	require.ErrorContains(t, tooMany.rejected, fmt.Sprintf("the batch places %d sessions; the most one batch places is %d", MaxPlaceBatch+1, MaxPlaceBatch))
	placed := map[string][]string{"a": {"web/paused", "web/two"}, "b": {"web/one", "web/three"}, "c": {"api/solo"}}
	require.Equal(t, placed, sessionsByHost(before))
	require.Equal(t, placed, sessionsByHost(after), "a refused batch places none of its sessions, web/four included")
}

func sessionsByHost(v HostsView) map[string][]string {
	out := map[string][]string{}
	for _, hv := range v.Hosts {
		out[hv.Name] = hv.Sessions
	}
	return out
}

// A batch in which one session needs a live host, when none takes
// sessions, places none of them: not even the one pinned before it.
func TestHostsBatchWithNoLiveHostPlacesNothing(t *testing.T) {
	h := newHostsHarness(t)
	h.beat(time.Second, HostBeat{Host: "a", MaxSessions: 0, Every: 10 * time.Second})
	r := h.placeAll(2*time.Second, PlaceRequest{Session: "web/pinned", Want: "a"}, PlaceRequest{Session: "web/lead"})
	var v HostsView
	h.at(3*time.Second, func() { v = h.view() })
	h.run(time.Minute)
	require.ErrorContains(t, r.err, "session 2 of 2 in the batch (web/lead) names no host, so none is placed: no live host takes sessions")
	require.Len(t, v.Hosts, 1)
	require.Empty(t, v.Hosts[0].Sessions, "the pinned session was not placed either")
}

// A new session the registry placed on a live host just before it started
// tells the registry nothing (it knows), yet still hears when the host
// goes down; its next run, after continue-as-new, tells it again.
func TestSessionPlacedJustNowDoesNotTellTheRegistry(t *testing.T) {
	h := newHarness(t)
	var assigned []HostAssign
	recordAssigns(h.env, &assigned)
	in := sessionInput(policy(config.ModeOff, 85, 0))
	in.Host, in.Placed = "b", true
	h.send(time.Minute, 1)
	h.at(10*time.Minute, func() { h.env.SignalWorkflow(SignalHost, HostState{Host: "b", Alive: false}) })
	var down SessionView
	h.at(11*time.Minute, func() { down = h.view() })
	v := h.run(in, time.Hour)
	require.Empty(t, assigned, "the registry placed it: nothing to tell")
	require.Equal(t, StatusHostDown, down.Status, "the registry's news still reaches it")
	require.Equal(t, 1, v.Context.TotalTurns)

	next := newHarness(t)
	assigned = nil
	recordAssigns(next.env, &assigned)
	carried := sessionInput(policy(config.ModeOff, 85, 0))
	carried.Host, carried.Placed = "b", true
	carried.State = &SessionState{Status: StatusIdle, PlacementState: PlacementState{Host: "b"}, FeedState: FeedState{NextSeq: 5}}
	next.run(carried, time.Minute)
	require.Equal(t, []HostAssign{{Session: "web/lead", Host: "b"}}, assigned, "a run after the first tells it where it is")
}
