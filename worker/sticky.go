package worker

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"golang.org/x/sync/errgroup"

	"github.com/nid-dev/nid/nidclient"
)

// resetStickyQueues sends the next task of every workflow running on
// queues to that queue rather than to the worker that ran it last.
//
// A server that outlives its worker (nid server, or a cluster), or an
// embedded one restarted after a kill -9 (it keeps which worker ran each
// workflow last in its database), sends a workflow's queries to that
// worker's own queue until the worker has been silent for a while: queries
// time out for seconds though a new worker is ready. Resetting costs the workflows cached on
// another live worker one replay each, which is cheap next to a session
// that does not answer.
func resetStickyQueues(ctx context.Context, c client.Client, namespace string, logger *slog.Logger, queues ...string) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	start := time.Now()
	var execs []*workflowpb.WorkflowExecutionInfo
	for _, queue := range queues {
		on, err := nidclient.RunningOnTaskQueue(ctx, c, queue)
		if err != nil {
			// The other queues' workflows are taken over all the same.
			logger.Warn("Could not list workflows to take them over", "queue", queue, "error", err)
			continue
		}
		execs = append(execs, on...)
	}
	// One request each: a few at once, so that a fleet of thousands is
	// taken over in seconds, not one round trip after another.
	var g errgroup.Group
	g.SetLimit(stickyResets)
	var reset atomic.Int64
	for _, e := range execs {
		if ctx.Err() != nil {
			break
		}
		g.Go(func() error {
			_, err := c.WorkflowService().ResetStickyTaskQueue(ctx, &workflowservice.ResetStickyTaskQueueRequest{
				Namespace: namespace,
				Execution: e.GetExecution(),
			})
			switch {
			case err == nil || nidclient.IsNotFound(err):
				reset.Add(1)
			case ctx.Err() == nil:
				logger.Warn("Could not take a workflow over from the worker that ran it", "workflowID", e.GetExecution().GetWorkflowId(), "error", err)
			}
			return nil
		})
	}
	_ = g.Wait()
	if ctx.Err() != nil && int(reset.Load()) < len(execs) {
		logger.Warn("Ran out of time taking workflows over from the worker that ran them: the rest answer queries once the server gives up on it",
			"taken", reset.Load(), "running", len(execs))
		return
	}
	logger.Debug("Took the running workflows over", "workflows", len(execs), "took", time.Since(start))
}

// stickyResets is how many workflows resetStickyQueues takes over at once.
const stickyResets = 8
