package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"

	"github.com/urfave/cli/v2"
	"go.temporal.io/sdk/client"

	"github.com/nid-dev/nid/config"
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
	// unlisted are running groups the configuration does not name.
	unlisted []string
}

// startNode starts a worker node; tests pass their own.
type startNode func(ctx context.Context, opts worker.Options) (node, error)

func startWorkerNode(ctx context.Context, opts worker.Options) (node, error) {
	n, err := worker.Start(ctx, opts)
	if err != nil {
		return node{}, err
	}
	return node{client: n.Client, frontend: n.Frontend, ui: n.UI, http: n.HTTP, stop: n.Stop, tokenFile: n.TokenFile, login: n.Login,
		unlisted: n.Unlisted}, nil
}

type upOptions struct {
	Node worker.Options
	// Hint is printed on stderr once the node serves.
	Hint string
	Feed watchOptions
}

func newUpCommand(a *app) *cli.Command {
	return &cli.Command{
		Name:      "up",
		Usage:     "Start Temporal, the worker and every group in nid.yaml, then follow the feed",
		ArgsUsage: " ",
		Description: "Starts an embedded Temporal server (persisted under the state directory, Web UI\n" +
			"beside it) unless temporal.address names a cluster, the worker with nid's HTTP\n" +
			"server, and starts or resumes every group in the configuration. Prints where\n" +
			"each is, then the event feed of every session (as nid watch does). Ctrl-C stops\n" +
			"everything cleanly; the next nid up resumes every session where it was.",
		Action: action(func(cCtx *cli.Context) error {
			opts, err := a.upOptions(cCtx, a.StartEmbedded, true,
				"Ctrl-C stops nid; the next nid up resumes every session where it was.")
			if err != nil {
				return err
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
			"work. Prints where it connected, then the event feed. Ctrl-C stops it.",
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
	args, err := commandArgs(cCtx)
	if err != nil {
		return upOptions{}, err
	}
	if len(args) > 0 {
		return upOptions{}, fmt.Errorf("%s takes no arguments (got %q)", helpName(cCtx), args[0])
	}
	cfg, err := a.loadConfigFor(cCtx, true)
	if err != nil {
		return upOptions{}, err
	}
	logger, err := a.logger(cCtx)
	if err != nil {
		return upOptions{}, err
	}
	return newUpOptions(cfg, logger, embed, startGroups, hint), nil
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
	if err := writeTable(stdout, [][]string{
		{"Temporal frontend", n.frontend},
		{"Temporal Web UI", ui},
		{"nid HTTP server", n.http},
		{"Dashboard", n.login + " (a one-time login link for " + loginLinkTTL() + "; then log in with the API token)"},
		{"API token", tokenWhere(n.tokenFile)},
	}); err != nil {
		return errors.Join(err, n.stop())
	}
	for _, g := range n.unlisted {
		_ = printLine(stderr, "nid: group %s is running but not in the configuration: its sessions go on; nid stop %s stops them", g, g)
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

// loginLinkTTL is how long nid up's login link works, as people say it.
func loginLinkTTL() string {
	return strconv.Itoa(int(worker.LoginLinkTTL.Minutes())) + " minutes"
}

// tokenWhere says where the API token the dashboard and the API need is.
func tokenWhere(file string) string {
	if file == "" {
		return "http.token (nid.yaml or NID_HTTP_TOKEN)"
	}
	return "in " + file + " (nid made it on its first start; set http.token to choose one)"
}
