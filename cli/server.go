package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/nid-dev/nid/worker"
)

type serverOptions struct {
	Embedded worker.EmbeddedOptions
}

func newServerCommand(a *app) *cli.Command {
	return &cli.Command{
		Name:      "server",
		Usage:     "Run the embedded Temporal server alone, for workers in other processes",
		ArgsUsage: " ",
		Description: "Starts the Temporal server nid up would embed (persisted under the state\n" +
			"directory, Web UI beside it) and nothing else: no worker, no groups. Point\n" +
			"nid up or nid worker elsewhere at it with temporal.address (or --address), so\n" +
			"that workers can stop, crash and restart while the sessions' history stays\n" +
			"served. It refuses every client without the credential it keeps in the state\n" +
			"directory (temporal-token); a worker with another state directory sets\n" +
			"temporal.apiKey to it. Prints where it listens, and a one-time login link to\n" +
			"the Web UI, which asks for a login. Ctrl-C stops it cleanly.",
		Action: action(func(cCtx *cli.Context) error {
			opts, err := a.serverOptions(cCtx)
			if err != nil {
				return err
			}
			return runServer(cCtx.Context, opts, a.StartEmbedded, a.Stdout, a.Stderr)
		}),
	}
}

func (a *app) serverOptions(cCtx *cli.Context) (serverOptions, error) {
	if err := noArgs(cCtx); err != nil {
		return serverOptions{}, err
	}
	cfg, err := a.loadConfig(cCtx)
	if err != nil {
		return serverOptions{}, err
	}
	if !cfg.Embedded() {
		return serverOptions{}, fmt.Errorf("temporal.address is %s, so that server serves nid; %s only runs the embedded one (unset temporal.address, TEMPORAL_ADDRESS and --address)",
			cfg.Temporal.Address, helpName(cCtx))
	}
	logger, err := a.logger(cCtx)
	if err != nil {
		return serverOptions{}, err
	}
	return serverOptions{Embedded: worker.NewEmbeddedOptions(cfg, logger)}, nil
}

// runServer starts the embedded server, says where it is, and serves until
// ctx is cancelled.
func runServer(ctx context.Context, opts serverOptions, start worker.StartEmbedded, stdout, stderr io.Writer) error {
	if start == nil {
		return errors.New("this nid has no embedded Temporal server")
	}
	srv, err := start(ctx, opts.Embedded)
	if err != nil {
		return fmt.Errorf("embedded Temporal server: %w", err)
	}
	ui := srv.UIAddress()
	if ui == "" {
		ui = "off"
	}
	rows := [][]string{{"Temporal frontend", srv.FrontendAddress()}, {"Temporal Web UI", ui}}
	if link := srv.UILoginLink(); link != "" {
		rows = append(rows, []string{"Web UI login", uiLoginLine(link, false)})
	}
	rows = append(rows, []string{"State", opts.Embedded.StateDir})
	if err := writeTable(stdout, rows); err != nil {
		return errors.Join(err, srv.Stop())
	}
	fmt.Fprintf(stderr, "Run nid up or nid worker with temporal.address: %s (or --address %s); one with another state directory, or on another host through a tunnel, also sets temporal.apiKey to the content of %s. Ctrl-C stops the server.\n",
		srv.FrontendAddress(), srv.FrontendAddress(), worker.TemporalTokenPath(opts.Embedded.StateDir))
	<-ctx.Done()
	if err := srv.Stop(); err != nil {
		return fmt.Errorf("stopping: %w", err)
	}
	return nil
}
