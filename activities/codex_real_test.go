package activities_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/activities"
	"github.com/nid-dev/nid/workflows"
)

// codexWindow is what Codex reports for gpt-5.5: 95% of 272k.
const codexWindow = 258400

func codexRig(t *testing.T) (*agentRig, *activities.Codex) {
	t.Helper()
	r := newRig(t)
	r.proc.Command = agentBin(t, "codex")
	codexHome := filepath.Join(r.home, ".codex")
	require.NoError(t, os.MkdirAll(codexHome, 0o755))
	cfg := fmt.Sprintf(`model = "gpt-5.5"
model_provider = "local"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false
[analytics]
enabled = false
[features]
plugins = false
apps = false
remote_plugin = false
tool_suggest = false
[model_providers.local]
name = "local"
base_url = "%s/v1"
env_key = "LOCAL_API_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
`, r.model.srv.URL)
	require.NoError(t, os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(cfg), 0o644))
	r.proc.Env["CODEX_HOME"] = codexHome
	r.proc.Env["LOCAL_API_KEY"] = "test-key"
	c := activities.NewCodex()
	t.Cleanup(func() { _ = c.Stop(context.Background(), activities.StopRequest{Session: r.ref}) })
	return r, c
}

func TestCodexTurnResumeAndRestart(t *testing.T) {
	r, c := codexRig(t)
	r.model.Script(
		fakeReply{Text: "first answer", Input: 5000, Cached: 3000, Output: 20},
		fakeReply{Text: "second answer", Input: 9000, Cached: 5000, Output: 30},
		fakeReply{Text: "third answer", Input: 12000, Output: 40},
	)
	rep, _, err := r.turn(c, "", "remember the word pelican", activities.TurnWork)
	require.NoError(t, err)
	require.NotEmpty(t, rep.Conversation)
	require.Equal(t, "first answer", rep.Output)
	require.Equal(t, activities.Usage{UsedTokens: 5020, WindowTokens: codexWindow, Source: activities.SourceReported}, rep.Usage)

	rep2, _, err := r.turn(c, rep.Conversation, "what was the word?", activities.TurnWork)
	require.NoError(t, err)
	require.Equal(t, rep.Conversation, rep2.Conversation)
	require.Equal(t, activities.Usage{UsedTokens: 9030, WindowTokens: codexWindow, Source: activities.SourceReported}, rep2.Usage)

	// A worker restart: a new adapter, a new app-server, the same thread.
	require.NoError(t, c.Stop(context.Background(), activities.StopRequest{Session: r.ref}))
	c2 := activities.NewCodex()
	t.Cleanup(func() { _ = c2.Stop(context.Background(), activities.StopRequest{Session: r.ref}) })
	rep3, _, err := r.turn(c2, rep.Conversation, "and now?", activities.TurnWork)
	require.NoError(t, err)
	require.Equal(t, rep.Conversation, rep3.Conversation)
	require.Equal(t, "third answer", rep3.Output)
	require.Contains(t, lastRequest(t, r.model).Body, "pelican")
}

func TestCodexCompact(t *testing.T) {
	r, c := codexRig(t)
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
	require.Equal(t, int64(150020), cr.BeforeTokens)
	require.Less(t, cr.AfterTokens, cr.BeforeTokens)
	require.Equal(t, cr.AfterTokens, cr.Usage.UsedTokens)
	require.Contains(t, lastRequest(t, r.model).Headers.Get("x-codex-turn-metadata"), "compaction")
}

func TestCodexHandoff(t *testing.T) {
	r, c := codexRig(t)
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

	require.NoError(t, c.Stop(context.Background(), activities.StopRequest{Session: r.ref}))
	fresh := workflows.FreshMessage(r.ref, workflows.ReasonContext, r.sessions.Summaries()[0], workflows.SummaryFromAgent, testBoard)
	fr, _, err := r.turn(c, "", fresh, activities.TurnFresh)
	require.NoError(t, err)
	require.NotEqual(t, rep.Conversation, fr.Conversation)
	first := lastRequest(t, r.model).Body
	require.Contains(t, first, "HANDOFF: dark mode half done")
	require.Contains(t, first, testBoard)
	require.NotContains(t, first, "work on dark mode")
	require.Equal(t, int64(905), fr.Usage.UsedTokens)
}

func TestCodexAutoCompaction(t *testing.T) {
	r, c := codexRig(t)
	r.proc.Args = []string{"-c", "model_auto_compact_token_limit=100000"}
	r.model.Script(
		fakeReply{Text: "worked", Input: 150000, Output: 20},
		fakeReply{Text: "Summary: we worked.", Input: 150100, Output: 300},
	)
	r.model.Default = fakeReply{Text: "after compaction", Input: 2000, Output: 10}
	rep, _, err := r.turn(c, "", "do the work", activities.TurnWork)
	require.NoError(t, err)
	rep2, _, err := r.turn(c, rep.Conversation, "go on", activities.TurnWork)
	require.NoError(t, err)
	require.NotNil(t, rep2.Vendor, "the auto compaction is reported")
	require.Equal(t, int64(150020), rep2.Vendor.BeforeTokens)
	require.Equal(t, int64(2010), rep2.Usage.UsedTokens)
	require.Equal(t, "after compaction", rep2.Output)
}

// Codex does not retry a 429 by itself: the turn fails with an error that
// says so and that Temporal retries with backoff (not a non-retryable one).
func TestCodexRateLimited(t *testing.T) {
	r, c := codexRig(t)
	r.model.Script(
		fakeReply{Status: 429, Body: `{"error":{"type":"rate_limit_exceeded","code":"rate_limit_exceeded","message":"Rate limit reached"}}`},
		fakeReply{Text: "got through", Input: 3000, Output: 10},
	)
	_, _, err := r.turn(c, "", "hello", activities.TurnWork)
	require.Error(t, err)
	require.Contains(t, err.Error(), "429")
	require.Empty(t, errType(err), "a rate limit is retryable")

	rep, _, err := r.turn(c, "", "hello", activities.TurnWork)
	require.NoError(t, err)
	require.Equal(t, "got through", rep.Output)
}

func TestCodexContextFull(t *testing.T) {
	r, c := codexRig(t)
	r.model.Script(fakeReply{ContextFull: true})
	_, _, err := r.turn(c, "", "hello", activities.TurnWork)
	require.Error(t, err)
	require.Equal(t, activities.ErrContextFull, errType(err), err.Error())
}

func TestCodexMissingBinary(t *testing.T) {
	r, c := codexRig(t)
	r.proc.Command = "/nonexistent/codex"
	_, _, err := r.turn(c, "", "hello", activities.TurnWork)
	require.Equal(t, activities.ErrAgentFailed, errType(err))
	require.True(t, strings.Contains(err.Error(), "not found"), err.Error())
}

func TestCodexSetupErrorsAreNotRetried(t *testing.T) {
	t.Run("bad flag", func(t *testing.T) {
		r, c := codexRig(t)
		r.proc.Args = []string{"--no-such-flag"}
		_, _, err := r.turn(c, "", "hello", activities.TurnWork)
		require.Equal(t, activities.ErrAgentFailed, errType(err), "%v", err)
		require.Contains(t, err.Error(), "--no-such-flag")
	})
	t.Run("refused key", func(t *testing.T) {
		r, c := codexRig(t)
		r.model.Default = fakeReply{Status: 401, Body: `{"error":{"type":"invalid_request_error","code":"invalid_api_key","message":"Incorrect API key provided"}}`}
		_, _, err := r.turn(c, "", "hello", activities.TurnWork)
		require.Equal(t, activities.ErrAgentFailed, errType(err), "%v", err)
		require.Contains(t, err.Error(), "401")
	})
}

// A turn past its timeout kills the app-server; the next turn starts a new
// one and resumes the same thread.
func TestCodexTurnTimeout(t *testing.T) {
	r, c := codexRig(t)
	r.model.Script(fakeReply{Text: "first", Input: 1000, Output: 5})
	rep, _, err := r.turn(c, "", "hello", activities.TurnWork)
	require.NoError(t, err)

	r.proc.Timeout = 3 * time.Second
	r.model.Script(fakeReply{Hang: true}, fakeReply{Text: "back", Input: 1200, Output: 5})
	_, _, err = r.turn(c, rep.Conversation, "take your time", activities.TurnWork)
	require.Equal(t, activities.ErrAgentFailed, errType(err), "%v", err)
	require.Contains(t, err.Error(), "timeout of 3s")

	r.proc.Timeout = 2 * time.Minute
	rep2, _, err := r.turn(c, rep.Conversation, "again", activities.TurnWork)
	require.NoError(t, err)
	require.Equal(t, rep.Conversation, rep2.Conversation)
	require.Equal(t, "back", rep2.Output)
}

// A worker that shuts down closes its app-servers: none is left running
// and none stays recorded for the next start to find.
func TestCodexCloseEndsTheAppServers(t *testing.T) {
	r, c := codexRig(t)
	r.proc.PidDir = filepath.Join(r.state, "pids")
	r.model.Script(fakeReply{Text: "first answer", Input: 5000, Output: 20})
	_, _, err := r.turn(c, "", "hello", activities.TurnWork)
	require.NoError(t, err)
	running, err := os.ReadDir(r.proc.PidDir)
	require.NoError(t, err)
	require.Len(t, running, 1, "the app-server outlives the turn, recorded")

	require.NoError(t, c.Close())
	left, err := os.ReadDir(r.proc.PidDir)
	require.NoError(t, err)
	require.Empty(t, left, "Close returns once the app-server has exited")
	pid, err := strconv.Atoi(strings.TrimSuffix(running[0].Name(), ".json"))
	require.NoError(t, err)
	require.Error(t, syscall.Kill(pid, 0), "the app-server is gone")
}
