package cli

import (
	"fmt"
	"io"
	"runtime/debug"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/nid-dev/nid/agents"
)

// Modules whose versions nid version reports, as the build records them.
const (
	moduleSDK    = "go.temporal.io/sdk"
	moduleServer = "go.temporal.io/server"
	moduleUI     = "github.com/temporalio/ui-server/v2"
)

type versionOptions struct {
	JSON bool
	// Build reads what the binary was built from; debug.ReadBuildInfo in
	// nid itself.
	Build func() (*debug.BuildInfo, bool)
}

// versions is what nid version says. A version is empty when the build
// does not hold the module.
type versions struct {
	Nid string `json:"nid"`
	// Commit, CommitTime and Modified are the version control state the
	// build was made from, when the build recorded it.
	Commit         string `json:"commit,omitempty"`
	CommitTime     string `json:"commitTime,omitempty"`
	Modified       bool   `json:"modified,omitempty"`
	Go             string `json:"go"`
	TemporalSDK    string `json:"temporalSDK"`
	TemporalServer string `json:"temporalServer"`
	TemporalUI     string `json:"temporalUI"`
	// Tested are the agent CLIs nid is tested with, at the versions its
	// tests pin.
	Tested []testedAgent `json:"tested"`
}

type testedAgent struct {
	Agent   string `json:"agent"`
	Title   string `json:"title"`
	Package string `json:"package"`
	Version string `json:"version"`
}

func newVersionCommand(a *app) *cli.Command {
	return &cli.Command{
		Name:      "version",
		Usage:     "Print the versions of nid, its Temporal SDK, server and Web UI",
		ArgsUsage: " ",
		Description: "Prints nid's version (and the commit it was built from, when the build\n" +
			"recorded it), the Go it was built with, the Temporal SDK, the embedded\n" +
			"Temporal server and Web UI it carries, and the agent CLI versions nid is\n" +
			"tested with, all read from the binary's own build information.",
		Flags: []cli.Flag{jsonFlag()},
		Action: action(func(cCtx *cli.Context) error {
			if err := noArgs(cCtx); err != nil {
				return err
			}
			build := a.BuildInfo
			if build == nil {
				build = debug.ReadBuildInfo
			}
			return runVersion(versionOptions{JSON: cCtx.Bool("json"), Build: build}, a.Stdout)
		}),
	}
}

func runVersion(opts versionOptions, stdout io.Writer) error {
	info, ok := opts.Build()
	if !ok {
		return fmt.Errorf("this nid binary carries no build information (build it with go build ./cmd/nid)")
	}
	v := readVersions(info)
	if opts.JSON {
		return writeJSON(stdout, v)
	}
	nid := v.Nid
	var from []string
	if v.Commit != "" {
		from = append(from, "commit "+v.Commit)
	}
	if v.CommitTime != "" {
		from = append(from, v.CommitTime)
	}
	if v.Modified {
		from = append(from, "with uncommitted changes")
	}
	if len(from) > 0 {
		nid += " (" + strings.Join(from, ", ") + ")"
	}
	var tested []string
	for _, t := range v.Tested {
		tested = append(tested, t.Title+" "+t.Version)
	}
	or := func(s, what string) string {
		if s == "" {
			return "not in this build"
		}
		return s + what
	}
	return writeTable(stdout, [][]string{
		{"nid", nid},
		{"Go", v.Go},
		{"Temporal SDK", or(v.TemporalSDK, "")},
		{"Temporal server", or(v.TemporalServer, " (embedded)")},
		{"Temporal Web UI", or(v.TemporalUI, " (embedded)")},
		{"Tested with", strings.Join(tested, ", ")},
	})
}

// readVersions reads the versions out of a build: a module replaced by
// another reports the replacement's version.
func readVersions(info *debug.BuildInfo) versions {
	v := versions{Nid: info.Main.Version, Go: info.GoVersion}
	if v.Nid == "" || v.Nid == "(devel)" {
		v.Nid = "devel"
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = s.Value
		case "vcs.time":
			v.CommitTime = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	for _, m := range info.Deps {
		version := m.Version
		if m.Replace != nil && m.Replace.Version != "" {
			version = m.Replace.Version
		}
		switch m.Path {
		case moduleSDK:
			v.TemporalSDK = version
		case moduleServer:
			v.TemporalServer = version
		case moduleUI:
			v.TemporalUI = version
		}
	}
	for _, k := range agents.Kinds() {
		if tv := agents.TestedVersion(k); tv != "" {
			v.Tested = append(v.Tested, testedAgent{Agent: k.Name, Title: k.Title, Package: k.Package, Version: tv})
		}
	}
	return v
}
