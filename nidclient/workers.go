package nidclient

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/nid-dev/nid/workflows"
)

// ServedWithin is how recently a worker must have asked for the session
// workflows' tasks to be taken for running: an idle worker's long poll
// ends within a minute and it polls again at once, and the server keeps
// the time of each worker's last poll for five minutes after it stops.
const ServedWithin = 2 * time.Minute

// Unserved says whether no worker has asked for the session workflows'
// tasks within ServedWithin of now. Then nothing runs the sessions, and
// what their listing says is what it was when the last worker stopped:
// since is that worker's last poll, zero when the server no longer knows
// of any.
func Unserved(ctx context.Context, c client.Client, now time.Time) (unserved bool, since time.Time, err error) {
	resp, err := c.DescribeTaskQueue(ctx, workflows.TaskQueue, enumspb.TASK_QUEUE_TYPE_WORKFLOW)
	if err != nil {
		return false, time.Time{}, fmt.Errorf("describing task queue %s: %w", workflows.TaskQueue, err)
	}
	for _, p := range resp.GetPollers() {
		if at := p.GetLastAccessTime(); at != nil && at.AsTime().After(since) {
			since = at.AsTime()
		}
	}
	return now.Sub(since) > ServedWithin, since, nil
}

// NoWorkerText says that nothing runs nid's workflows, and since when (see
// Unserved).
func NoWorkerText(since, now time.Time) string {
	if since.IsZero() {
		return "no worker is running (Temporal knows of none asking for nid's work)"
	}
	return fmt.Sprintf("no worker is running (the last one asked Temporal for nid's work at %s, %s ago)",
		since.Local().Format(time.TimeOnly), now.Sub(since).Round(time.Second))
}

// unanswered is the error for a workflow that did not answer a query:
// with no worker to run it, it says so rather than only that time ran out.
// A worker that stopped a moment ago still counts as serving for
// ServedWithin, but a query that went unanswered while no worker asked
// for work at all (none since before it was sent) shows it gone: a live
// worker keeps a poll waiting, which would have taken the query and been
// renewed. Only Temporal's own failure is worded by gRPC.
func unanswered(ctx context.Context, c client.Client, who string, err error) error {
	e := &UnavailableError{Who: who, Err: err}
	now := time.Now()
	unserved, since, uerr := Unserved(ctx, c, now)
	if uerr != nil {
		return e // Temporal itself does not answer: its words say why
	}
	_, refused := errors.AsType[*serviceerror.QueryFailed](err)
	asked := now.Add(-QueryTimeout)
	if q, ok := errors.AsType[*queryError](err); ok {
		asked = q.asked
	}
	e.Served = true
	if unserved || (!refused && since.Before(asked)) {
		e.NoWorker = NoWorkerText(since, now)
	} else {
		e.LastPoll = max(now.Sub(since), 0).Round(time.Second)
	}
	return e
}
