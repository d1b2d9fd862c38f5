// Command nid runs teams of coding agents as durable Temporal sessions that
// rotate their conversations before the context window fills.
//
// main only wires the process to package cli: signals, standard streams,
// the environment, the embedded Temporal server, and the exit code.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/nid-dev/nid/cli"
	"github.com/nid-dev/nid/worker/embedded"
)

func main() {
	os.Exit(run())
}

func run() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		// After the first Ctrl-C starts a clean shutdown, a second one
		// kills the process the usual way.
		<-ctx.Done()
		stop()
	}()

	app := cli.NewApp(cli.Deps{
		StartEmbedded: embedded.Start,
		Stdout:        os.Stdout,
		Stderr:        os.Stderr,
		Environ:       os.Environ(),
		Args:          os.Args,
	})
	if err := app.RunContext(ctx, os.Args); err != nil {
		fmt.Fprintf(os.Stderr, "nid: %v\n", err)
		return 1
	}
	return 0
}
