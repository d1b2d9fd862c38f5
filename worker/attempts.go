package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"

	"github.com/nid-dev/nid/activities"
)

// attemptRecorder records every activity attempt this worker runs under
// dir while it runs (see activities.CutAttempts).
type attemptRecorder struct {
	interceptor.WorkerInterceptorBase
	dir    string
	logger *slog.Logger
}

func (r *attemptRecorder) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	return &recordedActivity{ActivityInboundInterceptorBase: interceptor.ActivityInboundInterceptorBase{Next: next}, r: r}
}

type recordedActivity struct {
	interceptor.ActivityInboundInterceptorBase
	r *attemptRecorder
}

// ExecuteActivity runs the attempt with its record in place. Without a
// record it still runs: a crash would then only leave it to the server's
// timeout, as before records.
func (a *recordedActivity) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	info := activity.GetInfo(ctx)
	done, err := activities.RecordAttempt(a.r.dir, activities.Attempt{
		Token: info.TaskToken, Activity: info.ActivityType.Name, Workflow: info.WorkflowExecution.ID, Number: info.Attempt,
	})
	if err != nil {
		a.r.logger.Warn("Could not record an activity attempt; if this worker is killed during it, it runs again only after its timeout",
			"activity", info.ActivityType.Name, "workflow", info.WorkflowExecution.ID, "error", err)
		return a.Next.ExecuteActivity(ctx, in)
	}
	defer done()
	return a.Next.ExecuteActivity(ctx, in)
}

// failCutAttempts fails the attempts that a worker on this state directory
// left unfinished when it died, so that they run again now rather than
// when the server notices (a session's turn is tried again by the session
// itself, which runs nothing once it is stopped). The token fails that attempt only: one the
// server has meanwhile timed out, or that completed, is gone and left be.
func failCutAttempts(ctx context.Context, c client.Client, dir string, logger *slog.Logger) {
	cut, err := activities.CutAttempts(dir)
	if err != nil {
		logger.Warn("Could not check every recorded activity attempt", "dir", dir, "error", err)
	}
	var failed []string
	for _, a := range cut {
		reason := temporal.NewApplicationError(
			fmt.Sprintf("the worker running this attempt (pid %d) stopped before it ended", a.Owner),
			activities.ErrWorkerStopped)
		err := c.CompleteActivity(ctx, a.Token, nil, reason)
		_, gone := errors.AsType[*serviceerror.NotFound](err)
		switch {
		case err == nil:
			failed = append(failed, fmt.Sprintf("%s of %s (attempt %d)", a.Activity, a.Workflow, a.Number))
		case ctx.Err() != nil:
			return // the records stay for the next start
		case !gone:
			logger.Warn("Could not fail an activity attempt a stopped worker left; it runs again after its timeout",
				"activity", a.Activity, "workflow", a.Workflow, "error", err)
		}
		if err := a.Forget(); err != nil {
			logger.Warn("Could not remove an activity attempt's record", "dir", dir, "error", err)
		}
	}
	if len(failed) > 0 {
		logger.Warn("Failed at once what a worker that did not stop cleanly left unfinished: each session runs it again, unless it was stopped", "attempts", strings.Join(failed, ", "))
	}
}
