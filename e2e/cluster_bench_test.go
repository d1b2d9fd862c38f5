package e2e

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"

	"github.com/nid-dev/nid/internal/clustertest"
	"github.com/nid-dev/nid/internal/temporaltest"
	"github.com/nid-dev/nid/workflows"
)

// BenchmarkCluster runs 50, then 200 sim sessions on the embedded server
// (one host, nid up) and on a Temporal cluster on PostgreSQL (two nid
// worker hosts, nid up placing them), and prints for each the turn overhead
// (the gap between one turn's end and the next one's start, median and p90
// over a sample of sessions), how long nid ls takes, and how long the
// sessions took from nid up's start to every one working, side by side:
// what the cluster costs, and how each grows from 50 to 200 sessions. Its
// sessions ask for a turn every 200 ms, far more than the machine gives:
// how long the last of them waits to start is the machine's saturation,
// not a fleet's start, which BenchmarkClusterFleetStart times.
func BenchmarkCluster(b *testing.B) {
	type row struct {
		backend     string
		sessions    int
		median, p90 time.Duration
		ls, up      time.Duration
		working     time.Duration
	}
	var rows []row
	for _, backend := range []string{"embedded", "cluster"} {
		for _, n := range []int{50, 200} {
			var r row
			ran := b.Run(fmt.Sprintf("%s-%d", backend, n), func(b *testing.B) {
				median, p90, ls, up, working := benchSessions(b, backend, n)
				r = row{backend, n, median, p90, ls, up, working}
				b.ReportMetric(float64(median.Microseconds())/1000, "ms-median-gap")
				b.ReportMetric(float64(p90.Microseconds())/1000, "ms-p90-gap")
				b.ReportMetric(float64(ls.Microseconds())/1000, "ms-median-ls")
				b.ReportMetric(up.Seconds(), "s-nid-up")
				b.ReportMetric(working.Seconds(), "s-all-working")
			})
			if ran && r.sessions > 0 {
				rows = append(rows, r)
			}
		}
	}
	var out strings.Builder
	fmt.Fprintf(&out, "%-9s %8s %12s %10s %12s %12s %12s\n", "BACKEND", "SESSIONS", "GAP MEDIAN", "GAP P90", "NID LS", "NID UP", "ALL WORKING")
	for _, r := range rows {
		fmt.Fprintf(&out, "%-9s %8d %12v %10v %12v %12v %12v\n", r.backend, r.sessions, r.median.Round(time.Millisecond), r.p90.Round(time.Millisecond),
			r.ls.Round(time.Millisecond), r.up.Round(100*time.Millisecond), r.working.Round(100*time.Millisecond))
	}
	fmt.Fprint(os.Stdout, out.String())
}

// upOnCluster starts a Temporal cluster on PostgreSQL, two nid worker
// hosts taking half of n sessions each, and a nid up that runs none
// itself, with groups; started is when nid up was started.
func upOnCluster(b *testing.B, groups string, n int) (s *site, started time.Time) {
	cl := clustertest.Start(b)
	for _, host := range []string{"bench-a", "bench-b"} {
		h := newSite(b, "")
		h.cluster = cl.Address
		h.worker = fmt.Sprintf("  host: %s\n  maxSessions: %d\n", host, n/2)
		h.writeConfig()
		h.serveNid("worker")
	}
	s = newSite(b, groups)
	s.cluster = cl.Address
	s.worker = "  maxSessions: 0\n"
	s.upWait = 10 * time.Minute
	s.writeConfig()
	started = time.Now()
	s.up()
	return s, started
}

// benchSessions starts n sim sessions on backend, waits until a sample of
// them took turns, and measures; up is how long nid up took to start them
// and say it serves, working how long from its start until every session
// was working (its first turn started).
func benchSessions(b *testing.B, backend string, n int) (median, p90, ls, up, working time.Duration) {
	var groups strings.Builder
	fmt.Fprintf(&groups, "  bench:\n    goal: Measure\n    rotate: {mode: off}\n    sessions:\n")
	for i := range n {
		fmt.Fprintf(&groups, "      - {agent: sim, name: s%d, sim: {window: 100000000, tokensPerTurn: 1, turnDelay: 200ms}}\n", i)
	}
	var s *site
	var started time.Time
	switch backend {
	case "embedded":
		temporaltest.Binary(b) // built before the clock starts
		started = time.Now()
		s = newBenchSite(b, groups.String())
	case "cluster":
		s, started = upOnCluster(b, groups.String(), n)
	}
	up = time.Since(started)
	working = s.untilFleetWorking(b, n, started, 10*time.Minute)
	// Every tenth session is the sample whose histories are read.
	var sample []string
	for i := 0; i < n; i += 10 {
		sample = append(sample, fmt.Sprintf("s%d", i))
	}
	s.eventually("the sample to take 10 turns each", 30*time.Minute, func() bool {
		rows := s.ls()
		for _, name := range sample {
			if rows["bench/"+name].Turns < 10 {
				return false
			}
		}
		return len(rows) == n
	})
	c := s.client()
	var gaps []time.Duration
	for _, name := range sample {
		iter := c.GetWorkflowHistory(context.Background(), workflows.SessionID("bench", name), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		var events []*historypb.HistoryEvent
		for iter.HasNext() {
			e, err := iter.Next()
			if err != nil {
				b.Fatal(err)
			}
			events = append(events, e)
		}
		gaps = append(gaps, turnGaps(events)...)
	}
	sort.Slice(gaps, func(i, j int) bool { return gaps[i] < gaps[j] })
	var runs []time.Duration
	for range 5 {
		start := time.Now()
		out := s.mustNid("ls")
		runs = append(runs, time.Since(start))
		if got := strings.Count(out, "\n"); got != n+1 {
			b.Fatalf("nid ls printed %d lines, want %d", got, n+1)
		}
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i] < runs[j] })
	return gaps[len(gaps)/2], gaps[len(gaps)*9/10], runs[len(runs)/2], up, working
}
