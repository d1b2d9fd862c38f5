package workflows

import (
	"errors"
	"time"

	"go.temporal.io/sdk/workflow"
)

// Every long-running workflow here (Session, Group) reads its signals the
// same way: a coroutine beside the main loop folds each one into the state as
// it arrives, and continue-as-new drains what is left before the state
// travels on. signalSelector builds a fresh selector over a workflow's
// signal channels; both the coroutine and the drain use it, so a signal has
// one handler whichever of them reads it.
type signalSelector func(ctx workflow.Context) workflow.Selector

// onSignal makes sel decode the named signal's payload and hand it to fn.
func onSignal[T any](ctx workflow.Context, sel workflow.Selector, name string, fn func(workflow.Context, T)) {
	sel.AddReceive(workflow.GetSignalChannel(ctx, name), func(c workflow.ReceiveChannel, _ bool) {
		var v T
		c.Receive(ctx, &v)
		fn(ctx, v)
	})
}

// listenSignals starts the coroutine that folds signals into the state. A
// signal that arrives mid-turn is seen at once (and shows in queries) but
// acted on by the main loop at its next boundary.
//
// It waits for a pending signal before selecting: a selector blocked in
// Select takes a signal off its channel the moment it arrives, and if the
// main loop continues as new before this coroutine runs again, that signal
// would be lost. Left on the channel, continueAsNew drains it.
//
// after, when not nil, runs after each signal is folded.
func listenSignals(ctx workflow.Context, selector signalSelector, after func(workflow.Context)) {
	workflow.Go(ctx, func(ctx workflow.Context) {
		sel := selector(ctx)
		for {
			if err := workflow.Await(ctx, sel.HasPending); err != nil {
				return
			}
			sel.Select(ctx)
			if after != nil {
				after(ctx)
			}
		}
	})
}

// continueAsNew ends the run once every update and signal handler has
// finished, after folding the signals that arrived but were not yet read
// into the state, and starts the next run of workflowType with the input
// that state makes (built after the drain, so nothing is dropped).
//
// Since VersionSettledContinueAsNew it waits for the handlers again after
// draining, until neither a signal nor a handler is left: a signal handler
// can block (a push awaits its delivery), and an update accepted meanwhile
// would otherwise be cut off by the new run, failing at the client after
// its change was made.
func continueAsNew(ctx workflow.Context, l ladder, selector signalSelector, workflowType string, input func() any) error {
	return continueAsNewWhen(ctx, l, nil, selector, nil, workflowType, input)
}

// continueOn is continueAsNew onto queue: the next run's workflow tasks go
// there rather than to this run's queue.
func continueOn(ctx workflow.Context, queue string, l ladder, selector signalSelector, workflowType string, input func() any) error {
	err := continueAsNew(ctx, l, selector, workflowType, input)
	if can, ok := errors.AsType[*workflow.ContinueAsNewError](err); ok {
		can.TaskQueueName = queue
	}
	return err
}

// continueAsNewWhen is continueAsNew that also waits, with the handlers,
// until settled (when not nil) says what the run still has under way is
// done, and, with live (when not nil), for a task its cached instance
// takes (VersionContinueFromCache, below).
func continueAsNewWhen(ctx workflow.Context, l ladder, live *liveness, selector signalSelector, settled func() bool, workflowType string, input func() any) error {
	sel := selector(ctx)
	for waits := 0; ; waits++ {
		for {
			done := func() bool { return workflow.AllHandlersFinished(ctx) && (settled == nil || settled()) }
			wake := done
			if l.has(VersionRegistryAtScale) {
				// Signals are taken while the handlers finish: a handler
				// may wait for them (the registry's placeAll waits for the
				// beats sent before it), and waiting for it first left
				// both waiting for good.
				wake = func() bool { return sel.HasPending() || done() }
			}
			if err := workflow.Await(ctx, wake); err != nil {
				return err
			}
			if !sel.HasPending() {
				break
			}
			for sel.HasPending() {
				sel.Select(ctx)
			}
			if !l.has(VersionSettledContinueAsNew) {
				break
			}
		}
		if live == nil || waits == maxContinueWaits {
			break
		}
		var rebuilt bool
		if err := workflow.SideEffect(ctx, func(ctx workflow.Context) any {
			return live.rebuiltNow(ctx) && workflow.GetInfo(ctx).GetCurrentHistorySize() >= continueWaitBytes
		}).Get(&rebuilt); err != nil {
			return err
		}
		if !rebuilt {
			break
		}
		if err := workflow.Sleep(ctx, continueWait); err != nil {
			return err
		}
	}
	return workflow.NewContinueAsNewError(ctx, workflowType, input())
}

// A continue-as-new the server refuses, because signals arrived while its
// workflow task ran (UNHANDLED_COMMAND; an update sent meanwhile does not
// refuse it, but is turned away and sent again by its client), costs a
// replay of the whole run: the SDK drops a workflow from its cache once it
// has sent the command that ends it. The next attempt then ends a workflow
// task that lasted as long as that replay, and a group of a thousand
// sessions, sent about seventy signals a second, is all but sure to be sent
// more meanwhile: attempt after attempt was refused, each replaying, and
// the group answered nothing for tens of seconds.
//
// Since VersionContinueFromCache a group's run of continueWaitBytes or more
// rebuilt by replay in the very task that would continue it as new records
// that (a side effect, so replay takes the same path) and waits
// continueWait for its next task instead, which the cached workflow takes
// in milliseconds; at most maxContinueWaits times in a row, so that a
// worker that keeps no cache still continues. A smaller run replays in
// milliseconds too, and waiting would only let its history grow.
const (
	continueWait      = time.Millisecond
	continueWaitBytes = 256 << 10
	maxContinueWaits  = 10
)

// liveness remembers the first workflow task this instance of a run took
// live rather than by replaying history: an instance that took none
// before the current task was rebuilt in it.
type liveness struct {
	observed bool
	since    int
}

// watchLiveness starts the coroutine that notes the first live task; its
// condition is evaluated at every task, replayed or live, and makes no
// command.
func watchLiveness(ctx workflow.Context) *liveness {
	l := &liveness{}
	workflow.Go(ctx, func(ctx workflow.Context) {
		_ = workflow.Await(ctx, func() bool {
			if !l.observed && !workflow.IsReplaying(ctx) {
				l.observed, l.since = true, workflow.GetInfo(ctx).GetCurrentHistoryLength()
			}
			return false
		})
	})
	return l
}

// rebuiltNow says no task before the current one ran live in this
// instance. Read only inside a side effect: it depends on the worker's
// cache, not on the history.
func (l *liveness) rebuiltNow(ctx workflow.Context) bool {
	return !l.observed || l.since >= workflow.GetInfo(ctx).GetCurrentHistoryLength()
}

// awaitWithin waits until cond holds or d has passed, as
// workflow.AwaitWithTimeout does, and says whether cond held. Since
// VersionCancelledWaits it cancels its timer when cond ends the wait
// first: AwaitWithTimeout leaves it running, to fire into a workflow task
// of its own.
func awaitWithin(ctx workflow.Context, l ladder, d time.Duration, cond func() bool) (bool, error) {
	if !l.has(VersionCancelledWaits) {
		return workflow.AwaitWithTimeout(ctx, d, cond)
	}
	timerCtx, cancel := workflow.WithCancel(ctx)
	defer cancel()
	timer := workflow.NewTimer(timerCtx, d)
	err := workflow.Await(ctx, func() bool { return cond() || timer.IsReady() })
	return cond(), err
}

// historyFull says a workflow should continue as new: the server suggests
// it, or its history passed limit (defaultHistoryLimit when 0).
func historyFull(ctx workflow.Context, limit int) bool {
	info := workflow.GetInfo(ctx)
	if limit <= 0 {
		limit = defaultHistoryLimit
	}
	return info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() >= limit
}
