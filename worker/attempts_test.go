package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/nid-dev/nid/activities"
	"github.com/nid-dev/nid/internal/temporaltest"
)

// TestAStartingWorkerFailsOnlyTheCutAttemptsTheServerStillWaitsFor writes
// the records a killed worker would have left: one of an attempt the server
// still waits for, one of an attempt that has since ended (the server timed
// it out, or it completed), and one whose token the server refuses. Only
// the first is failed, and so run again at once; the ended one is dropped
// without a word, the refused one with a warning; no record is left.
func TestAStartingWorkerFailsOnlyTheCutAttemptsTheServerStillWaitsFor(t *testing.T) {
	t.Parallel()
	env := temporaltest.New(t)
	c := env.Client(t)
	const queue = "cut-attempts"
	tokens := make(chan []byte, 4)
	w := sdkworker.New(c, queue, sdkworker.Options{})
	w.RegisterActivityWithOptions(func(ctx context.Context) (int32, error) {
		info := activity.GetInfo(ctx)
		tokens <- info.TaskToken
		if info.Attempt == 1 {
			<-ctx.Done() // cut: this attempt never ends on its own
			return 0, ctx.Err()
		}
		return info.Attempt, nil
	}, activity.RegisterOptions{Name: "Cut"})
	w.RegisterActivityWithOptions(func(ctx context.Context) error {
		tokens <- activity.GetInfo(ctx).TaskToken
		return nil
	}, activity.RegisterOptions{Name: "Ends"})
	w.RegisterWorkflowWithOptions(func(ctx workflow.Context) (int32, error) {
		if err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute}), "Ends").Get(ctx, nil); err != nil {
			return 0, err
		}
		var attempt int32
		err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: time.Hour, // only failing the attempt can end it within the test
			RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Millisecond},
		}), "Cut").Get(ctx, &attempt)
		return attempt, err
	}, workflow.RegisterOptions{Name: "CutAttempts"})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)

	run, err := c.ExecuteWorkflow(t.Context(), client.StartWorkflowOptions{TaskQueue: queue}, "CutAttempts")
	require.NoError(t, err)
	ended, cut := <-tokens, <-tokens

	dir := t.TempDir()
	dead := exec.Command("true")
	require.NoError(t, dead.Run())
	for name, a := range map[string]activities.Attempt{
		"cut":     {Token: cut, Activity: "Cut", Workflow: run.GetID(), Number: 1},
		"ended":   {Token: ended, Activity: "Ends", Workflow: run.GetID(), Number: 1},
		"refused": {Token: []byte("not a task token"), Activity: "Cut", Workflow: run.GetID(), Number: 1},
	} {
		rec, err := json.Marshal(struct {
			activities.Attempt
			Owner int `json:"owner"`
		}{a, dead.Process.Pid})
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, name+".json"), rec, 0o600))
	}

	var log bytes.Buffer
	failCutAttempts(t.Context(), c, dir, slog.New(slog.NewTextHandler(&log, nil)))

	var attempt int32
	require.NoError(t, run.Get(t.Context(), &attempt))
	require.EqualValues(t, 2, attempt, "the cut attempt was failed, and the next one ran")
	var lines []string
	for l := range bytes.Lines(log.Bytes()) {
		lines = append(lines, string(l))
	}
	require.Len(t, lines, 2, "one warning for the refused token, one naming what runs again: %s", log.String())
	require.Contains(t, lines[0], "Could not fail an activity attempt")
	require.Contains(t, lines[1], "Failed at once what a worker that did not stop cleanly left unfinished")
	require.Contains(t, lines[1], "Cut of "+run.GetID()+" (attempt 1)")
	require.NotContains(t, log.String(), "Ends of", "an attempt that has ended is not said to run again")
	left, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, left, "every record is dealt with")
}
