package config_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/config"
)

const agentsFile = `agents:
  claude: {command: /opt/claude/bin/claude, args: [--verbose-mcp], env: {ANTHROPIC_API_KEY: sk-default, HOME: /home/agents}, model: claude-sonnet-4-5, turnTimeout: 20m}
  codex: {env: {OPENAI_API_KEY: sk-openai}}
groups:
  web:
    sessions:
      - {agent: claude, name: lead, model: claude-opus-4-1, env: {ANTHROPIC_API_KEY: sk-lead}}
      - {agent: claude, name: plain}
      - {agent: codex, name: worker, args: [-c, model_reasoning_effort=high], turnTimeout: 5m}
      - {agent: exec, name: script, command: ./agent.sh}
`

func TestAgentFor(t *testing.T) {
	file := writeFile(t, agentsFile)
	cfg, err := config.Load(config.LoadOptions{File: file, Environ: []string{}})
	require.NoError(t, err)
	tests := []struct {
		session string
		want    config.AgentSettings
	}{
		{"lead", config.AgentSettings{Command: "/opt/claude/bin/claude", Args: []string{"--verbose-mcp"},
			Env: map[string]string{"ANTHROPIC_API_KEY": "sk-lead", "HOME": "/home/agents"}, Model: "claude-opus-4-1", TurnTimeout: config.Duration(20 * time.Minute)}},
		{"plain", config.AgentSettings{Command: "/opt/claude/bin/claude", Args: []string{"--verbose-mcp"},
			Env: map[string]string{"ANTHROPIC_API_KEY": "sk-default", "HOME": "/home/agents"}, Model: "claude-sonnet-4-5", TurnTimeout: config.Duration(20 * time.Minute)}},
		{"worker", config.AgentSettings{Command: "codex", Args: []string{"-c", "model_reasoning_effort=high"},
			Env: map[string]string{"OPENAI_API_KEY": "sk-openai"}, TurnTimeout: config.Duration(5 * time.Minute)}},
		{"script", config.AgentSettings{Command: filepath.Join(filepath.Dir(file), "agent.sh"), Env: map[string]string{}, TurnTimeout: config.Duration(config.DefaultTurnTimeout)}},
	}
	for _, tt := range tests {
		got, ok := cfg.AgentFor("web", tt.session)
		require.True(t, ok, tt.session)
		require.Equal(t, tt.want, got, tt.session)
	}
	_, ok := cfg.AgentFor("web", "nobody")
	require.False(t, ok)
}

func TestAgentSettingsProblems(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{"unknown kind", "agents:\n  gpt: {command: gpt}\n" + group(oneSim),
			[]string{`agents.gpt: "gpt" is not an agent kind that runs a command (known: claude, codex, exec)`}},
		{"sim takes no settings", "agents:\n  sim: {command: x}\n" + group(oneSim),
			[]string{`agents.sim: "sim" is not an agent kind that runs a command`}},
		{"unknown key", "agents:\n  claude: {comand: claude}\n" + group(oneSim),
			[]string{`agents.claude.comand: unknown key (allowed: command, args, env, model, turnTimeout)`}},
		{"bad duration", "agents:\n  claude: {turnTimeout: soon}\n" + group(oneSim),
			[]string{`agents.claude.turnTimeout: "soon" is not a duration (use e.g. 500ms, 2s, 1m)`}},
		{"negative duration", group("    sessions:\n      - {agent: claude, turnTimeout: -1m}\n"),
			[]string{`groups.web.sessions[0].turnTimeout: -1m0s must be more than 0`}},
		{"exec needs a command", group("    sessions:\n      - {agent: exec}\n"),
			[]string{`groups.web.sessions[0].command: an exec session needs a command (here or in agents.exec.command)`}},
		{"sim takes no command", group("    sessions:\n      - {agent: sim, command: x, env: {A: b}}\n"),
			[]string{`groups.web.sessions[0].command: only allowed with agent: claude, codex, exec`, `groups.web.sessions[0].env: only allowed with agent: claude, codex, exec`}},
		{"bad env name", group("    sessions:\n      - {agent: codex, env: {\"A=B\": x}}\n"),
			[]string{`groups.web.sessions[0].env: "A=B" is not an environment variable name`}},
		{"env values are text", "agents:\n  claude: {env: {KEY: [1]}}\n" + group(oneSim),
			[]string{`agents.claude.env.KEY: a list is not a string`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.Load(config.LoadOptions{File: writeFile(t, tt.yaml), Environ: []string{}})
			require.Error(t, err)
			for _, w := range tt.want {
				require.True(t, strings.Contains(err.Error(), w), "want %q in:\n%s", w, err)
			}
		})
	}
	t.Run("exec command from the agents section", func(t *testing.T) {
		_, err := config.Load(config.LoadOptions{File: writeFile(t, "agents:\n  exec: {command: ./a.sh}\n"+group("    sessions:\n      - {agent: exec}\n")), Environ: []string{}})
		require.NoError(t, err)
	})
}
