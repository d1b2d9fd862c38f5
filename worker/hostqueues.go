package worker

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/nid-dev/nid/nidclient"
	"github.com/nid-dev/nid/workflows"
)

// hostQueues keeps this node polling every other host's queue for
// workflow tasks.
//
// A session's workflow runs on its host's queue, nid@<host> (see
// startSession), where the host's own worker takes both its workflow tasks
// and its activities: the server hands a turn's activity back with the
// answer to the workflow task that scheduled it (eager dispatch), where
// with the workflow on the shared queue the activity waited for one of the
// host's polls, 1.5-2 ms of every turn (docs/performance.md). But a host
// that is down would then take its sessions' workflow tasks with it: no
// query answered (nid show, the dashboard, nid watch) and no signal taken,
// nid move off the dead host included. So every node also polls every
// host's queue the registry knows for workflow tasks alone: its worker
// there has no activity worker at all (LocalActivityWorkerOnly), so it
// neither polls for the host's activities nor asks for them eagerly, and
// they wait for their host. A dead host's sessions answer as soon as the
// server gives up on its sticky queue, as they did when every workflow
// ran on the shared queue. Its few polls (hostQueuePollers) leave
// most of a live host's sessions to the host's own worker, which polls
// with many.
//
// The registry never forgets a host, so a queue, once polled, is polled
// until the node stops: a session moved off a host keeps running its
// workflow on that host's queue until it continues as new onto its new
// host's (VersionHostQueue).
type hostQueues struct {
	c      client.Client
	opts   sdkworker.Options
	own    string // this node's host, whose queue its own worker polls; "" for none
	logger *slog.Logger

	mu      sync.Mutex
	workers map[string]sdkworker.Worker
	stopped bool
}

// hostQueuePollers is how many polls a node keeps on another host's queue:
// one for the queue and one for its own sticky queue.
const hostQueuePollers = 2

// hostQueuesEvery is how often a node asks the registry for hosts it does
// not poll yet. A new host polls its own queue before any session is
// placed on it; the others need it only once it is down, which the
// registry takes three missed beats (30 s by default) to say.
const hostQueuesEvery = 10 * time.Second

func newHostQueues(c client.Client, opts sdkworker.Options, own string, logger *slog.Logger) *hostQueues {
	opts.WorkflowTaskPollerBehavior = sdkworker.NewPollerBehaviorSimpleMaximum(sdkworker.PollerBehaviorSimpleMaximumOptions{MaximumNumberOfPollers: hostQueuePollers})
	// Else the SDK polls the queue for activities too, with none
	// registered, and fails the host's turns it takes: "unable to find
	// activityType".
	opts.LocalActivityWorkerOnly = true
	return &hostQueues{c: c, opts: opts, own: own, logger: logger, workers: map[string]sdkworker.Worker{}}
}

// sync starts polling the queue of every host the registry knows that this
// node does not poll yet, and returns the queues it started on.
func (q *hostQueues) sync(ctx context.Context) ([]string, error) {
	v, err := nidclient.Hosts(ctx, q.c)
	if err != nil {
		return nil, err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	var started []string
	for _, h := range v.Hosts {
		queue := workflows.HostQueue(h.Name)
		if h.Name == q.own || q.workers[queue] != nil || q.stopped {
			continue
		}
		w := sdkworker.New(q.c, queue, q.opts)
		RegisterWorkflows(w)
		if err := w.Start(); err != nil {
			return started, fmt.Errorf("polling %s: %w", queue, err)
		}
		q.workers[queue] = w
		started = append(started, queue)
	}
	return started, nil
}

// run syncs every hostQueuesEvery until ctx ends.
func (q *hostQueues) run(ctx context.Context) {
	every(ctx, hostQueuesEvery, func() {
		started, err := q.sync(ctx)
		if err != nil && ctx.Err() == nil {
			q.logger.Warn("Could not ask the hosts registry for hosts to poll: a session of a host that is down answers once this node polls its queue", "error", err)
		}
		if len(started) > 0 {
			q.logger.Info("Polling new hosts' queues for their sessions' workflow tasks", "queues", started)
		}
	})
}

// queues are the host queues this node polls for other hosts, sorted.
func (q *hostQueues) queues() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]string, 0, len(q.workers))
	for queue := range q.workers {
		out = append(out, queue)
	}
	slices.Sort(out)
	return out
}

// stop stops every worker it started; sync starts no more.
func (q *hostQueues) stop() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.stopped = true
	for _, w := range q.workers {
		w.Stop()
	}
}
