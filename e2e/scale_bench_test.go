package e2e

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/proto"

	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/internal/clustertest"
	"github.com/nid-dev/nid/nidclient"
	"github.com/nid-dev/nid/worker"
	"github.com/nid-dev/nid/workflows"
)

// The load generator of docs/scale.md: nid's own shared workflows (the
// hosts registry, a group, the event feed) driven at a fleet's rates by
// Temporal clients that send what sessions, hosts and agents send, through
// the functions nid's worker calls (worker.Beat, worker.Place,
// worker.UpdateBoard, nidclient.QueryGroup, nidclient.Feed). The registry
// and the group run in nid's own worker (nid up, or nid worker on the
// cluster); the sessions they talk to are seats: small workflows under the
// sessions' ids that take the group's and the registry's pushes and answer
// the feed's queries as a session does, without an agent behind them.

// scaleTurnEvery is how often a session takes a turn: a real agent's turn
// (a model call or several, tools, edits) takes tens of seconds.
const scaleTurnEvery = 30 * time.Second

// scaleGoal is the p99 every update and signal must stay under.
const scaleGoal = time.Second

// scaleQueue is the task queue of the seats, served by the benchmark's own
// worker; nid's worker serves workflows.TaskQueue.
const scaleQueue = "nid-scale-seats"

// scaleSeatName is the seats' workflow type in the group and registry
// phases, where nid ls must not list them; the feed's seats take
// workflows.SessionWorkflowName, whose listing the feed reads.
const scaleSeatName = "nid.scale.Seat"

// scaleBump is the signal that gives a feed seat one more event.
const scaleBump = "scale_bump"

// scaleSeat stands in for a session: it takes whatever it is sent (board,
// policy and host pushes, each a workflow task as on a real session) and
// answers the events query from its listing's event count, which a bump
// raises as a session's new event does.
func scaleSeat(ctx workflow.Context) error {
	// A session's first event is its start, which its memo names.
	events := int64(1)
	if err := workflow.SetQueryHandler(ctx, workflows.QueryEvents, func(after int64) ([]workflows.Event, error) {
		var out []workflows.Event
		for seq := after + 1; seq <= events; seq++ {
			out = append(out, workflows.Event{Seq: seq, Kind: "bench", Text: "news"})
		}
		return out, nil
	}); err != nil {
		return err
	}
	sel := workflow.NewSelector(ctx)
	for _, name := range []string{workflows.SignalBoard, workflows.SignalPolicy, workflows.SignalHost} {
		sel.AddReceive(workflow.GetSignalChannel(ctx, name), func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, nil) })
	}
	sel.AddReceive(workflow.GetSignalChannel(ctx, scaleBump), func(c workflow.ReceiveChannel, _ bool) {
		c.Receive(ctx, nil)
		events++
		// As a session of workflows.VersionListedAt stamps each change.
		_ = workflow.UpsertTypedSearchAttributes(ctx, temporal.NewSearchAttributeKeyTime(workflows.SearchListedAt).ValueSet(workflow.Now(ctx)))
		_ = workflow.UpsertMemo(ctx, map[string]any{workflows.MemoEvents: events})
	})
	for {
		sel.Select(ctx)
	}
}

// scaleConfig is a run's size: NID_SCALE_QUICK=1 makes every part a tenth
// or so, for development; NID_SCALE_BACKENDS (embedded,cluster),
// NID_SCALE_PARTS (registry,group,feed) and NID_SCALE_GROUPS (100,1000)
// pick what runs.
type scaleConfig struct {
	quick       bool
	backends    []string
	groupSizes  []int
	stepFor     time.Duration
	steps       []float64
	hosts       int
	placements  int
	placeRates  []float64
	moves       int
	feedSeats   int
	feedPolls   int
	feedNewsPct float64
	parts       []string
}

func scaleSettings() scaleConfig {
	c := scaleConfig{
		backends:   []string{"embedded", "cluster"},
		groupSizes: []int{100, 500, 1000},
		stepFor:    30 * time.Second,
		steps:      []float64{1, 2, 4, 8},
		hosts:      100, placements: 10000, placeRates: []float64{50, 100, 200, 400}, moves: 500,
		feedSeats: 10000, feedPolls: 10, feedNewsPct: 1,
	}
	if os.Getenv("NID_SCALE_QUICK") != "" {
		c.quick = true
		c.groupSizes = []int{100, 1000}
		c.stepFor = 15 * time.Second
		c.steps = []float64{1, 4}
		c.placements, c.placeRates, c.moves = 1000, []float64{50, 200}, 100
		c.feedSeats, c.feedPolls = 1000, 5
	}
	if b := os.Getenv("NID_SCALE_BACKENDS"); b != "" {
		c.backends = strings.Split(b, ",")
	}
	if p := os.Getenv("NID_SCALE_PARTS"); p != "" {
		c.parts = strings.Split(p, ",")
	}
	if g := os.Getenv("NID_SCALE_GROUPS"); g != "" {
		c.groupSizes = nil
		for _, f := range strings.Split(g, ",") {
			var n int
			fmt.Sscan(f, &n)
			c.groupSizes = append(c.groupSizes, n)
		}
	}
	return c
}

// part says the run includes part (registry, group, feed).
func (c scaleConfig) part(p string) bool { return len(c.parts) == 0 || slices.Contains(c.parts, p) }

// BenchmarkScale drives the hosts registry, a group of 100, 500 and 1,000
// sessions, and the feed over 10,000 listed sessions, on the embedded
// server and on a PostgreSQL cluster, stepping each rate up until p99
// passes a second, and prints for each: throughput, p50/p99 latency,
// history growth and continue-as-new frequency (docs/scale.md).
func BenchmarkScale(b *testing.B) {
	cfg := scaleSettings()
	var report strings.Builder
	for _, backend := range cfg.backends {
		b.Run(backend, func(b *testing.B) {
			s := scaleSite(b, backend)
			c := s.client()
			w := sdkworker.New(c, scaleQueue, sdkworker.Options{})
			w.RegisterWorkflowWithOptions(scaleSeat, workflow.RegisterOptions{Name: scaleSeatName})
			w.RegisterWorkflowWithOptions(scaleSeat, workflow.RegisterOptions{Name: workflows.SessionWorkflowName})
			if err := w.Start(); err != nil {
				b.Fatal(err)
			}
			defer w.Stop()
			fmt.Fprintf(&report, "\n== %s (load at start: %s)\n", backend, loadAverage())
			if cfg.part("registry") {
				scaleRegistry(b, c, cfg, &report)
			}
			if cfg.part("group") {
				for _, n := range cfg.groupSizes {
					scaleGroup(b, c, cfg, n, &report)
				}
			}
			if cfg.part("feed") {
				scaleFeed(b, c, cfg, &report)
			}
			fmt.Fprintf(&report, "(load at end: %s)\n", loadAverage())
		})
	}
	fmt.Fprint(os.Stdout, report.String())
}

// scaleSite starts nid up on backend with an idle group; its worker serves
// the registry and the groups the benchmark starts, and its host is one
// more in the registry.
func scaleSite(b *testing.B, backend string) *site {
	// A session with no goal and no task takes no turn.
	groups := "  idle:\n    rotate: {mode: off}\n    sessions:\n      - {agent: sim, name: s0}\n"
	s := newSite(b, groups)
	s.upWait = 10 * time.Minute
	if backend == "cluster" {
		s.cluster = clustertest.Start(b).Address
		s.writeConfig()
	}
	s.up()
	return s
}

// loadAverage is the machine's load as uptime prints it.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

// latencies collects how long each call of one kind took.
type latencies struct {
	mu    sync.Mutex
	d     []time.Duration
	fails atomic.Int64
	// first is the first failure, which the report shows.
	first error
}

// time runs f, counts its failure or keeps how long it took, and returns
// its error.
func (l *latencies) time(f func() error) error {
	start := time.Now()
	if err := f(); err != nil {
		if l.fails.Add(1) == 1 {
			l.mu.Lock()
			l.first = err
			l.mu.Unlock()
		}
		return err
	}
	l.mu.Lock()
	l.d = append(l.d, time.Since(start))
	l.mu.Unlock()
	return nil
}

func (l *latencies) quantiles() (n int, p50, p99 time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return 0, 0, 0
	}
	slices.Sort(l.d)
	return len(l.d), l.d[len(l.d)/2], l.d[min(len(l.d)-1, len(l.d)*99/100)]
}

func (l *latencies) line(name string, elapsed time.Duration) (string, time.Duration) {
	n, p50, p99 := l.quantiles()
	ok := "met"
	switch {
	case p99 > scaleGoal || l.fails.Load() > 0:
		ok = "NOT MET"
	case n == 0:
		ok = "none sent"
	}
	text := fmt.Sprintf("    %-14s %7.1f/s  p50 %8v  p99 %8v  failed %d  (goal p99 < %v: %s)",
		name, float64(n)/elapsed.Seconds(), p50.Round(time.Millisecond), p99.Round(time.Millisecond), l.fails.Load(), scaleGoal, ok)
	if l.first != nil {
		text += "\n                   first failure: " + strings.ReplaceAll(l.first.Error(), "\n", " ")
	}
	return text, p99
}

// historyMark is where a workflow's history stood when a phase began.
type historyMark struct {
	since         time.Time
	events, bytes int64
}

// markHistory notes where the running run of id stands now.
func markHistory(c client.Client, id string) historyMark {
	m := historyMark{since: time.Now()}
	if d, err := c.DescribeWorkflowExecution(context.Background(), id, ""); err == nil {
		m.events, m.bytes = d.GetWorkflowExecutionInfo().GetHistoryLength(), d.GetWorkflowExecutionInfo().GetHistorySizeBytes()
	}
	return m
}

// grownSince is how id's history grew since m: the runs that closed since
// (each a continue-as-new), and the events and bytes written since, over
// them and the running run; ended names how a run ended otherwise (the
// server terminates one whose history passed its size limit).
func grownSince(b *testing.B, c client.Client, id string, m historyMark) (closed int, events, bytes int64, ended string, runs []string) {
	ctx := context.Background()
	var token []byte
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query:         fmt.Sprintf("WorkflowId = '%s' AND CloseTime >= '%s'", id, m.since.UTC().Format(time.RFC3339Nano)),
			NextPageToken: token,
		})
		if err != nil {
			b.Fatalf("listing the runs of %s: %v", id, err)
		}
		for _, e := range resp.GetExecutions() {
			if st := e.GetStatus(); st != enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW {
				ended = st.String()
			} else {
				closed++
			}
			runs = append(runs, e.GetExecution().GetRunId())
			events += e.GetHistoryLength()
			bytes += e.GetHistorySizeBytes()
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	if d, err := c.DescribeWorkflowExecution(ctx, id, ""); err == nil {
		events += d.GetWorkflowExecutionInfo().GetHistoryLength()
		bytes += d.GetWorkflowExecutionInfo().GetHistorySizeBytes()
	}
	return closed, events - m.events, bytes - m.bytes, ended, runs
}

// historyLine says how a workflow's history grew over a phase.
func historyLine(b *testing.B, c client.Client, id string, m historyMark, elapsed time.Duration) string {
	closed, events, bytes, ended, runs := grownSince(b, c, id, m)
	can := "none"
	if closed > 0 {
		can = fmt.Sprintf("every %v", (elapsed / time.Duration(closed)).Round(time.Second))
	}
	text := fmt.Sprintf("    history        %7.1f events/s  %7.1f KB/s  continue-as-new %d times (%s)",
		float64(events)/elapsed.Seconds(), float64(bytes)/1024/elapsed.Seconds(), closed, can)
	if ended != "" {
		text += "\n    ENDED          a run ended " + ended + " (the server ends a run whose history passes its limits)"
	}
	if mix := historyMix(c, id, runs); mix != "" {
		text += "\n    made of        " + mix
	}
	if failed := failedTasks(c, id); failed != "" {
		text += "\n    FAILED TASKS   " + failed
	}
	return text
}

// historyMix says what the closed runs of id held: the kinds of event
// that took the most bytes, with their counts, and the workflow tasks that
// failed (and why) or timed out (a continue-as-new the server refused for the signals and
// updates that arrived meanwhile shows here, and costs a replay each).
func historyMix(c client.Client, id string, runs []string) string {
	type kind struct {
		events int
		bytes  int
	}
	kinds := map[enumspb.EventType]*kind{}
	failed := map[string]int{}
	for _, run := range runs {
		iter := c.GetWorkflowHistory(context.Background(), id, run, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for iter.HasNext() {
			e, err := iter.Next()
			if err != nil {
				break
			}
			k := kinds[e.GetEventType()]
			if k == nil {
				k = &kind{}
				kinds[e.GetEventType()] = k
			}
			k.events++
			k.bytes += proto.Size(e)
			switch e.GetEventType() {
			case enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED:
				failed["failed "+e.GetWorkflowTaskFailedEventAttributes().GetCause().String()]++
			case enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
				failed["timed out"]++
			}
		}
	}
	types := slices.Collect(maps.Keys(kinds))
	slices.SortFunc(types, func(a, b enumspb.EventType) int { return kinds[b].bytes - kinds[a].bytes })
	var parts []string
	for _, t := range types[:min(len(types), 6)] {
		parts = append(parts, fmt.Sprintf("%s %d (%d KB)", strings.TrimPrefix(t.String(), "EVENT_TYPE_"), kinds[t].events, kinds[t].bytes/1024))
	}
	for _, cause := range slices.Sorted(maps.Keys(failed)) {
		parts = append(parts, fmt.Sprintf("task %s %d", cause, failed[cause]))
	}
	return strings.Join(parts, ", ")
}

// failedTasks names the workflow tasks of id's running run that failed or
// timed out, with the first failure's cause: a workflow that cannot
// complete its tasks shows as slow answers otherwise.
func failedTasks(c client.Client, id string) string {
	iter := c.GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	failed, timedOut := 0, 0
	first := ""
	for iter.HasNext() {
		e, err := iter.Next()
		if err != nil {
			return ""
		}
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED:
			failed++
			if first == "" {
				a := e.GetWorkflowTaskFailedEventAttributes()
				first = a.GetCause().String() + ": " + a.GetFailure().GetMessage()
			}
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
			timedOut++
		}
	}
	if failed == 0 && timedOut == 0 {
		return ""
	}
	return fmt.Sprintf("%d failed, %d timed out in the running run (first: %.300s)", failed, timedOut, first)
}

// startSeats starts a seat under each id, 32 at a time.
func startSeats(b *testing.B, c client.Client, ids []string, workflowType string, memo func(i int) map[string]any, attrs func(i int) temporal.SearchAttributes) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	var failed atomic.Int64
	for i, id := range ids {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			opts := client.StartWorkflowOptions{ID: id, TaskQueue: scaleQueue,
				WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_TERMINATE_EXISTING}
			if memo != nil {
				opts.Memo = memo(i)
			}
			if attrs != nil {
				opts.TypedSearchAttributes = attrs(i)
			}
			if _, err := c.ExecuteWorkflow(context.Background(), opts, workflowType); err != nil {
				failed.Add(1)
			}
		}()
	}
	wg.Wait()
	if failed.Load() > 0 {
		b.Fatalf("%d of %d seats did not start", failed.Load(), len(ids))
	}
}

// pace calls do(i) for i in [0, n) at rate a second, each in its own
// goroutine, and waits for them all: an open loop, so a server that falls
// behind shows as latency, not as a slower load.
func pace(n int, rate float64, do func(i int)) time.Duration {
	start := time.Now()
	var wg sync.WaitGroup
	for i := range n {
		at := start.Add(time.Duration(float64(i) / rate * float64(time.Second)))
		time.Sleep(time.Until(at))
		wg.Add(1)
		go func() {
			defer wg.Done()
			do(i)
		}()
	}
	wg.Wait()
	return time.Since(start)
}

// scaleRegistry: cfg.hosts hosts beat every config.DefaultHeartbeat
// through worker.Beat; cfg.placements new sessions are placed as a fleet
// starts (by the nid up that applies nid.yaml, through worker.PlaceAll),
// then as many again by every host at once; then as many through
// worker.Place at rising rates, then cfg.moves of them land on another
// host (the HostAssign a moved session sends). The starts come first, as
// in a fleet's life: measured after the rates, they measured the backlog
// the fastest of those left.
func scaleRegistry(b *testing.B, c client.Client, cfg scaleConfig, out *strings.Builder) {
	fmt.Fprintf(out, "  hosts registry: %d hosts beating every %v, %d placements, %d moves\n", cfg.hosts, config.DefaultHeartbeat, cfg.placements, cfg.moves)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	// Beats sent while the registry is driven past what it keeps up with
	// (every host placing at once, single placements past 100 a second)
	// are counted apart: they measure the overload, and a beat the
	// registry does not answer in time is signalled instead.
	var beats, busyBeats latencies
	var busy atomic.Bool
	beat := func(b workflows.HostBeat) {
		l := &beats
		if busy.Load() {
			l = &busyBeats
		}
		l.time(func() error { return worker.Beat(ctx, c, b) })
	}
	var beating sync.WaitGroup
	for h := range cfg.hosts {
		hb := workflows.HostBeat{Host: fmt.Sprintf("host-%03d", h), MaxSessions: 2*cfg.placements/cfg.hosts + 10, Every: config.DefaultHeartbeat}
		beat(hb)
		beating.Add(1)
		go func() {
			defer beating.Done()
			// Spread over the period, as hosts started at different times.
			time.Sleep(time.Duration(rand.Int64N(int64(config.DefaultHeartbeat))))
			t := time.NewTicker(config.DefaultHeartbeat)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					beat(hb)
				}
			}
		}()
	}
	mark := markHistory(c, workflows.HostsID)
	since := mark.since
	// A fleet starting: the nid up that applies nid.yaml places every new
	// session, a batch at a time, as worker.PlaceAll does.
	var start latencies
	startAt := time.Now()
	fleet := make([]workflows.PlaceRequest, cfg.placements)
	for i := range fleet {
		fleet[i] = workflows.PlaceRequest{Session: fmt.Sprintf("new%d/s%d", i/100, i%100)}
	}
	for batch := range slices.Chunk(fleet, workflows.MaxPlaceBatch/2) {
		start.time(func() error { _, err := worker.PlaceAll(ctx, c, batch); return err })
	}
	line, _ := start.line("fleet start", time.Since(startAt))
	fmt.Fprintf(out, "%s\n                   one nid up placing %d new sessions, %d a batch: all placed in %v\n",
		line, cfg.placements, workflows.MaxPlaceBatch/2, time.Since(startAt).Round(time.Millisecond))
	// Every host's nid up applying a configuration of its own at once,
	// each placing its share of as many sessions in one PlaceAll: more
	// than a fleet does, to find where the registry's updates queue.
	var starts latencies
	busy.Store(true)
	startAt = time.Now()
	var starting sync.WaitGroup
	for h := range cfg.hosts {
		reqs := make([]workflows.PlaceRequest, cfg.placements/cfg.hosts)
		for i := range reqs {
			reqs[i] = workflows.PlaceRequest{Session: fmt.Sprintf("start%03d/s%d", h, i), Want: fmt.Sprintf("host-%03d", h)}
		}
		starting.Add(1)
		go func() {
			defer starting.Done()
			starts.time(func() error { _, err := worker.PlaceAll(ctx, c, reqs); return err })
		}()
	}
	starting.Wait()
	busy.Store(false)
	line, _ = starts.line("every host at once", time.Since(startAt))
	fmt.Fprintf(out, "%s\n                   %d nid ups placing %d sessions each at once: all placed in %v\n",
		line, cfg.hosts, cfg.placements/cfg.hosts, time.Since(startAt).Round(time.Millisecond))
	per := cfg.placements / len(cfg.placeRates)
	placed := 0
	for _, rate := range cfg.placeRates {
		busy.Store(rate > 100)
		var place latencies
		elapsed := pace(per, rate, func(i int) {
			ref := fmt.Sprintf("fleet%d/s%d", (placed+i)/100, (placed+i)%100)
			place.time(func() error { _, err := worker.Place(ctx, c, ref, ""); return err })
		})
		placed += per
		line, _ := place.line(fmt.Sprintf("place @%g/s", rate), elapsed)
		fmt.Fprintln(out, line)
	}
	busy.Store(false)
	var moves latencies
	moveStart := time.Now()
	elapsed := pace(cfg.moves, 50, func(i int) {
		a := workflows.HostAssign{Session: fmt.Sprintf("fleet%d/s%d", i/100, i%100), Host: fmt.Sprintf("host-%03d", (i+1)%cfg.hosts)}
		moves.time(func() error { return c.SignalWorkflow(ctx, workflows.HostsID, "", workflows.SignalHostAssign, a) })
	})
	line, _ = moves.line("move @50/s", elapsed)
	fmt.Fprintln(out, line)
	// A move's signal is taken when sent; the registry has it when its
	// view shows it.
	last := fmt.Sprintf("fleet%d/s%d", (cfg.moves-1)/100, (cfg.moves-1)%100)
	want := fmt.Sprintf("host-%03d", cfg.moves%cfg.hosts)
	for time.Since(moveStart) < 5*time.Minute {
		v, err := nidclient.Hosts(ctx, c)
		if err == nil && slices.ContainsFunc(v.Hosts, func(h workflows.HostView) bool { return h.Name == want && slices.Contains(h.Sessions, last) }) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	fmt.Fprintf(out, "    moves applied  %v after the first was sent\n", time.Since(moveStart).Round(time.Millisecond))
	line, _ = beats.line("heartbeat", time.Since(since))
	fmt.Fprintln(out, line)
	line, _ = busyBeats.line("heartbeat, busy", time.Since(since))
	fmt.Fprintf(out, "%s\n                   sent while every host placed at once and at over 100 placements a second\n", line)
	fmt.Fprintln(out, historyLine(b, c, workflows.HostsID, mark, time.Since(since)))
	stop()
	beating.Wait()
}

// scaleGroup runs a group of n seats at turn rates stepped up from one
// turn every scaleTurnEvery a session. Each turn does what a session of a
// budgeted group and its agent do (see docs/scale.md): the session
// reserves the turn (SignalReserve) and charges it (SignalCharge); the
// agent reads the board every other turn (board_read, through the
// worker.Boards of the session's host: a query shared by the group's
// sessions on that host while it is fresh), takes a
// lock and releases it every other turn (lock_acquire, lock_release),
// claims a task on its first turn and marks it done every tenth
// (task_claim, task_done), while tasks last.
func scaleGroup(b *testing.B, c client.Client, cfg scaleConfig, n int, out *strings.Builder) {
	name := fmt.Sprintf("scale%d", n)
	sessions := make([]string, n)
	ids := make([]string, n)
	for i := range n {
		sessions[i] = fmt.Sprintf("s%04d", i)
		ids[i] = workflows.SessionID(name, sessions[i])
	}
	startSeats(b, c, ids, scaleSeatName, nil, nil)
	var tasks []config.Task
	for i := range workflows.MaxTasks {
		tasks = append(tasks, config.Task{Title: fmt.Sprintf("Task %d of the benchmark", i+1), Detail: "Change one module and its tests."})
	}
	ctx := context.Background()
	_, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: workflows.GroupID(name), TaskQueue: workflows.TaskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_TERMINATE_EXISTING},
		workflows.GroupWorkflowName, workflows.GroupInput{
			Name: name, Goal: "Measure", Policy: config.Rotate{Mode: "off"}, Sessions: sessions, Tasks: tasks,
			Budget: config.Budget{Turns: 1 << 40},
		})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		_ = c.TerminateWorkflow(ctx, workflows.GroupID(name), "", "benchmark over")
		for _, id := range ids {
			_ = c.TerminateWorkflow(ctx, id, "", "benchmark over")
		}
	}()
	fmt.Fprintf(out, "  group of %d sessions (a turn every %v each: %.1f turns/s)\n", n, scaleTurnEvery, float64(n)/scaleTurnEvery.Seconds())
	settled, events := settle(c, workflows.GroupID(name), 5*time.Minute)
	fmt.Fprintf(out, "    start          settled in %v (its first board pushed to every session): %d events\n", settled.Round(100*time.Millisecond), events)

	// The driver's view of the board: which task each session holds and
	// how many turns it took.
	var mu sync.Mutex
	holding := map[string]string{}
	turns := map[string]int{}
	nextTask := 1
	seq := map[string]int64{}
	// A session takes one turn at a time: a turn due while its last is
	// still waiting on the group waits for it, as a session's next turn
	// waits for its agent.
	inTurn := map[string]*sync.Mutex{}
	for _, s := range sessions {
		inTurn[s] = &sync.Mutex{}
	}
	// The group's sessions spread over the fleet's hosts, each host's
	// worker reading boards for its own (worker.Boards, as board_read
	// does) and told of their claims and locks.
	hostBoards := make([]*worker.Boards, cfg.hosts)
	for h := range hostBoards {
		hostBoards[h] = worker.NewBoards(c)
	}
	// Each host's first read has no board to fall back on while the group
	// is busy; a worker makes it once in its life, so the steps measure
	// workers that have, and these first reads are shown apart.
	var firstReads latencies
	var warming sync.WaitGroup
	warmAt := time.Now()
	for h, boards := range hostBoards {
		warming.Go(func() { firstReads.time(func() error { _, err := boards.Text(ctx, name, sessions[h%n]); return err }) })
	}
	warming.Wait()
	line, _ := firstReads.line("board_read, a host's first", time.Since(warmAt))
	fmt.Fprintln(out, line)
	for _, mult := range cfg.steps {
		rate := mult * float64(n) / scaleTurnEvery.Seconds()
		var reserve, charge, read, lock, task latencies
		mark := markHistory(c, workflows.GroupID(name))
		count := int(rate * cfg.stepFor.Seconds())
		elapsed := pace(count, rate, func(i int) {
			seat := i % n
			s := sessions[seat]
			boards := hostBoards[seat%len(hostBoards)]
			update := func(kind string, req workflows.BoardRequest) func() error {
				return func() error {
					defer boards.Changed(name)
					_, err := worker.UpdateBoard(ctx, c, name, kind, req)
					return err
				}
			}
			inTurn[s].Lock()
			defer inTurn[s].Unlock()
			mu.Lock()
			seq[s]++
			turn := seq[s]
			turns[s]++
			held := holding[s]
			claim := ""
			if held == "" && nextTask <= workflows.MaxTasks {
				claim = fmt.Sprintf("t%d", nextTask)
				nextTask++
				holding[s] = claim
			}
			mu.Unlock()
			reserve.time(func() error {
				return c.SignalWorkflow(ctx, workflows.GroupID(name), "", workflows.SignalReserve, workflows.Reserve{Session: s, Seq: turn})
			})
			if claim != "" {
				task.time(update(workflows.UpdateTaskClaim, workflows.BoardRequest{Session: s, TaskID: claim}))
			}
			// Half the sessions read on their odd turns, half on their
			// even ones: a step of one turn each reads too.
			if (turn+int64(seat))%2 == 0 {
				read.time(func() error { _, err := boards.Text(ctx, name, s); return err })
			} else {
				lockName := "src/" + s + "/main.go"
				acquired := lock.time(update(workflows.UpdateLockAcquire, workflows.BoardRequest{Session: s, Lock: lockName}))
				// An acquire that timed out may still be taken after a
				// release sent now, which would find the lock not held: an
				// agent releases what it was told it holds.
				if acquired == nil {
					lock.time(update(workflows.UpdateLockRelease, workflows.BoardRequest{Session: s, Lock: lockName}))
				}
			}
			if held != "" && turn%10 == 0 {
				task.time(update(workflows.UpdateTaskDone, workflows.BoardRequest{Session: s, TaskID: held}))
				mu.Lock()
				holding[s] = ""
				mu.Unlock()
			}
			charge.time(func() error {
				return c.SignalWorkflow(ctx, workflows.GroupID(name), "", workflows.SignalCharge, workflows.Charge{Session: s, Turns: 0, Tokens: 20000, USD: 0.05})
			})
		})
		fmt.Fprintf(out, "   x%g: %.1f turns/s for %v (load %s)\n", mult, rate, elapsed.Round(time.Second), loadAverage())
		worst := time.Duration(0)
		for _, l := range []struct {
			name string
			l    *latencies
		}{{"reserve", &reserve}, {"charge", &charge}, {"board_read", &read}, {"lock", &lock}, {"task", &task}} {
			line, p99 := l.l.line(l.name, elapsed)
			worst = max(worst, p99)
			fmt.Fprintln(out, line)
		}
		fmt.Fprintln(out, historyLine(b, c, workflows.GroupID(name), mark, elapsed))
		if worst > scaleGoal {
			fmt.Fprintf(out, "    p99 passes %v at %.1f turns/s (x%g the fleet's rate)\n", scaleGoal, rate, mult)
			break
		}
	}
}

// settle waits until the history of id stops growing for two seconds, or
// for at most limit, and says how long that took and its length then.
func settle(c client.Client, id string, limit time.Duration) (time.Duration, int64) {
	start := time.Now()
	var last int64 = -1
	still := time.Now()
	for time.Since(start) < limit {
		d, err := c.DescribeWorkflowExecution(context.Background(), id, "")
		if err == nil {
			if n := d.GetWorkflowExecutionInfo().GetHistoryLength(); n != last {
				last, still = n, time.Now()
			} else if time.Since(still) >= 2*time.Second {
				return still.Sub(start), last
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return limit, last
}

// scaleFeed lists cfg.feedSeats sessions (seats with the search
// attributes and memo a session writes) and polls a feed over all of them,
// as nid up's and each dashboard's do, while cfg.feedNewsPct of them have
// news at each poll.
func scaleFeed(b *testing.B, c client.Client, cfg scaleConfig, out *strings.Builder) {
	n := cfg.feedSeats
	ids := make([]string, n)
	for i := range n {
		ids[i] = workflows.SessionID(fmt.Sprintf("feed%d", i/100), fmt.Sprintf("s%d", i%100))
	}
	start := time.Now()
	startSeats(b, c, ids, workflows.SessionWorkflowName,
		func(int) map[string]any { return map[string]any{workflows.MemoEvents: int64(1)} },
		func(i int) temporal.SearchAttributes {
			return temporal.NewSearchAttributes(
				temporal.NewSearchAttributeKeyKeyword(workflows.SearchGroup).ValueSet(fmt.Sprintf("feed%d", i/100)),
				temporal.NewSearchAttributeKeyKeyword(workflows.SearchSession).ValueSet(fmt.Sprintf("s%d", i%100)),
				temporal.NewSearchAttributeKeyKeyword(workflows.SearchAgent).ValueSet("sim"),
				temporal.NewSearchAttributeKeyKeyword(workflows.SearchStatus).ValueSet(workflows.StatusIdle),
				temporal.NewSearchAttributeKeyTime(workflows.SearchListedAt).ValueSet(start),
			)
		})
	defer func() {
		for _, id := range ids {
			_ = c.TerminateWorkflow(context.Background(), id, "", "benchmark over")
		}
	}()
	fmt.Fprintf(out, "  feed over %d listed sessions (%d started in %v)\n", n, n, time.Since(start).Round(time.Second))
	ctx := context.Background()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		sessions, err := nidclient.ListSessions(ctx, c, "")
		if err == nil && len(sessions) >= n {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d sessions listed after 5 minutes, want %d (%v)", len(sessions), n, err)
		}
		time.Sleep(time.Second)
	}
	var list latencies
	for range cfg.feedPolls {
		list.time(func() error { _, err := nidclient.ListSessions(ctx, c, ""); return err })
	}
	line, _ := list.line("list", time.Duration(cfg.feedPolls)*time.Second)
	fmt.Fprintln(out, strings.Replace(line, "/s ", "   ", 1))
	// A feed of its own lists every session at each poll (nid watch); one
	// of nid up's event streams takes its lists from the worker's kept
	// list (nidclient.Listing), which asks only for what changed.
	pollFeed(b, c, ids, cfg, "", nidclient.FeedOptions{Backlog: 5}, out)
	pollFeed(b, c, ids, cfg, "kept list", nidclient.FeedOptions{Backlog: 5, Listing: nidclient.NewListing(c)}, out)
}

// pollFeed polls a feed with opts over the seats ids, bumping
// cfg.feedNewsPct of them before each poll, and prints its latencies.
func pollFeed(b *testing.B, c client.Client, ids []string, cfg scaleConfig, label string, opts nidclient.FeedOptions, out *strings.Builder) {
	ctx := context.Background()
	n := len(ids)
	if label != "" {
		fmt.Fprintf(out, "    from the %s:\n", label)
	}
	feed := nidclient.NewFeed(c, opts)
	first := time.Now()
	if _, err := feed.Poll(ctx); err != nil {
		b.Fatal(err)
	}
	fmt.Fprintf(out, "    first poll     %v (%d sessions; each past nidclient.DefaultBacklogSessions followed from its listing)\n", time.Since(first).Round(time.Millisecond), n)
	var polls latencies
	news := max(1, int(float64(n)*cfg.feedNewsPct/100))
	got := 0
	for p := range cfg.feedPolls {
		for k := range news {
			_ = c.SignalWorkflow(ctx, ids[(p*news+k*97)%n], "", scaleBump, nil)
		}
		// Visibility takes the memo a moment after the signal.
		time.Sleep(time.Second)
		polls.time(func() error {
			poll, err := feed.Poll(ctx)
			got += len(poll.Events)
			return err
		})
	}
	line, _ := polls.line("poll", time.Duration(cfg.feedPolls)*time.Second)
	fmt.Fprintln(out, strings.Replace(line, "/s ", "   ", 1))
	fmt.Fprintf(out, "    news           %d events from %d bumps of %d sessions a poll\n", got, news*cfg.feedPolls, news)
}

// BenchmarkScaleSession measures what one session costs the server a turn,
// from the histories of real sim sessions on the embedded server: events,
// workflow tasks, activities, visibility writes (search attribute and memo
// upserts) and bytes of history, and the signals it sends and receives. It
// is the per-session figure docs/scale.md multiplies out. Ten sessions of
// a budgeted group with tasks, each task three turns, take 40 turns each.
func BenchmarkScaleSession(b *testing.B) {
	const sessions, turns = 10, 40
	var groups strings.Builder
	groups.WriteString("  cost:\n    goal: Measure\n    rotate: {mode: auto, contextPercent: 85}\n    budget: {turns: 100000}\n    tasks:\n")
	for i := range 200 {
		fmt.Fprintf(&groups, "      - {title: Task %d}\n", i)
	}
	groups.WriteString("    sessions:\n")
	for i := range sessions {
		fmt.Fprintf(&groups, "      - {agent: sim, name: s%d, sim: {window: 200000, tokensPerTurn: 4000, turnDelay: 500ms, taskTurns: 3}}\n", i)
	}
	start := time.Now()
	s := newBenchSite(b, groups.String())
	c := s.client()
	s.eventually(fmt.Sprintf("every session to take %d turns", turns), 20*time.Minute, func() bool {
		rows := s.ls()
		for i := range sessions {
			if rows[fmt.Sprintf("cost/s%d", i)].Turns < turns {
				return false
			}
		}
		return true
	})
	counts := map[string]float64{}
	var taken float64
	for i := range sessions {
		id := workflows.SessionID("cost", fmt.Sprintf("s%d", i))
		iter := c.GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for iter.HasNext() {
			e, err := iter.Next()
			if err != nil {
				b.Fatal(err)
			}
			counts["events"]++
			switch e.GetEventType() {
			case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED:
				counts["activities"]++
			case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
				if e.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() == "nid.RunTurn" {
					taken++
				}
			case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
				counts["workflow tasks"]++
			case enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES, enumspb.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED:
				counts["visibility writes"]++
			case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
				counts["signals received"]++
			case enumspb.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED:
				counts["signals sent"]++
			case enumspb.EVENT_TYPE_TIMER_STARTED:
				counts["timers"]++
			}
		}
		d, err := c.DescribeWorkflowExecution(context.Background(), id, "")
		if err != nil {
			b.Fatal(err)
		}
		counts["bytes"] += float64(d.GetWorkflowExecutionInfo().GetHistorySizeBytes())
	}
	runs, groupEvents, groupBytes, _, _ := grownSince(b, c, workflows.GroupID("cost"), historyMark{since: start})
	fmt.Printf("a sim session's turn (%d sessions, %.0f turns in their current runs; load %s):\n", sessions, taken, loadAverage())
	for _, k := range []string{"events", "workflow tasks", "activities", "visibility writes", "signals sent", "signals received", "timers", "bytes"} {
		fmt.Printf("  %-18s %8.2f a turn\n", k, counts[k]/taken)
		b.ReportMetric(counts[k]/taken, strings.ReplaceAll(k, " ", "-")+"/turn")
	}
	// The group's turns are every session's, of every run.
	all := 0
	for _, r := range s.ls() {
		all += r.Turns
	}
	fmt.Printf("  the group:         %.2f events, %.0f bytes a turn (%d turns; %d runs continued as new)\n",
		float64(groupEvents)/float64(all), float64(groupBytes)/float64(all), all, runs)
}
