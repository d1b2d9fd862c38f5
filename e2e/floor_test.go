package e2e

import (
	"context"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/nid-dev/nid/worker"
)

// The floor: the smallest Temporal program that does what a nid turn does.
// A workflow waits for a signal carrying a prompt, runs one activity with
// it on a task queue and keeps the activity's answer; a prompt already
// queued is the next turn at once, as a message queued for a session is.
// BenchmarkTurnOverhead runs it beside nid's turns on nid up's own server
// and measures its gap between turns as it measures nid's. It is a test's
// program, not nid's: nothing of the product runs it.

// Names the floor registers and signals under.
const (
	floorWorkflowName = "floor.Turns"
	floorTurnName     = "floor.Turn"
	floorSignal       = "prompt"
	floorQueryTurns   = "turns"
)

// floorWorkflow takes the prompts signalled to it one after another, each
// a turn: one activity on activityQueue, its answer kept in the state.
func floorWorkflow(ctx workflow.Context, activityQueue string) error {
	turns, answer := 0, ""
	if err := workflow.SetQueryHandler(ctx, floorQueryTurns, func() (int, error) { return turns, nil }); err != nil {
		return err
	}
	prompts := workflow.GetSignalChannel(ctx, floorSignal)
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{TaskQueue: activityQueue, StartToCloseTimeout: time.Minute})
	for {
		var prompt string
		prompts.Receive(ctx, &prompt)
		if err := workflow.ExecuteActivity(actx, floorTurnName, prompt).Get(ctx, &answer); err != nil {
			return err
		}
		turns++
	}
}

// floorTurn is the floor's turn: it answers at once, as the sim agent with
// no turn delay does.
func floorTurn(_ context.Context, prompt string) (string, error) {
	return "done: " + prompt, nil
}

// floor is one layout of the floor program, running in the benchmark's
// process against the server nid up runs.
type floor struct {
	// name says which layout it is, in the benchmark's output.
	name string
	// workflowID is its one workflow.
	workflowID string
}

// startFloor starts the floor in one of two layouts, with the worker
// options nid's workers take (worker.HostWorkerOptions,
// worker.WorkflowWorkerOptions) and dialled as nid dials (c):
//
//   - oneQueue: one worker polls one queue for the workflow and its
//     activity, so the SDK asks the server for the activity at once when
//     the workflow task schedules it (eager dispatch, the SDK's default):
//     the smallest program, the floor nid's gap is judged against, and
//     nid's layout, where a session's workflow runs on its host's queue;
//   - otherwise the layout nid had before: the workflow on one queue and
//     the activity on a host's queue (name@host), each polled by a worker
//     of its own, as sessions started before VersionHostQueue still run
//     until they continue as new.
func startFloor(b *testing.B, c client.Client, oneQueue bool) *floor {
	b.Helper()
	var workers []sdkworker.Worker
	f := &floor{name: "the floor (one queue, eager)", workflowID: "floor/one-queue"}
	wfQueue, actQueue := "floor", "floor"
	if oneQueue {
		w := sdkworker.New(c, wfQueue, worker.HostWorkerOptions())
		w.RegisterWorkflowWithOptions(floorWorkflow, workflow.RegisterOptions{Name: floorWorkflowName})
		w.RegisterActivityWithOptions(floorTurn, activity.RegisterOptions{Name: floorTurnName})
		workers = append(workers, w)
	} else {
		f.name, f.workflowID = "the floor on two queues (nid's layout before)", "floor/two-queues"
		wfQueue, actQueue = "floor-shared", "floor-shared@bench"
		wfw := sdkworker.New(c, wfQueue, worker.WorkflowWorkerOptions())
		wfw.RegisterWorkflowWithOptions(floorWorkflow, workflow.RegisterOptions{Name: floorWorkflowName})
		acts := worker.HostWorkerOptions()
		acts.WorkflowTaskPollerBehavior = nil
		actw := sdkworker.New(c, actQueue, acts)
		actw.RegisterActivityWithOptions(floorTurn, activity.RegisterOptions{Name: floorTurnName})
		workers = append(workers, wfw, actw)
	}
	for _, w := range workers {
		if err := w.Start(); err != nil {
			b.Fatalf("%s: worker: %v", f.name, err)
		}
		b.Cleanup(w.Stop)
	}
	_, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: f.workflowID, TaskQueue: wfQueue}, floorWorkflowName, actQueue)
	if err != nil {
		b.Fatalf("%s: start: %v", f.name, err)
	}
	return f
}

// turns is how many turns the floor has taken.
func (f *floor) turns(b *testing.B, c client.Client) int {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, err := c.QueryWorkflow(ctx, f.workflowID, "", floorQueryTurns)
	if err != nil {
		b.Fatalf("%s: %v", f.name, err)
	}
	var n int
	if err := v.Get(&n); err != nil {
		b.Fatal(err)
	}
	return n
}
