package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/nid-dev/nid/nidclient"
	"github.com/nid-dev/nid/workflows"
)

// hostQueues keeps this node polling, for workflow tasks, the queues of
// the hosts that are down.
//
// A session's workflow runs on its host's queue, nid@<host> (see
// startSession), where the host's own worker takes both its workflow tasks
// and its activities: the server hands a turn's activity back with the
// answer to the workflow task that scheduled it (eager dispatch), where
// with the workflow on the shared queue the activity waited for one of the
// host's polls, 1.5-2 ms of every turn (docs/performance.md). But a host
// that is down would then take its sessions' workflow tasks with it: no
// query answered (nid show, the dashboard, nid watch) and no signal taken,
// nid move off the dead host included. So while the registry says a host
// is down, every other node polls its queue for workflow tasks alone: its
// worker there has no activity worker at all (LocalActivityWorkerOnly), so
// it neither polls for the host's activities nor asks for them eagerly,
// and they wait for their host.
//
// Only while it is down: a worker that runs one workflow task of a session
// has the session's next ones sent to it (sticky execution), so a node
// polling a live host's queue would take sessions from their host and keep
// them, without eager dispatch and in its own cache. The price is the time
// between a host's death and the registry saying so (three missed beats,
// 30 s by default) and this node's next look (hostQueuesEvery), in which
// the host's sessions answer no query. Once the host is back the node stops
// polling its queue, and the server sends the sessions' tasks to the queue,
// where their host takes them.
type hostQueues struct {
	c         client.Client
	opts      sdkworker.Options
	own       string // this node's host, whose queue its own worker polls; "" for none
	namespace string
	logger    *slog.Logger

	mu      sync.Mutex
	workers map[string]sdkworker.Worker
	stopped bool
}

// hostQueuePollers is how many polls a node keeps on another host's queue:
// one for the queue and one for its own sticky queue.
const hostQueuePollers = 2

// hostQueuesEvery is how often a node asks the registry which hosts are
// down.
const hostQueuesEvery = 10 * time.Second

func newHostQueues(c client.Client, opts sdkworker.Options, own, namespace string, logger *slog.Logger) *hostQueues {
	opts.WorkflowTaskPollerBehavior = sdkworker.NewPollerBehaviorSimpleMaximum(sdkworker.PollerBehaviorSimpleMaximumOptions{MaximumNumberOfPollers: hostQueuePollers})
	// Else the SDK polls the queue for activities too, with none
	// registered, and fails the host's turns it takes: "unable to find
	// activityType".
	opts.LocalActivityWorkerOnly = true
	return &hostQueues{c: c, opts: opts, own: own, namespace: namespace, logger: logger, workers: map[string]sdkworker.Worker{}}
}

// update polls the queues of the hosts the registry says are down and no
// longer those of the hosts that are back, and takes the sessions of a
// queue it starts polling over from the dead worker that ran them last
// (resetStickyQueues), so that they answer at once.
func (q *hostQueues) update(ctx context.Context) error {
	v, err := nidclient.Hosts(ctx, q.c)
	if err != nil {
		return fmt.Errorf("asking the hosts registry which hosts are down: %w", err)
	}
	down := map[string]bool{}
	for _, h := range v.Hosts {
		if h.Name != q.own && !h.Alive {
			down[workflows.HostQueue(h.Name)] = true
		}
	}
	started, back, err := q.sync(down)
	stopAll(back)
	if len(back) > 0 {
		q.logger.Info("Stopped polling the queues of hosts that are back", "hosts", len(back))
	}
	if len(started) > 0 {
		q.logger.Info("Polling the queues of hosts that are down, so that their sessions answer", "queues", started)
		resetStickyQueues(ctx, q.c, q.namespace, q.logger, started...)
	}
	return err
}

// sync starts a worker on each queue of down it has none on, and returns
// the queues it started and the workers of the queues no longer down, for
// the caller to stop.
func (q *hostQueues) sync(down map[string]bool) (started []string, back []sdkworker.Worker, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.stopped {
		return nil, nil, nil
	}
	for queue, w := range q.workers {
		if !down[queue] {
			back = append(back, w)
			delete(q.workers, queue)
		}
	}
	var errs []error
	for _, queue := range slices.Sorted(maps.Keys(down)) {
		if q.workers[queue] != nil {
			continue
		}
		w := sdkworker.New(q.c, queue, q.opts)
		RegisterWorkflows(w)
		if err := w.Start(); err != nil {
			errs = append(errs, fmt.Errorf("polling %s: %w", queue, err))
			continue
		}
		q.workers[queue] = w
		started = append(started, queue)
	}
	return started, back, errors.Join(errs...)
}

// run updates every hostQueuesEvery until ctx ends.
func (q *hostQueues) run(ctx context.Context) {
	every(ctx, hostQueuesEvery, func() {
		if err := q.update(ctx); err != nil && ctx.Err() == nil {
			q.logger.Warn("Could not poll the queues of the hosts that are down: their sessions answer once this node does", "error", err)
		}
	})
}

// queues are the host queues this node polls for other hosts, sorted.
func (q *hostQueues) queues() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.Sorted(maps.Keys(q.workers))
}

// stop stops every worker it started; update starts no more.
func (q *hostQueues) stop() {
	q.mu.Lock()
	q.stopped = true
	ws := slices.Collect(maps.Values(q.workers))
	clear(q.workers)
	q.mu.Unlock()
	stopAll(ws)
}

// stopAll stops workers at once rather than one after another: each stop
// tells the server, and a node that cannot reach it would otherwise wait
// out each call in turn.
func stopAll(ws []sdkworker.Worker) {
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Go(w.Stop)
	}
	wg.Wait()
}
