package worker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"golang.org/x/sync/errgroup"

	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/internal/temporaltest"
	"github.com/nid-dev/nid/workflows"
)

// A thousand sessions starting at once ask the registry where they go while
// it continues as new; the server fails the workflow task that tried, and
// with it every placement that task had taken. Each is asked again, so
// none of them fails nid up's start. The beats that keep coming meanwhile
// are updates, which the server turns away to be sent again rather than
// refuse the continue-as-new (workflows.VersionBeatUpdate): no run has a
// workflow task failed for them.
func TestPlacingSurvivesTheRegistryContinuingAsNew(t *testing.T) {
	env := temporaltest.New(t)
	c := env.Client(t)
	// A registry that continues as new every few placements.
	_, err := c.SignalWithStartWorkflow(t.Context(), workflows.HostsID, workflows.SignalHeartbeat,
		workflows.HostBeat{Host: temporaltest.Host, MaxSessions: 8, Every: config.DefaultHeartbeat}, hostsStart(),
		workflows.HostsWorkflowName, workflows.HostsInput{State: &workflows.HostsState{HistoryLimit: 40}})
	require.NoError(t, err)
	first, err := c.DescribeWorkflowExecution(t.Context(), workflows.HostsID, "")
	require.NoError(t, err)
	startNode(t, env.Config(t, "  web:\n    sessions:\n      - {agent: sim, name: lead}\n"))

	runs := map[string]bool{first.GetWorkflowExecutionInfo().GetExecution().GetRunId(): true}
	// Sixteen placers and a stream of beats, as sessions starting on many
	// hosts make, until the registry has continued as new ten times.
	ctx, stop := context.WithCancel(t.Context())
	var work errgroup.Group
	work.Go(func() error {
		for ctx.Err() == nil {
			_ = Beat(ctx, c, workflows.HostBeat{Host: "other", MaxSessions: 1, Every: time.Minute})
		}
		return nil
	})
	for p := range 16 {
		work.Go(func() error {
			for n := 0; ctx.Err() == nil; n++ {
				host, err := Place(ctx, c, fmt.Sprintf("web/s%d-%d", p, n), temporaltest.Host)
				switch {
				case ctx.Err() != nil:
				case err != nil:
					return err
				case host != temporaltest.Host:
					return fmt.Errorf("placed on %q", host)
				}
			}
			return nil
		})
	}
	deadline := time.Now().Add(2 * time.Minute)
	for len(runs) <= 10 && time.Now().Before(deadline) {
		now, err := c.DescribeWorkflowExecution(t.Context(), workflows.HostsID, "")
		require.NoError(t, err)
		runs[now.GetWorkflowExecutionInfo().GetExecution().GetRunId()] = true
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	require.NoError(t, work.Wait())
	require.Greater(t, len(runs), 10, "the registry continued as new only %d times", len(runs)-1)
	for run := range runs {
		require.Zero(t, refusedContinues(t, c, run), "run %s had its continue-as-new refused", run)
	}
}

// refusedContinues counts the workflow tasks of the registry's run that the
// server failed because events came while they ran (a continue-as-new
// refused).
func refusedContinues(t *testing.T, c client.Client, run string) int {
	refused := 0
	events := c.GetWorkflowHistory(t.Context(), workflows.HostsID, run, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for events.HasNext() {
		e, err := events.Next()
		require.NoError(t, err)
		if e.GetWorkflowTaskFailedEventAttributes().GetCause() == enumspb.WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_COMMAND {
			refused++
		}
	}
	return refused
}

// A registry that does not answer a beat's update in time (here no worker
// takes its tasks; in a fleet, one behind on placements) is sent the beat
// as a signal too, which the server records at once: a busy registry
// does not count its hosts down.
func TestABeatTheRegistryDoesNotAnswerIsSignalled(t *testing.T) {
	env := temporaltest.New(t)
	c := env.Client(t)
	b := workflows.HostBeat{Host: "a", MaxSessions: 1, Every: config.DefaultHeartbeat}
	require.NoError(t, Beat(t.Context(), c, b))
	require.Equal(t, []string{workflows.SignalHeartbeat}, registrySignals(t, c))
}

// A registry whose run is older than the beat's update (one that knows
// only the signal) is sent the signal.
func TestABeatToARegistryOlderThanItsUpdateIsSignalled(t *testing.T) {
	env := temporaltest.New(t)
	c := env.Client(t)
	w := sdkworker.New(c, workflows.TaskQueue, sdkworker.Options{})
	w.RegisterWorkflowWithOptions(func(ctx workflow.Context, _ workflows.HostsInput) error {
		var b workflows.HostBeat
		workflow.GetSignalChannel(ctx, workflows.SignalHeartbeat).Receive(ctx, &b)
		return nil
	}, workflow.RegisterOptions{Name: workflows.HostsWorkflowName})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)

	b := workflows.HostBeat{Host: "a", MaxSessions: 1, Every: config.DefaultHeartbeat}
	require.NoError(t, Beat(t.Context(), c, b))
	run := c.GetWorkflow(t.Context(), workflows.HostsID, "")
	require.NoError(t, run.Get(t.Context(), nil), "the registry took the beat's signal")
	require.Equal(t, []string{workflows.SignalHeartbeat}, registrySignals(t, c))
}

// registrySignals names the signals the registry's current run was sent.
func registrySignals(t *testing.T, c client.Client) []string {
	var names []string
	events := c.GetWorkflowHistory(t.Context(), workflows.HostsID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for events.HasNext() {
		e, err := events.Next()
		require.NoError(t, err)
		if a := e.GetWorkflowExecutionSignaledEventAttributes(); a != nil {
			names = append(names, a.GetSignalName())
		}
	}
	return names
}

// The hosts of a fleet and the sessions of a group each have an update in
// flight to one workflow at once. nid's server takes a thousand (the
// embedded server, and deploy/dynamicconfig.yaml for a cluster): at the
// server's default of 10 the rest were refused and their clients backed
// off for seconds, and the registry placing 200 sessions a second did 10.
func TestAWorkflowTakesAHundredUpdatesInFlight(t *testing.T) {
	env := temporaltest.New(t)
	c := env.Client(t)
	const n = 100
	w := sdkworker.New(c, "in-flight", sdkworker.Options{})
	w.RegisterWorkflowWithOptions(func(ctx workflow.Context) error {
		waiting := 0
		err := workflow.SetUpdateHandler(ctx, "wait", func(ctx workflow.Context) error {
			waiting++
			return workflow.Await(ctx, func() bool { return waiting >= n })
		})
		if err != nil {
			return err
		}
		return workflow.Await(ctx, func() bool { return waiting >= n && workflow.AllHandlersFinished(ctx) })
	}, workflow.RegisterOptions{Name: "in-flight"})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	run, err := c.ExecuteWorkflow(t.Context(), client.StartWorkflowOptions{ID: "in-flight", TaskQueue: "in-flight"}, "in-flight")
	require.NoError(t, err)

	// Every update waits for all of them: each one the server refuses
	// waits, trying again, until this deadline.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var updates errgroup.Group
	for range n {
		updates.Go(func() error {
			h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
				WorkflowID: "in-flight", UpdateName: "wait", WaitForStage: client.WorkflowUpdateStageCompleted,
			})
			if err != nil {
				return err
			}
			return h.Get(ctx, nil)
		})
	}
	require.NoError(t, updates.Wait(), "a hundred updates in flight at once")
	require.NoError(t, run.Get(ctx, nil))
}
