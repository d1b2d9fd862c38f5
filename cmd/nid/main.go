// Command nid runs teams of coding agents as durable Temporal sessions that
// rotate their conversations before the context window fills.
//
// main only wires the process to package cli: signals, standard streams,
// the environment, the embedded Temporal server, and the exit code.
//
// The embedded server comes in one of two ways. Built plainly (go build,
// go run, go install), nid links the server and runs it in its own process.
// Built by make build (the nidlean tag), nid carries that plain build as a
// separate executable and runs the server as its child (package serverproc):
// Go initialises every package a binary links before main runs, and the
// server's eight hundred cost every command, nid ls and nid version too,
// tens of milliseconds and megabytes (docs/performance.md).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/nid-dev/nid/cli"
	"github.com/nid-dev/nid/worker/serverproc"
)

func main() {
	if len(os.Args) == 2 && os.Args[1] == serverproc.ChildArg {
		os.Exit(serveChild())
	}
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
		StartEmbedded: startEmbedded,
		BuildInfo:     buildInfo,
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
