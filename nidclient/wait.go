package nidclient

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
)

// A workflow whose worker died a moment ago still has its workflow tasks,
// queries included, sent to that worker for a few seconds (its sticky
// queue had a poller recently); then Temporal hands them to another
// worker. A query asked in that window would time out, though the answer
// comes a few seconds later: queries wait it out, and say so.

// queryAttempts is how many QueryTimeout-long tries a query gets: the
// first goes to a worker that may have just died, the next to whoever
// took its workflows over.
const queryAttempts = 3

// noticeKey carries the function that tells the user a command waits.
type noticeKey struct{}

// WithWaitNotice returns ctx carrying notice, which the operations call
// with a sentence when they wait for a workflow whose worker may have just
// stopped (the command line prints it on stderr).
func WithWaitNotice(ctx context.Context, notice func(string)) context.Context {
	return context.WithValue(ctx, noticeKey{}, notice)
}

// waitNotice says text through the function ctx carries, if any.
func waitNotice(ctx context.Context, text string) {
	if notice, ok := ctx.Value(noticeKey{}).(func(string)); ok && notice != nil {
		notice(text)
	}
}

// query asks workflow id's query, trying again while an attempt only ran
// out of time: the worker the query went to may have just died, and
// another takes its workflows over within seconds.
func query(ctx context.Context, c client.Client, id, name string, args ...any) (converter.EncodedValue, error) {
	for attempt := 1; ; attempt++ {
		qctx, cancel := context.WithTimeout(ctx, QueryTimeout)
		val, err := c.QueryWorkflow(qctx, id, "", name, args...)
		cancel()
		if err == nil || !timedOut(err) || ctx.Err() != nil || attempt == queryAttempts {
			return val, err
		}
		if !heldByAWorker(ctx, c, id) {
			return val, err
		}
		waitNotice(ctx, fmt.Sprintf("waiting for %s to answer: the worker running it may have just stopped, and Temporal hands its workflow to another within seconds", id))
	}
}

// heldByAWorker says the workflow's query waits behind a workflow task a
// worker took and has not finished (one that died holding it, whose task
// Temporal gives to another worker once it times out), while some worker
// still polls nid's queue: then waiting brings the answer. A workflow with
// no task taken was simply not asked by any worker: nobody runs it, and
// waiting would not help.
func heldByAWorker(ctx context.Context, c client.Client, id string) bool {
	if unserved, _, err := Unserved(ctx, c, time.Now()); err != nil || unserved {
		return false
	}
	dctx, cancel := context.WithTimeout(ctx, QueryTimeout)
	defer cancel()
	d, err := c.DescribeWorkflowExecution(dctx, id, "")
	if err != nil {
		return false
	}
	task := d.GetPendingWorkflowTask()
	return task != nil && task.GetState() == enumspb.PENDING_WORKFLOW_TASK_STATE_STARTED
}

// timedOut says a call ran out of time rather than being refused.
func timedOut(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	_, deadline := errors.AsType[*serviceerror.DeadlineExceeded](err)
	return deadline
}
