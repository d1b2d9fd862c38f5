//go:build !nidlean

package main

import (
	"fmt"
	"os"
	"runtime/debug"

	"github.com/nid-dev/nid/worker/embedded"
	"github.com/nid-dev/nid/worker/serverproc"
)

// This build links the server and runs it in process.
var (
	startEmbedded = embedded.Start
	buildInfo     = debug.ReadBuildInfo
)

// serveChild serves the server to a nid built with nidlean, which carries
// this build and runs it so.
func serveChild() int {
	if err := serverproc.Serve(embedded.Start, os.Stdin, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "nid: embedded Temporal server: %v\n", err)
		return 1
	}
	return 0
}
