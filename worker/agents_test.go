package worker

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/activities"
	"github.com/nid-dev/nid/config"
)

// The spec a session's workflow carries holds no secret: API keys stay in
// the worker's config and reach the agent at activity time.
func TestAgentSpecKeepsSecretsOnTheWorker(t *testing.T) {
	cfg := config.Default()
	cfg.Agents = map[string]config.AgentSettings{config.AgentClaude: {Env: map[string]string{"ANTHROPIC_API_KEY": "sk-ant-secret"}, TurnTimeout: config.Duration(20 * time.Minute)}}
	lead := config.Session{Agent: config.AgentClaude, Name: "lead", Model: "claude-sonnet-4-5", Args: []string{"--x"}, Env: map[string]string{"HOME": "/home/lead"}}
	cfg.Groups = map[string]config.Group{"web": {Rotate: config.DefaultRotate(), Sessions: []config.Session{lead}}}
	require.NoError(t, cfg.Validate())

	spec := AgentSpec(cfg, "web", lead)
	require.Equal(t, activities.AgentSpec{Kind: config.AgentClaude, Command: "claude", Model: "claude-sonnet-4-5", TurnTimeout: config.Duration(20 * time.Minute)}, spec)
	b, err := json.Marshal(spec)
	require.NoError(t, err)
	require.NotContains(t, string(b), "sk-ant-secret")
	require.NotContains(t, string(b), "/home/lead")

	set, ok := AgentSettings(cfg)(activities.SessionRef{Group: "web", Name: "lead"})
	require.True(t, ok)
	require.Equal(t, map[string]string{"ANTHROPIC_API_KEY": "sk-ant-secret", "HOME": "/home/lead"}, set.Env)
	require.Equal(t, []string{"--x"}, set.Args)
}

func TestAgentsCoverEveryKind(t *testing.T) {
	agents := Agents()
	for _, kind := range config.AgentKinds() {
		require.Contains(t, agents, kind)
	}
}
