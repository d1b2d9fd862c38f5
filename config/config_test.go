package config_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/config"
)

// kinds are the agent kinds nid has, which config is handed by its caller.
func kinds() []config.Kind { return agents.ConfigKinds() }

// writeFile writes a nid.yaml into a fresh directory and returns its path.
func writeFile(t *testing.T, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "nid.yaml")
	require.NoError(t, os.WriteFile(path, []byte(yaml), 0o600))
	return path
}

// group wraps sessions and rotate lines into a file with one group, web.
func group(body string) string {
	return "groups:\n  web:\n" + body
}

const oneSim = "    sessions:\n      - agent: sim\n"

func TestLoadReportsBadInput(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		env  []string
		want []string // lines the error must contain
		// notWant are lines the error must not contain: a key whose value
		// has the wrong type is reported once, as such.
		notWant []string
		// worker loads as nid up does, with the checks only it needs.
		worker bool
	}{
		{
			name: "bad worker keys",
			yaml: "worker: {host: 'my host', maxSessions: -1, heartbeat: 1ms}\n",
			want: []string{
				`worker.host: "my host" must be letters, digits, '.', '-' or '_' (at most 253, starting with a letter or digit)`,
				`worker.maxSessions: -1 must be 0 (take no sessions) or more`,
				`worker.heartbeat: 1ms is outside 500ms..5m0s`,
			},
		},
		{
			name: "bad host on a group and a session",
			yaml: "groups:\n  web:\n    host: -x\n    sessions:\n      - agent: sim\n        host: a/b\n",
			want: []string{`groups.web.host: "-x" must be letters`, `groups.web.sessions[0].host: "a/b" must be letters`},
		},
		{
			name: "negative budget",
			yaml: group("    budget: {turns: -1, usd: -2.5}\n" + oneSim),
			want: []string{`groups.web.budget.turns: -1 must be 0 (no limit) or more`, `groups.web.budget.usd: -2.5 must be 0 (no limit) or more`},
		},
		{
			name: "budget that is not an amount",
			yaml: group("    budget: {usd: .nan}\n" + oneSim),
			want: []string{`groups.web.budget.usd: NaN is not an amount of dollars (0: no limit)`},
		},
		{
			name: "infinite budget",
			yaml: group("    budget: {usd: .inf}\n" + oneSim),
			want: []string{`groups.web.budget.usd: +Inf is not an amount of dollars (0: no limit)`},
		},
		{
			name: "unknown budget key",
			yaml: group("    budget: {dollars: 5}\n" + oneSim),
			want: []string{`groups.web.budget.dollars: unknown key (allowed: turns, tokens, usd)`},
		},
		{
			name: "task without title",
			yaml: group("    tasks:\n      - detail: no title\n" + oneSim),
			want: []string{`groups.web.tasks[0].title: must not be empty`},
		},
		{
			name: "unknown prompt placeholder",
			yaml: group("    prompts: {task: \"do {{task.name}} now\"}\n" + oneSim),
			want: []string{`groups.web.prompts.task: {{task.name}} is not a placeholder (allowed: {{group}}, {{session}}, {{goal}}, {{task.id}}, {{task.title}}, {{task.detail}}, {{board}})`},
		},
		{
			name:   "repo that is not a git repository",
			yaml:   group("    repo: /\n" + oneSim),
			worker: true,
			want:   []string{`groups.web.repo: "/" is not a git repository`},
		},
		{
			name: "repo with a workdir",
			yaml: group("    repo: /\n    workdir: /tmp\n" + oneSim),
			want: []string{`groups.web.workdir: not allowed with repo`},
		},
		{
			name: "unknown sim ack",
			yaml: group("    sessions:\n      - agent: sim\n        sim: {ack: maybe}\n"),
			want: []string{`groups.web.sessions[0].sim.ack: "maybe" is not one of correct, wrong, none`},
		},
		{
			name: "negative taskTurns",
			yaml: group("    sessions:\n      - agent: sim\n        sim: {taskTurns: -1}\n"),
			want: []string{`groups.web.sessions[0].sim.taskTurns: -1 must be 1 or more (0: the default, 5)`},
		},
		{
			name: "unknown rotate mode",
			yaml: group("    rotate: {mode: fast}\n" + oneSim),
			want: []string{`groups.web.rotate.mode: "fast" is not one of auto, compact, handoff, off`},
		},
		{
			name: "contextPercent zero",
			yaml: group("    rotate: {contextPercent: 0}\n" + oneSim),
			want: []string{`groups.web.rotate.contextPercent: 0 is outside 1..100`},
		},
		{
			name: "contextPercent above 100",
			yaml: group("    rotate: {contextPercent: 101}\n" + oneSim),
			want: []string{`groups.web.rotate.contextPercent: 101 is outside 1..100`},
		},
		{
			name: "contextPercent not whole",
			yaml: group("    rotate: {contextPercent: 80.5}\n" + oneSim),
			want: []string{`groups.web.rotate.contextPercent: 80.5 is not a whole number`},
		},
		{
			name: "negative maxTurns",
			yaml: group("    rotate: {maxTurns: -1}\n" + oneSim),
			want: []string{`groups.web.rotate.maxTurns: -1 must be 0 (never) or more`},
		},
		{
			name: "negative contextTokens and maxConcurrentRotations",
			yaml: group("    rotate: {contextTokens: -5, maxConcurrentRotations: -1}\n" + oneSim),
			want: []string{
				`groups.web.rotate.contextTokens: -5 must be 0 (no token limit) or more`,
				`groups.web.rotate.maxConcurrentRotations: -1 must be 0 (no limit) or more`,
			},
		},
		{
			name: "contextTokens not whole",
			yaml: group("    rotate: {contextTokens: 1.5e5x}\n" + oneSim),
			want: []string{`groups.web.rotate.contextTokens: "1.5e5x" is not a number`},
		},
		{
			name: "sim compaction switches out of range",
			yaml: group("    sessions:\n      - agent: sim\n        sim: {window: 1000, compactAt: 101, compactKeeps: 100, startTokens: 2000}\n"),
			want: []string{
				`groups.web.sessions[0].sim.compactAt: 101 is outside 0..100 (0: it never compacts by itself)`,
				`groups.web.sessions[0].sim.compactKeeps: 100 is outside 1..99 (0: the default, 10)`,
				`groups.web.sessions[0].sim.startTokens: 2000 must be at most the window, 1000`,
			},
		},
		{
			name: "negative sim compaction switches",
			yaml: group("    sessions:\n      - agent: sim\n        sim: {compactAt: -1, compactKeeps: -1, startTokens: -1}\n"),
			want: []string{
				`groups.web.sessions[0].sim.compactAt: -1 is outside 0..100 (0: it never compacts by itself)`,
				`groups.web.sessions[0].sim.compactKeeps: -1 is outside 1..99 (0: the default, 10)`,
				`groups.web.sessions[0].sim.startTokens: -1 must be 0 or more`,
			},
		},
		{
			name: "duplicate session name",
			yaml: group("    sessions:\n      - {agent: sim, name: lead}\n      - {agent: sim, name: lead}\n"),
			want: []string{`groups.web.sessions[1].name: "lead" is used twice in group web`},
		},
		{
			name: "duplicate default name",
			yaml: group("    sessions:\n      - agent: sim\n      - agent: sim\n"),
			want: []string{`groups.web.sessions[1].name: "sim" is used twice in group web (a session's name defaults to its agent kind: give each one a name)`},
		},
		{
			name: "malformed session name",
			yaml: group("    sessions:\n      - {agent: sim, name: Lead!}\n"),
			want: []string{`groups.web.sessions[0].name: "Lead!" is not a name: a group or session name is lower-case letters, digits, '-' and '_', starting with a letter or digit, at most 63 characters`},
		},
		{
			name: "malformed group name",
			yaml: "groups:\n  Web:\n" + oneSim,
			want: []string{`groups.Web: "Web" is not a name: a group or session name is lower-case letters`},
		},
		{
			name: "unknown agent",
			yaml: group("    sessions:\n      - {agent: gpt, name: lead}\n"),
			want: []string{`groups.web.sessions[0].agent: "gpt" is not a known agent (known: sim, claude, codex, exec)`},
		},
		{
			name: "missing agent",
			yaml: group("    sessions:\n      - name: lead\n"),
			want: []string{`groups.web.sessions[0].agent: missing (known: sim, claude, codex, exec)`},
		},
		{
			name:    "agent of the wrong type",
			yaml:    group("    sessions:\n      - {agent: [sim], name: lead}\n"),
			want:    []string{`groups.web.sessions[0].agent: a list is not a string`},
			notWant: []string{`agent: missing`},
		},
		{
			name:    "group not a mapping",
			yaml:    "groups:\n  web: 5\n",
			want:    []string{`groups.web: 5 is not a mapping (allowed keys: goal, rotate, repo, workdir, tasks, budget, prompts, sessions, permissions, network, host)`},
			notWant: []string{`groups.web.sessions`},
		},
		{
			name: "group with no sessions",
			yaml: group("    goal: nothing to do\n"),
			want: []string{`groups.web.sessions: a group needs at least one session`},
		},
		{
			name: "sessions not a list",
			yaml: group("    sessions: {agent: sim}\n"),
			want: []string{`groups.web.sessions: a mapping is not a list`},
		},
		{
			name: "unknown key in a group",
			yaml: group("    rotat: {mode: off}\n" + oneSim),
			want: []string{`groups.web.rotat: unknown key (allowed: goal, rotate, repo, workdir, tasks, budget, prompts, sessions, permissions, network, host)`},
		},
		{
			name: "unknown key at the top",
			yaml: "colour: blue\n",
			want: []string{`colour: unknown key (allowed: state, temporal, http, worker, groups, agents)`},
		},
		{
			name: "unknown key in rotate",
			yaml: group("    rotate: {turns: 3}\n" + oneSim),
			want: []string{`groups.web.rotate.turns: unknown key (allowed: mode, contextPercent, contextTokens, maxTurns, maxConcurrentRotations)`},
		},
		{
			name: "unknown key in sim",
			yaml: group("    sessions:\n      - agent: sim\n        sim: {speed: 2}\n"),
			want: []string{`groups.web.sessions[0].sim.speed: unknown key (allowed: window, tokensPerTurn, turnDelay, failCompact, noHandoff, handoffAfterTurns, silent, taskTurns, ack, compactAt, compactKeeps, startTokens)`},
		},
		{
			name: "port not a number",
			yaml: "temporal: {port: abc}\n",
			want: []string{`temporal.port: "abc" is not a number`},
		},
		{
			name: "ports out of range",
			yaml: "temporal: {port: 0, ui: {port: 70000}}\n",
			want: []string{
				`temporal.port: 0 is outside 1..65535`,
				`temporal.ui.port: 70000 is outside 1..65535`,
			},
		},
		{
			name: "Web UI on the frontend's port",
			yaml: "temporal: {port: 7233, ui: {port: 7233}}\n",
			want: []string{`temporal.ui.port: 7233 is also temporal.port; the Web UI needs a port of its own`},
		},
		{
			name: "the Web UI's port where it was before",
			yaml: "temporal: {uiPort: 8300}\n",
			want: []string{`temporal.uiPort: moved to temporal.ui.port`},
		},
		{
			name: "empty namespace",
			yaml: "temporal: {namespace: \"\"}\n",
			want: []string{`temporal.namespace: must not be empty`},
		},
		{
			name: "address without a port",
			yaml: "temporal: {address: temporal.example.com}\n",
			want: []string{`temporal.address: "temporal.example.com" must be host:port, or empty to start the embedded server`},
		},
		{
			name: "listen without a port",
			yaml: "http: {listen: localhost}\n",
			want: []string{`http.listen: "localhost" must be host:port, e.g. 127.0.0.1:7777`},
		},
		{
			name: "temporal not a mapping",
			yaml: "temporal: 7233\n",
			want: []string{`temporal: 7233 is not a mapping (allowed keys: address, namespace, port, ui, tls, apiKey)`},
		},
		{
			name: "sim window zero",
			yaml: group("    sessions:\n      - agent: sim\n        sim: {window: 0}\n"),
			want: []string{`groups.web.sessions[0].sim.window: 0 must be more than 0`},
		},
		{
			name: "sim window beyond any model",
			yaml: group("    sessions:\n      - agent: sim\n        sim: {window: 9223372036854775807, tokensPerTurn: 9223372036854775807}\n"),
			want: []string{`groups.web.sessions[0].sim.window: 9223372036854775807 must be at most 1099511627776`},
		},
		{
			name: "sim turn larger than its window",
			yaml: group("    sessions:\n      - agent: sim\n        sim: {window: 1000, tokensPerTurn: 5000}\n"),
			want: []string{`groups.web.sessions[0].sim.tokensPerTurn: 5000 must be at most the window, 1000`},
		},
		{
			name: "sim negatives",
			yaml: group("    sessions:\n      - agent: sim\n        sim: {tokensPerTurn: -1, turnDelay: -1s, handoffAfterTurns: -2}\n"),
			want: []string{
				`groups.web.sessions[0].sim.tokensPerTurn: -1 must be 0 or more`,
				`groups.web.sessions[0].sim.turnDelay: -1s must be 0 or more`,
				`groups.web.sessions[0].sim.handoffAfterTurns: -2 must be 0 (never) or more`,
			},
		},
		{
			name: "turnDelay not a duration",
			yaml: group("    sessions:\n      - agent: sim\n        sim: {turnDelay: soon}\n"),
			want: []string{`groups.web.sessions[0].sim.turnDelay: "soon" is not a duration (use e.g. 500ms, 2s, 1m)`},
		},
		{
			name: "turnDelay without a unit",
			yaml: group("    sessions:\n      - agent: sim\n        sim: {turnDelay: 500}\n"),
			want: []string{`groups.web.sessions[0].sim.turnDelay: 500 needs a unit (use e.g. 500ms, 2s, 1m)`},
		},
		{
			name: "failCompact not a bool",
			yaml: group("    sessions:\n      - agent: sim\n        sim: {failCompact: maybe}\n"),
			want: []string{`groups.web.sessions[0].sim.failCompact: "maybe" is not true or false`},
		},
		{
			name: "sim block on another agent",
			yaml: group("    sessions:\n      - agent: gpt\n        sim: {window: 1000}\n"),
			want: []string{
				`groups.web.sessions[0].agent: "gpt" is not a known agent (known: sim, claude, codex, exec)`,
				`groups.web.sessions[0].sim: only allowed with agent: sim`,
			},
		},
		{
			name: "unknown NID_ variable",
			env:  []string{"NID_TEMPORAL_PROT=7300"},
			want: []string{`NID_TEMPORAL_PROT: unknown environment variable; did you mean NID_TEMPORAL_PORT?`},
		},
		{
			name: "compact mode for a kind that cannot compact",
			yaml: "groups:\n  web:\n    rotate: {mode: compact}\n    sessions:\n      - {agent: sim}\n      - {agent: exec, name: lint, command: /bin/true, permissions: full}\n",
			want: []string{`groups.web.rotate.mode: compact never works for session lint: exec agents cannot compact; use handoff, or auto (which hands them off)`},
		},
		{
			name: "a group named as a command word",
			yaml: "groups:\n  help:\n    sessions: [{agent: sim}]\n  clear:\n    sessions: [{agent: sim}]\n",
			want: []string{
				`groups.clear: "clear" is a word nid's commands take (add, clear, h, help), so nid ls clear would not name the group: choose another name`,
				`groups.help: "help" is a word nid's commands take (add, clear, h, help), so nid ls help would not name the group: choose another name`,
			},
		},
		{
			name: "a Web UI address that is no URL",
			yaml: "temporal: {ui: {url: 127.0.0.1:8233}}\n",
			want: []string{`temporal.ui.url: "127.0.0.1:8233" must be an http:// or https:// address, e.g. http://127.0.0.1:8233`},
		},
		{
			name: "a near miss is a typo",
			env:  []string{"NID_HTTP_LISTN=127.0.0.1:1"},
			want: []string{`NID_HTTP_LISTN: unknown environment variable; did you mean NID_HTTP_LISTEN?`},
		},
		{
			name: "the Web UI's port variable where it was before",
			env:  []string{"NID_TEMPORAL_UIPORT=8300"},
			want: []string{`NID_TEMPORAL_UIPORT: moved to NID_TEMPORAL_UI_PORT (temporal.ui.port)`},
		},
		{
			name: "TLS for the embedded server",
			yaml: "temporal: {tls: {serverName: temporal.example.com}}\n",
			want: []string{`temporal.tls: is for a cluster at temporal.address; the embedded server nid up starts listens on 127.0.0.1 without TLS`},
		},
		{
			name: "an API key for the embedded server",
			env:  []string{"TEMPORAL_API_KEY=secret"},
			want: []string{`environment: TEMPORAL_API_KEY (temporal.apiKey): is for a cluster at temporal.address;`},
		},
		{
			name: "an API key with its line break",
			env:  []string{"TEMPORAL_ADDRESS=temporal.example.com:7233", "TEMPORAL_API_KEY=secret\n"},
			want: []string{`TEMPORAL_API_KEY (temporal.apiKey): contains white space or control characters`},
		},
		{
			name:    "a guessable metrics token",
			yaml:    "http: {metricsToken: short}\n",
			notWant: []string{`http.token:`},
			want:    []string{`http.metricsToken: is 5 characters long; it needs at least 16 (empty: only the API token reads /metrics)`},
		},
		{
			name:    "the API token as the metrics token",
			env:     []string{"NID_HTTP_TOKEN=the-same-token-0123456789-abcdefghijkl", "NID_HTTP_METRICSTOKEN=the-same-token-0123456789-abcdefghijkl"},
			want:    []string{`NID_HTTP_METRICSTOKEN (http.metricsToken): is the same as http.token`},
			notWant: []string{`http.token:`},
		},
		{
			name: "a goal past its limit",
			yaml: "groups:\n  web:\n    goal: " + strings.Repeat("g", config.MaxGoalBytes+1) + "\n    sessions:\n      - {agent: sim, name: lead}\n",
			want: []string{"groups.web.goal: is 16385 bytes; a goal is at most 16384 (it goes into every prompt)"},
		},
		{
			name: "a guessable API token",
			yaml: "http: {token: hunter2-0123456789}\n",
			want: []string{`http.token: is 18 characters long; it needs at least 32 (empty: nid makes one in the state directory)`},
		},
		{
			name: "a metrics token with its line break",
			yaml: "http: {metricsToken: \"metrics-token-0123456789\\n\"}\n",
			want: []string{`http.metricsToken: contains white space or control characters`},
		},
		{
			name: "NID_ variable of the wrong type",
			env:  []string{"NID_TEMPORAL_UI_PORT=abc"},
			want: []string{`environment: NID_TEMPORAL_UI_PORT (temporal.ui.port): "abc" is not a number`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := tt.env
			if env == nil {
				env = []string{}
			}
			_, err := config.Load(config.LoadOptions{Kinds: kinds(), File: writeFile(t, tt.yaml), Environ: env, Worker: tt.worker})
			require.Error(t, err)
			for _, line := range tt.want {
				require.Contains(t, err.Error(), line)
			}
			for _, line := range tt.notWant {
				require.NotContains(t, err.Error(), line)
			}
		})
	}
}

func TestLoadReportsEveryProblemAtOnce(t *testing.T) {
	path := writeFile(t, `
temporal: {port: abc}
groups:
  web:
    rotate: {mode: fast, contextPercent: 0}
    sessions:
      - {agent: sim, name: lead}
      - {agent: sim, name: lead}
  API:
    sessions:
      - agent: gpt
`)
	_, err := config.Load(config.LoadOptions{Kinds: kinds(), File: path, Environ: []string{"NID_STAT=blue", "NID_COLOUR=blue"}})
	require.Error(t, err)
	require.Equal(t, path+` and the environment: 7 problems:
  NID_STAT: unknown environment variable; did you mean NID_STATE?
  groups.API: "API" is not a name: a group or session name is lower-case letters, digits, '-' and '_', starting with a letter or digit, at most 63 characters
  groups.API.sessions[0].agent: "gpt" is not a known agent (known: sim, claude, codex, exec)
  groups.web.rotate.contextPercent: 0 is outside 1..100
  groups.web.rotate.mode: "fast" is not one of auto, compact, handoff, off
  groups.web.sessions[1].name: "lead" is used twice in group web
  temporal.port: "abc" is not a number`, err.Error())
}

func TestLoadYAMLSyntaxErrorNamesFileAndLine(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{
			name: "a key indented less than its siblings",
			yaml: "temporal:\n  port: 7233\ngroups:\n  web:\n    goal: ship\n   sessions: []\n",
			want: ": line 6: did not find expected key",
		},
		{
			name: "a list item indented less than the one before",
			yaml: "groups:\n  web:\n    goal: ship\n    sessions:\n      - agent: sim\n        name: lead\n     - agent: sim\n",
			want: ": line 7: did not find expected key",
		},
		{
			name: "a list item among keys",
			yaml: "state: .nid\nhttp:\n  listen: 127.0.0.1:7777\n  token: \"\"\n  - extra\n",
			want: ": line 5: did not find expected key",
		},
		{
			name: "an unclosed bracket",
			yaml: "groups:\n  web:\n    goal: [unclosed\n    rotate: {}\n",
			want: ": line 3: did not find expected ',' or ']'",
		},
		{
			name: "a tab in the indentation",
			yaml: "groups:\n  web:\n    goal: ship\n\tsessions: []\n",
			want: ": line 4: found a tab character that violates indentation",
		},
	}
	// A mistake at the end of a long list, under a block opened at
	// its top: found in a few parses, not one per line.
	long := "groups:\n  web:\n    sessions:\n" + strings.Repeat("      - agent: sim\n", 5000) + "     - agent: sim\n"
	tests = append(tests, struct{ name, yaml, want string }{"a mistake after five thousand sessions", long, ": line 5004: did not find expected key"})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, tt.yaml)
			_, err := config.Load(config.LoadOptions{Kinds: kinds(), File: path, Environ: []string{}})
			require.Error(t, err)
			require.Equal(t, path+tt.want, err.Error())
		})
	}
}

func TestLoadNamesTheVariableThatSetABadValue(t *testing.T) {
	path := writeFile(t, "temporal: {port: 7233}\n")
	tests := []struct {
		name  string
		env   []string
		flags map[string]any
		want  string
	}{
		{
			name: "a variable's value that is not a number",
			env:  []string{"NID_TEMPORAL_PORT=abc"},
			want: `environment: NID_TEMPORAL_PORT (temporal.port): "abc" is not a number`,
		},
		{
			name: "a variable's value out of range",
			env:  []string{"NID_TEMPORAL_PORT=0"},
			want: `environment: NID_TEMPORAL_PORT (temporal.port): 0 is outside 1..65535`,
		},
		{
			name: "a variable nid does not know",
			env:  []string{"NID_TEMPORAL_PROT=7300"},
			want: `environment: NID_TEMPORAL_PROT: unknown environment variable; did you mean NID_TEMPORAL_PORT?`,
		},
		{
			name:  "a flag over the variable",
			env:   []string{"NID_TEMPORAL_PORT=7300"},
			flags: map[string]any{"temporal.port": 0},
			want:  path + `: temporal.port: 0 is outside 1..65535`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.Load(config.LoadOptions{Kinds: kinds(), File: path, Environ: tt.env, Flags: tt.flags})
			require.Error(t, err)
			require.Equal(t, tt.want, err.Error())
		})
	}
}

func TestLoadFile(t *testing.T) {
	t.Run("named file missing", func(t *testing.T) {
		missing := filepath.Join(t.TempDir(), "other.yaml")
		_, err := config.Load(config.LoadOptions{Kinds: kinds(), File: missing, Environ: []string{}})
		require.ErrorContains(t, err, missing)
	})
	t.Run("no file at all", func(t *testing.T) {
		dir := t.TempDir()
		t.Chdir(dir)
		c, err := config.Load(config.LoadOptions{Kinds: kinds(), Environ: []string{}})
		require.NoError(t, err)
		want := config.Default()
		want.State = filepath.Join(dir, config.DefaultStateDir)
		require.Equal(t, want, c)
		require.Empty(t, c.GroupNames())
		require.True(t, c.Embedded())
		require.Equal(t, config.DefaultAddress, c.Address())
	})
	t.Run("nid.yaml in the current directory", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, config.DefaultFile), []byte("state: /var/lib/nid\n"), 0o600))
		t.Chdir(dir)
		c, err := config.Load(config.LoadOptions{Kinds: kinds(), Environ: []string{}})
		require.NoError(t, err)
		require.Equal(t, "/var/lib/nid", c.State)
	})
	t.Run("problems in the current directory's file name it", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, config.DefaultFile), []byte("stat: x\n"), 0o600))
		t.Chdir(dir)
		_, err := config.Load(config.LoadOptions{Kinds: kinds(), Environ: []string{}})
		require.EqualError(t, err, "nid.yaml: stat: unknown key (allowed: state, temporal, http, worker, groups, agents)")
	})
}

func TestLoadPrecedence(t *testing.T) {
	file := writeFile(t, "temporal: {port: 1111, address: file:7233, namespace: file-ns}\n")
	tests := []struct {
		name    string
		env     []string
		flags   map[string]any
		port    int
		address string
	}{
		{name: "file over defaults", port: 1111, address: "file:7233"},
		{
			name:    "environment over file",
			env:     []string{"NID_TEMPORAL_PORT=2222", "NID_TEMPORAL_ADDRESS=env:7233"},
			port:    2222,
			address: "env:7233",
		},
		{
			name:    "flags over environment",
			env:     []string{"NID_TEMPORAL_PORT=2222", "NID_TEMPORAL_ADDRESS=env:7233"},
			flags:   map[string]any{"temporal.port": 3333, "temporal.address": "flag:7233"},
			port:    3333,
			address: "flag:7233",
		},
		{
			name:    "flags given as strings",
			flags:   map[string]any{"temporal.port": "4444"},
			port:    4444,
			address: "file:7233",
		},
		{
			name:    "Temporal CLI variable over file",
			env:     []string{"TEMPORAL_ADDRESS=cli:7233"},
			port:    1111,
			address: "cli:7233",
		},
		{
			name:    "NID_ variable over the Temporal CLI's",
			env:     []string{"NID_TEMPORAL_ADDRESS=nid:7233", "TEMPORAL_ADDRESS=cli:7233"},
			port:    1111,
			address: "nid:7233",
		},
		{
			name:    "empty Temporal CLI variable is unset",
			env:     []string{"TEMPORAL_ADDRESS="},
			port:    1111,
			address: "file:7233",
		},
		{
			name:    "empty NID_ variable clears the address",
			env:     []string{"NID_TEMPORAL_ADDRESS="},
			port:    1111,
			address: "127.0.0.1:1111",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := append([]string{}, tt.env...)
			c, err := config.Load(config.LoadOptions{Kinds: kinds(), File: file, Environ: env, Flags: tt.flags})
			require.NoError(t, err)
			require.Equal(t, tt.port, c.Temporal.Port)
			require.Equal(t, tt.address, c.Address())
		})
	}
}

func TestLoadEnvironment(t *testing.T) {
	c, err := config.Load(config.LoadOptions{Kinds: kinds(), File: writeFile(t, ""), Environ: []string{
		"NID_STATE=/tmp/nid-state",
		"NID_TEMPORAL_ADDRESS=temporal:7233",
		"NID_TEMPORAL_NAMESPACE=ns",
		"NID_TEMPORAL_PORT=7300",
		"NID_TEMPORAL_UI_PORT=8300",
		"NID_TEMPORAL_UI_WRITEACTIONS=true",
		"NID_HTTP_LISTEN=127.0.0.1:7800",
		"TEMPORAL_NAMESPACE=ignored-because-nid-wins",
		"NID_CONFIG=elsewhere.yaml",
		"HOME=/root",
	}})
	require.NoError(t, err)
	require.Equal(t, "/tmp/nid-state", c.State)
	require.Equal(t, config.Temporal{Address: "temporal:7233", Namespace: "ns", Port: 7300, UI: config.UI{Port: 8300, WriteActions: true}}, c.Temporal)
	require.Equal(t, "127.0.0.1:7800", c.HTTP.Listen)
	require.False(t, c.Embedded())

	c, err = config.Load(config.LoadOptions{Kinds: kinds(), File: writeFile(t, ""), Environ: []string{"TEMPORAL_NAMESPACE=cli-ns"}})
	require.NoError(t, err)
	require.Equal(t, "cli-ns", c.Temporal.Namespace)
}

func TestLoadReadsProcessEnvironmentWhenNoneGiven(t *testing.T) {
	t.Setenv("NID_TEMPORAL_UI_PORT", "8400")
	c, err := config.Load(config.LoadOptions{Kinds: kinds(), File: writeFile(t, "")})
	require.NoError(t, err)
	require.Equal(t, 8400, c.Temporal.UI.Port)
}

func TestLoadUnknownFlagKey(t *testing.T) {
	path := writeFile(t, "")
	_, err := config.Load(config.LoadOptions{Kinds: kinds(),
		File:    path,
		Environ: []string{},
		Flags:   map[string]any{"temporal.prot": 7300},
	})
	require.EqualError(t, err, path+": temporal.prot: unknown key (allowed: address, namespace, port, ui, tls, apiKey)")
}

func TestLoadFillsDefaultsPerField(t *testing.T) {
	_, err := config.Load(config.LoadOptions{Kinds: kinds(), Environ: []string{}, File: writeFile(t, `
groups:
  web:
    rotate: {maxTurns: 60}
    sessions:
      - agent: sim
      - agent: sim
        name: fast
        sim: {tokensPerTurn: 20000, turnDelay: 0}
  api:
    rotate:
    sessions:
      - agent: sim
        sim: {window: 0}
`)})
	require.Error(t, err, "an explicit window of 0 is not the default")
	require.ErrorContains(t, err, "groups.api.sessions[0].sim.window: 0 must be more than 0")

	c, err := config.Load(config.LoadOptions{Kinds: kinds(), Environ: []string{}, File: writeFile(t, `
groups:
  web:
    rotate: {maxTurns: 60}
    sessions:
      - agent: sim
      - agent: sim
        name: fast
        sim: {tokensPerTurn: 20000, turnDelay: 0}
  api:
    rotate:
    sessions:
      - agent: sim
`)})
	require.NoError(t, err)
	require.Equal(t, []string{"api", "web"}, c.GroupNames())
	web := c.Groups["web"]
	require.Equal(t, config.Rotate{Mode: config.ModeAuto, ContextPercent: 85, MaxTurns: 60, MaxConcurrentRotations: 2}, web.Rotate)
	require.Equal(t, config.DefaultRotate(), c.Groups["api"].Rotate)
	require.Equal(t, []config.Session{
		{Agent: "sim", Name: "sim", Sim: config.Sim{Window: 200_000, TokensPerTurn: 12_000, TurnDelay: config.Duration(500 * time.Millisecond), TaskTurns: 5}},
		{Agent: "sim", Name: "fast", Sim: config.Sim{Window: 200_000, TokensPerTurn: 20_000, TurnDelay: 0, TaskTurns: 5}},
	}, web.Sessions)
	require.Equal(t, config.Default().Temporal, c.Temporal)
	require.Equal(t, config.DefaultStateDir, filepath.Base(c.State))
	require.Equal(t, config.DefaultHTTPListen, c.HTTP.Listen)
}

func TestSampleFile(t *testing.T) {
	c, err := config.Load(config.LoadOptions{Kinds: kinds(), File: "../nid.yaml", Environ: []string{}})
	require.NoError(t, err)
	require.NoError(t, c.Validate(kinds()))
	top, err := filepath.Abs("..")
	require.NoError(t, err)
	want := &config.Config{
		State:    filepath.Join(top, ".nid"),
		Temporal: config.Temporal{Namespace: "default", Port: 7233, UI: config.UI{Port: 8233}},
		HTTP:     config.HTTP{Listen: "127.0.0.1:7777"},
		Worker:   config.Worker{Host: config.DefaultHost(), MaxSessions: config.DefaultMaxSessions(), Heartbeat: config.Duration(config.DefaultHeartbeat)},
		Groups: map[string]config.Group{
			"web": {
				Goal:   "Add dark mode to the settings page",
				Rotate: config.Rotate{Mode: config.ModeAuto, ContextPercent: 80, MaxTurns: 60, MaxConcurrentRotations: 2},
				Sessions: []config.Session{
					{Agent: "sim", Name: "lead", Sim: config.Sim{Window: 200_000, TokensPerTurn: 12_000, TurnDelay: config.Duration(500 * time.Millisecond), TaskTurns: 5}},
					{Agent: "sim", Name: "worker", Sim: config.Sim{Window: 200_000, TokensPerTurn: 20_000, TurnDelay: config.Duration(500 * time.Millisecond), TaskTurns: 5}},
				},
				Prompts: config.DefaultPrompts(),
			},
			"api": {
				Goal:   "Add rate limiting to the public API",
				Rotate: config.Rotate{Mode: config.ModeHandoff, ContextPercent: 85, MaxTurns: 8, MaxConcurrentRotations: 2},
				Sessions: []config.Session{
					{Agent: "sim", Name: "solo", Sim: config.DefaultSim()},
				},
				Prompts: config.DefaultPrompts(),
			},
		},
	}
	require.Equal(t, want, c)
	require.Equal(t, "127.0.0.1:7233", c.Address())
}

func TestValidateConfigBuiltInCode(t *testing.T) {
	c := config.Default()
	c.Groups = map[string]config.Group{"web": {
		Rotate:   config.DefaultRotate(),
		Sessions: []config.Session{{Agent: "sim", Name: "lead"}},
	}}
	require.EqualError(t, c.Validate(kinds()), "groups.web.sessions[0].sim.window: 0 must be more than 0")
	c.Groups["web"].Sessions[0].Sim = config.DefaultSim()
	require.NoError(t, c.Validate(kinds()))
}

func TestRotateProblems(t *testing.T) {
	bad := config.Rotate{Mode: "fast", ContextPercent: 0, MaxTurns: -1}
	require.Equal(t, []string{
		`groups.web.rotate.mode: "fast" is not one of auto, compact, handoff, off`,
		`groups.web.rotate.contextPercent: 0 is outside 1..100`,
		`groups.web.rotate.maxTurns: -1 must be 0 (never) or more`,
	}, bad.Problems("groups.web.rotate"))
	require.EqualError(t, bad.Validate(), strings.Join([]string{
		`mode: "fast" is not one of auto, compact, handoff, off`,
		`contextPercent: 0 is outside 1..100`,
		`maxTurns: -1 must be 0 (never) or more`,
	}, "\n"))
	require.NoError(t, config.DefaultRotate().Validate())
	require.Empty(t, config.Rotate{Mode: config.ModeOff, ContextPercent: 100}.Problems(""))
}

func TestApplyRotateJSON(t *testing.T) {
	base := config.Rotate{Mode: config.ModeAuto, ContextPercent: 80, MaxTurns: 60}
	tests := []struct {
		name    string
		js      string
		want    config.Rotate
		wantErr []string
	}{
		{
			name: "fields present change",
			js:   `{"mode":"handoff","maxTurns":40}`,
			want: config.Rotate{Mode: config.ModeHandoff, ContextPercent: 80, MaxTurns: 40},
		},
		{
			name: "a token threshold and the governor's limit",
			js:   `{"contextTokens":150000,"maxConcurrentRotations":0}`,
			want: config.Rotate{Mode: config.ModeAuto, ContextPercent: 80, MaxTurns: 60, ContextTokens: 150_000},
		},
		{
			name: "negative token threshold and limit",
			js:   `{"contextTokens":-1,"maxConcurrentRotations":-2}`,
			wantErr: []string{
				`contextTokens: -1 must be 0 (no token limit) or more`,
				`maxConcurrentRotations: -2 must be 0 (no limit) or more`,
			},
		},
		{
			name: "empty object changes nothing",
			js:   ` {} `,
			want: base,
		},
		{
			name: "null keeps the field",
			js:   `{"contextPercent":null,"maxTurns":0}`,
			want: config.Rotate{Mode: config.ModeAuto, ContextPercent: 80, MaxTurns: 0},
		},
		{
			name:    "unknown field",
			js:      `{"mode":"off","turns":3}`,
			wantErr: []string{`turns: unknown key (allowed: mode, contextPercent, contextTokens, maxTurns, maxConcurrentRotations)`},
		},
		{
			name: "invalid values, all reported",
			js:   `{"mode":"fast","contextPercent":120,"maxTurns":-1}`,
			wantErr: []string{
				`mode: "fast" is not one of auto, compact, handoff, off`,
				`contextPercent: 120 is outside 1..100`,
				`maxTurns: -1 must be 0 (never) or more`,
			},
		},
		{
			name:    "wrong type",
			js:      `{"maxTurns":"many"}`,
			wantErr: []string{`maxTurns: "many" is not a number`},
		},
		{
			name:    "a number in quotes",
			js:      `{"contextPercent":"80"}`,
			wantErr: []string{`contextPercent: "80" is a string: write a number without quotes`},
		},
		{
			name:    "not whole",
			js:      `{"contextPercent":80.5}`,
			wantErr: []string{`contextPercent: 80.5 is not a whole number`},
		},
		{
			name:    "array",
			js:      `["handoff"]`,
			wantErr: []string{`rotate: a list is not a JSON object; write one such as {"mode":"handoff","maxTurns":40}`},
		},
		{
			name:    "string",
			js:      `"handoff"`,
			wantErr: []string{`rotate: "handoff" is not a JSON object`},
		},
		{
			name:    "null",
			js:      `null`,
			wantErr: []string{`rotate: null is not a JSON object`},
		},
		{
			name:    "not JSON",
			js:      `mode=handoff`,
			wantErr: []string{`rotate: "mode=handoff" is not JSON`},
		},
		{
			name:    "empty",
			js:      ``,
			wantErr: []string{`rotate: "" is not JSON`},
		},
		{
			name:    "two objects",
			js:      `{"mode":"off"}{"mode":"auto"}`,
			wantErr: []string{`has more after its JSON object`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := config.ApplyRotateJSON(base, tt.js)
			if tt.wantErr == nil {
				require.NoError(t, err)
				require.Equal(t, tt.want, got)
				return
			}
			require.Error(t, err)
			for _, line := range tt.wantErr {
				require.Contains(t, err.Error(), line)
			}
			require.Equal(t, base, got, "a refused change leaves the policy as it was")
		})
	}
}

func TestValidName(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"lead", true},
		{"web-2", true},
		{"a_b", true},
		{"0", true},
		{strings.Repeat("a", 63), true},
		{strings.Repeat("a", 64), false},
		{"", false},
		{"-lead", false},
		{"_lead", false},
		{"Lead", false},
		{"web/lead", false},
		{"a.b", false},
		{"lead!", false},
	}
	for _, tt := range tests {
		require.Equal(t, tt.ok, config.ValidName(tt.name), "%q", tt.name)
	}
}

func TestValidHost(t *testing.T) {
	for host, ok := range map[string]bool{
		"build-1.example.com":    true,
		"Host_2":                 true,
		strings.Repeat("a", 253): true,
		strings.Repeat("a", 254): false,
		"":                       false,
		".host":                  false,
		"-host":                  false,
		"my host":                false,
		"host/../x":              false,
		"hôst":                   false,
	} {
		require.Equal(t, ok, config.ValidHost(host), "%q", host)
	}
}

func TestAddress(t *testing.T) {
	c := config.Default()
	c.Temporal.Port = 7300
	require.True(t, c.Embedded())
	require.Equal(t, "127.0.0.1:7300", c.Address())
	c.Temporal.Address = "temporal.example.com:7233"
	require.False(t, c.Embedded())
	require.Equal(t, "temporal.example.com:7233", c.Address())
}

func TestApplyBudgetJSON(t *testing.T) {
	base := config.Budget{Turns: 100}
	got, err := config.ApplyBudgetJSON(base, `{"usd":20}`)
	require.NoError(t, err)
	require.Equal(t, config.Budget{Turns: 100, USD: 20}, got, "only the fields given change")
	_, err = config.ApplyBudgetJSON(base, `{"turns":-5,"minutes":3}`)
	require.EqualError(t, err, "minutes: unknown key (allowed: turns, tokens, usd)\nturns: -5 must be 0 (no limit) or more")
	_, err = config.ApplyBudgetJSON(base, `[1]`)
	require.ErrorContains(t, err, `budget: a list is not a JSON object; write one such as {"turns":500,"usd":20}`)
}

func TestRenderPrompt(t *testing.T) {
	got := config.RenderPrompt(config.DefaultPrompts().Continue, "task.id", "t3", "task.title", "Docs")
	require.Equal(t, "Continue with task t3: Docs. When it is done, call task_done with id t3.", got)
	require.Equal(t, config.DefaultPrompts(), config.Prompts{}.WithDefaults())
}

func TestRepoMustBeAGitRepository(t *testing.T) {
	dir := t.TempDir()
	out, err := exec.Command("git", "init", "-q", dir).CombinedOutput()
	require.NoError(t, err, string(out))
	c := config.Default()
	c.Groups = map[string]config.Group{"web": {
		Rotate: config.DefaultRotate(), Repo: dir,
		Sessions: []config.Session{{Agent: "sim", Name: "lead", Sim: config.DefaultSim()}},
	}}
	require.NoError(t, c.Validate(kinds()))
}

// Variables far from any of nid's are someone else's: a shell's NID_FOO, or
// what an older nid handed its agents, do not stop nid.
func TestOtherNIDVariablesAreNotNids(t *testing.T) {
	cfg, err := config.Load(config.LoadOptions{Kinds: kinds(), File: writeFile(t, ""), Environ: []string{
		"NID_SESSION=g/x", "NID_CONVERSATION=abc", "NID_TURN_KIND=work", "NID_MCP_URL=http://127.0.0.1:1/mcp", "NID_FOO=1",
	}})
	require.NoError(t, err)
	require.Equal(t, config.DefaultStateDir, filepath.Base(cfg.State))
}

// Relative paths in a file are the file's: nid --config other/nid.yaml reads
// other/'s repo and state, whatever the current directory; and a command
// that only reads is not stopped by a repo it never uses.
func TestRelativePathsAreTheFiles(t *testing.T) {
	dir := t.TempDir()
	other := filepath.Join(dir, "other")
	require.NoError(t, os.MkdirAll(filepath.Join(other, "repo"), 0o755))
	require.NoError(t, exec.Command("git", "init", "-q", filepath.Join(other, "repo")).Run())
	path := filepath.Join(other, "nid.yaml")
	require.NoError(t, os.WriteFile(path, []byte(`state: st
groups:
  web:
    repo: repo
    sessions:
      - {agent: exec, name: tool, command: ./bin/agent.sh, permissions: full}
      - {agent: exec, name: path, command: agent-on-path, permissions: full}
  api:
    workdir: ../shared
    sessions: [{agent: sim}]
`), 0o644))
	t.Chdir(dir)
	cfg, err := config.Load(config.LoadOptions{Kinds: kinds(), File: "other/nid.yaml", Environ: []string{}, Worker: true})
	require.NoError(t, err)
	require.Equal(t, filepath.Join(other, "st"), cfg.State)
	require.Equal(t, filepath.Join(other, "repo"), cfg.Groups["web"].Repo)
	require.Equal(t, filepath.Join(dir, "shared"), cfg.Groups["api"].WorkDir)
	require.Equal(t, filepath.Join(other, "bin", "agent.sh"), cfg.Groups["web"].Sessions[0].Command)
	require.Equal(t, "agent-on-path", cfg.Groups["web"].Sessions[1].Command)

	require.NoError(t, os.RemoveAll(filepath.Join(other, "repo")))
	_, err = config.Load(config.LoadOptions{Kinds: kinds(), File: "other/nid.yaml", Environ: []string{}})
	require.NoError(t, err, "a read command does not need the repo")
	_, err = config.Load(config.LoadOptions{Kinds: kinds(), File: "other/nid.yaml", Environ: []string{}, Worker: true})
	require.ErrorContains(t, err, `groups.web.repo: "`+filepath.Join(other, "repo")+`" is not a git repository`)
}

func TestWorkerHostAndPins(t *testing.T) {
	long := "build-agent-0042.eu-central-1.compute.internal.corp.example-company.com"
	dir := t.TempDir()
	file := filepath.Join(dir, "nid.yaml")
	yaml := "worker: {maxSessions: 0}\ngroups:\n  web:\n    host: box-a\n    sessions:\n      - {agent: sim, name: lead}\n      - {agent: sim, name: worker, host: box-b}\n"
	require.NoError(t, os.WriteFile(file, []byte(yaml), 0o600))
	c, err := config.Load(config.LoadOptions{Kinds: kinds(), File: file, Environ: []string{"NID_WORKER_HOST=" + long}})
	require.NoError(t, err)
	require.Equal(t, long, c.Worker.Host, "a fully qualified hostname over 63 characters is a host name")
	require.Zero(t, c.Worker.MaxSessions, "0 is kept: a worker that takes no sessions")
	lead, _ := c.Session("web", "lead")
	worker, _ := c.Session("web", "worker")
	require.Equal(t, "box-a", c.SessionHost("web", lead), "the group's host")
	require.Equal(t, "box-b", c.SessionHost("web", worker), "the session's own wins")
	require.True(t, config.IsRepoURL("https://git.example.com/app.git"))
	require.True(t, config.IsRepoURL("git@github.com:nid-dev/nid.git"))
	require.False(t, config.IsRepoURL("../app"))

	url := "groups:\n  web:\n    repo: https://git.example.com/app.git\n    sessions:\n      - {agent: sim}\n"
	require.NoError(t, os.WriteFile(file, []byte(url), 0o600))
	c, err = config.Load(config.LoadOptions{Kinds: kinds(), File: file, Environ: []string{}, Worker: true})
	require.NoError(t, err, "a URL is cloned by each host, not checked here")
	require.Equal(t, "https://git.example.com/app.git", c.Groups["web"].Repo, "a URL is not a path")
}

// Every command reads nid.yaml before it does anything, so a fleet's file
// is part of what each nid ls costs: a thousand sessions in ten groups.
func BenchmarkLoadThousandSessions(b *testing.B) {
	var yaml strings.Builder
	yaml.WriteString("groups:\n")
	for g := range 10 {
		fmt.Fprintf(&yaml, "  g%d:\n    sessions:\n", g)
		for s := range 100 {
			fmt.Fprintf(&yaml, "      - {agent: sim, name: s%d}\n", s)
		}
	}
	path := filepath.Join(b.TempDir(), "nid.yaml")
	require.NoError(b, os.WriteFile(path, []byte(yaml.String()), 0o600))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := config.Load(config.LoadOptions{Kinds: kinds(), File: path, Environ: []string{}}); err != nil {
			b.Fatal(err)
		}
	}
}

// A group's repo reaches git, so one git would take as an option, hand to
// a program (a remote helper), or fetch over a transport nid does not use
// is refused when nid.yaml is read, naming the group and what is allowed.
func TestReposGitWouldRunAreRefused(t *testing.T) {
	for _, tc := range []struct {
		repo string
		ok   bool
	}{
		{"https://git.example.com/app.git", true},
		{"ssh://git@git.example.com/app.git", true},
		{"git@github.com:nid-dev/nid.git", true},
		{"file:///srv/git/app.git", true},
		{"/srv/git/app", true},
		{"ext::sh -c touch% /tmp/pwned", false},
		{"fd::3", false},
		{"--upload-pack=touch /tmp/pwned", false},
		{"http://git.example.com/app.git", false},
		{"git://git.example.com/app.git", false},
		{"https://git.example.com/app.git\n[core]", false},
	} {
		problem := config.RepoProblem(tc.repo)
		require.Equal(t, tc.ok, problem == "", "%q: %s", tc.repo, problem)
		if !tc.ok {
			require.Contains(t, problem, "a repo is an https://, ssh:// or file:// URL, user@host:path, or a path on this host")
		}
	}
	file := filepath.Join(t.TempDir(), "nid.yaml")
	yaml := "groups:\n  web:\n    repo: \"ext::sh -c touch% /tmp/pwned\"\n    sessions:\n      - {agent: sim}\n"
	require.NoError(t, os.WriteFile(file, []byte(yaml), 0o600))
	_, err := config.Load(config.LoadOptions{Kinds: kinds(), File: file, Environ: []string{}})
	require.ErrorContains(t, err, "groups.web.repo")
	require.ErrorContains(t, err, "names a git remote helper")
}
