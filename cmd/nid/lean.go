//go:build nidlean

package main

import (
	"bytes"
	"context"
	"debug/buildinfo"
	_ "embed"
	"fmt"
	"os"
	"runtime/debug"
	"slices"

	"github.com/nid-dev/nid/worker"
	"github.com/nid-dev/nid/worker/serverproc"
)

// serverExecutable is the plain build of this command, which links the
// Temporal server; make build puts it here before building this one.
//
//go:embed nid-server.bin
var serverExecutable []byte

func startEmbedded(ctx context.Context, opts worker.EmbeddedOptions) (worker.EmbeddedServer, error) {
	exe, err := serverproc.Extract(serverExecutable)
	if err != nil {
		return nil, err
	}
	return serverproc.Start(exe, serverproc.ChildArg)(ctx, opts)
}

// buildInfo is this binary's build with the modules of the server it carries,
// so that nid version names the server and Web UI it runs.
func buildInfo() (*debug.BuildInfo, bool) {
	own, ok := debug.ReadBuildInfo()
	if !ok {
		return nil, false
	}
	server, err := buildinfo.Read(bytes.NewReader(serverExecutable))
	if err != nil {
		return own, true
	}
	merged := *own
	merged.Deps = slices.Clone(own.Deps)
	for _, m := range server.Deps {
		if !slices.ContainsFunc(merged.Deps, func(d *debug.Module) bool { return d.Path == m.Path }) {
			merged.Deps = append(merged.Deps, m)
		}
	}
	return &merged, true
}

// serveChild refuses: only the plain build, which links the server, serves it.
func serveChild() int {
	fmt.Fprintln(os.Stderr, "nid: this build runs the Temporal server it carries; it serves none itself")
	return 1
}
