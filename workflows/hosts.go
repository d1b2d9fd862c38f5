package workflows

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/internal/clip"
)

// The hosts registry: one workflow, nid/hosts, that every worker with
// capacity beats into and that places new sessions. Placement is decided
// here, one update at a time, so two sessions starting together never both
// take a host's last seat; liveness is decided here too, so every session of
// a host hears that it went down (or came back) from one place, and `nid
// hosts` shows what the sessions were told.

// hostMissedBeats is how many heartbeats a host may miss before it counts
// as down.
const hostMissedBeats = 3

// HostsState is everything the registry carries across continue-as-new.
type HostsState struct {
	// Hosts are sorted by name.
	Hosts []HostRecord `json:"hosts"`
	// Pending are the changes not yet told to the sessions they concern,
	// in the order they happened; they travel across continue-as-new.
	Pending []HostNotice `json:"pending,omitempty"`
	// HistoryLimit overrides defaultHistoryLimit (tests use a small one).
	HistoryLimit int `json:"historyLimit,omitempty"`
}

// HostNotice is a host's state to tell one session (Session, group/name),
// or every session on the host (Session empty).
type HostNotice struct {
	Session string    `json:"session,omitempty"`
	State   HostState `json:"state"`
}

// HostRecord is one host as the registry knows it.
type HostRecord struct {
	Name        string        `json:"name"`
	MaxSessions int           `json:"maxSessions"`
	Every       time.Duration `json:"every"`
	// HTTP is the host's own HTTP server (dashboard, API, MCP endpoint).
	HTTP     string    `json:"http,omitempty"`
	LastSeen time.Time `json:"lastSeen"`
	Alive    bool      `json:"alive"`
	// Sessions placed here, as group/name, sorted; Stopped those of them
	// stopped, which keep their place but take no capacity.
	Sessions []string `json:"sessions"`
	Stopped  []string `json:"stopped,omitempty"`
}

// free is how many more sessions the host takes before it is full
// (negative once sessions pinned to it passed its capacity).
func (h HostRecord) free() int { return h.MaxSessions - len(h.Sessions) + len(h.Stopped) }

// deadline is when a host that beats no more counts as down.
func (h HostRecord) deadline() time.Time { return h.LastSeen.Add(hostMissedBeats * h.Every) }

type hosts struct {
	st *HostsState
	// on indexes st.Hosts by session: the hosts whose Sessions or Stopped
	// hold it, in name order (one, but for a state carried from a run
	// that left it on more). Built when a run starts and kept by assign,
	// it is never carried, and only looked up, never ranged over: finding
	// a session on every host made each placement cost the fleet's hosts.
	on map[string][]string
	// sel folds the beats and assignments; nil until the run starts.
	sel workflow.Selector
	// startBytes is the history's size when the run began: the state it
	// carried, which full does not count against the run.
	startBytes int64
	// beaten says a beat came by update since the loop last looked: the
	// loop wakes for it as for a signal (VersionBeatUpdate).
	beaten bool
	// live notes this instance's first live workflow task, for
	// continueAsNewWhen (VersionBeatUpdate); nil before.
	live *liveness
	// ladder is the rung this run follows: the registry is new at
	// VersionHosts, and later changes to it branch on the ladder too.
	ladder
}

// HostsWorkflow is the hosts registry, nid/hosts. Workers start it with
// their first heartbeat (update- or signal-with-start); it runs forever.
func HostsWorkflow(ctx workflow.Context, in HostsInput) error {
	r := &hosts{st: in.State, ladder: ladder{versionOf(ctx)}}
	publishRung(ctx, r.ladder)
	if r.st == nil {
		r.st = &HostsState{}
	}
	r.index()
	r.startBytes = int64(workflow.GetInfo(ctx).GetCurrentHistorySize())
	if err := workflow.SetQueryHandler(ctx, QueryHosts, r.view); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdatePlace, r.place,
		workflow.UpdateHandlerOptions{Validator: r.validatePlace}); err != nil {
		return err
	}
	if r.has(VersionBatchedPlacement) {
		if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdatePlaceAll, r.placeAll,
			workflow.UpdateHandlerOptions{Validator: r.validatePlaceAll}); err != nil {
			return err
		}
	}
	if r.has(VersionBeatUpdate) {
		if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateHeartbeat, r.beatUpdate,
			workflow.UpdateHandlerOptions{Validator: r.validateBeat}); err != nil {
			return err
		}
		r.live = watchLiveness(ctx)
	}
	return r.run(ctx)
}

func (r *hosts) selector(ctx workflow.Context) workflow.Selector {
	sel := workflow.NewSelector(ctx)
	onSignal(ctx, sel, SignalHeartbeat, r.onBeat)
	onSignal(ctx, sel, SignalHostAssign, r.onAssign)
	return sel
}

// run folds beats and assignments as they come, marks hosts down when their
// beats stop, and tells the sessions of each host that changed.
func (r *hosts) run(ctx workflow.Context) error {
	sel := r.selector(ctx)
	r.sel = sel
	var deadline deadlineTimer
	for {
		// Beats first: a worker that restarts beats before it takes the
		// registry's task, whose timer fired meanwhile, and must not be
		// told down by it.
		for sel.HasPending() {
			sel.Select(ctx)
		}
		r.beaten = false
		r.expire(ctx)
		r.tell(ctx)
		if r.full(ctx) {
			return continueAsNewWhen(ctx, r.ladder, r.live, r.selector, nil, HostsWorkflowName, func() any {
				return HostsInput{State: r.st}
			})
		}
		var err error
		wait, ok := r.nextDeadline(ctx)
		switch {
		case r.has(VersionRegistryAtScale):
			deadline.set(ctx, wait, ok)
			// Updates alone wake it too once they filled the history: a
			// fleet placing itself sends nothing else.
			err = workflow.Await(ctx, func() bool { return sel.HasPending() || r.beaten || deadline.fired() || r.full(ctx) })
		case ok:
			_, err = workflow.AwaitWithTimeout(ctx, wait, sel.HasPending)
		default:
			err = workflow.Await(ctx, sel.HasPending)
		}
		if err != nil {
			return err
		}
	}
}

// full says the run should continue as new: its history is full, or
// (since VersionRegistryAtScale) it grew by registryRunBytes. A placement
// batch's request and answer are kilobytes in the history, and a workflow
// task that carries updates fails now and then ("premature end of stream",
// https://github.com/temporalio/temporal/issues/7741), after which the
// worker replays the whole run: a registry of a thousand such batches took
// seconds to replay, and updates that came meanwhile failed it again.
func (r *hosts) full(ctx workflow.Context) bool {
	if historyFull(ctx, r.st.HistoryLimit) {
		return true
	}
	return r.has(VersionRegistryAtScale) && int64(workflow.GetInfo(ctx).GetCurrentHistorySize()) >= r.startBytes+registryRunBytes
}

// registryRunBytes is how much a run of the registry grows before it
// continues as new: about a hundred batches of a hundred placements.
const registryRunBytes = 1 << 20

// deadlineTimer is the registry's one timer for the first live host's
// deadline. A timer that fires before that deadline costs one look at the
// hosts (beats moved the deadline on); a timer set afresh at every
// workflow task cost a timer left running for each (VersionRegistryAtScale).
type deadlineTimer struct {
	at     time.Time
	timer  workflow.Future
	cancel workflow.CancelFunc
}

// set makes the timer fire no later than wait from now when ok (there is a
// live host to count down): it keeps a running timer that does, and
// otherwise cancels it and starts one. A timer that fired is done with:
// the hosts were looked at since.
func (t *deadlineTimer) set(ctx workflow.Context, wait time.Duration, ok bool) {
	if t.fired() {
		t.timer, t.cancel = nil, nil
	}
	at := workflow.Now(ctx).Add(wait)
	if !ok || (t.timer != nil && !t.at.After(at)) {
		return
	}
	if t.cancel != nil {
		t.cancel()
	}
	var timerCtx workflow.Context
	timerCtx, t.cancel = workflow.WithCancel(ctx)
	t.at = at
	t.timer = workflow.NewTimer(timerCtx, wait)
}

func (t *deadlineTimer) fired() bool { return t.timer != nil && t.timer.IsReady() }

// nextDeadline is how long until the first live host counts as down.
func (r *hosts) nextDeadline(ctx workflow.Context) (time.Duration, bool) {
	var first time.Time
	for _, h := range r.st.Hosts {
		if h.Alive && (first.IsZero() || h.deadline().Before(first)) {
			first = h.deadline()
		}
	}
	if first.IsZero() {
		return 0, false
	}
	// A millisecond past the deadline, so the timer never wakes a hair
	// before it and spins.
	return max(first.Sub(workflow.Now(ctx))+time.Millisecond, time.Millisecond), true
}

// expire marks down every live host whose beats stopped.
func (r *hosts) expire(ctx workflow.Context) {
	now := workflow.Now(ctx)
	for i := range r.st.Hosts {
		h := &r.st.Hosts[i]
		if h.Alive && !now.Before(h.deadline()) {
			h.Alive = false
			r.st.Pending = append(r.st.Pending, HostNotice{State: HostState{Host: h.Name, Alive: false}})
		}
	}
}

// known says whether the registry has a record of host name.
func (r *hosts) known(name string) bool {
	return slices.ContainsFunc(r.st.Hosts, func(h HostRecord) bool { return h.Name == name })
}

func (r *hosts) host(name string) *HostRecord {
	i, ok := slices.BinarySearchFunc(r.st.Hosts, name, func(h HostRecord, n string) int {
		switch {
		case h.Name < n:
			return -1
		case h.Name > n:
			return 1
		}
		return 0
	})
	if !ok {
		r.st.Hosts = slices.Insert(r.st.Hosts, i, HostRecord{Name: name, Sessions: []string{}})
	}
	return &r.st.Hosts[i]
}

// onBeat takes a beat sent as a signal: one with no valid host or period
// is dropped unsaid, as it always was; one past the caps is said in the
// log (VersionCheckedInput).
func (r *hosts) onBeat(ctx workflow.Context, b HostBeat) {
	if !config.ValidHost(b.Host) || b.Every <= 0 {
		return
	}
	if r.has(VersionCheckedInput) {
		if err := r.validateBeat(b); err != nil {
			warnRefused(ctx, SignalHeartbeat, err.Error())
			return
		}
	}
	r.takeBeat(ctx, b)
}

// validateBeat refuses a beat the registry does not take, saying why.
func (r *hosts) validateBeat(b HostBeat) error {
	switch {
	case !config.ValidHost(b.Host):
		return hostNameError(b.Host)
	case b.Every <= 0:
		return fmt.Errorf("host %s beats every %s: the period must be above zero", b.Host, b.Every)
	case len(b.HTTP) > MaxHostHTTP:
		return fmt.Errorf("host %s gives an HTTP address of %d bytes; the limit is %d", b.Host, len(b.HTTP), MaxHostHTTP)
	case !r.known(b.Host) && len(r.st.Hosts) >= MaxHosts:
		return fmt.Errorf("host %s is not taken: the registry keeps %d hosts, the most it may", b.Host, MaxHosts)
	}
	return nil
}

// beatUpdate takes a beat sent as an update (VersionBeatUpdate), which
// validateBeat let through, and wakes the loop: the beat may bring a host
// back, whose sessions are told, or one whose deadline comes first.
func (r *hosts) beatUpdate(ctx workflow.Context, b HostBeat) error {
	r.takeBeat(ctx, b)
	r.beaten = true
	return nil
}

// takeBeat records a valid beat.
func (r *hosts) takeBeat(ctx workflow.Context, b HostBeat) {
	h := r.host(b.Host)
	h.MaxSessions, h.Every, h.HTTP = max(b.MaxSessions, 0), b.Every, b.HTTP
	h.LastSeen = workflow.Now(ctx)
	if !h.Alive {
		h.Alive = true
		r.st.Pending = append(r.st.Pending, HostNotice{State: HostState{Host: h.Name, Alive: true}})
	}
}

// onAssign records where a session is (each run of a session says so when
// it starts, and a move when it lands) and answers with that host's state,
// so a session placed on a host that is down knows it at once.
func (r *hosts) onAssign(ctx workflow.Context, a HostAssign) {
	if !config.ValidHost(a.Host) {
		return
	}
	if r.has(VersionCheckedInput) {
		if _, _, err := ParseSessionRef(a.Session); err != nil {
			warnRefused(ctx, SignalHostAssign, clip.Runes(err.Error(), 200))
			return
		}
		if !r.known(a.Host) && len(r.st.Hosts) >= MaxHosts {
			warnRefused(ctx, SignalHostAssign, fmt.Sprintf("host %s is not taken: the registry keeps %d hosts, the most it may", a.Host, MaxHosts))
			return
		}
	}
	r.assign(a.Session, a.Host)
	h := r.host(a.Host)
	if a.Stopped {
		h.Stopped = insertSorted(h.Stopped, a.Session)
	}
	r.st.Pending = append(r.st.Pending, HostNotice{Session: a.Session, State: HostState{Host: h.Name, Alive: h.Alive}})
}

// assign moves session onto host, off any other, as running.
func (r *hosts) assign(session, host string) {
	for _, was := range r.on[session] {
		h := r.host(was)
		h.Sessions = deleteSorted(h.Sessions, session)
		h.Stopped = deleteSorted(h.Stopped, session)
	}
	h := r.host(host)
	h.Sessions = insertSorted(h.Sessions, session)
	r.on[session] = []string{host}
}

// index builds on from the hosts' lists.
func (r *hosts) index() {
	r.on = map[string][]string{}
	for _, h := range r.st.Hosts {
		for _, list := range [][]string{h.Sessions, h.Stopped} {
			for _, s := range list {
				if on := r.on[s]; len(on) == 0 || on[len(on)-1] != h.Name {
					r.on[s] = append(on, h.Name)
				}
			}
		}
	}
}

func insertSorted(list []string, s string) []string {
	if i, found := slices.BinarySearch(list, s); !found {
		return slices.Insert(list, i, s)
	}
	return list
}

// deleteSorted removes s from the sorted list: a search, where comparing
// it with every session of every host made each placement cost the whole
// fleet, and each replay of a registry placing thousands its square.
func deleteSorted(list []string, s string) []string {
	if i, found := slices.BinarySearch(list, s); found {
		return slices.Delete(list, i, i+1)
	}
	return list
}

// where is the host session is placed on, if any.
func (r *hosts) where(session string) string {
	for _, name := range r.on[session] {
		if _, found := slices.BinarySearch(r.host(name).Sessions, session); found {
			return name
		}
	}
	return ""
}

// tell sends every pending change to the sessions it concerns. A session
// that is gone (removed, or never started) just misses it. Since
// VersionRegistryAtScale it sends tellBatch signals at a time and awaits
// them before the next batch, and leaves what it has not sent in Pending,
// for the next run, once the run is full.
func (r *hosts) tell(ctx workflow.Context) {
	if !r.has(VersionRegistryAtScale) {
		r.tellAtOnce(ctx)
		return
	}
	r.st.Pending = r.perSession(r.st.Pending)
	for len(r.st.Pending) > 0 && !r.full(ctx) {
		n := min(len(r.st.Pending), tellBatch)
		sent := make([]workflow.Future, n)
		for i, notice := range r.st.Pending[:n] {
			group, name, _ := ParseSessionRef(notice.Session) // perSession kept valid ones only
			sent[i] = workflow.SignalExternalWorkflow(ctx, SessionID(group, name), "", SignalHost, notice.State)
		}
		r.st.Pending = slices.Clone(r.st.Pending[n:])
		for _, f := range sent {
			_ = f.Get(ctx, nil)
		}
	}
}

// tellBatch bounds the signals the registry has in flight: the server
// fails a workflow task that leaves more than 2,000 pending.
const tellBatch = 500

// perSession turns each notice for a whole host into one for each of its
// sessions now, in order, and leaves out sessions whose name is not one.
func (r *hosts) perSession(notices []HostNotice) []HostNotice {
	var out []HostNotice
	for _, n := range notices {
		to := []string{n.Session}
		if n.Session == "" {
			to = r.host(n.State.Host).Sessions
		}
		for _, ref := range to {
			if _, _, err := ParseSessionRef(ref); err == nil {
				out = append(out, HostNotice{Session: ref, State: n.State})
			}
		}
	}
	return out
}

// tellAtOnce is tell before VersionRegistryAtScale: every signal in one
// workflow task.
func (r *hosts) tellAtOnce(ctx workflow.Context) {
	var sent []workflow.Future
	for _, n := range r.perSession(r.st.Pending) {
		group, name, _ := ParseSessionRef(n.Session)
		sent = append(sent, workflow.SignalExternalWorkflow(ctx, SessionID(group, name), "", SignalHost, n.State))
	}
	r.st.Pending = nil
	for _, f := range sent {
		_ = f.Get(ctx, nil)
	}
}

func (r *hosts) validatePlace(req PlaceRequest) error {
	if _, _, err := ParseSessionRef(req.Session); err != nil {
		return err
	}
	if req.Want != "" && !config.ValidHost(req.Want) {
		return hostNameError(req.Want)
	}
	return nil
}

// hostNameError says why name is not a host's.
func hostNameError(name string) error {
	return fmt.Errorf("host %q: a host name is letters, digits, '.', '-' or '_' (at most 253, starting with a letter or digit)", clip.Runes(name, 80))
}

// errNoLiveHost is why a session that names no host is not placed.
var errNoLiveHost = errors.New("no live host takes sessions: start nid worker (or nid up) with worker.maxSessions above 0, or pin the session with host:")

// place answers where a session runs: where it already is; else the host
// it asks for; else the live host with the most room, the first by name
// among equals. With no live host that takes sessions, nothing is placed.
func (r *hosts) place(ctx workflow.Context, req PlaceRequest) (Placement, error) {
	host := r.where(req.Session)
	if host == "" {
		host = req.Want
		if host == "" {
			best := r.roomiest()
			if best < 0 {
				return Placement{}, errNoLiveHost
			}
			host = r.st.Hosts[best].Name
		}
		r.assign(req.Session, host)
	}
	h := r.host(host)
	_, stopped := slices.BinarySearch(h.Stopped, req.Session)
	return Placement{Host: host, Alive: r.has(VersionBatchedPlacement) && h.Alive && !stopped}, nil
}

// roomiest is the index of the live host with the most room, the first by
// name among equals; -1 when no live host takes sessions.
func (r *hosts) roomiest() int {
	best := -1
	for i, h := range r.st.Hosts {
		if h.Alive && h.MaxSessions > 0 && (best < 0 || h.free() > r.st.Hosts[best].free()) {
			best = i
		}
	}
	return best
}

// validatePlaceAll refuses a batch that is empty, past MaxPlaceBatch, or
// holds one request place would refuse, naming it: a refused batch places
// none of its sessions.
func (r *hosts) validatePlaceAll(b PlaceBatch) error {
	switch {
	case len(b.Sessions) == 0:
		return errors.New("the batch places no session: it needs at least one")
	case len(b.Sessions) > MaxPlaceBatch:
		return fmt.Errorf("the batch places %d sessions; the most one batch places is %d", len(b.Sessions), MaxPlaceBatch)
	}
	for i, req := range b.Sessions {
		if err := r.validatePlace(req); err != nil {
			return fmt.Errorf("session %d of %d in the batch (%q): %w", i+1, len(b.Sessions), clip.Runes(req.Session, 80), err)
		}
	}
	return nil
}

// placeAll places a batch of sessions in order, each as place would, in one
// update: a fleet of a thousand new sessions is one round trip through the
// registry rather than a thousand. A batch in which one session cannot be
// placed (it names no host and no live host takes sessions) places none.
func (r *hosts) placeAll(ctx workflow.Context, b PlaceBatch) (Placements, error) {
	// The beats that came before the batch are folded first: nid up's own
	// first beat and its batch reach a new registry in the same workflow
	// task, and the batch must see that host alive.
	if err := workflow.Await(ctx, func() bool { return r.sel != nil && !r.sel.HasPending() }); err != nil {
		return Placements{}, err
	}
	if r.roomiest() < 0 {
		for i, req := range b.Sessions {
			if req.Want == "" && r.where(req.Session) == "" {
				return Placements{}, fmt.Errorf("session %d of %d in the batch (%s) names no host, so none is placed: %w", i+1, len(b.Sessions), req.Session, errNoLiveHost)
			}
		}
	}
	out := Placements{Placed: make([]Placement, 0, len(b.Sessions))}
	for _, req := range b.Sessions {
		p, err := r.place(ctx, req)
		if err != nil {
			return Placements{}, err // not reached: the check above
		}
		out.Placed = append(out.Placed, p)
	}
	return out, nil
}

func (r *hosts) view() (HostsView, error) {
	v := HostsView{Hosts: make([]HostView, 0, len(r.st.Hosts))}
	for _, h := range r.st.Hosts {
		v.Hosts = append(v.Hosts, HostView{HostRecord: h, Free: h.free()})
	}
	return v, nil
}
