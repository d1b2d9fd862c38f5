package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/nid-dev/nid/workflows"
)

const (
	longRunTurns     = 10_000
	longRunRotations = 300
	// longRunHistoryBound is the most events one run of the session
	// workflow may hold: sessions continue as new at 4,000.
	longRunHistoryBound = 5_000
)

// BenchmarkLongRun runs one sim session for 10,000 turns with no delay and
// a policy that rotates every 30 turns, then stops it and checks that every
// workflow run stayed small, that the counters are exact and that nid ls
// still answers. It prints the elapsed time and nid up's peak memory. It
// takes many minutes, so `make bench` leaves it out: `make bench-long` runs
// it.
func BenchmarkLongRun(b *testing.B) {
	s := newSite(b, `  long:
    goal: Run for a long time
    rotate: {mode: auto, maxTurns: 30}
    sessions:
      - agent: sim
        name: one
        sim: {window: 100000, tokensPerTurn: 3000, turnDelay: 0s}
`)
	start := time.Now()
	p := s.up()
	last := s.untilTurns("long/one", longRunTurns, 25*time.Minute)
	elapsed := time.Since(start)

	// A stopped session takes no more turns, so its counters can be
	// compared with the sim's while nothing moves.
	s.mustNid("stop", "long/one")
	s.eventually("the session to stop", time.Minute, func() bool {
		last = s.ls()["long/one"]
		return last.Status == workflows.StatusStopped
	})
	if last.Context.TotalTurns < longRunTurns {
		b.Fatalf("totalTurns %d, want at least %d", last.Context.TotalTurns, longRunTurns)
	}
	if last.Context.Rotations < longRunRotations {
		b.Fatalf("%d rotations, want at least %d", last.Context.Rotations, longRunRotations)
	}
	if simTurns := simConversationTurns(b, s, "long", "one"); simTurns != last.Context.TotalTurns {
		b.Fatalf("the sim's conversations record %d turns, the session %d", simTurns, last.Context.TotalTurns)
	}

	ctx := context.Background()
	runs, longest := sessionRuns(b, s.client(), ctx, workflows.SessionID("long", "one"))
	if longest >= longRunHistoryBound {
		b.Fatalf("a session run holds %d events, want under %d", longest, longRunHistoryBound)
	}

	lsStart := time.Now()
	s.mustNid("ls")
	lsTime := time.Since(lsStart)
	peak := peakRSS(b, p.cmd.Process.Pid)

	b.ReportMetric(elapsed.Seconds(), "s-elapsed")
	b.ReportMetric(float64(peak)/1024, "MiB-peak-rss")
	b.ReportMetric(float64(lsTime.Microseconds())/1000, "ms-ls")
	b.ReportMetric(float64(longest), "events-longest-run")
	fmt.Printf("long run: %d turns, %d rotations in %v; %d session runs, the longest %d events (bound %d); nid ls %v; nid up peak RSS %d MiB\n",
		last.Context.TotalTurns, last.Context.Rotations, elapsed.Round(time.Second), runs, longest, longRunHistoryBound, lsTime.Round(time.Millisecond), peak/1024)
}

// untilTurns waits until a session has taken n turns. A session whose count
// stands still for two minutes has stalled, which fails at once rather than
// at the deadline.
func (s *site) untilTurns(session string, n int, timeout time.Duration) lsRow {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	var last lsRow
	moved := time.Now()
	for {
		row := s.ls()[session]
		if row.Context.TotalTurns >= n {
			return row
		}
		if row.Context.TotalTurns != last.Context.TotalTurns {
			moved = time.Now()
		}
		last = row
		switch {
		case time.Since(moved) > 2*time.Minute:
			s.t.Fatalf("%s stalled at %d turns (status %s, %d rotations)", session, row.Context.TotalTurns, row.Status, row.Context.Rotations)
		case time.Now().After(deadline):
			s.t.Fatalf("%s took %d of %d turns in %v", session, row.Context.TotalTurns, n, timeout)
		}
		time.Sleep(time.Second)
	}
}

// simConversationTurns adds up the turns the sim recorded in each
// conversation of a session.
func simConversationTurns(b *testing.B, s *site, group, name string) int {
	b.Helper()
	files, err := filepath.Glob(filepath.Join(s.dir, ".nid", "sim", group, name, "*.json"))
	if err != nil || len(files) == 0 {
		b.Fatalf("no sim conversations for %s/%s (%v)", group, name, err)
	}
	total := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		var conv struct {
			Turns int `json:"turns"`
		}
		if err := json.Unmarshal(data, &conv); err != nil {
			b.Fatalf("%s: %v", f, err)
		}
		total += conv.Turns
	}
	return total
}

// sessionRuns lists every run of a workflow and returns how many there are
// and the history length of the longest.
func sessionRuns(b *testing.B, c client.Client, ctx context.Context, id string) (runs int, longest int64) {
	b.Helper()
	var token []byte
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query:         fmt.Sprintf("WorkflowId = '%s'", id),
			NextPageToken: token,
		})
		if err != nil {
			b.Fatal(err)
		}
		for _, e := range resp.GetExecutions() {
			d, err := c.DescribeWorkflowExecution(ctx, id, e.GetExecution().GetRunId())
			if err != nil {
				b.Fatal(err)
			}
			runs++
			longest = max(longest, d.GetWorkflowExecutionInfo().GetHistoryLength())
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	if runs < 2 {
		b.Fatalf("%s has %d runs: it never continued as new", id, runs)
	}
	return runs, longest
}

// peakRSS returns nid's (pid's) peak resident set size in KiB, its embedded
// server's included.
func peakRSS(b *testing.B, pid int) int64 {
	b.Helper()
	// The sum of nid's and its server's peaks: at most a little over the
	// peak of their sum, as both grow with the sessions.
	var total int64
	for _, p := range withServer(b, pid) {
		total += procStatus(b, p, "VmHWM:")
	}
	return total
}
