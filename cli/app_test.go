package cli

import (
	"context"
	"io"
	"log/slog"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/internal/temporaltest"
	"github.com/nid-dev/nid/worker"
	"github.com/nid-dev/nid/workflows"
)

func TestArgumentErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown command", []string{"frobnicate"}, `unknown command "frobnicate" (see nid --help)`},
		{"unknown group subcommand", []string{"group", "drop"}, `unknown command "drop" (see nid group --help)`},
		{"unknown flag", []string{"ls", "--colour"}, "flag provided but not defined: -colour (see nid ls --help)"},
		{"unknown flag after the argument", []string{"rotate", "web/lead", "--force"}, "flag provided but not defined: --force"},
		{"flag without its value", []string{"rotate", "web/lead", "--mode"}, "flag needs an argument: --mode"},
		{"bad log level", []string{"--log-level", "loud", "ls"}, `--log-level "loud": use debug, info, warn or error`},

		{"bad mode", []string{"rotate", "web/lead", "--mode", "restart"}, `--mode "restart" is not a rotation mode: use auto, compact or handoff`},
		{"off is not a way to rotate", []string{"rotate", "--mode=off", "web/lead"}, `--mode "off" is not a rotation mode`},
		{"rotate without a session", []string{"rotate"}, "nid rotate takes one GROUP/SESSION"},
		{"rotate a group", []string{"rotate", "web"}, `"web" is not a session: write GROUP/SESSION, e.g. web/lead`},
		{"rotate a malformed session", []string{"rotate", "web/Lead!"}, `"web/Lead!" is not a session`},

		{"group set without a setting", []string{"group", "set", "web"}, "nothing to set on web: add KEY=VALUE"},
		{"group set without =", []string{"group", "set", "web", "rotate"}, `"rotate" is not KEY=VALUE (keys: rotate, budget, learned)`},
		{"group set unknown key", []string{"group", "set", "web", "color=blue"}, `unknown key "color": allowed keys: rotate, budget, learned`},
		{"board add without title", []string{"board", "add", "web"}, "nid board add takes GROUP TITLE"},
		{"stop a malformed session", []string{"stop", "web/Lead!"}, "is not a session"},
		{"stop a malformed group", []string{"stop", "We b"}, `"We b" is not a group name`},
		{"group set empty value", []string{"group", "set", "web", "rotate="}, "rotate needs a value"},
		{"group set twice", []string{"group", "set", "web", `rotate={"mode":"auto"}`, `rotate={"mode":"off"}`}, "rotate is given twice"},
		{"group set bad group", []string{"group", "set", "Web", `rotate={}`}, `"Web" is not a group name`},

		{"send without text", []string{"send", "web/lead"}, "nothing to send to web/lead"},
		{"send blank text", []string{"send", "web/lead", "  "}, "nothing to send to web/lead"},
		{"send to a group", []string{"send", "web", "hello"}, `"web" is not a session`},

		{"ls two groups", []string{"ls", "web", "api"}, "too many arguments: nid ls takes at most one GROUP"},
		{"ls bad group", []string{"ls", "we b"}, `"we b" is not a group name`},
		{"watch half a session", []string{"watch", "web/"}, `"web/" is not a session`},
		{"inbox two groups", []string{"inbox", "web", "api"}, "too many arguments"},
		{"up takes no arguments", []string{"up", "now"}, `nid up takes no arguments (got "now")`},

		// Every command reads the global flags after its name too, the
		// ones with subcommands included.
		{"board --config", []string{"board", "--config", "/nonexistent/nid.yaml"}, "/nonexistent/nid.yaml"},
		{"board add --config", []string{"board", "add", "web", "t", "--config", "/nonexistent/nid.yaml"}, "/nonexistent/nid.yaml"},
		{"inbox --config", []string{"inbox", "--config", "/nonexistent/nid.yaml"}, "/nonexistent/nid.yaml"},
		{"inbox clear --config", []string{"inbox", "clear", "--config", "/nonexistent/nid.yaml"}, "/nonexistent/nid.yaml"},
		{"board --address", []string{"board", "--address"}, "flag needs an argument: -address"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A nil client: none of these may reach Temporal.
			_, _, err := runApp(t, Deps{}, tt.args...)
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func TestFlagsAfterArguments(t *testing.T) {
	t.Parallel()
	s := newSite(t, `  web:
    sessions:
      - {agent: sim, name: worker, sim: {turnDelay: 0s}}
`)
	temporaltest.TakeTurns(t, s.c, "web", "worker", "write the parser")
	// The documented usage puts --mode after the session.
	require.Equal(t, "rotating web/worker now (handoff)\n", s.mustNid("rotate", "web/worker", "--mode", "handoff"))
	v := temporaltest.WaitSession(t, s.c, "web", "worker", "to rotate", func(v workflows.SessionView) bool { return v.Context.Rotations == 1 })
	require.Equal(t, &workflows.RotationMark{Method: config.ModeHandoff, Reason: workflows.ReasonManual, At: v.Context.LastRotation.At, OK: true}, v.Context.LastRotation)
}

func TestSendJoinsWordsAndTakesDashTextAfterDoubleDash(t *testing.T) {
	t.Parallel()
	s := newSite(t, `  web:
    sessions:
      - {agent: sim, name: lead, sim: {turnDelay: 0s}}
`)
	require.Equal(t, "queued for web/lead\n", s.mustNid("send", "web/lead", "run", "the", "tests"))
	require.Equal(t, "queued for web/lead\n", s.mustNid("send", "web/lead", "--", "-1 is", "wrong"))
	v := temporaltest.WaitSession(t, s.c, "web", "lead", "to take both turns", func(v workflows.SessionView) bool { return v.Context.TotalTurns == 2 })
	require.Equal(t, []string{"message queued: run the tests", "message queued: -1 is wrong"}, eventTexts(v, workflows.EventMessage))
}

// eventTexts are the texts of a session's events of one kind, oldest first.
func eventTexts(v workflows.SessionView, kind string) []string {
	var out []string
	for _, e := range v.Events {
		if e.Kind == kind {
			out = append(out, e.Text)
		}
	}
	return out
}

func TestHelpAfterArgumentsShowsHelp(t *testing.T) {
	out, _, err := runApp(t, Deps{}, "rotate", "web/lead", "--help")
	require.NoError(t, err)
	require.Contains(t, out, "--mode MODE")
}

// Help lists only what a command takes, and each default once.
func TestHelpListsWhatTheCommandUses(t *testing.T) {
	for _, command := range []string{"version", "completion"} {
		out, _, err := runApp(t, Deps{}, command, "--help")
		require.NoError(t, err)
		for _, global := range []string{"--config", "--address", "--namespace", "--log-level"} {
			require.NotContains(t, out, global, "nid %s reads no configuration", command)
		}
	}
	out, _, err := runApp(t, Deps{}, "ls", "--help")
	require.NoError(t, err)
	require.Contains(t, out, "--config FILE", "a command that reads the configuration takes the global flags after its name")

	for _, command := range []string{"up", "worker"} {
		out, _, err := runApp(t, Deps{}, command, "--help")
		require.NoError(t, err)
		line := regexp.MustCompile(`(?m)^\s+--max-sessions N.*$`).FindString(out)
		require.Equal(t, 1, strings.Count(line, "default:"), line)
		require.Contains(t, line, "(default: worker.maxSessions, else one per core, at least 2)")
	}
}

func TestLsColour(t *testing.T) {
	t.Parallel()
	s := newSite(t, `  web:
    rotate: {mode: off}
    sessions:
      - {agent: sim, name: lead, sim: {window: 200000, tokensPerTurn: 160000, turnDelay: 0s}}
`)
	temporaltest.TakeTurns(t, s.c, "web", "lead", "go")
	temporaltest.Settle(t, s.c)
	terminal := func(io.Writer) bool { return true }
	tests := []struct {
		name   string
		deps   Deps
		yellow bool
	}{
		{"terminal", Deps{IsTerminal: terminal}, true},
		{"NO_COLOR", Deps{IsTerminal: terminal, Environ: []string{"NO_COLOR=1"}}, false},
		{"empty NO_COLOR does not count", Deps{IsTerminal: terminal, Environ: []string{"NO_COLOR="}}, true},
		{"not a terminal", Deps{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.deps.Environ = append(tt.deps.Environ, s.Environ()...)
			tt.deps.Dial = worker.Dial
			out, _, err := runApp(t, tt.deps, "ls")
			require.NoError(t, err)
			require.Contains(t, out, "80% of 200k")
			if tt.yellow {
				require.Contains(t, out, ansiYellow+"80% of 200k"+ansiReset)
			} else {
				require.NotContains(t, out, "\x1b[")
			}
		})
	}
}

func TestGlobalFlagsReachTheConfig(t *testing.T) {
	t.Parallel()
	s := newSite(t, "")
	var got *config.Config
	d := Deps{
		Environ: []string{"TEMPORAL_NAMESPACE=from-env"},
		Dial: func(ctx context.Context, cfg *config.Config, _ *slog.Logger) (client.Client, error) {
			got = cfg
			return client.DialContext(ctx, s.ClientOptions())
		},
	}
	_, _, err := runApp(t, d, "--address", "10.0.0.5:7233", "ls")
	require.NoError(t, err)
	require.Equal(t, "10.0.0.5:7233", got.Address())
	require.Equal(t, "from-env", got.Temporal.Namespace)

	_, _, err = runApp(t, d, "ls", "--namespace", "nid-test")
	require.NoError(t, err)
	require.Equal(t, "nid-test", got.Temporal.Namespace)
	require.Equal(t, config.DefaultAddress, got.Address())
}
