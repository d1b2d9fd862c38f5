package e2e

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"

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
// completed) and the next one starting, with turnDelay 0. Goals: a median
// of at most 5 ms and a p90 of at most 15 ms.
func BenchmarkTurnOverhead(b *testing.B) {
	s := newBenchSite(b, `  bench:
    goal: Measure
    rotate: {mode: off}
    sessions:
      - agent: sim
        name: one
        sim: {window: 100000000, tokensPerTurn: 1, turnDelay: 0s}
`)
	const turns = 200
	s.eventually("turns", 5*time.Minute, func() bool { return s.ls()["bench/one"].Turns >= turns })

	c := s.client()
	ctx := context.Background()
	iter := c.GetWorkflowHistory(ctx, workflows.SessionID("bench", "one"), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var events []*historypb.HistoryEvent
	for iter.HasNext() {
		e, err := iter.Next()
		if err != nil {
			b.Fatal(err)
		}
		events = append(events, e)
	}
	phases := gapPhases(events)
	gaps := turnGaps(events)
	if len(gaps) < 10 {
		b.Fatalf("only %d turn gaps in the current run", len(gaps))
	}
	sort.Slice(gaps, func(i, j int) bool { return gaps[i] < gaps[j] })
	median := gaps[len(gaps)/2]
	p90 := gaps[len(gaps)*9/10]
	b.ReportMetric(float64(median.Microseconds())/1000, "ms-median-gap")
	b.ReportMetric(float64(p90.Microseconds())/1000, "ms-p90-gap")
	fmt.Printf("orchestration gap between sim turns over %d gaps: median %v (goal: at most %v, %s), p90 %v (goal: at most %v, %s)\n",
		len(gaps), median.Round(time.Microsecond*10), gapMedianGoal, verdict(median, gapMedianGoal), p90.Round(time.Microsecond*10), gapP90Goal, verdict(p90, gapP90Goal))
	fmt.Printf("  where the gap went (medians): %s\n", phaseMedians(phases))
	// The tail has causes of its own: the same split over the slowest
	// tenth of the gaps.
	slices.SortFunc(phases, func(a, b gapPhase) int { return cmp.Compare(a.total(), b.total()) })
	fmt.Printf("  where the slowest tenth went (medians): %s\n", phaseMedians(phases[len(phases)*9/10:]))
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

func gapPhases(events []*historypb.HistoryEvent) []gapPhase {
	turns := map[int64]bool{}
	var out []gapPhase
	var ended, wftScheduled, wftStarted, wftCompleted time.Time
	for _, e := range events {
		at := e.GetEventTime().AsTime()
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			if e.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() == activities.RunTurnName {
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
				out = append(out, gapPhase{wftScheduled.Sub(ended), wftStarted.Sub(wftScheduled), wftCompleted.Sub(wftStarted), at.Sub(wftCompleted)})
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			if turns[e.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()] {
				ended = at
				wftScheduled, wftStarted, wftCompleted = time.Time{}, time.Time{}, time.Time{}
			}
		}
	}
	return out
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
// runs it: a fresh process each time, its start included, the median of 20.
// Goal: at most 100 ms. Beside it, where the time goes, each the median of
// 20: the process start (nid ls --help, which parses the command line and
// stops), and in this process the dial and the visibility list nid ls makes,
// dialled as nid dials;
// the rest is reading the config and printing.
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
	// The sessions have nothing to do: what nid up spends now is what an
	// idle fleet costs, its own live feed included.
	time.Sleep(10 * time.Second)
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
	var ls, start, dial, list durations
	for i := 0; i < runs; i++ {
		ls = append(ls, timed(func() {
			if n := strings.Count(s.mustNid("ls"), "\n"); n != 1001 {
				b.Fatalf("nid ls printed %d lines, want 1001", n)
			}
		}))
		start = append(start, timed(func() { s.mustNid("ls", "--help") }))
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
	for _, d := range []durations{ls, start, dial, list} {
		slices.Sort(d)
	}
	b.ReportMetric(ms(ls.median()), "ms-median-ls")
	b.ReportMetric(ms(start.median()), "ms-median-start")
	b.ReportMetric(ms(list.median()), "ms-median-list")
	fmt.Printf("nid ls over 1000 sessions: median %v, best %v, worst %v of %d fresh processes (goal: at most %v, %s)\n",
		ls.median(), ls[0], ls[len(ls)-1], runs, lsGoal, verdict(ls.median(), lsGoal))
	fmt.Printf("  its parts, medians: process start %v (nid ls --help), dial %v, visibility list %v; the rest (config, decoding, printing) about %v\n",
		start.median(), dial.median(), list.median(), (ls.median() - start.median() - dial.median() - list.median()).Round(time.Millisecond))
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
