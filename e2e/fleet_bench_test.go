package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/nid-dev/nid/activities"
	"github.com/nid-dev/nid/internal/temporaltest"
	"github.com/nid-dev/nid/nidclient"
	"github.com/nid-dev/nid/workflows"
)

// fleetStartGoal is how long a thousand new sessions may take from nid up
// to every one of them working (make bench), and two hundred on the
// two-host cluster (make bench-cluster).
const fleetStartGoal = 30 * time.Second

// BenchmarkFleetStart starts 1,000 new sim sessions (ten groups of a
// hundred, each with a goal) on one host and times nid up from its start
// to every session working: its first turn started. Goal: at most 30 s.
// A sim turn here lasts a minute, as an agent's does, so the turns of the
// sessions started first do not crowd out the start of the rest.
func BenchmarkFleetStart(b *testing.B) {
	s := newSite(b, fleetGroups(10, 100, "1m"))
	s.upWait = 10 * time.Minute
	temporaltest.Binary(b) // built before the clock starts
	started := time.Now()
	up := s.up()
	serving := time.Since(started)
	working := s.untilFleetWorking(b, 1000, started, 10*time.Minute)
	cpu := cpuTime(b, up.cmd.Process.Pid)
	s.reportFleetStart(b, started, serving, working, 1000, 25)
	fmt.Printf("1000 new sim sessions on one host: nid up said it serves after %v, every session working after %v (goal: at most %v, %s); nid up used %v of processor time meanwhile, its server's included\n",
		serving.Round(100*time.Millisecond), working.Round(100*time.Millisecond), fleetStartGoal, verdict(working, fleetStartGoal), cpu.Round(100*time.Millisecond))
}

// BenchmarkClusterFleetStart starts 200 new sim sessions (two groups of a
// hundred, each with a goal, turns of a minute as in BenchmarkFleetStart)
// on the PostgreSQL cluster with two nid worker hosts, and times nid up
// from its start to every session working. Goal: at most 30 s.
func BenchmarkClusterFleetStart(b *testing.B) {
	temporaltest.Binary(b)
	s, started := upOnCluster(b, fleetGroups(2, 100, "1m"), 200)
	serving := time.Since(started)
	working := s.untilFleetWorking(b, 200, started, 10*time.Minute)
	s.reportFleetStart(b, started, serving, working, 200, 10)
	fmt.Printf("200 new sim sessions on the two-host cluster: nid up said it serves after %v, every session working after %v (goal: at most %v, %s)\n",
		serving.Round(100*time.Millisecond), working.Round(100*time.Millisecond), fleetStartGoal, verdict(working, fleetStartGoal))
}

// reportFleetStart reports how long a fleet of n sessions in groups of a
// hundred (fleetGroups) took to be served and to work, and prints the
// start phases of every every-th session.
func (s *site) reportFleetStart(b *testing.B, started time.Time, serving, working time.Duration, n, every int) {
	var sample []string
	for i := 0; i < n; i += every {
		sample = append(sample, fmt.Sprintf("g%d/s%d", i/100, i%100))
	}
	fmt.Printf("  a sample's starts, from nid up's start (medians): %s\n", s.startPhases(b, started, sample))
	b.ReportMetric(serving.Seconds(), "s-nid-up-serving")
	b.ReportMetric(working.Seconds(), "s-fleet-working")
}

// fleetGroups is groups of perGroup sim sessions each, with a goal, whose
// turns take turnDelay.
func fleetGroups(groups, perGroup int, turnDelay string) string {
	var g strings.Builder
	for i := range groups {
		fmt.Fprintf(&g, "  g%d:\n    goal: Keep going\n    rotate: {mode: off}\n    sessions:\n", i)
		for j := range perGroup {
			fmt.Fprintf(&g, "      - {agent: sim, name: s%d, sim: {window: 100000000, tokensPerTurn: 1, turnDelay: %s}}\n", j, turnDelay)
		}
	}
	return g.String()
}

// untilFleetWorking waits until n sessions are listed and every one of
// them is working or has taken a turn, and says how long after started
// that was. It lists once a second, in this process, so that watching
// costs the fleet's machine little.
func (s *site) untilFleetWorking(b *testing.B, n int, started time.Time, timeout time.Duration) time.Duration {
	b.Helper()
	c := s.client()
	deadline := started.Add(timeout)
	for {
		sessions, err := nidclient.ListSessions(context.Background(), c, "")
		working := 0
		for _, r := range sessions {
			if r.Status == workflows.StatusWorking || r.Context.TotalTurns > 0 {
				working++
			}
		}
		if err == nil && len(sessions) == n && working == n {
			return time.Since(started)
		}
		if time.Now().After(deadline) {
			b.Fatalf("after %v, %d of %d sessions listed, %d working (%v)", timeout, len(sessions), n, working, err)
		}
		time.Sleep(time.Second)
	}
}

// fleetMemoryGoal is the most nid up may hold resident, its server child
// included, with a thousand idle sessions.
const fleetMemoryGoal = 600 << 20

// printFleetMemory prints nid up's resident memory (its server child's
// included) with its n sessions idle, against the goal, and its live Go
// heap beside it.
func (s *site) printFleetMemory(b *testing.B, up *upProcess, n int) {
	b.Helper()
	pids := withServer(b, up.cmd.Process.Pid)
	own := procStatus(b, pids[0], "VmRSS:") << 10
	rss := residentKiB(b, up.cmd.Process.Pid) << 10
	heap, goroutines := s.runtimeGauges(b)
	b.ReportMetric(float64(rss)/(1<<20), fmt.Sprintf("MiB-rss-%d-idle", n))
	got := "met"
	if rss > fleetMemoryGoal {
		got = "NOT met"
	}
	fmt.Printf("nid up with %d idle sim sessions: %d MiB resident, its server's included (goal: at most %d MiB, %s): nid up %d MiB (live Go heap %.0f MiB, %.0f goroutines), its server %d MiB\n",
		n, rss>>20, fleetMemoryGoal>>20, got, own>>20, heap/(1<<20), goroutines, (rss-own)>>20)
}

// startPhases says, in words, where the start of a sample of sessions went:
// from nid up's start to each session's workflow started, and from there
// to the milestones of its history up to its first turn started, each the
// median and the slowest over the sample.
func (s *site) startPhases(b *testing.B, upStarted time.Time, refs []string) string {
	b.Helper()
	c := s.client()
	names := []string{"started", "first task done", "registry told", "host answer", "board", "turn scheduled", "turn started"}
	at := make([]durations, len(names))
	for _, ref := range refs {
		group, name, _ := strings.Cut(ref, "/")
		iter := c.GetWorkflowHistory(context.Background(), workflows.SessionID(group, name), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		seen := make([]time.Duration, len(names))
		for iter.HasNext() {
			e, err := iter.Next()
			if err != nil {
				b.Fatal(err)
			}
			d := e.GetEventTime().AsTime().Sub(upStarted)
			mark := func(i int) {
				if seen[i] == 0 {
					seen[i] = d
				}
			}
			switch e.GetEventType() {
			case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
				mark(0)
			case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
				mark(1)
			case enumspb.EVENT_TYPE_EXTERNAL_WORKFLOW_EXECUTION_SIGNALED:
				if e.GetExternalWorkflowExecutionSignaledEventAttributes().GetWorkflowExecution().GetWorkflowId() == workflows.HostsID {
					mark(2)
				}
			case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
				switch e.GetWorkflowExecutionSignaledEventAttributes().GetSignalName() {
				case workflows.SignalHost:
					mark(3)
				case workflows.SignalBoard:
					mark(4)
				}
			case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
				if e.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() == activities.RunTurnName {
					mark(5)
				}
			case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
				mark(6)
			}
		}
		for i, d := range seen {
			if d > 0 {
				at[i] = append(at[i], d)
			}
		}
	}
	var parts []string
	for i, name := range names {
		if len(at[i]) == 0 {
			continue
		}
		slices.Sort(at[i])
		parts = append(parts, fmt.Sprintf("%s %.1fs (slowest %.1fs)", name, at[i].median().Seconds(), at[i][len(at[i])-1].Seconds()))
	}
	return strings.Join(parts, ", ")
}
