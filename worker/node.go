package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/nid-dev/nid/activities"
	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/statedir"
	"github.com/nid-dev/nid/transcript"
	"github.com/nid-dev/nid/worker/metrics"
	"github.com/nid-dev/nid/workflows"
)

// Options configures a worker node.
type Options struct {
	Config *config.Config
	// StartEmbedded starts the embedded Temporal server when the config
	// names no address; nil means this node never embeds one.
	StartEmbedded StartEmbedded
	// StartGroups starts or resumes every group in the config (nid up),
	// and stops the sessions that left it unless KeepRemoved.
	StartGroups bool
	KeepRemoved bool
	Logger      *slog.Logger
}

// Node is a running worker: optionally the embedded server, the Temporal
// workers, and the HTTP server.
type Node struct {
	Client client.Client
	// Frontend is the Temporal frontend address; UI the Web UI URL (empty
	// when not embedded); HTTP the URL of nid's HTTP server.
	Frontend string
	UI       string
	HTTP     string

	// Applied is what starting changed of the running groups (nid up
	// only): groups and sessions started, changed, stopped.
	Applied Plan

	// TokenFile is where the generated API token lives; empty when
	// http.token or NID_HTTP_TOKEN sets it.
	TokenFile string
	// Login is a one-time login link to the dashboard (see
	// API.LoginLink).
	Login string
	// UILogin is a one-time login link to the embedded Web UI (see
	// EmbeddedServer.UILoginLink); empty when this node started none.
	UILogin string

	// cfg is the configuration the node runs, swapped by Reload.
	cfg          atomic.Pointer[config.Config]
	reloading    sync.Mutex
	startsGroups bool

	server   EmbeddedServer
	workers  []sdkworker.Worker
	acts     *activities.Activities
	http     *http.Server
	logger   *slog.Logger
	stopped  bool
	groupErr error
	// stopBeat ends this host's heartbeat; a node that takes no sessions
	// (worker.maxSessions 0) beats not.
	stopBeat context.CancelFunc
	beating  sync.WaitGroup
	// hostQueues polls the queues of the hosts that are down; stopQueues
	// ends its looks.
	hostQueues *hostQueues
	stopQueues context.CancelFunc
	polling    sync.WaitGroup
}

// Start brings a node up and returns once it is serving: the embedded server
// (when the config names no address), the workflow and activity workers, the
// HTTP server with the MCP endpoint, and, with StartGroups, every group in the
// config started or resumed.
func Start(ctx context.Context, opts Options) (n *Node, err error) {
	cfg := opts.Config
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	// started outlives `return nil, err`, which clears n before the
	// deferred clean-up runs.
	started := &Node{logger: logger}
	n = started
	// Before any worker starts: a turn it picks up at once reads the
	// agent settings from the configuration in force.
	n.cfg.Store(cfg)
	defer func() {
		if err != nil {
			_ = started.Stop()
		}
	}()
	// Before anything starts, the state directory included: a node that
	// would serve its API to the network without a configured token
	// refuses to start at all, and leaves nothing behind.
	if err := needsToken(cfg); err != nil {
		return nil, err
	}
	if err := statedir.Prepare(cfg.State); err != nil {
		return nil, err
	}
	token, tokenFile, err := APIToken(cfg)
	if err != nil {
		return nil, err
	}
	n.TokenFile = tokenFile

	n.Frontend = cfg.Address()
	if cfg.Embedded() && opts.StartEmbedded != nil {
		embedded := NewEmbeddedOptions(cfg, logger)
		// A person who logs in to the dashboard with the API token can log
		// in to the Web UI with it too.
		embedded.APIToken = token
		n.server, err = opts.StartEmbedded(ctx, embedded)
		if err != nil {
			return nil, fmt.Errorf("embedded Temporal server: %w", err)
		}
		n.Frontend = n.server.FrontendAddress()
		n.UI = n.server.UIAddress()
		n.UILogin = n.server.UILoginLink()
	}

	if n.UI == "" {
		// nid server (or a cluster) serves the Web UI: link to it if told.
		n.UI = cfg.Temporal.UI.URL
	}
	// One registry for the node: the SDK's metrics of its client and
	// workers, and nid's own (see package metrics).
	m, err := metrics.New(logger)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	n.Client, err = dial(ctx, cfg, logger, m.SDK())
	if err != nil {
		return nil, err
	}
	if err := m.Watch(n.Client); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	if n.server == nil {
		if err := EnsureSearchAttributes(ctx, n.Client, cfg.Temporal.Namespace); err != nil {
			return nil, err
		}
	}

	key, err := LoadOrCreateKey(cfg.State)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.HTTP.Listen)
	if err != nil {
		return nil, fmt.Errorf("http.listen %s: %w", cfg.HTTP.Listen, err)
	}
	n.HTTP = "http://" + ln.Addr().String()
	mcp := NewMCPEndpoint(key, temporalSessions{c: n.Client, boards: NewBoards(n.Client)}, n.HTTP)
	logs := transcript.New(cfg.State)
	api := NewAPI(n.Client, APIOptions{Token: token, Transcripts: logs, WebUI: n.UI, Namespace: cfg.Temporal.Namespace, Temporal: cfg.Address()})
	scrape := MetricsAuth(m.Handler(), token, cfg.HTTP.MetricsToken)
	n.http = NewHTTPServer(mcp.Handler(), api.Handler(), scrape, DefaultHTTPLimits())
	n.Login = n.HTTP + api.LoginLink()
	go func() {
		if err := n.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("http server stopped", "error", err)
		}
	}()

	// Agents a killed worker left running would go on editing the
	// worktrees while their turns run again here.
	killed, err := agents.ReapOrphans(agents.PidDir(cfg.State))
	if len(killed) > 0 {
		logger.Warn("Killed agent processes left running by a worker that did not stop cleanly", "processes", strings.Join(killed, ", "))
	}
	if err != nil {
		logger.Warn("Could not check every recorded agent process", "dir", agents.PidDir(cfg.State), "error", err)
	}

	// Before any worker starts: an activity waiting in this host's queue
	// (a restart) runs the moment it does, and reads the configuration.
	n.cfg.Store(cfg)
	acts := &activities.Activities{
		Agents:   Agents(),
		Settings: agentSettings(n.config),
		Places:   agentPlaces(n.config),
		Notify:   sessionNotifier{c: n.Client},
		StateDir: cfg.State,
		MCP:      mcp.Access,
	}
	acts.Transcripts = logs
	n.acts = acts
	if cfg.Worker.MaxSessions > 0 {
		// Registered before this node takes any workflow task: the
		// registry, whose timer for this host may have fired while it was
		// away, sees the beat in the same task and tells its sessions
		// nothing; and the host is there to place sessions on.
		b := hostBeat(cfg.Worker, n.HTTP)
		if err := beatBySignal(ctx, n.Client, b); err != nil {
			return nil, err
		}
		bctx, cancel := context.WithCancel(context.Background())
		n.stopBeat = cancel
		n.beating.Add(1)
		go func() {
			defer n.beating.Done()
			heartbeat(bctx, n.Client, b, logger)
		}()
	}
	sdkworker.SetStickyWorkflowCacheSize(workflowCacheSize)
	wfw := sdkworker.New(n.Client, workflows.TaskQueue, workflowWorkerOptions(m))
	RegisterWorkflows(wfw)
	ws := []sdkworker.Worker{wfw}
	own := ""
	if cfg.Worker.MaxSessions > 0 {
		// The host's sessions run their workflows and their activities on
		// its queue, in one worker: see hostQueues.
		own = cfg.Worker.Host
		hostw := sdkworker.New(n.Client, workflows.HostQueue(own), hostWorkerOptions(m, &attemptRecorder{dir: activities.AttemptDir(cfg.State), logger: logger}))
		RegisterWorkflows(hostw)
		RegisterActivities(hostw, acts)
		ws = append(ws, hostw)
	}
	for _, w := range ws {
		if err := w.Start(); err != nil {
			return nil, fmt.Errorf("temporal worker: %w", err)
		}
		n.workers = append(n.workers, w)
	}

	// The server (one that outlived its worker, or an embedded one that
	// kept in its database which worker ran each workflow last) would send
	// queries to the dead worker's own queue (see resetStickyQueues): take
	// the workflows over before the node says it serves. The shared
	// queue's first: the registry, which says which hosts are down (whose
	// queues this node then polls, see hostQueues), runs there.
	queues := []string{workflows.TaskQueue}
	if own != "" {
		queues = append(queues, workflows.HostQueue(own))
	}
	resetStickyQueues(ctx, n.Client, cfg.Temporal.Namespace, logger, queues...)
	n.hostQueues = newHostQueues(n.Client, workflowWorkerOptions(m), own, cfg.Temporal.Namespace, logger)
	n.pollHostsDown(ctx)
	qctx, stopQueues := context.WithCancel(context.Background())
	n.stopQueues = stopQueues
	n.polling.Add(1)
	go func() {
		defer n.polling.Done()
		n.hostQueues.run(qctx)
	}()

	// After the reaping: a cut attempt run again must not meet the agent
	// that was running it. And after the take-over: a session hears of its
	// cut turn in a workflow task, which would otherwise wait for the dead
	// worker's own queue, holding up every query meanwhile.
	failCutAttempts(ctx, n.Client, activities.AttemptDir(cfg.State), logger)

	n.startsGroups = opts.StartGroups
	if opts.StartGroups {
		if n.Applied, err = n.apply(ctx, cfg, nil, opts.KeepRemoved); err != nil {
			return nil, err
		}
	}
	return n, nil
}

// pollHostsDown polls the queues of the hosts that are down now (see
// hostQueues); a node that cannot ask says so and tries again at its next
// look.
func (n *Node) pollHostsDown(ctx context.Context) {
	if n.hostQueues == nil {
		return
	}
	if err := n.hostQueues.update(ctx); err != nil {
		n.logger.Warn("Could not poll the queues of the hosts that are down: their sessions answer once this node does", "error", err)
	}
}

// workflowCacheSize is how many workflows the worker keeps in memory
// between their tasks (the SDK's sticky cache, one per process). A workflow
// that is not kept replays its whole history at its next task, up to the
// thousands of events a session holds before it continues as new, so the
// cache holds every session of a thousand-session host with room for a
// rotation each and the groups. Kept, an idle session costs about 30 KiB
// of nid up's memory (its state and its coroutines' stacks: 1,000 idle sim
// sessions took 19 MiB of live heap and 11 MiB of stacks, the whole
// process 63 MiB; docs/performance.md), so a full cache is about 60 MiB.
// The SDK's default, 10,000, would let a bigger fleet grow nid up by
// 300 MiB before the first eviction.
const workflowCacheSize = 2048

// activityPollers is how many polls a host keeps open on its queue. The
// server splits a queue into four partitions and puts each task in one; the
// SDK's default of two polls leaves two partitions without one, and a turn
// whose task landed there waited for the server to forward it: the slowest
// tenth of the gaps between sim turns took 40-80 ms, against 15-20 ms with
// a poll on every partition.
const activityPollers = 8

// httpGrace is how long a stopping node waits for API calls under way.
// The workers have stopped by then, so no turn needs the MCP endpoint, and
// event streams end at once.
const httpGrace = 2 * time.Second

func hostWorkerOptions(m *metrics.Metrics, attempts *attemptRecorder) sdkworker.Options {
	opts := HostWorkerOptions()
	opts.Interceptors = append(m.Interceptors(), attempts)
	return opts
}

// HostWorkerOptions are the options of a host's own worker, which runs its
// sessions' workflows and their activities, before nid's interceptors (its
// metrics and attempt records): the workflow worker's pollers
// (WorkflowWorkerOptions), a poll on every partition of the host's queue
// for activities (activityPollers), and on Ctrl-C a moment for a turn in
// flight to finish rather than being cut and run again by the next worker.
// BenchmarkTurnOverhead's floor runs with the same.
func HostWorkerOptions() sdkworker.Options {
	opts := WorkflowWorkerOptions()
	opts.WorkerStopTimeout = 5 * time.Second
	opts.MaxConcurrentActivityTaskPollers = activityPollers
	return opts
}

func workflowWorkerOptions(m *metrics.Metrics) sdkworker.Options {
	opts := WorkflowWorkerOptions()
	opts.Interceptors = m.Interceptors()
	return opts
}

// WorkflowWorkerOptions are the options of the workflow worker before
// nid's metrics interceptors. They give it pollers of their own for the
// shared queue and for its sticky queue. With the SDK's default, one set
// of pollers for both, a poller always picks the sticky queue while that
// has a backlog; a couple of hundred busy sessions keep one there all the
// time, and a workflow task on the shared queue (a session's first, any
// after a restart or a cache eviction, a new group's) waited as long as
// the others kept busy: 23 of 200 sim sessions took no turn in 20
// minutes. BenchmarkTurnOverhead's floor runs with the same.
func WorkflowWorkerOptions() sdkworker.Options {
	return sdkworker.Options{
		WorkflowTaskPollerBehavior: sdkworker.NewPollerBehaviorAutoscaling(sdkworker.PollerBehaviorAutoscalingOptions{}),
	}
}

// config is the configuration the node runs now.
func (n *Node) config() *config.Config { return n.cfg.Load() }

// Reload applies cfg, read again from the file, to the running groups (as
// nid up would) and to this worker's own agent settings, which its next
// turns take; it returns what changed. The Temporal, HTTP and state
// settings change only with a restart, and the plan says so.
func (n *Node) Reload(ctx context.Context, cfg *config.Config, keepRemoved bool) (Plan, error) {
	n.reloading.Lock()
	defer n.reloading.Unlock()
	prev := n.config()
	n.cfg.Store(cfg)
	if !n.startsGroups {
		// nid worker: the groups are nid up's; its own agent settings
		// are what it reloads.
		return Plan{Changes: []Change{{Text: "this worker's agent settings are reloaded; nid up applies the groups"}}}, nil
	}
	plan, err := n.apply(ctx, cfg, prev, keepRemoved)
	if prev.Temporal != cfg.Temporal || prev.HTTP != cfg.HTTP || prev.State != cfg.State {
		plan.Changes = append(plan.Changes, Change{Text: "temporal, http and state settings take effect only when nid restarts"})
	}
	return plan, err
}

// apply plans cfg against the running groups, then carries the plan out,
// and checks what the file's sessions need of this host as their turns
// will: the plan names those that cannot start.
func (n *Node) apply(ctx context.Context, cfg, prev *config.Config, keepRemoved bool) (Plan, error) {
	plan, err := PlanGroups(ctx, n.Client, cfg, prev, keepRemoved)
	if err != nil {
		return plan, err
	}
	started := StartGroups(ctx, n.Client, cfg)
	if err := TellStarted(ctx, n.Client, cfg); err != nil {
		n.logger.Warn("Could not tell every group its sessions started: a board sent to one before it ran waits for the next start", "error", err)
	}
	// A session placed by nid.yaml on a host that never served (the
	// registry counts it down) answers from this node now, not at its
	// next look.
	n.pollHostsDown(ctx)
	if started != nil {
		return plan, started
	}
	plan.Attention = agents.Failing(SessionChecks(ctx, cfg, false))
	n.tellCannotStart(ctx, cfg.Worker.Host, plan.Attention)
	return plan, StopRemoved(ctx, n.Client, plan)
}

// tellCannotStart tells each session whose check failed that its agent
// cannot run on host, so that it needs attention now, as the plan says,
// rather than showing idle until a turn tries. A session that did not
// hear it learns the same at its first turn.
func (n *Node) tellCannotStart(ctx context.Context, host string, failing []agents.Check) {
	told := map[string]bool{}
	for _, c := range failing {
		group, name, err := workflows.ParseSessionRef(c.Session)
		if err != nil || told[c.Session] {
			continue
		}
		told[c.Session] = true
		err = n.Client.SignalWorkflow(ctx, workflows.SessionID(group, name), "", workflows.SignalCannotStart,
			workflows.CannotStart{Host: host, Text: c.Text})
		if err != nil {
			n.logger.Debug("Could not tell a session it cannot start", "sessionID", workflows.SessionID(group, name), "error", err)
		}
	}
}

// NewEmbeddedOptions is how the config sets up the embedded server, so that
// nid up and nid server start the same one on the same state.
func NewEmbeddedOptions(cfg *config.Config, logger *slog.Logger) EmbeddedOptions {
	return EmbeddedOptions{
		StateDir:         cfg.State,
		Namespace:        cfg.Temporal.Namespace,
		Port:             cfg.Temporal.Port,
		UIPort:           cfg.Temporal.UI.Port,
		UIWriteActions:   cfg.Temporal.UI.WriteActions,
		SearchAttributes: workflows.SearchAttributes(),
		Logger:           logger,
	}
}

// Stop shuts the node down: HTTP server, workers, client, embedded server.
func (n *Node) Stop() error {
	if n.stopped {
		return nil
	}
	n.stopped = true
	var errs []error
	if n.stopBeat != nil {
		n.stopBeat()
		n.beating.Wait()
	}
	// Workers first: a turn finishing during the stop may still need the
	// MCP endpoint.
	if n.stopQueues != nil {
		n.stopQueues()
		n.polling.Wait()
		n.hostQueues.stop()
	}
	for i := len(n.workers) - 1; i >= 0; i-- {
		n.workers[i].Stop()
	}
	if n.acts != nil {
		errs = append(errs, n.acts.Close())
	}
	if n.http != nil {
		errs = append(errs, stopHTTP(n.http, httpGrace))
	}
	if n.Client != nil {
		n.Client.Close()
	}
	if n.server != nil {
		errs = append(errs, n.server.Stop())
	}
	return errors.Join(errs...)
}
