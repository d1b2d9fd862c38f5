package nidclient_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/nid-dev/nid/internal/temporaltest"
	"github.com/nid-dev/nid/nidclient"
	"github.com/nid-dev/nid/workflows"
)

// A session whose workflow task is held where no answer comes from (as on
// a worker that died a moment ago) answers a query only once that task
// times out and another worker takes it: the query waits for it, and says
// it waits, instead of failing with "context deadline exceeded".
func TestAQueryWaitsOutAWorkflowTaskHeldByADeadWorker(t *testing.T) {
	env := temporaltest.New(t)
	c := env.Client(t)
	var held atomic.Bool
	w := sdkworker.New(c, workflows.TaskQueue, sdkworker.Options{DeadlockDetectionTimeout: time.Minute})
	w.RegisterWorkflowWithOptions(func(ctx workflow.Context) error {
		if err := workflow.SetQueryHandler(ctx, workflows.QuerySession, func() (workflows.SessionView, error) {
			return workflows.SessionView{Group: "web", Name: "lead", Status: workflows.StatusIdle}, nil
		}); err != nil {
			return err
		}
		if held.CompareAndSwap(false, true) {
			time.Sleep(12 * time.Second) // past the workflow task's timeout: it is as lost
		}
		return workflow.Await(ctx, func() bool { return false })
	}, workflow.RegisterOptions{Name: "held"})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	_, err := c.ExecuteWorkflow(t.Context(), client.StartWorkflowOptions{ID: workflows.SessionID("web", "lead"), TaskQueue: workflows.TaskQueue}, "held")
	require.NoError(t, err)
	require.Eventually(t, held.Load, 10*time.Second, 50*time.Millisecond)

	var mu sync.Mutex
	var notices []string
	ctx := nidclient.WithWaitNotice(context.Background(), func(s string) {
		mu.Lock()
		defer mu.Unlock()
		notices = append(notices, s)
	})
	v, err := nidclient.QuerySession(ctx, c, "web", "lead")
	require.NoError(t, err)
	require.Equal(t, workflows.StatusIdle, v.Status)
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, notices, "the command said it waits")
	require.Contains(t, notices[0], "waiting for nid/web/lead to answer")
}
