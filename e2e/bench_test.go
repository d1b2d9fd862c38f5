package e2e

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/proto"

	"github.com/nid-dev/nid/activities"
	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/nidclient"
	"github.com/nid-dev/nid/worker"
	"github.com/nid-dev/nid/worker/serverproc"
	"github.com/nid-dev/nid/workflows"
)

// Goals of make bench.
const (
	gapMedianGoal = 5 * time.Millisecond
	gapP90Goal    = 15 * time.Millisecond
	lsGoal        = 100 * time.Millisecond
)

// verdict says whether got is within goal.
func verdict(got, goal time.Duration) string {
	if got <= goal {
		return "met"
	}
	return "NOT met"
}

// BenchmarkTurnOverhead measures nid's orchestration overhead per turn on the
// embedded server: the time between one sim turn ending (its activity
// completed) and the next one starting, with turnDelay 0, from the
// session's history. Goals: a median of at most 5 ms and a p90 of at most
// 15 ms, and at most floorGoal times the floor's at the median and at p90.
//
// The floor (floor_test.go) is the smallest Temporal program that does
// what a turn does, run by this process against the same nid up's server
// with the worker options nid's workers take; its gap is measured from its
// history as nid's is; nid's session runs in the same layout, its
// workflow and its activities on its host's queue. A second floor keeps
// the layout nid had before (workflow and activity on queues of their
// own), to tell what the layout costs from what nid's own work does.
//
// How the three are alternated: in rounds. Each round sends every side in
// turn floorTurns prompts at once (nid's session as nid send does, a
// message each) and waits until that side has taken them all before the
// next side starts, the order rotating each round, so that the machine's
// noise falls on each side alike and no side runs while another is
// measured (turnSide.round says how a round's end is seen). A gap counts
// when both its turns fall inside one side's round, after the round's last
// prompt was sent: the gaps between rounds, and those the prompts' own
// signals overlap, are left out. The first round is a warm-up and is not
// counted.
func BenchmarkTurnOverhead(b *testing.B) {
	s := newBenchSite(b, `  bench:
    rotate: {mode: off}
    sessions:
      - agent: sim
        name: one
        sim: {window: 100000000, tokensPerTurn: 1, turnDelay: 0s}
`)
	ctx := context.Background()
	cfg, err := config.Load(config.LoadOptions{File: filepath.Join(s.dir, "nid.yaml"), Kinds: agents.ConfigKinds()})
	if err != nil {
		b.Fatal(err)
	}
	// One client, dialled as nid dials, sends every side its prompts and
	// runs the floors' workers.
	c, err := worker.Dial(ctx, cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	one, two := startFloor(b, c, true), startFloor(b, c, false)
	sessionID := workflows.SessionID("bench", "one")
	sides := []*turnSide{
		{name: "nid", workflowID: sessionID, activity: activities.RunTurnName,
			send: func(text string) error {
				return c.SignalWorkflow(ctx, sessionID, "", workflows.SignalMessage, workflows.Message{Text: text})
			},
			turns: func() int { return s.session(c, "bench", "one").Context.TotalTurns }},
	}
	for _, f := range []*floor{one, two} {
		sides = append(sides, &turnSide{name: f.name, workflowID: f.workflowID, activity: floorTurnName,
			send:  func(text string) error { return c.SignalWorkflow(ctx, f.workflowID, "", floorSignal, text) },
			turns: func() int { return f.turns(b, c) }})
	}
	for r := 0; r <= floorRounds; r++ {
		for i := range sides {
			sides[(r+i)%len(sides)].round(b, c, r > 0)
		}
	}

	gaps := make([]durations, len(sides))
	for i, side := range sides {
		events := history(b, c, side.workflowID)
		kept, phases, turnEvents, slowest := side.counted(turnPhases(events, side.activity))
		if len(phases) < 10 {
			b.Fatalf("%s: only %d turn gaps counted", side.name, len(phases))
		}
		for _, p := range phases {
			gaps[i] = append(gaps[i], p.total())
		}
		slices.Sort(gaps[i])
		median, p90 := gaps[i].median(), gaps[i][len(gaps[i])*9/10]
		if i == 0 {
			b.ReportMetric(ms(median), "ms-median-gap")
			b.ReportMetric(ms(p90), "ms-p90-gap")
			fmt.Printf("orchestration gap between sim turns over %d gaps: median %v (goal: at most %v, %s), p90 %v (goal: at most %v, %s)\n",
				len(phases), median.Round(time.Microsecond*10), gapMedianGoal, verdict(median, gapMedianGoal), p90.Round(time.Microsecond*10), gapP90Goal, verdict(p90, gapP90Goal))
		} else {
			fmt.Printf("%s over %d gaps: median %v, p90 %v\n", side.name, len(phases), median.Round(time.Microsecond*10), p90.Round(time.Microsecond*10))
		}
		fmt.Printf("  where the gap went (medians): %s\n", phaseMedians(phases))
		// The tail has causes of its own: the same split over the slowest
		// tenth of the gaps.
		slices.SortFunc(phases, func(a, b gapPhase) int { return cmp.Compare(a.total(), b.total()) })
		fmt.Printf("  where the slowest tenth went (medians): %s\n", phaseMedians(phases[len(phases)*9/10:]))
		fmt.Printf("  one turn's events, from the turn before ending to this one ending: %s\n", turnEvents)
		fmt.Printf("  the slowest gap's turn: %s\n", slowest)
		fmt.Printf("  gaps %s\n", extraWork(kept))
		fmt.Printf("  events per turn in the counted rounds: %s\n", side.eventsPerTurn(events))
	}
	for i, side := range sides[1:] {
		floorMedian, floorP90 := gaps[i+1].median(), gaps[i+1][len(gaps[i+1])*9/10]
		median, p90 := float64(gaps[0].median())/float64(floorMedian), float64(gaps[0][len(gaps[0])*9/10])/float64(floorP90)
		if i == 0 {
			b.ReportMetric(median, "x-floor-median")
			b.ReportMetric(p90, "x-floor-p90")
			fmt.Printf("nid over %s: median %.2fx (goal: at most %.1fx, %s), p90 %.2fx (goal: at most %.1fx, %s)\n",
				side.name, median, floorGoal, ratioVerdict(median), p90, floorGoal, ratioVerdict(p90))
			continue
		}
		fmt.Printf("nid over %s: median %.2fx, p90 %.2fx\n", side.name, median, p90)
	}
}

// ratioVerdict says whether nid's gap over the floor's is within floorGoal.
func ratioVerdict(ratio float64) string {
	if ratio <= floorGoal {
		return "met"
	}
	return "NOT met"
}

// The floor's rounds (see BenchmarkTurnOverhead) and the goal against it.
const (
	floorRounds = 16
	floorTurns  = 10
	floorGoal   = 1.2
)

// turnSide is one of the programs BenchmarkTurnOverhead alternates: nid's
// session or a floor.
type turnSide struct {
	name, workflowID string
	// activity is the type of its turn's activity.
	activity string
	// send gives it one prompt; turns is how many it has taken.
	send  func(text string) error
	turns func() int
	// taken is how many prompts it was sent.
	taken int
	// rounds are the spans of its counted rounds: from the round's last
	// prompt sent to the benchmark seeing it take them all.
	rounds [][2]time.Time
}

// round sends the side floorTurns prompts at once and waits until it has
// taken them all; counted keeps the round's span. While the round runs
// the benchmark only asks the server whether the workflow has a task
// pending (DescribeWorkflowExecution, which no worker answers): a query
// would be a task for the worker the side is being measured on, heavier
// for nid's view than for the floor's count. Once idle, a query says
// whether every prompt was taken.
func (t *turnSide) round(b *testing.B, c client.Client, counted bool) {
	b.Helper()
	for i := 0; i < floorTurns; i++ {
		if err := t.send(fmt.Sprintf("turn %d", t.taken+i+1)); err != nil {
			b.Fatalf("%s: %v", t.name, err)
		}
	}
	t.taken += floorTurns
	sent := time.Now()
	deadline := sent.Add(time.Minute)
	for {
		if time.Now().After(deadline) {
			b.Fatalf("%s took fewer than %d turns in a minute", t.name, t.taken)
		}
		time.Sleep(20 * time.Millisecond)
		d, err := c.DescribeWorkflowExecution(context.Background(), t.workflowID, "")
		if err != nil {
			b.Fatalf("%s: %v", t.name, err)
		}
		if len(d.GetPendingActivities()) > 0 || d.GetPendingWorkflowTask() != nil {
			continue
		}
		done := time.Now()
		if t.turns() >= t.taken {
			if counted {
				t.rounds = append(t.rounds, [2]time.Time{sent, done})
			}
			return
		}
	}
}

// counted keeps the gaps that fall inside one of the side's counted
// rounds, and says the events of the middle one's turn and of the slowest
// one's.
func (t *turnSide) counted(gaps []turnGap) (kept []turnGap, phases []gapPhase, middle, slowest string) {
	for _, g := range gaps {
		for _, r := range t.rounds {
			if !g.ended.Before(r[0]) && !g.next.After(r[1]) {
				kept = append(kept, g)
				break
			}
		}
	}
	if len(kept) == 0 {
		return nil, nil, "", ""
	}
	for _, g := range kept {
		phases = append(phases, g.phase)
	}
	slow := slices.MaxFunc(kept, func(a, b turnGap) int { return cmp.Compare(a.phase.total(), b.phase.total()) })
	return kept, phases, kept[len(kept)/2].events, slow.events
}

// extraWork splits gaps into those whose events, up to the next turn
// starting, hold more than the floor's (a listing written, a timer, a
// signal to the group, another workflow task) and the rest, and says the
// median of each: what nid's extra events cost the gap they fall in.
func extraWork(gaps []turnGap) string {
	var extra, plain durations
	for _, g := range gaps {
		gap, _, _ := strings.Cut(g.events, "ActivityTaskStarted")
		if strings.Count(gap, "WorkflowTaskCompleted") > 1 || strings.Contains(gap, "Upsert") || strings.Contains(gap, "Timer") || strings.Contains(gap, "Signal") {
			extra = append(extra, g.phase.total())
		} else {
			plain = append(plain, g.phase.total())
		}
	}
	slices.Sort(extra)
	slices.Sort(plain)
	say := func(d durations) string {
		if len(d) == 0 {
			return "none"
		}
		return fmt.Sprintf("%d, median %v", len(d), d.median().Round(10*time.Microsecond))
	}
	return fmt.Sprintf("with more than the floor's events %s; the rest %s", say(extra), say(plain))
}

// eventsPerTurn says how many events of each type the side's history
// holds in its counted rounds, per activity completed in them (every
// activity in them is a turn): what a turn writes.
func (t *turnSide) eventsPerTurn(events []*historypb.HistoryEvent) string {
	count := map[string]int{}
	size := 0
	for _, e := range events {
		at := e.GetEventTime().AsTime()
		for _, r := range t.rounds {
			if !at.Before(r[0]) && !at.After(r[1]) {
				size += proto.Size(e)
				name := strings.TrimPrefix(e.GetEventType().String(), "EventType")
				if a := e.GetActivityTaskScheduledEventAttributes(); a != nil {
					name += " " + a.GetActivityType().GetName()
				}
				count[name]++
				break
			}
		}
	}
	turns := float64(count["ActivityTaskCompleted"])
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(count)) {
		parts = append(parts, fmt.Sprintf("%s %.2f", name, float64(count[name])/turns))
	}
	return fmt.Sprintf("%s; %.0f bytes of events", strings.Join(parts, ", "), float64(size)/turns)
}

// history is the current run's history of the workflow id.
func history(b *testing.B, c client.Client, id string) []*historypb.HistoryEvent {
	b.Helper()
	iter := c.GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var events []*historypb.HistoryEvent
	for iter.HasNext() {
		e, err := iter.Next()
		if err != nil {
			b.Fatal(err)
		}
		events = append(events, e)
	}
	return events
}

// turnGaps pairs each completed RunTurn activity with the start of the next.
func turnGaps(events []*historypb.HistoryEvent) []time.Duration {
	var gaps []time.Duration
	for _, g := range gapPhases(events) {
		gaps = append(gaps, g.total())
	}
	return gaps
}

// gapPhase is where one gap between turns went: from the turn's activity
// completing to the workflow task that folds it being scheduled, started
// and completed (which schedules the next turn), and from then to the next
// turn's activity starting.
type gapPhase [4]time.Duration

func (g gapPhase) total() time.Duration { return g[0] + g[1] + g[2] + g[3] }

// gapPhases are the gaps between nid's turns (RunTurn activities).
func gapPhases(events []*historypb.HistoryEvent) []gapPhase {
	var out []gapPhase
	for _, g := range turnPhases(events, activities.RunTurnName) {
		out = append(out, g.phase)
	}
	return out
}

// turnGap is one gap between turns: when the turn ended and the next
// started, where the time went, and the events from the one's end to the
// next one's, in history order.
type turnGap struct {
	ended, next time.Time
	phase       gapPhase
	events      string
}

// turnPhases are the gaps between the turns of a history whose turns are
// activities of type activity.
func turnPhases(events []*historypb.HistoryEvent, activity string) []turnGap {
	turns := map[int64]bool{}
	var out []turnGap
	var ended, wftScheduled, wftStarted, wftCompleted time.Time
	endedAt := 0
	for i, e := range events {
		at := e.GetEventTime().AsTime()
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			if e.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() == activity {
				turns[e.GetEventId()] = true
			}
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
			if !ended.IsZero() && wftScheduled.IsZero() {
				wftScheduled = at
			}
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED:
			if !wftScheduled.IsZero() && wftStarted.IsZero() {
				wftStarted = at
			}
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			if !wftStarted.IsZero() {
				wftCompleted = at
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			if turns[e.GetActivityTaskStartedEventAttributes().GetScheduledEventId()] && !ended.IsZero() && !wftCompleted.IsZero() {
				out = append(out, turnGap{ended: ended, next: at,
					phase:  gapPhase{wftScheduled.Sub(ended), wftStarted.Sub(wftScheduled), wftCompleted.Sub(wftStarted), at.Sub(wftCompleted)},
					events: eventNames(events[endedAt:])})
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			if turns[e.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()] {
				ended, endedAt = at, i
				wftScheduled, wftStarted, wftCompleted = time.Time{}, time.Time{}, time.Time{}
			}
		}
	}
	return out
}

// eventNames names the events after the first up to a turn's activity
// completing among them, with how long after the first each was: one turn
// as its history shows it, from the turn before it ending.
func eventNames(events []*historypb.HistoryEvent) string {
	var names []string
	for _, e := range events[1:] {
		name := strings.TrimPrefix(e.GetEventType().String(), "EventType")
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			name += " " + e.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName()
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
			name += " " + e.GetWorkflowExecutionSignaledEventAttributes().GetSignalName()
		case enumspb.EVENT_TYPE_TIMER_STARTED:
			name += " " + e.GetTimerStartedEventAttributes().GetStartToFireTimeout().AsDuration().String()
		}
		names = append(names, fmt.Sprintf("%s +%.1fms", name, ms(e.GetEventTime().AsTime().Sub(events[0].GetEventTime().AsTime()))))
		if e.GetEventType() == enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED {
			break
		}
	}
	return strings.Join(names, ", ")
}

// phaseMedians says, in words, the median of each phase of the gaps.
func phaseMedians(phases []gapPhase) string {
	names := []string{"turn ended to its workflow task scheduled", "to it started on the worker", "the worker's workflow task", "its end to the next turn started"}
	var parts []string
	for i, name := range names {
		var d []time.Duration
		for _, p := range phases {
			d = append(d, p[i])
		}
		slices.Sort(d)
		parts = append(parts, fmt.Sprintf("%s %.1fms", name, float64(d[len(d)/2].Microseconds())/1000))
	}
	return strings.Join(parts, ", ")
}

// BenchmarkLs1000 measures `nid ls` over 1,000 running sessions as a user
// runs it beside nid up: a fresh process each time, its start included, the
// median of 20. Goal: at most 100 ms. Beside it, where the time goes, each
// the median of 20: the process start (nid ls --help, which parses the
// command line and stops), nid up's session.list answer (its kept list,
// brought up to date), and in this process the dial and the visibility list
// nid ls makes when no nid up of its configuration runs, dialled as nid
// dials.
func BenchmarkLs1000(b *testing.B) {
	var groups strings.Builder
	for g := 0; g < 10; g++ {
		fmt.Fprintf(&groups, "  g%d:\n    sessions:\n", g)
		for i := 0; i < 100; i++ {
			fmt.Fprintf(&groups, "      - {agent: sim, name: s%d}\n", i)
		}
	}
	s := newSite(b, groups.String())
	s.upWait = 10 * time.Minute
	up := s.up()
	s.eventually("1000 sessions listed", 10*time.Minute, func() bool { return len(s.ls()) == 1000 })
	// The sessions have nothing to do: once the start's tail is done (the
	// sessions' first listings, and before rung 31 the boards a group sent
	// its new sessions in batches for tens of seconds after they were all
	// listed), what nid up spends is what an idle fleet costs, its own
	// live feed included.
	time.Sleep(45 * time.Second)
	busy := cpuTime(b, up.cmd.Process.Pid)
	time.Sleep(10 * time.Second)
	idle := float64(cpuTime(b, up.cmd.Process.Pid)-busy) / float64(10*time.Second) * 100
	b.ReportMetric(idle, "%cpu-idle-1000")
	fmt.Printf("nid up with 1000 idle sessions: %.1f%% of a core\n", idle)
	s.printFleetMemory(b, up, 1000)

	cfg, err := config.Load(config.LoadOptions{File: filepath.Join(s.dir, "nid.yaml"), Kinds: agents.ConfigKinds()})
	if err != nil {
		b.Fatal(err)
	}
	// Each round times every part once, so that the machine's noise falls
	// on all of them alike.
	const runs = 20
	var ls, start, api, dial, list durations
	for i := 0; i < runs; i++ {
		ls = append(ls, timed(func() {
			if n := strings.Count(s.mustNid("ls"), "\n"); n != 1001 {
				b.Fatalf("nid ls printed %d lines, want 1001", n)
			}
		}))
		start = append(start, timed(func() { s.mustNid("ls", "--help") }))
		api = append(api, timed(func() {
			if n := s.sessionList(b); n != 1000 {
				b.Fatalf("session.list answered %d sessions, want 1000", n)
			}
		}))
		var c client.Client
		dial = append(dial, timed(func() {
			if c, err = worker.Dial(context.Background(), cfg, nil); err != nil {
				b.Fatal(err)
			}
		}))
		list = append(list, timed(func() {
			sessions, err := nidclient.Sessions(context.Background(), c, "")
			if err != nil || len(sessions) != 1000 {
				b.Fatalf("listed %d sessions (%v), want 1000", len(sessions), err)
			}
		}))
		c.Close()
	}
	for _, d := range []durations{ls, start, api, dial, list} {
		slices.Sort(d)
	}
	b.ReportMetric(ms(ls.median()), "ms-median-ls")
	b.ReportMetric(ms(start.median()), "ms-median-start")
	b.ReportMetric(ms(api.median()), "ms-median-session-list")
	b.ReportMetric(ms(list.median()), "ms-median-list")
	fmt.Printf("nid ls over 1000 sessions, nid up running: median %v, best %v, worst %v of %d fresh processes (goal: at most %v, %s)\n",
		ls.median(), ls[0], ls[len(ls)-1], runs, lsGoal, verdict(ls.median(), lsGoal))
	fmt.Printf("  its parts, medians: process start %v (nid ls --help), nid up's session.list %v; the rest (config, decoding, printing) about %v\n",
		start.median(), api.median(), (ls.median() - start.median() - api.median()).Round(time.Millisecond))
	fmt.Printf("  without a nid up of its configuration nid ls asks Temporal: dial %v, visibility list %v (medians)\n", dial.median(), list.median())
}

// sessionList asks nid up's API for every session, as nid ls does, and
// says how many it listed.
func (s *site) sessionList(b *testing.B) int {
	b.Helper()
	token, err := os.ReadFile(filepath.Join(s.dir, ".nid", "http-token"))
	if err != nil {
		b.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, fmt.Sprintf("http://127.0.0.1:%d/api/%s", s.http, worker.MethodSessionList), strings.NewReader("{}"))
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var list worker.SessionList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("session.list: %d %v", resp.StatusCode, err)
	}
	return len(list.Sessions)
}

// durations are timed runs, fastest first once sorted.
type durations []time.Duration

// timed is how long f takes.
func timed(f func()) time.Duration {
	start := time.Now()
	f()
	return time.Since(start).Round(100 * time.Microsecond)
}

// median is the middle of sorted runs.
func (d durations) median() time.Duration { return d[len(d)/2] }

// ms is d in milliseconds, as benchmark metrics report it.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// newBenchSite starts nid up on a fresh site for a benchmark.
func newBenchSite(b *testing.B, groups string) *site {
	s := newSite(b, groups)
	s.upWait = 10 * time.Minute
	s.up()
	return s
}

// cpuTime is the processor time nid (pid) has used, user and system, its
// embedded server's included.
func cpuTime(b *testing.B, pid int) time.Duration {
	b.Helper()
	var total time.Duration
	for _, p := range withServer(b, pid) {
		total += ownCPUTime(b, p)
	}
	return total
}

func ownCPUTime(b *testing.B, pid int) time.Duration {
	b.Helper()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the command's name: utime and stime are the 12th and
	// 13th, in clock ticks (100 a second on Linux).
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}

// withServer is pid and, when it runs its embedded Temporal server as a
// child process (as the nid make build makes does), that child's: what nid
// up costs is both. Agent processes are not counted.
func withServer(b *testing.B, pid int) []int {
	b.Helper()
	pids := []int{pid}
	// Each thread lists the children it started.
	lists, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	if err != nil {
		b.Fatal(err)
	}
	var children []string
	for _, list := range lists {
		text, _ := os.ReadFile(list) // a thread that ended has none
		children = append(children, strings.Fields(string(text))...)
	}
	for _, field := range children {
		child, err := strconv.Atoi(field)
		if err != nil {
			b.Fatal(err)
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", child))
		if err == nil && slices.Contains(strings.Split(string(cmdline), "\x00"), serverproc.ChildArg) {
			pids = append(pids, child)
		}
	}
	return pids
}
