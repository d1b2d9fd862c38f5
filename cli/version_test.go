package cli

import (
	"bytes"
	"encoding/json"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/agents"
)

// nid version reads every version from the build: nid's own with the
// commit it was built from, Go, the SDK, the server and the Web UI (a
// replaced module by its replacement), and the CLIs nid is tested with
// from their one pin.
func TestVersion(t *testing.T) {
	info := &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Main:      debug.Module{Path: "github.com/nid-dev/nid", Version: "v1.4.0"},
		Deps: []*debug.Module{
			{Path: "go.temporal.io/api", Version: "v1.63.5"},
			{Path: moduleSDK, Version: "v1.50.0"},
			{Path: moduleServer, Version: "v1.32.1", Replace: &debug.Module{Path: "../temporal", Version: "v1.32.2-patched"}},
			{Path: moduleUI, Version: "v2.55.0"},
		},
		Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "abaf552e1b9c"}, {Key: "vcs.time", Value: "2026-01-05T10:00:00Z"}, {Key: "vcs.modified", Value: "true"},
		},
	}
	build := func() (*debug.BuildInfo, bool) { return info, true }
	claude, codex := agents.KindOf(agents.KindClaude), agents.KindOf(agents.KindCodex)
	var out bytes.Buffer
	require.NoError(t, runVersion(versionOptions{Build: build}, &out))
	require.Equal(t, ""+
		"nid              v1.4.0 (commit abaf552e1b9c, 2026-01-05T10:00:00Z, with uncommitted changes)\n"+
		"Go               go1.26.8\n"+
		"Temporal SDK     v1.50.0\n"+
		"Temporal server  v1.32.2-patched (embedded)\n"+
		"Temporal Web UI  v2.55.0 (embedded)\n"+
		"Tested with      Claude Code "+agents.TestedVersion(claude)+", Codex "+agents.TestedVersion(codex)+"\n", out.String())

	out.Reset()
	require.NoError(t, runVersion(versionOptions{Build: build, JSON: true}, &out))
	var v versions
	require.NoError(t, json.Unmarshal(out.Bytes(), &v))
	require.Equal(t, versions{Nid: "v1.4.0", Commit: "abaf552e1b9c", CommitTime: "2026-01-05T10:00:00Z", Modified: true, Go: "go1.26.8",
		TemporalSDK: "v1.50.0", TemporalServer: "v1.32.2-patched", TemporalUI: "v2.55.0", Tested: []testedAgent{
			{Agent: "claude", Title: "Claude Code", Package: "@anthropic-ai/claude-code", Version: agents.TestedVersion(claude)},
			{Agent: "codex", Title: "Codex", Package: "@openai/codex", Version: agents.TestedVersion(codex)},
		}}, v)

	// A build from a plain checkout, without the server (as this test
	// binary is): nothing is made up.
	info = &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Deps: []*debug.Module{{Path: moduleSDK, Version: "v1.50.0"}}}
	out.Reset()
	require.NoError(t, runVersion(versionOptions{Build: build}, &out))
	require.Contains(t, out.String(), "nid              devel\n")
	require.Contains(t, out.String(), "Temporal server  not in this build\n")
	require.Contains(t, out.String(), "Temporal Web UI  not in this build\n")

	_, _, err := runApp(t, Deps{}, "version", "now")
	require.EqualError(t, err, `nid version takes no arguments (got "now")`)
	require.EqualError(t, runVersion(versionOptions{Build: func() (*debug.BuildInfo, bool) { return nil, false }}, &out),
		"this nid binary carries no build information (build it with go build ./cmd/nid)")
}
