package activities

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/internal/agenttest"
)

type notes struct{ limited []bool }

func (n *notes) RateLimited(_ context.Context, ref agents.SessionRef, limited bool) error {
	if ref != lead {
		return errors.New("wrong session")
	}
	n.limited = append(n.limited, limited)
	return nil
}

// The spec in workflow history names only the kind; the command, arguments,
// environment (API keys), model and timeout come from the worker's own
// config at activity time.
func TestRunTurnResolvesTheProcessOnTheWorker(t *testing.T) {
	readyHost(t, "claude")
	var got agents.Process
	n := &notes{}
	yes := true
	acts := &Activities{
		Agents: map[string]agents.Agent{agents.KindClaude: scriptedAgent{fn: func(_ context.Context, req agents.TurnRequest) (agents.TurnReport, error) {
			got = req.Process
			req.RateLimited(true)
			req.RateLimited(false)
			return agents.TurnReport{Conversation: "c1", Output: "ok"}, nil
		}}},
		WorkDir: "/srv/work",
		Settings: func(ref agents.SessionRef) (string, config.AgentSettings, bool) {
			require.Equal(t, lead, ref)
			return agents.KindClaude, config.AgentSettings{Command: "claude", Args: []string{"--debug"}, Env: map[string]string{"ANTHROPIC_API_KEY": "sk-secret"},
				Model: "claude-sonnet-4-5", TurnTimeout: config.Duration(time.Minute), Permissions: config.PermissionsReadonly, Network: &yes}, true
		},
		Notify: n,
	}
	spec := agents.AgentSpec{Kind: agents.KindClaude, TurnTimeout: config.Duration(5 * time.Minute)}
	_, err := activityEnv(acts).ExecuteActivity(RunTurnName, TurnInput{Session: lead, Spec: spec, Prompt: "go"})
	require.NoError(t, err)
	require.Equal(t, agents.Process{Kind: agents.KindClaude, Command: "claude", Args: []string{"--debug"}, Env: map[string]string{"ANTHROPIC_API_KEY": "sk-secret"},
		Model: "claude-sonnet-4-5", WorkDir: "/srv/work", Timeout: time.Minute, Permissions: config.PermissionsReadonly, Network: true}, got)
	require.Equal(t, []bool{true, false}, n.limited, "rate limiting reaches the session while the turn runs")
}

// What nid.yaml leaves unset comes from the kind's entry in Kinds: its
// default command and its sandbox's network default; permissions the kind
// cannot enforce are refused before anything runs.
func TestTheKindFillsWhatTheConfigLeavesUnset(t *testing.T) {
	no := false
	for _, tc := range []struct {
		kind    string
		set     config.AgentSettings
		want    agents.Process
		refused string
	}{
		{agents.KindClaude, config.AgentSettings{}, agents.Process{Kind: agents.KindClaude, Command: "claude", Permissions: config.PermissionsWorkspace, Network: false}, ""},
		{agents.KindCodex, config.AgentSettings{Network: &no}, agents.Process{Kind: agents.KindCodex, Command: "codex", Permissions: config.PermissionsWorkspace, Network: false}, ""},
		{agents.KindExec, config.AgentSettings{Command: "./agent.sh", Permissions: config.PermissionsFull}, agents.Process{Kind: agents.KindExec, Command: "./agent.sh", Permissions: config.PermissionsFull}, ""},
		{agents.KindExec, config.AgentSettings{Command: "./agent.sh"}, agents.Process{},
			"exec: web/lead would run with permissions: workspace, which exec agents cannot enforce; set permissions: full for it (agents.exec, its group or the session) to run it with no sandbox"},
		{agents.KindExec, config.AgentSettings{Command: "./agent.sh", Permissions: config.PermissionsReadonly}, agents.Process{}, "permissions: readonly, which exec agents cannot enforce"},
	} {
		t.Run(tc.kind+"/"+tc.set.Permissions, func(t *testing.T) {
			readyHost(t, "claude", "codex")
			t.Chdir(t.TempDir())
			require.NoError(t, os.WriteFile("agent.sh", []byte("#!/bin/sh\n"), 0o755))
			a := &ran{}
			var got agents.Process
			acts := &Activities{
				Agents: map[string]agents.Agent{tc.kind: scriptedAgent{fn: func(_ context.Context, req agents.TurnRequest) (agents.TurnReport, error) {
					got = req.Process
					return a.Turn(context.Background(), req)
				}}},
				Settings: func(agents.SessionRef) (string, config.AgentSettings, bool) { return tc.kind, tc.set, true },
			}
			_, err := activityEnv(acts).ExecuteActivity(RunTurnName, TurnInput{Session: lead, Spec: agents.AgentSpec{Kind: tc.kind}, Prompt: "go"})
			if tc.refused == "" {
				require.NoError(t, err)
				require.Equal(t, tc.want, got)
				return
			}
			appErr, ok := errors.AsType[*temporal.ApplicationError](err)
			require.True(t, ok, "%v", err)
			require.Equal(t, ErrSandboxUnavailable, appErr.Type())
			require.True(t, appErr.NonRetryable())
			require.Contains(t, appErr.Error(), tc.refused)
			require.Empty(t, a.ops, "nothing ran")
		})
	}
}

func TestContextFullIsNotRetried(t *testing.T) {
	acts := &Activities{Agents: map[string]agents.Agent{"scripted": failing(agents.ContextFull("prompt_too_long"))}}
	_, err := activityEnv(acts).ExecuteActivity(RunTurnName, turnInput(agents.TurnWork, "go"))
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app), "%v", err)
	require.Equal(t, ErrContextFull, app.Type())
	require.True(t, app.NonRetryable())
}

// An agent gets the worker's variables it needs and its own vendor's, not
// the rest of the user's environment: another vendor's key, cloud
// credentials, the SSH agent's socket. What nid.yaml's env: gives it and
// what nid sets reach it whatever their name.
func TestAgentsGetOnlyTheirOwnVariables(t *testing.T) {
	codexHome := t.TempDir()
	require.NoError(t, os.WriteFile(codexHome+"/config.toml", []byte("model_provider = \"local\"\n[model_providers.local]\nenv_key = \"LOCAL_API_KEY\"\n"), 0o644))
	for k, v := range map[string]string{
		"PATH": "/usr/bin:/bin", "HOME": "/home/u", "LC_ALL": "C.UTF-8", "TZ": "UTC",
		"ANTHROPIC_API_KEY": "anthropic-key", "ANTHROPIC_BASE_URL": "http://127.0.0.1:1", "CLAUDE_CODE_USE_BEDROCK": "1",
		"OPENAI_API_KEY": "openai-key", "LOCAL_API_KEY": "local-key",
		"AWS_SECRET_ACCESS_KEY": "aws-secret", "SSH_AUTH_SOCK": "/tmp/ssh-agent.sock", "GITHUB_TOKEN": "github-token",
		"NID_HTTP_TOKEN": "nid-secret", "TEMPORAL_API_KEY": "temporal-secret",
	} {
		t.Setenv(k, v)
	}
	nidSets := map[string]string{agents.EnvMCPToken: "mcp-token"}
	for _, tc := range []struct {
		name       string
		p          agents.Process
		gets, lost []string
	}{
		{"claude", agents.Process{Kind: agents.KindClaude},
			[]string{"PATH", "HOME", "LC_ALL", "TZ", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "CLAUDE_CODE_USE_BEDROCK", agents.EnvMCPToken},
			[]string{"OPENAI_API_KEY", "LOCAL_API_KEY", "AWS_SECRET_ACCESS_KEY", "SSH_AUTH_SOCK", "GITHUB_TOKEN", "NID_HTTP_TOKEN", "TEMPORAL_API_KEY"}},
		{"claude on Bedrock, given its cloud's key in env:", agents.Process{Kind: agents.KindClaude, Env: map[string]string{"AWS_SECRET_ACCESS_KEY": "from-nid-yaml"}},
			[]string{"ANTHROPIC_API_KEY", "AWS_SECRET_ACCESS_KEY"},
			[]string{"OPENAI_API_KEY", "SSH_AUTH_SOCK"}},
		{"codex", agents.Process{Kind: agents.KindCodex},
			[]string{"PATH", "HOME", "OPENAI_API_KEY", agents.EnvMCPToken},
			[]string{"ANTHROPIC_API_KEY", "LOCAL_API_KEY", "AWS_SECRET_ACCESS_KEY", "SSH_AUTH_SOCK", "GITHUB_TOKEN", "NID_HTTP_TOKEN"}},
		{"codex with a provider of the user's own", agents.Process{Kind: agents.KindCodex, Env: map[string]string{"CODEX_HOME": codexHome}},
			[]string{"OPENAI_API_KEY", "LOCAL_API_KEY", "CODEX_HOME"},
			[]string{"ANTHROPIC_API_KEY", "AWS_SECRET_ACCESS_KEY"}},
		{"exec", agents.Process{Kind: agents.KindExec, Env: map[string]string{"MY_MODEL_KEY": "k"}},
			[]string{"PATH", "HOME", "MY_MODEL_KEY", agents.EnvMCPToken},
			[]string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "AWS_SECRET_ACCESS_KEY", "SSH_AUTH_SOCK", "NID_HTTP_TOKEN"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := agents.ProcessEnv(tc.p, nidSets)
			for _, k := range tc.gets {
				require.Contains(t, env, k)
			}
			for _, k := range tc.lost {
				require.NotContains(t, env, k)
			}
			if v, ok := tc.p.Env["AWS_SECRET_ACCESS_KEY"]; ok {
				require.Equal(t, v, env["AWS_SECRET_ACCESS_KEY"], "env: wins over the worker's")
			}
		})
	}
}

// An exec command that reports what its conversation holds but not its
// window gets the window its session's window key gives, and the context
// says where the window came from; a window the command reports wins, and
// a command that reports nothing still shows nothing.
func TestTheConfiguredWindowFillsWhatTheAgentLeavesOut(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		want       agents.Usage
	}{
		{"no window reported", `{"nid":"usage","used":41200}`, agents.Usage{UsedTokens: 41200, WindowTokens: 128000, Source: agents.SourceConfigured}},
		{"a window reported", `{"nid":"usage","used":41200,"window":200000}`, agents.Usage{UsedTokens: 41200, WindowTokens: 200000, Source: agents.SourceReported}},
		{"nothing reported", ``, agents.Usage{Source: agents.SourceUnknown}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := agenttest.Script(t, "cat >/dev/null\necho worked\necho '"+tc.line+"'\n")
			acts := &Activities{Agents: map[string]agents.Agent{agents.KindExec: agents.NewExec()}, StateDir: t.TempDir(),
				Settings: func(agents.SessionRef) (string, config.AgentSettings, bool) {
					return agents.KindExec, config.AgentSettings{Command: cmd, Permissions: config.PermissionsFull, TurnTimeout: config.Duration(time.Minute), Window: 128000}, true
				}}
			v, err := activityEnv(acts).ExecuteActivity(RunTurnName, TurnInput{Session: lead, Spec: agents.AgentSpec{Kind: agents.KindExec}, Prompt: "go"})
			require.NoError(t, err)
			var res TurnResult
			require.NoError(t, v.Get(&res))
			require.Equal(t, "worked", res.Output)
			require.Equal(t, tc.want, res.Usage)
		})
	}
}
