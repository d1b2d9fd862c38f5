package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"

	"github.com/nid-dev/nid/activities"
	"github.com/nid-dev/nid/workflows"
)

// BenchmarkTurnOverhead measures nid's orchestration overhead per turn on the
// embedded server: the time between one sim turn ending (its activity
// completed) and the next one starting, with turnDelay 0. Target: under 15 ms
// median.
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
	gaps := turnGaps(events)
	if len(gaps) < 10 {
		b.Fatalf("only %d turn gaps in the current run", len(gaps))
	}
	sort.Slice(gaps, func(i, j int) bool { return gaps[i] < gaps[j] })
	median := gaps[len(gaps)/2]
	p90 := gaps[len(gaps)*9/10]
	b.ReportMetric(float64(median.Microseconds())/1000, "ms-median-gap")
	b.ReportMetric(float64(p90.Microseconds())/1000, "ms-p90-gap")
	fmt.Printf("turn overhead over %d gaps: median %v, p90 %v (target: median under 15ms)\n", len(gaps), median, p90)
}

// turnGaps pairs each completed RunTurn activity with the start of the next.
func turnGaps(events []*historypb.HistoryEvent) []time.Duration {
	scheduled := map[int64]bool{}
	var gaps []time.Duration
	var ended time.Time
	for _, e := range events {
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			if e.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() == activities.RunTurnName {
				scheduled[e.GetEventId()] = true
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			if scheduled[e.GetActivityTaskStartedEventAttributes().GetScheduledEventId()] && !ended.IsZero() {
				gaps = append(gaps, e.GetEventTime().AsTime().Sub(ended))
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			if scheduled[e.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()] {
				ended = e.GetEventTime().AsTime()
			}
		}
	}
	return gaps
}

// BenchmarkLs1000 measures `nid ls` (one visibility list) over 1,000 running
// sessions. Target: under 300 ms.
func BenchmarkLs1000(b *testing.B) {
	var groups strings.Builder
	for g := 0; g < 10; g++ {
		fmt.Fprintf(&groups, "  g%d:\n    sessions:\n", g)
		for i := 0; i < 100; i++ {
			fmt.Fprintf(&groups, "      - {agent: sim, name: s%d}\n", i)
		}
	}
	s := newBenchSite(b, groups.String())
	s.eventually("1000 sessions listed", 10*time.Minute, func() bool { return len(s.ls()) == 1000 })

	var runs []time.Duration
	for i := 0; i < 10; i++ {
		start := time.Now()
		out := s.mustNid("ls")
		runs = append(runs, time.Since(start))
		if n := strings.Count(out, "\n"); n != 1001 {
			b.Fatalf("nid ls printed %d lines, want 1001", n)
		}
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i] < runs[j] })
	median := runs[len(runs)/2]
	b.ReportMetric(float64(median.Microseconds())/1000, "ms-median-ls")
	fmt.Printf("nid ls over 1000 sessions: median %v, best %v (target: under 300ms)\n", median, runs[0])
}

// newBenchSite starts nid up on a fresh site for a benchmark.
func newBenchSite(b *testing.B, groups string) *site {
	s := newSite(b, groups)
	s.up()
	return s
}
