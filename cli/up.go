package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"
	"go.temporal.io/sdk/client"

	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/statedir"
	"github.com/nid-dev/nid/worker"
)

// node is what nid up and nid worker need of a running worker node.
type node struct {
	client   client.Client
	frontend string
	ui       string
	http     string
	stop     func() error
	// tokenFile is where the generated API token lives; empty when the
	// configuration sets it.
	tokenFile string
	// login is a one-time login link to the dashboard.
	login string
	// uiLogin is a one-time login link to the embedded Web UI, empty when
	// the node started none.
	uiLogin string
	// applied is what starting changed of the running groups.
	applied worker.Plan
	// reload applies a configuration read again (SIGHUP, nid reload).
	reload func(ctx context.Context, cfg *config.Config, keepRemoved bool) (worker.Plan, error)
}

// startNode starts a worker node; tests pass their own.
type startNode func(ctx context.Context, opts worker.Options) (node, error)

func startWorkerNode(ctx context.Context, opts worker.Options) (node, error) {
	n, err := worker.Start(ctx, opts)
	if err != nil {
		return node{}, err
	}
	return node{client: n.Client, frontend: n.Frontend, ui: n.UI, http: n.HTTP, stop: n.Stop, tokenFile: n.TokenFile, login: n.Login,
		uiLogin: n.UILogin, applied: n.Applied, reload: n.Reload}, nil
}

type upOptions struct {
	Node worker.Options
	// Hint is printed on stderr once the node serves.
	Hint string
	Feed watchOptions
	// DryRun prints what nid up would change of the running groups and
	// changes nothing.
	DryRun bool
	// Reloads tells the node to apply the file again (SIGHUP); Reread
	// reads it again, as the command first read it.
	Reloads <-chan os.Signal
	Reread  func() (*config.Config, error)
}

// upFlags are nid up's own flags, with the host flags it shares with nid
// worker.
func upFlags() []cli.Flag {
	return append([]cli.Flag{
		&cli.BoolFlag{Name: "dry-run", Usage: "Print what applying nid.yaml would change of the running groups (from what runs to what the file says), or what nid up would start, and change nothing"},
		&cli.BoolFlag{Name: "keep-removed", Usage: "Leave running the sessions and groups that left nid.yaml (default: stop them)"},
	}, hostFlags()...)
}

// hostFlags name the host a worker serves under and its capacity.
func hostFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "host", Usage: "Serve under host `NAME` (default: worker.host, else the machine's hostname) [$NID_WORKER_HOST]"},
		// DefaultText, or the help would add a second default, 0, which
		// is not what an unset flag means.
		&cli.IntFlag{Name: "max-sessions", Usage: "Take at most `N` sessions placed by nid; 0 takes none [$NID_WORKER_MAXSESSIONS]",
			DefaultText: "worker.maxSessions, else one per core, at least 2"},
	}
}

func newUpCommand(a *app) *cli.Command {
	return &cli.Command{
		Name:      "up",
		Usage:     "Start Temporal, the worker and every group in nid.yaml, then follow the feed",
		ArgsUsage: " ",
		Description: "Starts an embedded Temporal server (persisted under the state directory, Web UI\n" +
			"beside it) unless temporal.address names a cluster, the worker with nid's HTTP\n" +
			"server, and starts or resumes every group in the configuration. Prints where\n" +
			"each is, with one-time login links to the Web UI and the dashboard, then the\n" +
			"event feed of every session (as nid watch does). Ctrl-C stops everything\n" +
			"cleanly; the next nid up resumes every session where it was.",
		Flags: upFlags(),
		Action: action(func(cCtx *cli.Context) error {
			opts, err := a.upOptions(cCtx, a.StartEmbedded, true,
				"Ctrl-C stops nid; the next nid up resumes every session where it was. nid reload (or SIGHUP) applies nid.yaml again.")
			if err != nil {
				return err
			}
			if opts.DryRun {
				return a.runDryRun(cCtx, opts)
			}
			return runUp(cCtx.Context, opts, startWorkerNode, a.Stdout, a.Stderr)
		}),
	}
}

func newWorkerCommand(a *app) *cli.Command {
	return &cli.Command{
		Name:      "worker",
		Usage:     "Run a worker against an existing Temporal server, then follow the feed",
		ArgsUsage: " ",
		Description: "Runs nid's workflows, activities, agent processes and HTTP server against the\n" +
			"Temporal server at temporal.address (default 127.0.0.1:7233), without starting\n" +
			"one and without starting groups: several workers on several hosts share the\n" +
			"work. Each serves under a host name (--host) with a capacity (--max-sessions)\n" +
			"and registers itself; sessions placed on it run their turns here. Prints where\n" +
			"it connected, then the event feed. Ctrl-C stops it.",
		Flags: hostFlags(),
		Action: action(func(cCtx *cli.Context) error {
			opts, err := a.upOptions(cCtx, nil, false, "Ctrl-C stops this worker.")
			if err != nil {
				return err
			}
			return runUp(cCtx.Context, opts, startWorkerNode, a.Stdout, a.Stderr)
		}),
	}
}

func (a *app) upOptions(cCtx *cli.Context, embed worker.StartEmbedded, startGroups bool, hint string) (upOptions, error) {
	if err := noArgs(cCtx); err != nil {
		return upOptions{}, err
	}
	cfg, err := a.loadConfigFor(cCtx, true)
	if err != nil {
		return upOptions{}, err
	}
	logger, err := a.logger(cCtx)
	if err != nil {
		return upOptions{}, err
	}
	opts := newUpOptions(cfg, logger, embed, startGroups, hint)
	opts.DryRun = cCtx.Bool("dry-run")
	opts.Node.KeepRemoved = cCtx.Bool("keep-removed")
	opts.Reread = func() (*config.Config, error) { return a.loadConfigFor(cCtx, true) }
	if !opts.DryRun {
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		opts.Reloads = hup
	}
	return opts, nil
}

func newUpOptions(cfg *config.Config, logger *slog.Logger, embed worker.StartEmbedded, startGroups bool, hint string) upOptions {
	return upOptions{
		Node: worker.Options{Config: cfg, StartEmbedded: embed, StartGroups: startGroups, Logger: logger},
		Hint: hint,
		Feed: watchOptions{Backlog: watchBacklog, Interval: watchInterval, Persist: true},
	}
}

// runUp starts the node, says where everything is, and prints the feed
// until ctx is cancelled; then it stops the node. A feed that fails does not
// take the node down with it.
func runUp(ctx context.Context, opts upOptions, start startNode, stdout, stderr io.Writer) error {
	n, err := start(ctx, opts.Node)
	if err != nil {
		return err
	}
	ui := n.ui
	if ui == "" {
		ui = "not started here (the cluster serves its own)"
	}
	rows := [][]string{{"Temporal frontend", n.frontend}, {"Temporal Web UI", ui}}
	if n.uiLogin != "" {
		rows = append(rows, []string{"Web UI login", uiLoginLine(n.uiLogin, true)})
	}
	rows = append(rows,
		[]string{"nid HTTP server", n.http},
		[]string{"Dashboard", n.login + " (a one-time login link for " + worker.LoginLinkLife() + "; then log in with the API token)"},
		[]string{"API token", tokenWhere(n.tokenFile)},
	)
	if err := writeTable(stdout, rows); err != nil {
		return errors.Join(err, n.stop())
	}
	for _, c := range n.applied.Changes {
		_ = printLine(stderr, "nid: %s", c.Text)
	}
	for _, line := range n.applied.AttentionLines() {
		_ = printLine(stderr, "nid: %s", line)
	}
	state := opts.Node.Config.State
	if err := writeRunning(opts.Node.Config, opts.Node.KeepRemoved); err != nil {
		_ = printLine(stderr, "nid: %v: nid reload will not find this process", err)
	}
	defer removeRunning(state)
	if opts.Reloads != nil && n.reload != nil {
		go reloadOnSignal(ctx, opts, n, stderr)
	}
	fmt.Fprintln(stderr, opts.Hint)
	if err := runWatch(ctx, n.client, opts.Feed, stdout, stderr); err != nil {
		_ = printLine(stderr, "nid: event feed stopped: %v", err)
		<-ctx.Done()
	}
	if err := n.stop(); err != nil {
		return fmt.Errorf("stopping: %w", err)
	}
	return nil
}

// uiLoginLine is the embedded Web UI's login link, and what logs in once
// it is spent: the Temporal credential, and the API token where the
// process serves nid's API (nid up, not nid server).
func uiLoginLine(link string, apiToken bool) string {
	then := "the Temporal credential"
	if apiToken {
		then += " or the API token"
	}
	return link + " (a one-time login link for " + worker.LoginLinkLife() + "; then log in with " + then + ")"
}

// tokenWhere says where the API token the dashboard and the API need is.
func tokenWhere(file string) string {
	if file == "" {
		return "http.token (nid.yaml or NID_HTTP_TOKEN)"
	}
	return "in " + file + " (nid made it on its first start; set http.token to choose one)"
}

// reloadOnSignal applies the file again on each SIGHUP: a bad file changes
// nothing and says why; a good one is applied and what changed is said.
func reloadOnSignal(ctx context.Context, opts upOptions, n node, stderr io.Writer) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-opts.Reloads:
		}
		cfg, err := opts.Reread()
		if err != nil {
			_ = printLine(stderr, "nid: reload: %v; nothing changed", err)
			continue
		}
		plan, err := n.reload(ctx, cfg, opts.Node.KeepRemoved)
		if err != nil {
			_ = printLine(stderr, "nid: reload: %v", err)
		}
		for _, line := range plan.Lines() {
			_ = printLine(stderr, "nid: reload: %s", line)
		}
	}
}

// runDryRun prints what nid up would change of the running groups, or,
// when no embedded Temporal server runs yet, what it would start.
func (a *app) runDryRun(cCtx *cli.Context, opts upOptions) error {
	cfg := opts.Node.Config
	c, err := a.Dial(cCtx.Context, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		// Only when no nid runs on the state directory is a server that
		// does not answer one that is not there.
		if _, running := readRunning(cfg.State); !cfg.Embedded() || running == nil {
			return err
		}
		if err := printLine(a.Stdout, "nothing runs on %s yet (no Temporal server answers at %s): nid up would start its embedded Temporal server, then:", cfg.State, cfg.Address()); err != nil {
			return err
		}
		return printPlan(worker.PlanStart(cfg), a.Stdout)
	}
	defer c.Close()
	return runPlan(cCtx.Context, c, cfg, opts.Node.KeepRemoved, a.Stdout)
}

// runPlan prints what applying cfg would change of the running groups,
// and which of its settings the nid running on its state directory takes
// only when it restarts.
func runPlan(ctx context.Context, c client.Client, cfg *config.Config, keepRemoved bool, stdout io.Writer) error {
	plan, err := worker.PlanGroups(ctx, c, cfg, nil, keepRemoved)
	if err != nil {
		return err
	}
	if r, err := readRunning(cfg.State); err == nil {
		if changed := r.restartOnly(cfg); len(changed) > 0 {
			plan.Changes = append(plan.Changes, worker.Change{Text: strings.Join(changed, ", ") +
				" settings changed: they take effect only when nid restarts (nid reload does not apply them)"})
		}
	}
	return printPlan(plan, stdout)
}

func printPlan(plan worker.Plan, stdout io.Writer) error {
	for _, line := range plan.Lines() {
		if err := printLine(stdout, "%s", line); err != nil {
			return err
		}
	}
	return nil
}

// runningFile records the nid up or nid worker running on a state
// directory, for nid reload to find.
const runningFile = "nid.pid"

type running struct {
	PID         int  `json:"pid"`
	KeepRemoved bool `json:"keepRemoved,omitempty"`
	// Settings are digests of the settings the process took when it
	// started and takes again only when it restarts, by section: a
	// digest, so that no credential is written here.
	Settings map[string]string `json:"settings,omitempty"`
}

// restartSettings are the digests of cfg's settings that a running nid
// takes only when it restarts (see worker.Node.Reload).
func restartSettings(cfg *config.Config) map[string]string {
	digest := func(v any) string {
		b, _ := json.Marshal(v)
		sum := sha256.Sum256(b)
		return hex.EncodeToString(sum[:])
	}
	return map[string]string{"temporal": digest(cfg.Temporal), "http": digest(cfg.HTTP), "state": digest(cfg.State)}
}

// restartOnly names the sections of cfg whose settings differ from those
// the running nid took: it takes them only when it restarts.
func (r running) restartOnly(cfg *config.Config) []string {
	if r.Settings == nil {
		return nil
	}
	var changed []string
	now := restartSettings(cfg)
	for _, section := range slices.Sorted(maps.Keys(now)) {
		if r.Settings[section] != now[section] {
			changed = append(changed, section)
		}
	}
	return changed
}

func writeRunning(cfg *config.Config, keepRemoved bool) error {
	b, _ := json.Marshal(running{PID: os.Getpid(), KeepRemoved: keepRemoved, Settings: restartSettings(cfg)})
	return os.WriteFile(filepath.Join(cfg.State, runningFile), b, statedir.FileMode)
}

func removeRunning(state string) { _ = os.Remove(filepath.Join(state, runningFile)) }

func readRunning(state string) (running, error) {
	var r running
	b, err := os.ReadFile(filepath.Join(state, runningFile))
	if err != nil {
		return r, fmt.Errorf("no nid up or nid worker is running on %s (no %s there)", state, runningFile)
	}
	if err := json.Unmarshal(b, &r); err != nil || r.PID <= 0 {
		return r, fmt.Errorf("%s: not a record of a running nid", filepath.Join(state, runningFile))
	}
	if err := syscall.Kill(r.PID, 0); err != nil {
		return r, fmt.Errorf("no nid up or nid worker is running on %s (process %d is gone)", state, r.PID)
	}
	return r, nil
}

func newReloadCommand(a *app) *cli.Command {
	return &cli.Command{
		Name:      "reload",
		Usage:     "Apply nid.yaml to the running nid: start, change and stop what the file says",
		ArgsUsage: " ",
		Description: "Prints what applying the configuration changes of the running groups (new\n" +
			"groups and sessions start; goals, policies, budgets, prompts and agent settings\n" +
			"change; sessions that left the file stop, unless nid up was given\n" +
			"--keep-removed), then tells the nid up or nid worker running on the same state\n" +
			"directory to apply it (SIGHUP does the same). A bad file changes nothing.",
		Action: action(func(cCtx *cli.Context) error {
			if err := noArgs(cCtx); err != nil {
				return err
			}
			cfg, err := a.loadConfigFor(cCtx, true)
			if err != nil {
				return err
			}
			r, err := readRunning(cfg.State)
			if err != nil {
				return err
			}
			return a.withClient(cCtx, func(ctx context.Context, c client.Client) error {
				return runReload(ctx, c, cfg, r, a.Stdout)
			})
		}),
	}
}

// runReload prints the plan and asks the running nid r to carry it out.
func runReload(ctx context.Context, c client.Client, cfg *config.Config, r running, stdout io.Writer) error {
	if err := runPlan(ctx, c, cfg, r.KeepRemoved, stdout); err != nil {
		return err
	}
	if err := syscall.Kill(r.PID, syscall.SIGHUP); err != nil {
		return fmt.Errorf("telling nid (process %d) to reload: %w", r.PID, err)
	}
	return printLine(stdout, "asked nid (process %d) to apply it; its feed says what it did", r.PID)
}
