package worker

import (
	"encoding/json"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/config"
)

// The spec a session's workflow carries holds no secret and nothing that
// decides what runs: the command, model and API keys stay in the worker's
// config and reach the agent at activity time.
func TestAgentSpecKeepsSecretsOnTheWorker(t *testing.T) {
	cfg := config.Default()
	cfg.Agents = map[string]config.AgentSettings{agents.KindClaude: {Env: map[string]string{"ANTHROPIC_API_KEY": "sk-ant-secret"}, TurnTimeout: config.Duration(20 * time.Minute)}}
	lead := config.Session{Agent: agents.KindClaude, Name: "lead", Model: "claude-sonnet-4-5", Args: []string{"--x"}, Env: map[string]string{"HOME": "/home/lead"}}
	cfg.Groups = map[string]config.Group{"web": {Rotate: config.DefaultRotate(), Sessions: []config.Session{lead}}}
	require.NoError(t, cfg.Validate(agents.ConfigKinds()))

	spec := AgentSpec(cfg, "web", lead)
	require.Equal(t, agents.AgentSpec{Kind: agents.KindClaude, TurnTimeout: config.Duration(20 * time.Minute)}, spec)
	b, err := json.Marshal(spec)
	require.NoError(t, err)
	require.NotContains(t, string(b), "sk-ant-secret")
	require.NotContains(t, string(b), "/home/lead")

	kind, set, ok := AgentSettings(cfg)(agents.SessionRef{Group: "web", Name: "lead"})
	require.True(t, ok)
	require.Equal(t, agents.KindClaude, kind)
	require.Empty(t, set.Command, "nid.yaml names none: the activities run the kind's default command")
	require.Equal(t, "claude-sonnet-4-5", set.Model)
	require.Equal(t, map[string]string{"ANTHROPIC_API_KEY": "sk-ant-secret", "HOME": "/home/lead"}, set.Env)
	require.Equal(t, []string{"--x"}, set.Args)
}

func TestAgentSettingsKnowOnlyTheConfigsSessions(t *testing.T) {
	cfg := config.Default()
	cfg.Groups = map[string]config.Group{"web": {Rotate: config.DefaultRotate(), Sessions: []config.Session{{Agent: agents.KindSim, Name: "lead", Sim: config.DefaultSim()}}}}
	kind, _, ok := AgentSettings(cfg)(agents.SessionRef{Group: "web", Name: "lead"})
	require.True(t, ok)
	require.Equal(t, agents.KindSim, kind)
	for _, ref := range []agents.SessionRef{{Group: "web", Name: "ghost"}, {Group: "api", Name: "lead"}} {
		_, _, ok := AgentSettings(cfg)(ref)
		require.False(t, ok, "%s/%s is not in the config", ref.Group, ref.Name)
	}
}

// The adapters whose processes outlive a turn (Claude Code's stream-json
// process, Codex's app-server) are closed when the node stops: Node.Stop
// closes the activities, which close every adapter that is an io.Closer.
func TestAgentsWithLongLivedProcessesAreClosed(t *testing.T) {
	adapters := Agents()
	for _, kind := range []string{agents.KindClaude, agents.KindCodex} {
		_, ok := adapters[kind].(io.Closer)
		require.True(t, ok, "%s's adapter has no Close", kind)
	}
}
