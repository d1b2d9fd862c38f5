package activities

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/nid-dev/nid/config"
)

type notes struct{ limited []bool }

func (n *notes) RateLimited(_ context.Context, ref SessionRef, limited bool) error {
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
	var got Process
	n := &notes{}
	yes := true
	acts := &Activities{
		Agents: map[string]Agent{config.AgentClaude: scriptedAgent{fn: func(_ context.Context, req TurnRequest) (TurnReport, error) {
			got = req.Process
			req.RateLimited(true)
			req.RateLimited(false)
			return TurnReport{Conversation: "c1", Output: "ok"}, nil
		}}},
		WorkDir: "/srv/work",
		Settings: func(ref SessionRef) (string, config.AgentSettings, bool) {
			require.Equal(t, lead, ref)
			return config.AgentClaude, config.AgentSettings{Command: "claude", Args: []string{"--debug"}, Env: map[string]string{"ANTHROPIC_API_KEY": "sk-secret"},
				Model: "claude-sonnet-4-5", TurnTimeout: config.Duration(time.Minute), Permissions: config.PermissionsReadonly, Network: &yes}, true
		},
		Notify: n,
	}
	spec := AgentSpec{Kind: config.AgentClaude, TurnTimeout: config.Duration(5 * time.Minute)}
	_, err := activityEnv(acts).ExecuteActivity(RunTurnName, TurnInput{Session: lead, Spec: spec, Prompt: "go"})
	require.NoError(t, err)
	require.Equal(t, Process{Command: "claude", Args: []string{"--debug"}, Env: map[string]string{"ANTHROPIC_API_KEY": "sk-secret"},
		Model: "claude-sonnet-4-5", WorkDir: "/srv/work", Timeout: time.Minute, Permissions: config.PermissionsReadonly, Network: &yes}, got)
	require.Equal(t, []bool{true, false}, n.limited, "rate limiting reaches the session while the turn runs")
}

func TestContextFullIsNotRetried(t *testing.T) {
	acts := &Activities{Agents: map[string]Agent{"scripted": failing(ContextFull("prompt_too_long"))}}
	_, err := activityEnv(acts).ExecuteActivity(RunTurnName, turnInput(TurnWork, "go"))
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app), "%v", err)
	require.Equal(t, ErrContextFull, app.Type())
	require.True(t, app.NonRetryable())
}

func TestReadLinesCutsOverlongLines(t *testing.T) {
	long := strings.Repeat("x", MaxLineBytes+1000)
	input := "first\n" + long + "\n\n  spaced  \n" + strings.Repeat("y", MaxLineBytes) + "\nno newline"
	var got []string
	// A reader that hands over a few bytes at a time, as a pipe does.
	readLines(iotest.HalfReader(strings.NewReader(input)), func(line []byte) { got = append(got, string(line)) })
	require.Len(t, got, 5)
	require.Equal(t, "first", got[0])
	require.Equal(t, long[:MaxLineBytes], got[1])
	require.Equal(t, "spaced", got[2])
	require.Len(t, got[3], MaxLineBytes, "a line of exactly the limit is whole")
	require.Equal(t, "no newline", got[4])
}
