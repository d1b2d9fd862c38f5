package agents_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/activities"
	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/internal/agenttest"
	"github.com/nid-dev/nid/worker"
)

// noKeys are set empty in every check's environment, so that the worker's
// own environment logs no agent in behind a test's back.
var noKeys = []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN", "OPENAI_API_KEY", "CODEX_API_KEY",
	"CLAUDE_CONFIG_DIR", "CODEX_HOME", "CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX", "CLAUDE_CODE_USE_FOUNDRY"}

// checkAgent runs nid doctor's checks of one session of kind whose
// nid.yaml settings are set, with env laid over noKeys, and returns them
// by name.
func checkAgent(t *testing.T, kind string, set config.AgentSettings, env map[string]string, deep bool) map[string]agents.Check {
	t.Helper()
	set.Env = map[string]string{}
	for _, k := range noKeys {
		set.Env[k] = ""
	}
	for k, v := range env {
		set.Env[k] = v
	}
	ref := agents.SessionRef{Group: "web", Name: "lead", WorkflowID: "nid/web/lead"}
	acts := &activities.Activities{Agents: worker.Agents(), Settings: func(agents.SessionRef) (string, config.AgentSettings, bool) {
		return kind, set, true
	}}
	out := map[string]agents.Check{}
	for _, c := range acts.CheckAgent(context.Background(), ref, agents.AgentSpec{Kind: kind}, deep) {
		require.Equal(t, "web/lead", c.Session)
		require.NotContains(t, out, c.Name, "one line per check")
		out[c.Name] = c
	}
	return out
}

func requireCheck(t *testing.T, c agents.Check, status string, says ...string) {
	t.Helper()
	require.Equal(t, status, c.Status, "%s: %s", c.Name, c.Text)
	for _, s := range says {
		require.Contains(t, c.Text, s, c.Name)
	}
}

// With the pinned CLIs installed, nid doctor finds each at the version nid
// is tested with, logged in and with a sandbox that runs here; without
// them it says how to install them, at that version.
func TestCheckAgentRealCLIs(t *testing.T) {
	home := t.TempDir()
	claude := checkAgent(t, agents.KindClaude, config.AgentSettings{Command: agentBin(t, "claude")},
		map[string]string{"HOME": home, "ANTHROPIC_API_KEY": "sk-ant-secret"}, true)
	requireCheck(t, claude["cli"], agents.CheckOK, agentBin(t, "claude"), "version "+agents.TestedVersion(agents.KindOf(agents.KindClaude))+": the version nid is tested with")
	requireCheck(t, claude["credentials"], agents.CheckOK, "ANTHROPIC_API_KEY is set")
	requireCheck(t, claude["sandbox"], agents.CheckOK, "bubblewrap runs a sandbox here")
	for _, c := range claude {
		require.NotContains(t, c.Text, "sk-ant-secret", "no check prints a secret")
	}

	codex := checkAgent(t, agents.KindCodex, config.AgentSettings{Command: agentBin(t, "codex")},
		map[string]string{"HOME": home, "CODEX_HOME": t.TempDir(), "OPENAI_API_KEY": "sk-secret"}, true)
	requireCheck(t, codex["cli"], agents.CheckOK, "version "+agents.TestedVersion(agents.KindOf(agents.KindCodex))+": the version nid is tested with")
	requireCheck(t, codex["credentials"], agents.CheckOK, "OPENAI_API_KEY is set")
	requireCheck(t, codex["sandbox"], agents.CheckOK, "Codex's own (nid's permission profile, workspace): it ran `true` here")

	// Absent: found nowhere, so the session cannot start.
	for _, kind := range []string{agents.KindClaude, agents.KindCodex} {
		k := agents.KindOf(kind)
		t.Setenv("PATH", t.TempDir())
		checks := checkAgent(t, kind, config.AgentSettings{}, map[string]string{"HOME": home, "PATH": os.Getenv("PATH")}, true)
		requireCheck(t, checks["cli"], agents.CheckFail, `command "`+kind+`" not found on PATH`,
			"npm install -g "+k.Package+"@"+agents.TestedVersion(k), "agents."+kind+".command")
		require.Len(t, agents.Failing(mapValues(checks)), len(checks)-boolInt(kind == agents.KindCodex),
			"with no CLI only Codex's sandbox is left untried: %v", checks)
		if kind == agents.KindCodex {
			requireCheck(t, checks["sandbox"], agents.CheckWarn, "not tried, for want of its CLI")
		}
	}
}

func mapValues(m map[string]agents.Check) []agents.Check {
	var out []agents.Check
	for _, c := range m {
		out = append(out, c)
	}
	return out
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// A CLI nid is not tested with works, with a warning naming the version it
// is tested with; one that cannot say its version does not run.
func TestCheckAgentVersions(t *testing.T) {
	k := agents.KindOf(agents.KindClaude)
	keys := map[string]string{"ANTHROPIC_API_KEY": "k"}
	other := checkAgent(t, k.Name, config.AgentSettings{Command: agenttest.Script(t, `echo "2.0.1 (Claude Code)"`), Permissions: config.PermissionsFull}, keys, true)
	requireCheck(t, other["cli"], agents.CheckWarn, "version 2.0.1: nid is tested with "+agents.TestedVersion(k), "npm install -g "+k.Package+"@"+agents.TestedVersion(k))

	broken := checkAgent(t, k.Name, config.AgentSettings{Command: agenttest.Script(t, `echo "cannot load libnode" >&2; exit 3`), Permissions: config.PermissionsFull}, keys, true)
	requireCheck(t, broken["cli"], agents.CheckFail, "does not run", "cannot load libnode", "exit status 3", "reinstall it")

	quick := checkAgent(t, k.Name, config.AgentSettings{Command: agenttest.Script(t, "exit 3"), Permissions: config.PermissionsFull}, keys, false)
	requireCheck(t, quick["cli"], agents.CheckOK, "found at ")
}

// Credentials are found where each CLI looks for them, a model provider of
// the user's own included, and their absence says what to set.
func TestCheckAgentCredentials(t *testing.T) {
	file := func(t *testing.T, dir, name, content string) string {
		t.Helper()
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600))
		return dir
	}
	for _, tc := range []struct {
		name, kind string
		args       []string
		env        func(t *testing.T) map[string]string
		status     string
		says       string
	}{
		{"claude key", agents.KindClaude, nil, func(*testing.T) map[string]string { return map[string]string{"ANTHROPIC_AUTH_TOKEN": "tok"} }, agents.CheckOK, "ANTHROPIC_AUTH_TOKEN is set"},
		{"claude on bedrock", agents.KindClaude, nil, func(*testing.T) map[string]string { return map[string]string{"CLAUDE_CODE_USE_BEDROCK": "1"} }, agents.CheckOK, "Amazon Bedrock"},
		{"claude login", agents.KindClaude, nil, func(t *testing.T) map[string]string {
			home := t.TempDir()
			file(t, filepath.Join(home, ".claude"), ".credentials.json", `{"claudeAiOauth":{}}`)
			return map[string]string{"HOME": home}
		}, agents.CheckOK, "a login in "},
		{"claude account (keychain)", agents.KindClaude, nil, func(t *testing.T) map[string]string {
			home := file(t, t.TempDir(), ".claude.json", `{"oauthAccount":{"emailAddress":"a@b"}}`)
			return map[string]string{"HOME": home}
		}, agents.CheckOK, "a login recorded in "},
		{"claude apiKeyHelper", agents.KindClaude, nil, func(t *testing.T) map[string]string {
			dir := file(t, t.TempDir(), "settings.json", `{"apiKeyHelper":"/bin/key"}`)
			return map[string]string{"HOME": t.TempDir(), "CLAUDE_CONFIG_DIR": dir}
		}, agents.CheckOK, "an apiKeyHelper in "},
		{"claude nothing", agents.KindClaude, nil, func(t *testing.T) map[string]string {
			home := file(t, t.TempDir(), ".claude.json", `{"numStartups":3}`)
			return map[string]string{"HOME": home}
		}, agents.CheckFail, "set ANTHROPIC_API_KEY (agents.claude.env, or nid's own environment), or log in by running claude"},
		{"codex key", agents.KindCodex, nil, func(*testing.T) map[string]string { return map[string]string{"CODEX_API_KEY": "k"} }, agents.CheckOK, "CODEX_API_KEY is set"},
		{"codex login", agents.KindCodex, nil, func(t *testing.T) map[string]string {
			return map[string]string{"CODEX_HOME": file(t, t.TempDir(), "auth.json", `{}`)}
		}, agents.CheckOK, "a login in "},
		{"codex own provider", agents.KindCodex, nil, func(t *testing.T) map[string]string {
			home := file(t, t.TempDir(), "config.toml", "model = \"m\" # the model\nmodel_provider = 'local'\n[model_providers.local]\nname = \"local\"\nenv_key = \"LOCAL_KEY\"\n")
			return map[string]string{"CODEX_HOME": home, "LOCAL_KEY": "k"}
		}, agents.CheckOK, "LOCAL_KEY is set, for model provider local"},
		{"codex own provider without its key", agents.KindCodex, nil, func(t *testing.T) map[string]string {
			home := file(t, t.TempDir(), "config.toml", "model_provider = \"local\"\n[model_providers.local]\nenv_key = \"LOCAL_KEY\"\n")
			return map[string]string{"CODEX_HOME": home, "OPENAI_API_KEY": "not this provider's"}
		}, agents.CheckFail, "model provider local takes its key from LOCAL_KEY, which is not set"},
		{"codex provider from args", agents.KindCodex, []string{"-c", `model_provider="oss"`}, func(t *testing.T) map[string]string {
			return map[string]string{"CODEX_HOME": t.TempDir()}
		}, agents.CheckOK, "model provider oss names no env_key"},
		{"codex nothing", agents.KindCodex, nil, func(t *testing.T) map[string]string {
			return map[string]string{"CODEX_HOME": t.TempDir()}
		}, agents.CheckFail, "set OPENAI_API_KEY (agents.codex.env, or nid's own environment), or log in with codex login"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checks := checkAgent(t, tc.kind, config.AgentSettings{Command: "/bin/true", Args: tc.args}, tc.env(t), false)
			requireCheck(t, checks["credentials"], tc.status, tc.says)
		})
	}
}

// The sandbox a session's permissions ask for: none with full; Claude
// Code's needs bubblewrap and socat on the agent's PATH, and a bubblewrap
// that works here; Codex's own must run `true`.
func TestCheckAgentSandbox(t *testing.T) {
	keys := map[string]string{"ANTHROPIC_API_KEY": "k", "OPENAI_API_KEY": "k", "CODEX_HOME": t.TempDir()}
	with := func(env map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range keys {
			out[k] = v
		}
		for k, v := range env {
			out[k] = v
		}
		return out
	}
	full := checkAgent(t, agents.KindClaude, config.AgentSettings{Command: "/bin/true", Permissions: config.PermissionsFull}, keys, false)
	requireCheck(t, full["sandbox"], agents.CheckOK, "none: permissions: full runs claude without a sandbox")

	noBwrap := checkAgent(t, agents.KindClaude, config.AgentSettings{Command: "/bin/true"}, with(map[string]string{"PATH": t.TempDir()}), false)
	requireCheck(t, noBwrap["sandbox"], agents.CheckFail, "bubblewrap (bwrap) and socat are not on the agent's PATH", "apt-get install bubblewrap socat", "permissions: full")

	refused := fakeBwrap(t) + ":" + os.Getenv("PATH")
	claude := checkAgent(t, agents.KindClaude, config.AgentSettings{Command: agentBin(t, "claude")}, with(map[string]string{"PATH": refused}), true)
	requireCheck(t, claude["sandbox"], agents.CheckFail, "bubblewrap cannot make a sandbox", "user namespace", "permissions: full")
	quick := checkAgent(t, agents.KindClaude, config.AgentSettings{Command: agentBin(t, "claude")}, with(map[string]string{"PATH": refused}), false)
	requireCheck(t, quick["sandbox"], agents.CheckOK, "bubblewrap (")

	codex := checkAgent(t, agents.KindCodex, config.AgentSettings{Command: agentBin(t, "codex")}, with(map[string]string{"PATH": refused}), true)
	requireCheck(t, codex["sandbox"], agents.CheckFail, "Codex's sandbox cannot run commands on this host", "user namespace", "permissions: full")

	exec := checkAgent(t, agents.KindExec, config.AgentSettings{Command: "/bin/true", Permissions: config.PermissionsFull}, nil, true)
	requireCheck(t, exec["sandbox"], agents.CheckOK, "none: permissions: full")
	boxed := checkAgent(t, agents.KindExec, config.AgentSettings{Command: "/bin/true"}, nil, true)
	requireCheck(t, boxed["sandbox"], agents.CheckFail, "cannot enforce")

	sim := checkAgent(t, agents.KindSim, config.AgentSettings{}, nil, true)
	require.Len(t, sim, 1)
	requireCheck(t, sim["agent"], agents.CheckOK, "runs inside nid: nothing to install")

	unknown := checkAgent(t, "gpt", config.AgentSettings{}, nil, true)
	require.Len(t, unknown, 1)
	require.Equal(t, `agent "gpt" cannot run on this host (known agents: claude, codex, exec, sim)`, unknown["agent"].Text)
}

// The versions nid is tested with are the ones npm installs for the
// tests: package-lock.json's, for every kind whose CLI comes from npm.
func TestTestedVersionIsWhatTheTestsInstall(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "agents", "package-lock.json"))
	require.NoError(t, err)
	var lock struct {
		Packages map[string]struct {
			Version string `json:"version"`
		} `json:"packages"`
	}
	require.NoError(t, json.Unmarshal(b, &lock))
	n := 0
	for _, k := range agents.Kinds() {
		if k.Package == "" {
			require.Empty(t, agents.TestedVersion(k))
			continue
		}
		n++
		require.Equal(t, lock.Packages["node_modules/"+k.Package].Version, agents.TestedVersion(k), k.Name)
		require.Regexp(t, `^\d+\.\d+\.\d+`, agents.TestedVersion(k), k.Name)
	}
	require.Equal(t, 2, n, "Claude Code and Codex come from npm")
}
