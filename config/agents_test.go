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
  claude: {command: /opt/claude/bin/claude, args: [--verbose-mcp], env: {ANTHROPIC_API_KEY: sk-default, HOME: /home/agents}, model: claude-sonnet-4-5, turnTimeout: 20m, network: true}
  codex: {env: {OPENAI_API_KEY: sk-openai}, permissions: readonly}
groups:
  web:
    repo: ./app
    sessions:
      - {agent: claude, name: lead, model: claude-opus-4-1, env: {ANTHROPIC_API_KEY: sk-lead}, permissions: full}
      - {agent: claude, name: plain}
      - {agent: codex, name: worker, args: [-c, model_reasoning_effort=high], turnTimeout: 5m}
      - {agent: exec, name: script, command: ./agent.sh, permissions: full, window: 128000}
  api:
    repo: ./api
    permissions: readonly
    network: false
    sessions:
      - {agent: claude, name: lead}
      - {agent: codex, name: writer, permissions: workspace}
`

func TestAgentFor(t *testing.T) {
	file := writeFile(t, agentsFile)
	cfg, err := config.Load(config.LoadOptions{Kinds: kinds(), File: file, Environ: []string{}})
	require.NoError(t, err)
	yes, no := true, false
	tests := []struct {
		group, session string
		want           config.AgentSettings
	}{
		{"web", "lead", config.AgentSettings{Command: "/opt/claude/bin/claude", Args: []string{"--verbose-mcp"},
			Env: map[string]string{"ANTHROPIC_API_KEY": "sk-lead", "HOME": "/home/agents"}, Model: "claude-opus-4-1", TurnTimeout: config.Duration(20 * time.Minute),
			Permissions: config.PermissionsFull, Network: &yes}},
		{"web", "plain", config.AgentSettings{Command: "/opt/claude/bin/claude", Args: []string{"--verbose-mcp"},
			Env: map[string]string{"ANTHROPIC_API_KEY": "sk-default", "HOME": "/home/agents"}, Model: "claude-sonnet-4-5", TurnTimeout: config.Duration(20 * time.Minute),
			Permissions: config.PermissionsWorkspace, Network: &yes}},
		// No command: the kind's default, which the worker resolves.
		{"web", "worker", config.AgentSettings{Args: []string{"-c", "model_reasoning_effort=high"},
			Env: map[string]string{"OPENAI_API_KEY": "sk-openai"}, TurnTimeout: config.Duration(5 * time.Minute), Permissions: config.PermissionsReadonly}},
		// A session's window is its own.
		{"web", "script", config.AgentSettings{Command: filepath.Join(filepath.Dir(file), "agent.sh"), Env: map[string]string{}, TurnTimeout: config.Duration(config.DefaultTurnTimeout),
			Permissions: config.PermissionsFull, Window: 128000}},
		// The group's setting wins over the agents: entry, the session's
		// over the group's.
		{"api", "lead", config.AgentSettings{Command: "/opt/claude/bin/claude", Args: []string{"--verbose-mcp"},
			Env: map[string]string{"ANTHROPIC_API_KEY": "sk-default", "HOME": "/home/agents"}, Model: "claude-sonnet-4-5", TurnTimeout: config.Duration(20 * time.Minute),
			Permissions: config.PermissionsReadonly, Network: &no}},
		{"api", "writer", config.AgentSettings{Env: map[string]string{"OPENAI_API_KEY": "sk-openai"}, TurnTimeout: config.Duration(config.DefaultTurnTimeout),
			Permissions: config.PermissionsWorkspace, Network: &no}},
	}
	for _, tt := range tests {
		got, ok := cfg.AgentFor(tt.group, tt.session)
		require.True(t, ok, tt.session)
		require.Equal(t, tt.want, got, tt.group+"/"+tt.session)
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
			[]string{`agents.claude.comand: unknown key (allowed: command, args, env, model, turnTimeout, permissions, network)`}},
		{"bad duration", "agents:\n  claude: {turnTimeout: soon}\n" + group(oneSim),
			[]string{`agents.claude.turnTimeout: "soon" is not a duration (use e.g. 500ms, 2s, 1m)`}},
		{"negative duration", group("    sessions:\n      - {agent: claude, turnTimeout: -1m}\n"),
			[]string{`groups.web.sessions[0].turnTimeout: -1m0s must be more than 0`}},
		{"exec needs a command", group("    sessions:\n      - {agent: exec}\n"),
			[]string{`groups.web.sessions[0].command: the exec agent has no default command: name one here or in agents.exec.command`}},
		{"sim takes no command", group("    sessions:\n      - {agent: sim, command: x, env: {A: b}}\n"),
			[]string{`groups.web.sessions[0].command: only allowed with agent: claude, codex, exec`, `groups.web.sessions[0].env: only allowed with agent: claude, codex, exec`}},
		{"bad env name", group("    sessions:\n      - {agent: codex, env: {\"A=B\": x}}\n"),
			[]string{`groups.web.sessions[0].env: "A=B" is not an environment variable name`}},
		{"env values are text", "agents:\n  claude: {env: {KEY: [1]}}\n" + group(oneSim),
			[]string{`agents.claude.env.KEY: a list is not a string`}},
		{"nid's and Temporal's variables stay with nid", "agents:\n  claude: {env: {NID_HTTP_TOKEN: x, temporal_api_key: y, NIDAGENT_SESSION: z}}\n" + group(oneSim),
			[]string{`agents.claude.env: "NID_HTTP_TOKEN" is reserved`, `agents.claude.env: "temporal_api_key" is reserved`, `agents.claude.env: "NIDAGENT_SESSION" is reserved`}},
		{"unknown permissions", "agents:\n  claude: {permissions: sandbox}\n" + group("    permissions: all\n    sessions:\n      - {agent: codex, permissions: none}\n"),
			[]string{`agents.claude.permissions: "sandbox" is not one of workspace, readonly, full`,
				`groups.web.permissions: "all" is not one of workspace, readonly, full`,
				`groups.web.sessions[0].permissions: "none" is not one of workspace, readonly, full`}},
		{"network is true or false", group("    sessions:\n      - {agent: codex, network: sometimes}\n"),
			[]string{`groups.web.sessions[0].network: "sometimes" is not true or false`}},
		{"exec cannot be sandboxed", group("    sessions:\n      - {agent: exec, command: ./a.sh}\n"),
			[]string{`groups.web.sessions[0].permissions: unset means workspace, which exec agents cannot enforce`, `Set permissions: full here, on the group or in agents.exec`}},
		{"exec has no readonly", group("    permissions: readonly\n    sessions:\n      - {agent: codex}\n      - {agent: exec, command: ./a.sh}\n"),
			[]string{`groups.web.permissions: readonly is not supported by exec agents (supported: full) (session groups.web.sessions[1] is exec)`}},
		{"no network needs a sandbox", "agents:\n  codex: {network: false}\n" + group("    sessions:\n      - {agent: codex, permissions: full}\n"),
			[]string{`agents.codex.network: false needs a sandbox, and groups.web.sessions[0] runs with permissions: full, which has none`}},
		{"two kinds in one directory", group("    sessions:\n      - {agent: claude}\n      - {agent: codex}\n"),
			[]string{`groups.web.sessions[0]: this claude session could write, in the directory nid runs in, the configuration the codex session groups.web.sessions[1] reads there ` +
				`(.claude/ and .mcp.json for Claude Code, .codex/ for Codex), and that CLI runs the hooks and MCP servers it names outside any sandbox: ` +
				`give the group a repo, so that each session works in a worktree of its own, or keep their workdirs apart, or set permissions: readonly or full for this session`,
				`groups.web.sessions[1]: this codex session could write, in the directory nid runs in, the configuration the claude session groups.web.sessions[0] reads there`}},
		{"a writer beside a CLI without a sandbox", group("    sessions:\n      - {agent: claude, permissions: full}\n      - {agent: codex}\n"),
			[]string{`groups.web.sessions[1]: this codex session could write, in the directory nid runs in, the configuration the claude session groups.web.sessions[0] reads there`}},
		{"two groups in one workdir", "groups:\n  web:\n    workdir: /srv/app\n    sessions:\n      - {agent: claude}\n" +
			"  api:\n    workdir: /srv/app/api\n    sessions:\n      - {agent: codex, permissions: readonly}\n",
			[]string{`groups.web.sessions[0]: this claude session could write, in /srv/app, the configuration the codex session groups.api.sessions[0] reads there`}},
		{"sim has no sandbox settings", group("    sessions:\n      - {agent: sim, permissions: full, network: true}\n"),
			[]string{`groups.web.sessions[0].permissions: only allowed with agent: claude, codex, exec`, `groups.web.sessions[0].network: only allowed with agent: claude, codex, exec`}},
		{"a window is a number of tokens", group("    sessions:\n      - {agent: exec, command: ./a.sh, permissions: full, window: -1}\n      - {agent: codex, name: b, window: 2000000000000}\n"),
			[]string{`groups.web.sessions[0].window: -1 must be more than 0 tokens (or unset: the window the agent reports)`,
				`groups.web.sessions[1].window: 2000000000000 must be at most 1099511627776 tokens`}},
		{"the sim's window is its own", group("    sessions:\n      - {agent: sim, window: 1000}\n"),
			[]string{`groups.web.sessions[0].window: only allowed with agent: claude, codex, exec`}},
		{"a window belongs to a session", "agents:\n  exec: {command: ./a.sh, window: 1000}\n" + group(oneSim),
			[]string{`agents.exec.window: unknown key (allowed: command, args, env, model, turnTimeout, permissions, network)`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.Load(config.LoadOptions{Kinds: kinds(), File: writeFile(t, tt.yaml), Environ: []string{}})
			require.Error(t, err)
			for _, w := range tt.want {
				require.True(t, strings.Contains(err.Error(), w), "want %q in:\n%s", w, err)
			}
		})
	}
	for name, yaml := range map[string]string{
		"two kinds in worktrees of their own": group("    repo: /srv/app\n    sessions:\n      - {agent: claude}\n      - {agent: codex}\n"),
		"one kind in one directory":           group("    sessions:\n      - {agent: claude, name: a}\n      - {agent: claude, name: b}\n"),
		"two kinds that write nothing":        group("    sessions:\n      - {agent: claude, permissions: readonly}\n      - {agent: codex, permissions: full}\n"),
		"two kinds in workdirs apart": "groups:\n  web:\n    workdir: /srv/web\n    sessions:\n      - {agent: claude}\n" +
			"  api:\n    workdir: /srv/api\n    sessions:\n      - {agent: codex}\n",
		"an exec command beside a CLI": group("    sessions:\n      - {agent: claude}\n      - {agent: exec, command: ./a.sh, permissions: full}\n"),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := config.Load(config.LoadOptions{Kinds: kinds(), File: writeFile(t, yaml), Environ: []string{}})
			require.NoError(t, err)
		})
	}
	t.Run("exec command from the agents section", func(t *testing.T) {
		_, err := config.Load(config.LoadOptions{Kinds: kinds(), File: writeFile(t, "agents:\n  exec: {command: ./a.sh, permissions: full}\n"+group("    sessions:\n      - {agent: exec}\n")), Environ: []string{}})
		require.NoError(t, err)
	})
}

// Config knows no agent kind of its own: the rules for a session's agent
// are those of the kinds its caller hands in.
func TestValidationFollowsTheKindsHandedIn(t *testing.T) {
	gpt := []config.Kind{{Name: "gpt", Process: true, Permissions: []string{config.PermissionsFull}}}
	c := config.Default()
	c.Groups = map[string]config.Group{"web": {Rotate: config.DefaultRotate(), Sessions: []config.Session{{Agent: "gpt", Name: "lead"}}}}
	require.EqualError(t, c.Validate(gpt), strings.Join([]string{
		"groups.web.sessions[0].command: the gpt agent has no default command: name one here or in agents.gpt.command",
		"groups.web.sessions[0].permissions: unset means workspace, which gpt agents cannot enforce: nid runs their command as it is, with no sandbox. " +
			"Set permissions: full here, on the group or in agents.gpt to let it do whatever the user running nid can",
	}, "\n"))
	c.Groups["web"].Sessions[0].Command, c.Groups["web"].Sessions[0].Permissions = "gpt-agent", config.PermissionsFull
	require.NoError(t, c.Validate(gpt))
	require.EqualError(t, c.Validate(kinds()), `groups.web.sessions[0].agent: "gpt" is not a known agent (known: sim, claude, codex, exec)`)

	require.ErrorContains(t, c.Validate(nil), `groups.web.sessions[0].agent: "gpt" is not a known agent (known: none: whoever loaded this configuration gave config no agent kinds`)

	gpt[0].DefaultCommand = "gpt"
	c.Groups["web"].Sessions[0].Command = ""
	require.NoError(t, c.Validate(gpt), "a kind with a default command needs none named")
}
