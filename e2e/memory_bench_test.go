package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nid-dev/nid/internal/temporaltest"
)

// BenchmarkMemory prints the resident memory of nid up (the embedded
// Temporal server, the worker and the HTTP server in one process) with 1,
// 50 and 200 sim sessions taking turns, and how it grows over 10,000 turns
// of 10 sessions while an event stream (the dashboard's feed) stays open:
// a leak in the worker, the feed or the stream shows as growth per turn.
func BenchmarkMemory(b *testing.B) {
	var lines []string
	for _, n := range []int{1, 50, 200} {
		s := newSite(b, simGroup("mem", n, "1s"))
		s.upWait = 10 * time.Minute
		p := s.up()
		s.untilTotalTurns(n, 3*n, 10*time.Minute)
		rss := residentKiB(b, p.cmd.Process.Pid)
		b.ReportMetric(float64(rss)/1024, fmt.Sprintf("MiB-rss-%d", n))
		lines = append(lines, fmt.Sprintf("nid up with %3d sim sessions: %4d MiB resident", n, rss/1024))
		p.kill()
	}

	const sessions, turns, every = 10, 10_000, 1_000
	s := newSite(b, simGroup("grow", sessions, "0s"))
	s.upWait = 10 * time.Minute
	p := s.up()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.readEvents(ctx)
	var samples []int64
	var live, goroutines []string
	for at := every; at <= turns; at += every {
		s.untilTotalTurns(sessions, at, 15*time.Minute)
		samples = append(samples, residentKiB(b, p.cmd.Process.Pid))
		heap, routines := s.runtimeGauges(b)
		live = append(live, strconv.FormatFloat(heap/(1<<20), 'f', 0, 64))
		goroutines = append(goroutines, strconv.FormatFloat(routines, 'f', 0, 64))
	}
	// The first thousand turns warm the caches up; growth is measured
	// from there.
	growth := float64(samples[len(samples)-1]-samples[0]) / sessions / float64(turns-every) * 1000
	b.ReportMetric(growth, "KiB-per-session-per-1000-turns")
	var trail []string
	for _, kib := range samples {
		trail = append(trail, strconv.FormatInt(kib/1024, 10))
	}
	lines = append(lines,
		fmt.Sprintf("nid up with %d sessions over %d turns, an event stream open: %s MiB at every %d turns", sessions, turns, strings.Join(trail, " "), every),
		fmt.Sprintf("growth after the first %d turns: %.1f KiB per session per 1,000 turns", every, growth),
		fmt.Sprintf("the live Go heap (what the last collection kept) at the same points: %s MiB", strings.Join(live, " ")),
		fmt.Sprintf("goroutines at the same points: %s", strings.Join(goroutines, " ")))
	for _, l := range lines {
		fmt.Println(l)
	}
}

// simGroup is a group of n sim sessions that take turns on their goal with
// turnDelay and rotate as the default policy says.
func simGroup(group string, n int, turnDelay string) string {
	var g strings.Builder
	fmt.Fprintf(&g, "  %s:\n    goal: Keep going\n    sessions:\n", group)
	for i := range n {
		fmt.Fprintf(&g, "      - {agent: sim, name: s%d, sim: {window: 200000, tokensPerTurn: 4000, turnDelay: %s}}\n", i, turnDelay)
	}
	return g.String()
}

// untilTotalTurns waits until n sessions are listed and their turns add up
// to at least total.
func (s *site) untilTotalTurns(n, total int, timeout time.Duration) {
	s.t.Helper()
	s.eventually(fmt.Sprintf("%d sessions to take %d turns", n, total), timeout, func() bool {
		rows := s.ls()
		sum := 0
		for _, r := range rows {
			sum += r.Context.TotalTurns
		}
		return len(rows) == n && sum >= total
	})
}

// readEvents keeps the API's event stream open and read until ctx ends.
func (s *site) readEvents(ctx context.Context) {
	token, err := os.ReadFile(filepath.Join(s.dir, ".nid", "http-token"))
	if err != nil {
		return
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/api/events", s.http), nil)
	if err != nil {
		return
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
	}
}

// runtimeGauges reads nid up's live heap in bytes and its goroutines from
// its /metrics: the resident set also holds garbage not yet collected and
// memory the allocator keeps, so a leak shows plainest in these.
func (s *site) runtimeGauges(b *testing.B) (liveHeap, goroutines float64) {
	b.Helper()
	token, err := os.ReadFile(filepath.Join(s.dir, ".nid", "http-token"))
	if err != nil {
		b.Fatal(err)
	}
	status, families := temporaltest.Scrape(b, fmt.Sprintf("http://127.0.0.1:%d", s.http), strings.TrimSpace(string(token)))
	if status != http.StatusOK {
		b.Fatalf("/metrics answered %d", status)
	}
	liveHeap, okHeap := temporaltest.Sample(families, "go_gc_heap_live_bytes", nil)
	goroutines, okRoutines := temporaltest.Sample(families, "go_goroutines", nil)
	if !okHeap || !okRoutines {
		b.Fatal("/metrics has no go_gc_heap_live_bytes or go_goroutines")
	}
	return liveHeap, goroutines
}

// residentKiB is nid's (pid's) resident set size now, in KiB, its embedded
// server's included.
func residentKiB(b *testing.B, pid int) int64 {
	b.Helper()
	var total int64
	for _, p := range withServer(b, pid) {
		total += procStatus(b, p, "VmRSS:")
	}
	return total
}

func procStatus(b *testing.B, pid int, field string) int64 {
	b.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, field); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb
		}
	}
	b.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}
