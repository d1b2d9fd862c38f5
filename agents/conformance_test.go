package agents_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/activities"
	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/internal/agenttest"
	"github.com/nid-dev/nid/internal/fakemodel"
	"github.com/nid-dev/nid/workflows"
)

// The adapter conformance suite: every agent kind in agents.Kinds() runs
// every case, through the activities as a worker runs them, the kinds that
// talk to a model against the fake model server (internal/fakemodel).
//
// It is the checklist for adding a kind: give newRig (agents_test.go) a way
// to run it, then make every case pass. Where the kind's entry says it
// cannot do something (compact, call tools, enforce a permission), its case
// asserts the clear refusal or the fallback nid takes instead; a case skips
// only what a kind does not have at all (the sim runs no process and calls
// no model), after checking that its entry says so. Focus on one kind or
// one case with -run:
//
//	go test ./activities -run 'TestAdapterConformance/codex/'
//	go test ./activities -run 'TestAdapterConformance/.*/compaction'
func TestAdapterConformance(t *testing.T) {
	for _, kind := range agents.Kinds() {
		for _, c := range conformanceCases() {
			t.Run(kind.Name+"/"+c.name, func(t *testing.T) { c.run(t, kind) })
		}
	}
}

// conformanceCase is one promise every agent kind keeps.
type conformanceCase struct {
	name string
	run  func(t *testing.T, kind agents.Kind)
}

func conformanceCases() []conformanceCase {
	return []conformanceCase{
		{"turn resume and restart", conformTurnResumeRestart},
		{"compaction", conformCompaction},
		{"vendor compaction", conformVendorCompaction},
		{"context full", conformContextFull},
		{"missing binary", conformMissingBinary},
		{"no credentials", conformNoCredentials},
		{"setup errors", conformSetupErrors},
		{"rate limit", conformRateLimit},
		{"turn timeout", conformTurnTimeout},
		{"handoff", conformHandoff},
		{"stop and close", conformStopAndClose},
		// conformance_process_test.go
		{"one process across turns", conformOneProcess},
		{"process dies mid-turn", conformProcessDies},
		{"idle process ends", conformIdle},
		// conformance_mcp_test.go
		{"context status", conformContextStatus},
		{"old conversations cannot act", conformOldConversationsCannotAct},
		// conformance_sandbox_test.go
		{"permissions", conformPermissions},
		{"commits in its worktree", conformCommits},
		{"network", conformNetwork},
		{"sandbox unavailable", conformSandboxUnavailable},
		{"secrets", conformSecrets},
		{"environment", conformEnvironment},
		{"prompts", conformPrompts},
	}
}

// usage is a context record the rig's agent reported, with the model it
// says it runs.
func (r *agentRig) usage(used, window int64) agents.Usage {
	model := "sim"
	if r.vendor != nil {
		model = r.vendor.model
	}
	return agents.Usage{UsedTokens: used, WindowTokens: window, Source: agents.SourceReported, Model: model}
}

// simTokens is what the sim counts of a message: four bytes a token.
func simTokens(prompt string) int64 { return (int64(len(prompt)) + 3) / 4 }

// A turn reports the answer and the context it leaves (used, window, where
// the numbers came from); the next turn continues the same conversation,
// and so does one after the worker restarted (a new adapter: Codex starts a
// new app-server and resumes the thread).
func conformTurnResumeRestart(t *testing.T, kind agents.Kind) {
	r := newRig(t, kind)
	replies := []fakemodel.Reply{
		{Text: "first answer", Input: 5000, Cached: 3000, Output: 20},
		{Text: "second answer", Input: 9000, Cached: 5000, Output: 30},
		{Text: "third answer", Input: 12000, Output: 40},
	}
	r.model.Script(replies...)
	prompts := []string{"remember the word pelican", "what was the word?", "and now?"}
	check := func(rep activities.TurnResult, n int) {
		t.Helper()
		if r.vendor == nil {
			// The sim answers from its own state: its first message's size,
			// and TokensPerTurn more each turn.
			require.Equal(t, fmt.Sprintf("sim turn %d of conversation %s: worked on %q", n+1, rep.Conversation, prompts[n]), rep.Output)
			require.Equal(t, r.usage(simTokens(prompts[0])+int64(n+1)*r.spec.Sim.TokensPerTurn, r.spec.Sim.Window), rep.Usage)
			return
		}
		require.Equal(t, replies[n].Text, rep.Output)
		require.Equal(t, r.usage(r.vendor.used(replies[n]), r.vendor.window), rep.Usage)
		if n > 0 {
			// The model was sent the first turn's prompt again: the same
			// conversation.
			require.Contains(t, lastRequest(t, r.model).Body, "pelican")
		}
	}

	rep, err := r.turn("", prompts[0], agents.TurnWork)
	require.NoError(t, err)
	require.NotEmpty(t, rep.Conversation)
	check(rep, 0)

	rep2, err := r.turn(rep.Conversation, prompts[1], agents.TurnWork)
	require.NoError(t, err)
	require.Equal(t, rep.Conversation, rep2.Conversation)
	check(rep2, 1)

	r.restart()
	rep3, err := r.turn(rep.Conversation, prompts[2], agents.TurnWork)
	require.NoError(t, err)
	require.Equal(t, rep.Conversation, rep3.Conversation)
	check(rep3, 2)
}

// A compaction counts only when the vendor confirmed it, with the tokens
// before (the context the last turn left) and after, and the conversation
// goes on. A kind that cannot compact refuses clearly (not OK, saying why)
// without asking its model anything, and the rotation hands off instead.
func conformCompaction(t *testing.T, kind agents.Kind) {
	r := newRig(t, kind)
	worked := fakemodel.Reply{Text: "worked", Input: 150000, Output: 20}
	r.model.Script(worked, fakemodel.Reply{Text: "Summary: we worked.", Input: 150100, Output: 300})
	rep, err := r.turn("", "do the work", agents.TurnWork)
	require.NoError(t, err)
	asked := len(r.model.Requests())
	cr, err := r.compact(rep.Conversation)
	require.NoError(t, err, "a compaction the agent refuses is a report, not an error")
	require.Equal(t, rep.Conversation, cr.Conversation)
	if !kind.Compacts {
		require.False(t, cr.OK)
		require.Contains(t, cr.Detail, "cannot compact")
		require.Len(t, r.model.Requests(), asked, "nothing was asked of the model")
		return
	}
	require.True(t, cr.OK, cr.Detail)
	require.Less(t, cr.AfterTokens, cr.BeforeTokens)
	window := r.spec.Sim.Window
	if r.vendor == nil {
		require.Equal(t, rep.Usage.UsedTokens, cr.BeforeTokens, "before: the context the last turn left")
	} else {
		require.Equal(t, worked.Input+worked.Output, cr.BeforeTokens, "before: the conversation with its last answer")
		window = r.vendor.window
		r.vendor.compacting(t, lastRequest(t, r.model))
	}
	require.Equal(t, r.usage(cr.AfterTokens, window), cr.Usage)

	r.model.Script(fakemodel.Reply{Text: "after the compaction", Input: 3000, Output: 10})
	next, err := r.turn(rep.Conversation, "go on", agents.TurnWork)
	require.NoError(t, err)
	require.Equal(t, rep.Conversation, next.Conversation, "a compaction keeps the conversation")
}

// A compaction the vendor's CLI did by itself inside a turn is reported,
// with the tokens before and after, and the turn's answer and usage are
// those after it. A CLI that never compacts by itself reports none, even
// near its window: the meter shows a full context for nid's own policy to
// rotate.
func conformVendorCompaction(t *testing.T, kind agents.Kind) {
	r := newRig(t, kind)
	if r.vendor == nil || r.vendor.autoCompact == nil {
		r.model.Script(fakemodel.Reply{Text: "worked", Input: 190000, Output: 20}, fakemodel.Reply{Text: "worked more", Input: 195000, Output: 20})
		r.spec.Sim.TokensPerTurn = 190000
		rep, err := r.turn("", "do the work", agents.TurnWork)
		require.NoError(t, err)
		rep2, err := r.turn(rep.Conversation, "go on", agents.TurnWork)
		require.NoError(t, err)
		require.Nil(t, rep2.Vendor)
		if r.vendor == nil {
			require.Equal(t, r.usage(r.spec.Sim.Window, r.spec.Sim.Window), rep2.Usage, "a full sim keeps working at 100%")
		} else {
			require.Equal(t, r.usage(195000, r.vendor.window), rep2.Usage)
		}
		return
	}
	worked := fakemodel.Reply{Text: "worked", Input: 190000, Output: 20}
	after := fakemodel.Reply{Text: "after compaction", Input: 2000, Output: 10}
	r.model.Script(worked, fakemodel.Reply{Text: "Summary: we worked.", Input: 190100, Output: 300})
	r.model.Default = after
	r.vendor.autoCompact(r)
	rep, err := r.turn("", "do the work", agents.TurnWork)
	require.NoError(t, err)
	require.Nil(t, rep.Vendor)
	rep2, err := r.turn(rep.Conversation, "go on", agents.TurnWork)
	require.NoError(t, err)
	require.NotNil(t, rep2.Vendor, "the auto compaction is reported")
	if r.vendor.autoCountsPrompt {
		require.Greater(t, rep2.Vendor.BeforeTokens, worked.Input+worked.Output, "before: the conversation with its last answer, and the prompt")
	} else {
		require.Equal(t, worked.Input+worked.Output, rep2.Vendor.BeforeTokens, "before: the conversation with its last answer")
	}
	require.Greater(t, rep2.Vendor.BeforeTokens, rep2.Vendor.AfterTokens)
	require.Equal(t, r.usage(r.vendor.used(after), r.vendor.window), rep2.Usage)
	require.Equal(t, "after compaction", rep2.Output)
	require.Equal(t, rep.Conversation, rep2.Conversation)
}

// A turn whose conversation no longer fits the window fails at once, not
// retried, as ErrContextFull: the session hands off to a fresh
// conversation. A command cannot say why it failed, so an exec agent's
// turn fails at once with its own words. The sim never overflows: at its
// window it keeps working at 100%.
func conformContextFull(t *testing.T, kind agents.Kind) {
	r := newRig(t, kind)
	if r.vendor == nil {
		r.spec.Sim.TokensPerTurn = r.spec.Sim.Window
		rep, err := r.turn("", "hello", agents.TurnWork)
		require.NoError(t, err)
		rep, err = r.turn(rep.Conversation, "again", agents.TurnWork)
		require.NoError(t, err)
		require.Equal(t, r.usage(r.spec.Sim.Window, r.spec.Sim.Window), rep.Usage)
		return
	}
	r.model.Script(fakemodel.Reply{ContextFull: true})
	_, err := r.turn("", "hello", agents.TurnWork)
	agenttest.RequireFinal(t, err, r.vendor.contextFull)
	if r.vendor.contextFull != activities.ErrContextFull {
		require.Contains(t, err.Error(), "prompt is too long")
	}
}

// A binary that is not there fails the turn at once, not retried, before
// any model call, as a host that cannot run the agent (ErrUnknownAgent,
// which puts the session in needs-attention at once): naming it, how to
// install it and the setting, in the words nid doctor uses. With no
// command in nid.yaml, the kind's default command is looked up on PATH; a
// kind without one must be given one. The sim runs no binary: with nothing
// on PATH it still works.
func conformMissingBinary(t *testing.T, kind agents.Kind) {
	r := newRig(t, kind)
	emptyPath := t.TempDir()
	if !kind.Process {
		require.Empty(t, kind.DefaultCommand)
		t.Setenv("PATH", emptyPath)
		_, err := r.turn("", "hello", agents.TurnWork)
		require.NoError(t, err)
		return
	}
	install := "install it"
	if kind.Package != "" {
		install = "npm install -g " + kind.Package + "@" + agents.TestedVersion(kind)
	}
	r.set.Command = "/nonexistent/" + kind.Name
	_, err := r.turn("", "hello", agents.TurnWork)
	agenttest.RequireFinal(t, err, activities.ErrUnknownAgent, `"/nonexistent/`+kind.Name+`" not found`, install, "agents."+kind.Name+".command", "nid doctor")
	require.Empty(t, r.model.Requests())

	t.Setenv("PATH", emptyPath)
	r.set.Command = ""
	_, err = r.turn("", "hello", agents.TurnWork)
	if kind.DefaultCommand != "" {
		agenttest.RequireFinal(t, err, activities.ErrUnknownAgent, fmt.Sprintf("command %q not found on PATH", kind.DefaultCommand), install, "agents."+kind.Name+".command")
	} else {
		agenttest.RequireFinal(t, err, activities.ErrUnknownAgent, "no command configured", "agents."+kind.Name+".command")
	}
	require.Empty(t, r.model.Requests())
}

// An agent with nothing to log in with fails its turn at once, not
// retried, before any model call (ErrUnknownAgent: the session needs the
// human), saying what to set in nid doctor's words; with them it runs. A
// kind that logs in with nothing has no check, which only a kind whose CLI
// nid does not install may lack.
func conformNoCredentials(t *testing.T, kind agents.Kind) {
	r := newRig(t, kind)
	if kind.Credentials == nil {
		require.Empty(t, kind.Package, "%s's CLI logs in with something: give its entry Credentials", kind.Name)
		if r.vendor != nil {
			require.Empty(t, r.vendor.credentials, "the rig logs %s in with variables it has no check for", kind.Name)
		}
		t.Skipf("%s needs no credentials", kind.Name)
	}
	require.NotEmpty(t, r.vendor.credentials, "say which of the rig's variables log %s in", kind.Name)
	kept := map[string]string{}
	for _, k := range r.vendor.credentials {
		kept[k] = r.set.Env[k]
		r.set.Env[k] = "" // set empty, so the worker's own do not count either
	}
	_, err := r.turn("", "hello", agents.TurnWork)
	agenttest.RequireFinal(t, err, activities.ErrUnknownAgent, r.vendor.noCredentials, "nid doctor")
	require.NotContains(t, err.Error(), "test-key", "the check never prints a secret")
	require.Empty(t, r.model.Requests())

	for k, v := range kept {
		r.set.Env[k] = v
	}
	r.model.Script(fakemodel.Reply{Text: "logged in", Input: 100, Output: 5})
	rep, err := r.turn("", "hello", agents.TurnWork)
	require.NoError(t, err)
	require.Equal(t, "logged in", rep.Output)
}

// A bad flag or a refused key fails the turn at once with the agent's own
// message, not retried: running it again gives the same answer. The sim's
// only setup is its state directory: without one its turn is refused the
// same way.
func conformSetupErrors(t *testing.T, kind agents.Kind) {
	r := newRig(t, kind)
	if !kind.Process {
		r.stateless = true
		r.restart()
		_, err := r.turn("", "hello", agents.TurnWork)
		agenttest.RequireFinal(t, err, activities.ErrBadInput, "no state directory")
		return
	}
	r.set.Args = []string{"--no-such-flag"}
	_, err := r.turn("", "hello", agents.TurnWork)
	agenttest.RequireFinal(t, err, activities.ErrAgentFailed, "--no-such-flag")

	r.set.Args = nil
	r.model.Default = fakemodel.Reply{Status: 401, Body: r.vendor.refusedKey}
	_, err = r.turn("", "hello", agents.TurnWork)
	agenttest.RequireFinal(t, err, activities.ErrAgentFailed, "401")
}

// A rate limit or an overload shows while the CLI retries it, and the turn
// that gets through is not a failure (Claude Code retries by itself). A CLI
// that does not retry (Codex) fails the turn with an error that Temporal
// retries with backoff. nid cannot tell a rate limit inside an exec agent
// from any other failure: the command's exit fails the turn at once, in its
// own words.
func conformRateLimit(t *testing.T, kind agents.Kind) {
	r := newRig(t, kind)
	if r.vendor == nil {
		t.Skipf("%s calls no model, so nothing limits its rate", kind.Name)
	}
	switch kind.Name {
	case agents.KindClaude:
		r.model.Script(
			fakemodel.Reply{Status: 529, Body: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`},
			fakemodel.Reply{Text: "got through", Input: 3000, Output: 10},
		)
		rep, err := r.turn("", "hello", agents.TurnWork)
		require.NoError(t, err)
		require.True(t, rep.RateLimited)
		require.Equal(t, []bool{true, false}, r.rateLimits(), "the session is told while the turn runs")
		require.Equal(t, "got through", rep.Output)
	case agents.KindCodex:
		r.model.Script(
			fakemodel.Reply{Status: 429, Body: `{"error":{"type":"rate_limit_exceeded","code":"rate_limit_exceeded","message":"Rate limit reached"}}`},
			fakemodel.Reply{Text: "got through", Input: 3000, Output: 10},
		)
		_, err := r.turn("", "hello", agents.TurnWork)
		typ, retried := failure(t, err)
		require.Equal(t, activities.ErrTransient, typ)
		require.True(t, retried, "a rate limit is retried")
		require.Contains(t, err.Error(), "429")
		rep, err := r.turn("", "hello", agents.TurnWork)
		require.NoError(t, err)
		require.Equal(t, "got through", rep.Output)
	case agents.KindExec:
		r.model.Script(fakemodel.Reply{Status: 429, Body: `{"error":{"message":"Rate limit reached"}}`})
		_, err := r.turn("", "hello", agents.TurnWork)
		agenttest.RequireFinal(t, err, activities.ErrAgentFailed, "429", "Rate limit reached")
		require.Empty(t, r.rateLimits())
	default:
		t.Fatalf("say what a %s turn does when its model is rate limited", kind.Name)
	}
}

// A turn past its timeout fails at once, not retried, saying so; its whole
// process group is killed (nothing of the session's agent runs on, and the
// model call it waited on is abandoned), and the next turn continues the
// same conversation. The sim runs no process: the workflow's activity
// timeout cancels its turn, which Temporal retries from where the
// conversation was.
func conformTurnTimeout(t *testing.T, kind agents.Kind) {
	r := newRig(t, kind)
	r.model.Script(fakemodel.Reply{Text: "first", Input: 1000, Output: 5})
	rep, err := r.turn("", "hello", agents.TurnWork)
	require.NoError(t, err)

	if !kind.Process {
		r.spec.Sim.TurnDelay = config.Duration(time.Minute)
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_, err := r.acts.RunTurn(ctx, activities.TurnInput{Session: r.ref, Spec: r.spec, Conversation: rep.Conversation, Prompt: "take your time"})
		typ, retried := failure(t, err)
		require.Equal(t, activities.ErrTransient, typ)
		require.True(t, retried)
		r.spec.Sim.TurnDelay = 0
		rep2, err := r.turn(rep.Conversation, "again", agents.TurnWork)
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(rep2.Output, "sim turn 2 of conversation "+rep.Conversation), "the cut turn left nothing: %s", rep2.Output)
		return
	}
	// Long enough for the CLI to start and make its model call on a busy
	// machine (claude --resume takes seconds there), so that the call the
	// timeout cuts is the one that hangs.
	r.set.TurnTimeout = config.Duration(15 * time.Second)
	r.model.Script(fakemodel.Reply{Hang: true}, fakemodel.Reply{Text: "back", Input: 1200, Output: 5})
	_, err = r.turn(rep.Conversation, "take your time", agents.TurnWork)
	agenttest.RequireFinal(t, err, activities.ErrAgentFailed, "timeout of 15s", "its process group was killed")
	r.requireNoProcesses("the turn's process group was killed")
	require.Eventually(t, func() bool { return r.model.Abandoned() == 1 }, 10*time.Second, 50*time.Millisecond, "the model call was abandoned")

	r.set.TurnTimeout = config.Duration(2 * time.Minute)
	rep2, err := r.turn(rep.Conversation, "again", agents.TurnWork)
	require.NoError(t, err)
	require.Equal(t, rep.Conversation, rep2.Conversation)
	require.Equal(t, "back", rep2.Output)
}

// Asked for a handoff, an agent that calls tools calls handoff_write on
// nid's MCP endpoint: the summary reaches its session and the call shows in
// its transcript. Once the agent is stopped, a fresh conversation starts
// from the handoff and the board, without the old conversation. An agent
// that calls no tools still runs the request as a turn, told what it is;
// nid records no handoff, and the rotation uses the turn's output instead.
func conformHandoff(t *testing.T, kind agents.Kind) {
	r := newRig(t, kind)
	const summary = "HANDOFF: dark mode half done"
	r.model.Script(fakemodel.Reply{Text: "worked", Input: 4000, Output: 20})
	if kind.Tools {
		r.model.Script(
			fakemodel.Reply{Tool: agents.ToolHandoffWrite, ToolInput: map[string]any{"summary": summary}, Input: 4100, Output: 40},
			fakemodel.Reply{Text: "handoff written", Input: 4200, Output: 5},
		)
	} else {
		r.model.Script(fakemodel.Reply{Text: summary, Input: 4100, Output: 40})
	}
	freshReply := fakemodel.Reply{Text: "continuing fresh", Input: 900, Output: 5}
	r.model.Script(freshReply)

	rep, err := r.turn("", "work on dark mode", agents.TurnWork)
	require.NoError(t, err)
	hr, err := r.turn(rep.Conversation, "call handoff_write now", agents.TurnHandoffRequest)
	require.NoError(t, err)
	written, source := hr.Output, workflows.SummaryFromLastOutput
	switch {
	case !kind.Tools:
		require.Empty(t, r.sessions.Summaries())
		require.Empty(t, r.toolCalls())
		require.Equal(t, summary, hr.Output)
		require.Equal(t, agents.TurnHandoffRequest, lastRequest(t, r.model).Headers.Get("X-Turn-Kind"), "the agent was told what the turn is for")
	case r.vendor == nil:
		require.Len(t, r.sessions.Summaries(), 1)
		require.Contains(t, r.sessions.Summaries()[0], "Handoff from sim conversation "+rep.Conversation+" of web/lead")
		require.Contains(t, hr.Output, "wrote a handoff with handoff_write")
		written, source = r.sessions.Summaries()[0], workflows.SummaryFromAgent
	default:
		require.Equal(t, "handoff written", hr.Output)
		require.Equal(t, []string{summary}, r.sessions.Summaries())
		written, source = summary, workflows.SummaryFromAgent
	}
	if kind.Tools {
		calls := r.toolCalls()
		require.Len(t, calls, 1)
		require.Contains(t, calls[0], "handoff_write(")
	}

	require.NoError(t, r.stop(rep.Conversation))
	fresh := workflows.FreshMessage(r.ref, workflows.ReasonContext, written, source, testBoard)
	fr, err := r.turn("", fresh, agents.TurnFresh)
	require.NoError(t, err)
	require.NotEqual(t, rep.Conversation, fr.Conversation)
	if r.vendor == nil {
		require.Equal(t, r.usage(simTokens(fresh)+r.spec.Sim.TokensPerTurn, r.spec.Sim.Window), fr.Usage)
		return
	}
	first := lastRequest(t, r.model).Body
	require.Contains(t, first, written)
	require.Contains(t, first, testBoard)
	require.NotContains(t, first, "work on dark mode")
	require.Equal(t, r.usage(r.vendor.used(freshReply), r.vendor.window), fr.Usage)
}

// Stopping an agent, and closing the worker as it shuts down, leave none of
// its processes running and none recorded for the next worker to reap. A
// process that outlives its turn (Claude Code's stream-json process,
// Codex's app-server) is recorded while it runs, and the next turn after a
// stop starts it again; one that ends with its turn is gone moments after
// it.
func conformStopAndClose(t *testing.T, kind agents.Kind) {
	r := newRig(t, kind)
	pids := agents.PidDir(r.state)
	recorded := func() []os.DirEntry {
		t.Helper()
		entries, err := os.ReadDir(pids)
		if os.IsNotExist(err) {
			return nil
		}
		require.NoError(t, err)
		return entries
	}
	r.model.Script(fakemodel.Reply{Text: "first answer", Input: 5000, Output: 20}, fakemodel.Reply{Text: "second answer", Input: 6000, Output: 20})
	rep, err := r.turn("", "hello", agents.TurnWork)
	require.NoError(t, err)
	if r.serves {
		require.Len(t, recorded(), 1, "the process outlives the turn, recorded")
		require.NotEmpty(t, r.processes())
	} else {
		// The turn may end at the CLI's last line while the process
		// exits (Claude Code saves its transcript): it is gone soon after.
		require.Eventually(t, func() bool { return len(recorded()) == 0 }, 10*time.Second, 20*time.Millisecond, "nothing outlives the turn")
		r.requireNoProcesses("nothing outlives the turn")
	}

	require.NoError(t, r.stop(rep.Conversation))
	require.Empty(t, recorded())
	r.requireNoProcesses("stopped")

	_, err = r.turn(rep.Conversation, "again", agents.TurnWork)
	require.NoError(t, err)
	running := recorded()
	require.NoError(t, r.acts.Close())
	require.Empty(t, recorded(), "Close returns once every process has exited")
	for _, e := range running {
		pid, err := strconv.Atoi(strings.TrimSuffix(e.Name(), ".json"))
		require.NoError(t, err)
		require.Error(t, syscall.Kill(pid, 0), "process %d is gone", pid)
	}
	r.requireNoProcesses("closed")
}
