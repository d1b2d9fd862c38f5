package activities_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/activities"
	"github.com/nid-dev/nid/workflows"
)

func claudeRig(t *testing.T) (*agentRig, *activities.Claude) {
	t.Helper()
	r := newRig(t)
	r.proc.Command = agentBin(t, "claude")
	r.proc.Model = "claude-sonnet-4-5"
	for k, v := range map[string]string{
		"CLAUDE_CODE_TMPDIR":                       r.proc.Env["TMPDIR"],
		"ANTHROPIC_BASE_URL":                       r.model.srv.URL,
		"ANTHROPIC_API_KEY":                        "test-key",
		"DISABLE_TELEMETRY":                        "1",
		"DISABLE_AUTOUPDATER":                      "1",
		"DISABLE_ERROR_REPORTING":                  "1",
		"DISABLE_BUG_COMMAND":                      "1",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
	} {
		r.proc.Env[k] = v
	}
	return r, activities.NewClaude()
}

func TestClaudeTurnAndResume(t *testing.T) {
	r, c := claudeRig(t)
	r.model.Script(
		fakeReply{Text: "first answer", Input: 5000, Cached: 3000, Output: 20},
		fakeReply{Text: "second answer", Input: 9000, Cached: 5000, Output: 30},
	)
	rep, _, err := r.turn(c, "", "remember the word pelican", activities.TurnWork)
	require.NoError(t, err)
	require.NotEmpty(t, rep.Conversation)
	require.Equal(t, "first answer", rep.Output)
	require.Equal(t, activities.Usage{UsedTokens: 5000, WindowTokens: 200000, Source: activities.SourceReported, Model: "claude-sonnet-4-5"}, rep.Usage)

	rep2, _, err := r.turn(c, rep.Conversation, "what was the word?", activities.TurnWork)
	require.NoError(t, err)
	require.Equal(t, rep.Conversation, rep2.Conversation)
	require.Equal(t, "second answer", rep2.Output)
	require.Equal(t, activities.Usage{UsedTokens: 9000, WindowTokens: 200000, Source: activities.SourceReported, Model: "claude-sonnet-4-5"}, rep2.Usage)
	// The resumed turn sent the first turn's prompt again: same conversation.
	require.Contains(t, lastRequest(t, r.model).Body, "pelican")
}

func TestClaudeCompact(t *testing.T) {
	r, c := claudeRig(t)
	r.model.Script(
		fakeReply{Text: "worked", Input: 150000, Output: 20},
		fakeReply{Text: "Summary: we worked.", Input: 150100, Output: 300},
	)
	rep, _, err := r.turn(c, "", "do the work", activities.TurnWork)
	require.NoError(t, err)
	cr, err := r.compact(c, rep.Conversation)
	require.NoError(t, err)
	require.True(t, cr.OK, cr.Detail)
	require.Equal(t, rep.Conversation, cr.Conversation)
	require.Greater(t, cr.BeforeTokens, cr.AfterTokens)
	require.Equal(t, cr.AfterTokens, cr.Usage.UsedTokens)
	require.Equal(t, int64(200000), cr.Usage.WindowTokens)
	require.Contains(t, lastRequest(t, r.model).Body, "summary of the conversation")
}

func TestClaudeHandoff(t *testing.T) {
	r, c := claudeRig(t)
	r.model.Script(
		fakeReply{Text: "worked", Input: 4000, Output: 20},
		fakeReply{Tool: activities.ToolHandoffWrite, ToolInput: map[string]any{"summary": "HANDOFF: dark mode half done"}, Input: 4100, Output: 40},
		fakeReply{Text: "handoff written", Input: 4200, Output: 5},
		fakeReply{Text: "continuing fresh", Input: 900, Output: 5},
	)
	rep, _, err := r.turn(c, "", "work on dark mode", activities.TurnWork)
	require.NoError(t, err)
	hr, _, err := r.turn(c, rep.Conversation, "call handoff_write now", activities.TurnHandoffRequest)
	require.NoError(t, err)
	require.Equal(t, "handoff written", hr.Output)
	require.Equal(t, []string{"HANDOFF: dark mode half done"}, r.sessions.Summaries())
	require.Len(t, r.toolCalls, 1)
	require.Contains(t, r.toolCalls[0], "handoff_write(")

	fresh := workflows.FreshMessage(r.ref, workflows.ReasonContext, r.sessions.Summaries()[0], workflows.SummaryFromAgent, testBoard)
	fr, _, err := r.turn(c, "", fresh, activities.TurnFresh)
	require.NoError(t, err)
	require.NotEqual(t, rep.Conversation, fr.Conversation)
	first := lastRequest(t, r.model).Body
	require.Contains(t, first, "HANDOFF: dark mode half done")
	require.Contains(t, first, testBoard)
	require.NotContains(t, first, "work on dark mode")
	require.Equal(t, int64(900), fr.Usage.UsedTokens)
}

func TestClaudeAutoCompaction(t *testing.T) {
	r, c := claudeRig(t)
	r.model.Script(
		fakeReply{Text: "worked", Input: 190000, Output: 20},
		fakeReply{Text: "Summary: we worked.", Input: 190100, Output: 300},
	)
	r.model.Default = fakeReply{Text: "after compaction", Input: 2000, Output: 10}
	rep, _, err := r.turn(c, "", "do the work", activities.TurnWork)
	require.NoError(t, err)
	// Claude Code compacts by itself when the context nears this window.
	r.proc.Env["CLAUDE_CODE_AUTO_COMPACT_WINDOW"] = "100000"
	rep2, _, err := r.turn(c, rep.Conversation, "go on", activities.TurnWork)
	require.NoError(t, err)
	require.NotNil(t, rep2.Vendor, "the auto compaction is reported")
	require.Greater(t, rep2.Vendor.BeforeTokens, rep2.Vendor.AfterTokens)
	require.Equal(t, int64(2000), rep2.Usage.UsedTokens)
	require.Equal(t, "after compaction", rep2.Output)
}

func TestClaudeOverloaded(t *testing.T) {
	r, c := claudeRig(t)
	r.model.Script(
		fakeReply{Status: 529, Body: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`},
		fakeReply{Text: "got through", Input: 3000, Output: 10},
	)
	rep, limited, err := r.turn(c, "", "hello", activities.TurnWork)
	require.NoError(t, err)
	require.True(t, rep.RateLimited)
	require.Equal(t, []bool{true, false}, limited)
	require.Equal(t, "got through", rep.Output)
}

func TestClaudeContextFull(t *testing.T) {
	r, c := claudeRig(t)
	r.model.Script(fakeReply{ContextFull: true})
	_, _, err := r.turn(c, "", "hello", activities.TurnWork)
	require.Error(t, err)
	require.Equal(t, activities.ErrContextFull, errType(err), err.Error())
}

func TestClaudeMissingBinary(t *testing.T) {
	r, c := claudeRig(t)
	r.proc.Command = "/nonexistent/claude"
	_, _, err := r.turn(c, "", "hello", activities.TurnWork)
	require.Equal(t, activities.ErrAgentFailed, errType(err))
	require.True(t, strings.Contains(err.Error(), "not found"), err.Error())
	require.Empty(t, r.model.Requests())
}

func TestClaudeSetupErrorsAreNotRetried(t *testing.T) {
	t.Run("bad flag", func(t *testing.T) {
		r, c := claudeRig(t)
		r.proc.Args = []string{"--no-such-flag"}
		_, _, err := r.turn(c, "", "hello", activities.TurnWork)
		require.Equal(t, activities.ErrAgentFailed, errType(err), "%v", err)
		require.Contains(t, err.Error(), "--no-such-flag")
	})
	t.Run("refused key", func(t *testing.T) {
		r, c := claudeRig(t)
		r.model.Default = fakeReply{Status: 401, Body: `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`}
		_, _, err := r.turn(c, "", "hello", activities.TurnWork)
		require.Equal(t, activities.ErrAgentFailed, errType(err), "%v", err)
		require.Contains(t, err.Error(), "401")
	})
}

func TestClaudeTurnTimeout(t *testing.T) {
	r, c := claudeRig(t)
	r.proc.Timeout = 3 * time.Second
	r.model.Script(fakeReply{Hang: true})
	_, _, err := r.turn(c, "", "hello", activities.TurnWork)
	require.Equal(t, activities.ErrAgentFailed, errType(err), "%v", err)
	require.Contains(t, err.Error(), "timeout of 3s")
}
