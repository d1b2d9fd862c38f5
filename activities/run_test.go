package activities

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/internal/agenttest"
)

// scriptedAgent answers every turn with fn; it stands in for a vendor whose
// output the test needs to choose.
type scriptedAgent struct {
	fn func(ctx context.Context, req agents.TurnRequest) (agents.TurnReport, error)
}

func (a scriptedAgent) Turn(ctx context.Context, req agents.TurnRequest) (agents.TurnReport, error) {
	return a.fn(ctx, req)
}

func (a scriptedAgent) Compact(context.Context, agents.CompactRequest) (agents.CompactReport, error) {
	return agents.CompactReport{}, agents.AgentFailed("scripted agents cannot compact")
}

func (a scriptedAgent) Stop(context.Context, agents.StopRequest) error { return nil }

func saying(output string) scriptedAgent {
	return scriptedAgent{fn: func(context.Context, agents.TurnRequest) (agents.TurnReport, error) {
		return agents.TurnReport{Conversation: "c1", Output: output}, nil
	}}
}

func failing(err error) scriptedAgent {
	return scriptedAgent{fn: func(context.Context, agents.TurnRequest) (agents.TurnReport, error) { return agents.TurnReport{}, err }}
}

// readyHost makes this test's host one whose agents pass the checks every
// turn makes before it starts one (see ready): programs on PATH that do
// nothing (the CLIs, bubblewrap and socat: a fake agent stands in for
// the adapter) and keys for Claude Code and Codex.
func readyHost(t *testing.T, programs ...string) {
	t.Helper()
	dir := t.TempDir()
	for _, p := range append(programs, "bwrap", "socat") {
		require.NoError(t, os.WriteFile(filepath.Join(dir, p), []byte("#!/bin/sh\nexit 0\n"), 0o755))
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("ANTHROPIC_API_KEY", "test-key")
	t.Setenv("OPENAI_API_KEY", "test-key")
}

// activityEnv registers acts' methods under their stable names in a test
// activity environment.
func activityEnv(acts *Activities) *testsuite.TestActivityEnvironment {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivityWithOptions(acts.RunTurn, activity.RegisterOptions{Name: RunTurnName})
	env.RegisterActivityWithOptions(acts.Compact, activity.RegisterOptions{Name: CompactName})
	env.RegisterActivityWithOptions(acts.StopAgent, activity.RegisterOptions{Name: StopAgentName})
	env.RegisterActivityWithOptions(acts.PrepareWorkspace, activity.RegisterOptions{Name: PrepareWorkspaceName})
	return env
}

func turnInput(kind, prompt string) TurnInput {
	return TurnInput{Session: lead, Spec: agents.AgentSpec{Kind: "scripted"}, Prompt: prompt, Kind: kind}
}

func TestRunTurnCutsOutput(t *testing.T) {
	for _, tc := range []struct {
		name   string
		output string
		kept   string
	}{
		{"short output is kept whole", "done", "done"},
		{"exactly the limit", strings.Repeat("a", MaxOutputBytes), strings.Repeat("a", MaxOutputBytes)},
		// 1365 three-byte runes fill 4095 bytes; the 1366th would cross the limit.
		{"cut on a character boundary", strings.Repeat("€", 2_000), strings.Repeat("€", 1_365)},
		{"ascii over the limit", strings.Repeat("b", MaxOutputBytes+10), strings.Repeat("b", MaxOutputBytes)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := activityEnv(&Activities{Agents: map[string]agents.Agent{"scripted": saying(tc.output)}})
			val, err := env.ExecuteActivity(RunTurnName, turnInput(agents.TurnWork, "go"))
			require.NoError(t, err)
			var res TurnResult
			require.NoError(t, val.Get(&res))

			sum := sha256.Sum256([]byte(tc.output))
			require.Equal(t, tc.kept, res.Output)
			require.True(t, utf8.ValidString(res.Output))
			require.Equal(t, len(tc.output), res.OutputBytes)
			require.Equal(t, hex.EncodeToString(sum[:]), res.OutputDigest)
			require.Equal(t, "c1", res.Conversation)
		})
	}
}

func TestRunTurnErrors(t *testing.T) {
	adapters := map[string]agents.Agent{
		agents.KindSim: agents.NewSim(),
		"failing":      failing(agents.AgentFailed("the model refused the prompt")),
		"flaky":        failing(errors.New("connection reset by peer")),
	}
	for _, tc := range []struct {
		name      string
		in        TurnInput
		errType   string
		retryable bool
		message   string
	}{
		{
			name:    "unknown agent names the kind and the known ones",
			in:      TurnInput{Session: lead, Spec: agents.AgentSpec{Kind: "claude"}, Prompt: "go", Kind: agents.TurnWork},
			errType: ErrUnknownAgent,
			message: `agent "claude" cannot run on this host (known agents: failing, flaky, sim)`,
		},
		{
			name:    "empty prompt",
			in:      TurnInput{Session: lead, Spec: agents.AgentSpec{Kind: agents.KindSim}, Prompt: " \n", Kind: agents.TurnWork},
			errType: ErrBadInput,
			message: "empty prompt for web/lead",
		},
		{
			name:    "unknown turn kind",
			in:      TurnInput{Session: lead, Spec: agents.AgentSpec{Kind: agents.KindSim}, Prompt: "go", Kind: "dance"},
			errType: ErrBadInput,
			message: `turn kind "dance" is not one of work, handoff-request, fresh`,
		},
		{
			name:    "session name that is a path",
			in:      TurnInput{Session: agents.SessionRef{Group: "web", Name: "../../etc"}, Spec: agents.AgentSpec{Kind: agents.KindSim}, Prompt: "go"},
			errType: ErrBadInput,
			message: "is not a name",
		},
		{
			name:    "agent failure",
			in:      TurnInput{Session: lead, Spec: agents.AgentSpec{Kind: "failing"}, Prompt: "go", Kind: agents.TurnWork},
			errType: ErrAgentFailed,
			message: "the model refused the prompt",
		},
		{
			name:      "transient failure is retried",
			in:        TurnInput{Session: lead, Spec: agents.AgentSpec{Kind: "flaky"}, Prompt: "go", Kind: agents.TurnWork},
			errType:   ErrTransient,
			retryable: true,
			message:   "connection reset by peer",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := activityEnv(&Activities{Agents: adapters, StateDir: t.TempDir()})
			_, err := env.ExecuteActivity(RunTurnName, tc.in)
			appErr, ok := errors.AsType[*temporal.ApplicationError](err)
			require.True(t, ok, "want an application error, got %v", err)
			require.Equal(t, tc.errType, appErr.Type())
			require.Equal(t, !tc.retryable, appErr.NonRetryable())
			require.Contains(t, appErr.Error(), tc.message)
		})
	}
}

// The agent gets its session's endpoint with the token of the turn's own
// conversation (its generation): a later conversation's token would let a
// rotated-away one act, an earlier one's would be refused.
func TestRunTurnGivesTheAgentItsEndpointAndStateDir(t *testing.T) {
	rec := agenttest.StartHandoffRecorder(t, "")
	stateDir := t.TempDir()
	var generations []int
	acts := &Activities{
		Agents:   map[string]agents.Agent{agents.KindSim: agents.NewSim()},
		StateDir: stateDir,
		MCP: func(ref agents.SessionRef, generation int) agents.MCPAccess {
			require.Equal(t, lead, ref)
			generations = append(generations, generation)
			return agents.MCPAccess{URL: rec.URL}
		},
	}
	env := activityEnv(acts)
	in := TurnInput{Session: lead, Spec: agents.AgentSpec{Kind: agents.KindSim}, Prompt: "Call handoff_write.", Generation: 3}

	var res TurnResult
	val, err := env.ExecuteActivity(RunTurnName, in)
	require.NoError(t, err)
	require.NoError(t, val.Get(&res))
	require.Equal(t, "sim-4", res.Conversation)
	require.FileExists(t, filepath.Join(stateDir, "sim", "web", "lead", "sim-4.json"))

	in.Conversation, in.Kind = res.Conversation, agents.TurnHandoffRequest
	_, err = env.ExecuteActivity(RunTurnName, in)
	require.NoError(t, err)
	require.Len(t, rec.Summaries(), 1)
	require.Contains(t, rec.Summaries()[0], "sim conversation sim-4 of web/lead")

	_, err = env.ExecuteActivity(CompactName, CompactInput{Session: lead, Spec: agents.AgentSpec{Kind: agents.KindSim}, Conversation: res.Conversation, Generation: 3})
	require.NoError(t, err)
	require.Equal(t, []int{3, 3, 3}, generations)
}

func TestRunTurnHeartbeatsWhileTheAgentWorks(t *testing.T) {
	beat := make(chan string, 1)
	agent := scriptedAgent{fn: func(ctx context.Context, _ agents.TurnRequest) (agents.TurnReport, error) {
		select {
		case details := <-beat:
			return agents.TurnReport{Conversation: "c1", Output: details}, nil
		case <-ctx.Done():
			return agents.TurnReport{}, ctx.Err()
		case <-time.After(time.Minute):
			return agents.TurnReport{}, agents.AgentFailed("no heartbeat while the turn ran")
		}
	}}
	env := activityEnv(&Activities{Agents: map[string]agents.Agent{"scripted": agent}, HeartbeatEvery: time.Millisecond})
	env.SetOnActivityHeartbeatListener(func(_ *activity.Info, details converter.EncodedValues) {
		var s string
		if details.Get(&s) == nil {
			select {
			case beat <- s:
			default:
			}
		}
	})
	val, err := env.ExecuteActivity(RunTurnName, turnInput(agents.TurnWork, "go"))
	require.NoError(t, err)
	var res TurnResult
	require.NoError(t, val.Get(&res))
	require.True(t, strings.HasPrefix(res.Output, "turn running for "), res.Output)
}

func TestCompactActivity(t *testing.T) {
	stateDir := t.TempDir()
	acts := &Activities{Agents: map[string]agents.Agent{agents.KindSim: agents.NewSim()}, StateDir: stateDir}
	env := activityEnv(acts)
	spec := agents.AgentSpec{Kind: agents.KindSim, Sim: config.Sim{TokensPerTurn: 50_000}}

	val, err := env.ExecuteActivity(RunTurnName, TurnInput{Session: lead, Spec: spec, Prompt: "abcd"})
	require.NoError(t, err)
	var turn TurnResult
	require.NoError(t, val.Get(&turn))

	val, err = env.ExecuteActivity(CompactName, CompactInput{Session: lead, Spec: spec, Conversation: turn.Conversation})
	require.NoError(t, err)
	var rep agents.CompactReport
	require.NoError(t, val.Get(&rep))
	require.True(t, rep.OK)
	require.Equal(t, int64(50_001), rep.BeforeTokens)
	require.Equal(t, int64(5_000), rep.AfterTokens)

	_, err = env.ExecuteActivity(CompactName, CompactInput{Session: lead, Spec: spec})
	appErr, ok := errors.AsType[*temporal.ApplicationError](err)
	require.True(t, ok, "%v", err)
	require.Equal(t, ErrBadInput, appErr.Type())
	require.Contains(t, appErr.Error(), "web/lead has no conversation to compact")
}

func TestStopAgentActivity(t *testing.T) {
	env := activityEnv(&Activities{Agents: map[string]agents.Agent{agents.KindSim: agents.NewSim()}, StateDir: t.TempDir()})
	_, err := env.ExecuteActivity(StopAgentName, StopInput{Session: lead, Spec: agents.AgentSpec{Kind: agents.KindSim}, Conversation: "sim-1"})
	require.NoError(t, err)

	_, err = env.ExecuteActivity(StopAgentName, StopInput{Session: lead, Spec: agents.AgentSpec{Kind: "codex"}})
	appErr, ok := errors.AsType[*temporal.ApplicationError](err)
	require.True(t, ok, "%v", err)
	require.Equal(t, ErrUnknownAgent, appErr.Type())
	require.True(t, appErr.NonRetryable())
}

func TestClassify(t *testing.T) {
	already := temporal.NewNonRetryableApplicationError("quota", "Quota", nil)
	for _, tc := range []struct {
		name      string
		err       error
		errType   string
		retryable bool
	}{
		{"bad input", agents.BadInput("no prompt"), ErrBadInput, false},
		{"agent failed, wrapped", fmt.Errorf("turn: %w", agents.AgentFailed("exit 1")), ErrAgentFailed, false},
		{"deadline", context.DeadlineExceeded, ErrTransient, true},
		{"anything else", errors.New("EOF"), ErrTransient, true},
		{"already classified", already, "Quota", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			appErr, ok := errors.AsType[*temporal.ApplicationError](classify(tc.err))
			require.True(t, ok)
			require.Equal(t, tc.errType, appErr.Type())
			require.Equal(t, !tc.retryable, appErr.NonRetryable())
			if tc.err != already {
				// The session reports it; the SDK logs it at debug only.
				require.Equal(t, temporal.ApplicationErrorCategoryBenign, appErr.Category())
			}
		})
	}
	require.ErrorIs(t, classify(context.Canceled), context.Canceled, "cancellation reaches Temporal as is")
	require.NoError(t, classify(nil))
}

// ran records which of an agent's operations ran.
type ran struct{ ops []string }

func (r *ran) Turn(context.Context, agents.TurnRequest) (agents.TurnReport, error) {
	r.ops = append(r.ops, "turn")
	return agents.TurnReport{Conversation: "c1", Output: "ok"}, nil
}

func (r *ran) Compact(context.Context, agents.CompactRequest) (agents.CompactReport, error) {
	r.ops = append(r.ops, "compact")
	return agents.CompactReport{OK: true, Conversation: "c1"}, nil
}

func (r *ran) Stop(context.Context, agents.StopRequest) error {
	r.ops = append(r.ops, "stop")
	return nil
}

// A spec comes from workflow history, which anyone who can signal the
// workflow writes; only the worker's own nid.yaml decides which agent runs.
func TestTheWorkersConfigDecidesWhichAgentRuns(t *testing.T) {
	claudeLead := func(ref agents.SessionRef) (string, config.AgentSettings, bool) {
		if ref.Group != lead.Group || ref.Name != lead.Name {
			return "", config.AgentSettings{}, false
		}
		return agents.KindClaude, config.AgentSettings{Command: "claude"}, true
	}
	ghost := agents.SessionRef{Group: "web", Name: "ghost", WorkflowID: "nid/web/ghost"}
	for _, tc := range []struct {
		name     string
		settings func(agents.SessionRef) (string, config.AgentSettings, bool)
		ref      agents.SessionRef
		kind     string
		message  string // empty: the agent runs
	}{
		{"the kind the file gives", claudeLead, lead, agents.KindClaude, ""},
		{"another kind", claudeLead, lead, agents.KindExec,
			`session web/lead asks for agent kind "exec", but this worker's nid.yaml gives it "claude"`},
		{"the sim instead of the file's kind", claudeLead, lead, agents.KindSim,
			`session web/lead asks for agent kind "sim", but this worker's nid.yaml gives it "claude"`},
		{"a process agent for a session the file does not list", claudeLead, ghost, agents.KindExec,
			`session web/ghost asks for agent kind "exec", but this worker's nid.yaml has no such session`},
		{"a process agent with no config at all", nil, lead, agents.KindCodex,
			`session web/lead asks for agent kind "codex", but this worker's nid.yaml has no such session`},
		{"the sim for a session the file does not list", claudeLead, ghost, agents.KindSim, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			readyHost(t, "claude")
			adapters := map[string]agents.Agent{}
			for _, kind := range agents.Kinds() {
				adapters[kind.Name] = &ran{}
			}
			env := activityEnv(&Activities{Agents: adapters, Settings: tc.settings, StateDir: t.TempDir()})
			spec := agents.AgentSpec{Kind: tc.kind}
			for _, call := range []struct {
				name string
				in   any
			}{
				{RunTurnName, TurnInput{Session: tc.ref, Spec: spec, Prompt: "go"}},
				{CompactName, CompactInput{Session: tc.ref, Spec: spec, Conversation: "c1"}},
				{StopAgentName, StopInput{Session: tc.ref, Spec: spec, Conversation: "c1"}},
			} {
				_, err := env.ExecuteActivity(call.name, call.in)
				// Stopping starts nothing: a session the file no
				// longer lists (removed) can be stopped.
				unlisted := tc.settings == nil || tc.ref == ghost
				if tc.message == "" || (call.name == StopAgentName && unlisted) {
					require.NoError(t, err, call.name)
					continue
				}
				appErr, ok := errors.AsType[*temporal.ApplicationError](err)
				require.True(t, ok, "%s: want an application error, got %v", call.name, err)
				require.Equal(t, ErrBadInput, appErr.Type(), call.name)
				require.True(t, appErr.NonRetryable(), call.name)
				require.Contains(t, appErr.Error(), tc.message, call.name)
			}
			for kind, a := range adapters {
				want := []string(nil)
				switch {
				case tc.message == "" && kind == tc.kind:
					want = []string{"turn", "compact", "stop"}
				case (tc.settings == nil || tc.ref == ghost) && kind == tc.kind:
					want = []string{"stop"}
				}
				require.Equal(t, want, a.(*ran).ops, "what the %s agent ran", kind)
			}
		})
	}
}
