package worker

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/config"
)

func attachConfig(t *testing.T) *config.Config {
	cfg := config.Default()
	cfg.State = t.TempDir()
	work := t.TempDir()
	lead := config.Session{Agent: agents.KindExec, Name: "lead", Command: "/bin/true", Permissions: config.PermissionsFull, Env: map[string]string{"TEAM": "web"}}
	cfg.Groups = map[string]config.Group{"web": {Rotate: config.DefaultRotate(), WorkDir: work, Sessions: []config.Session{lead}}}
	require.NoError(t, cfg.Validate(agents.ConfigKinds()))
	return cfg
}

// nid attach runs in the session's directory with its environment, and
// with MCP tools the worker itself accepts for the session's conversation
// of that generation: its key, its address.
func TestAttachCommandIsTheSessionsWithTheWorkersMCPAccess(t *testing.T) {
	cfg := attachConfig(t)
	key, err := LoadOrCreateKey(cfg.State) // as nid up on this host made it
	require.NoError(t, err)
	ref := agents.SessionRef{Group: "web", Name: "lead", WorkflowID: agents.SessionWorkflowID("web", "lead")}
	const httpURL = "http://127.0.0.1:7777"

	cmd, err := AttachCommand(t.Context(), cfg, ref, agents.AgentSpec{Kind: agents.KindExec}, "c-1", 2, "sh", httpURL)
	require.NoError(t, err)
	require.Equal(t, "sh", filepath.Base(cmd.Path))
	require.Equal(t, cfg.Groups["web"].WorkDir, cmd.Dir)
	require.Contains(t, cmd.Env, "TEAM=web")
	require.Contains(t, cmd.Env, "NIDAGENT_CONVERSATION=c-1")
	worker := NewMCPEndpoint(key, nil, httpURL)
	require.Contains(t, cmd.Env, "NIDAGENT_MCP_URL="+worker.URL(ref, 2), "the worker's own URL for generation 2")
	require.NotContains(t, cmd.Env, "NIDAGENT_MCP_URL="+worker.URL(ref, 1))
	require.Same(t, os.Stdin, cmd.Stdin, "the person's terminal")
}

// Without the worker's key nid attach makes none: tokens signed with a key
// of its own would be refused by the worker.
func TestAttachCommandNeedsTheWorkersKey(t *testing.T) {
	cfg := attachConfig(t)
	ref := agents.SessionRef{Group: "web", Name: "lead", WorkflowID: agents.SessionWorkflowID("web", "lead")}
	_, err := AttachCommand(t.Context(), cfg, ref, agents.AgentSpec{Kind: agents.KindExec}, "", 1, "sh", "http://127.0.0.1:7777")
	require.ErrorContains(t, err, "no MCP key in "+cfg.State+": nid attach runs on the host whose nid up runs the session")
	entries, _ := os.ReadDir(cfg.State)
	require.False(t, slices.ContainsFunc(entries, func(e os.DirEntry) bool { return strings.Contains(e.Name(), "mcp.key") }), "no key made")
}
