package cli

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/nid-dev/nid/config"
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
			_, _, err := runApp(t, nil, Deps{}, tt.args...)
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func TestFlagsAfterArguments(t *testing.T) {
	// The documented usage puts --mode after the session.
	fake := &fakeClient{sessions: []workflows.SessionView{{Group: "web", Name: "worker", Status: workflows.StatusIdle, Conversation: "c1", Policy: config.DefaultRotate()}}}
	out, _, err := runApp(t, fake, Deps{}, "rotate", "web/worker", "--mode", "handoff")
	require.NoError(t, err)
	require.Equal(t, "rotating web/worker now (handoff)\n", out)
	require.Equal(t, []sentSignal{{
		WorkflowID: "nid/web/worker", Name: workflows.SignalRotate,
		Arg: workflows.RotateRequest{Mode: "handoff", Reason: workflows.ReasonManual},
	}}, fake.signals)
}

func TestSendJoinsWordsAndTakesDashTextAfterDoubleDash(t *testing.T) {
	fake := &fakeClient{sessions: []workflows.SessionView{{Group: "web", Name: "lead"}}}
	_, _, err := runApp(t, fake, Deps{}, "send", "web/lead", "run", "the", "tests")
	require.NoError(t, err)
	_, _, err = runApp(t, fake, Deps{}, "send", "web/lead", "--", "-1 is", "wrong")
	require.NoError(t, err)
	require.Equal(t, []sentSignal{
		{WorkflowID: "nid/web/lead", Name: workflows.SignalMessage, Arg: workflows.Message{Text: "run the tests"}},
		{WorkflowID: "nid/web/lead", Name: workflows.SignalMessage, Arg: workflows.Message{Text: "-1 is wrong"}},
	}, fake.signals)
}

func TestHelpAfterArgumentsShowsHelp(t *testing.T) {
	out, _, err := runApp(t, nil, Deps{}, "rotate", "web/lead", "--help")
	require.NoError(t, err)
	require.Contains(t, out, "--mode MODE")
}

func TestLsColour(t *testing.T) {
	fake := &fakeClient{sessions: []workflows.SessionView{{
		Group: "web", Name: "lead", Agent: "sim", Status: "idle",
		Context: workflows.ContextRecord{Percent: pct(80), WindowTokens: 200_000},
	}}}
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
			out, _, err := runApp(t, fake, tt.deps, "ls")
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
	var got *config.Config
	fake := &fakeClient{}
	d := Deps{
		Environ: []string{"TEMPORAL_NAMESPACE=from-env"},
		Dial: func(_ context.Context, cfg *config.Config, _ *slog.Logger) (client.Client, error) {
			got = cfg
			return fake, nil
		},
	}
	_, _, err := runApp(t, fake, d, "--address", "10.0.0.5:7233", "ls")
	require.NoError(t, err)
	require.Equal(t, "10.0.0.5:7233", got.Address())
	require.Equal(t, "from-env", got.Temporal.Namespace)

	_, _, err = runApp(t, fake, d, "ls", "--namespace", "nid-test")
	require.NoError(t, err)
	require.Equal(t, "nid-test", got.Temporal.Namespace)
	require.Equal(t, config.DefaultAddress, got.Address())
}
