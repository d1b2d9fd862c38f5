package e2e

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/worker"
	"github.com/nid-dev/nid/workflows"
)

// An agent asks nid how full its context is and gets the numbers its
// session keeps, the ones nid ls shows.
func TestContextStatusThroughMCP(t *testing.T) {
	s := newSite(t, `  api:
    rotate: {mode: auto, contextPercent: 80, maxTurns: 40}
    sessions:
      - agent: sim
        name: solo
        sim: {window: 200000, tokensPerTurn: 5000, turnDelay: 10ms}
`)
	s.up()
	s.eventually("api/solo listed", time.Minute, func() bool { return s.ls()["api/solo"].Status == "idle" })
	s.mustNid("send", "api/solo", "Write the rate limiter")
	s.eventually("the message turn", time.Minute, func() bool { return s.ls()["api/solo"].Turns == 1 })

	v := s.session(s.client(), "api", "solo")
	res := s.mcpCall("api", "solo", agents.ToolContextStatus, nil)
	require.False(t, res.IsError, "%v", res.Content)
	st := contextStatusOf(t, res)
	require.Equal(t, worker.NewContextStatus(v), st, "the session's own record")
	require.Equal(t, "api/solo", st.Session)
	require.Equal(t, s.ls()["api/solo"].Context.UsedTokens, st.UsedTokens, "what nid ls shows")
	require.Equal(t, int64(200000), st.WindowTokens)
	require.Equal(t, agents.SourceReported, st.Source)
	require.Equal(t, int64(160000), st.Threshold.Tokens)
	require.Equal(t, "80% = 160k of 200k (contextPercent)", st.Threshold.Text)
	require.Equal(t, 40, st.MaxTurns)
	require.Equal(t, 1, st.TurnsSinceRotation)
	require.Zero(t, st.Rotations)
}

// After a handoff the old conversation's token is refused, in words that
// say why, and changes nothing: no signal reaches the session, the board
// keeps no lock. The fresh conversation's token works.
func TestOldConversationCannotActAfterAHandoff(t *testing.T) {
	s := newSite(t, `  api:
    rotate: {mode: off}
    sessions:
      - agent: sim
        name: solo
        sim: {window: 200000, tokensPerTurn: 5000, turnDelay: 10ms}
`)
	s.up()
	s.eventually("api/solo idle", time.Minute, func() bool { return s.ls()["api/solo"].Status == "idle" })
	s.mustNid("send", "api/solo", "Write the rate limiter")
	s.eventually("the message turn", time.Minute, func() bool { return s.ls()["api/solo"].Turns == 1 })
	c := s.client()
	before := s.session(c, "api", "solo")
	require.Zero(t, before.Generation)

	s.mustNid("rotate", "api/solo", "--mode", "handoff")
	s.eventually("the handoff", time.Minute, func() bool {
		v := s.session(c, "api", "solo")
		return v.Context.Rotations == 1 && v.Status == workflows.StatusIdle
	})
	after := s.session(c, "api", "solo")
	require.Equal(t, 1, after.Generation)
	signals := handoffSignals(t, c, "api", "solo")
	require.Equal(t, 1, signals, "the sim wrote its handoff when asked")

	const refused = "refused: this conversation of api/solo was rotated away (its token is of generation 0; the session is on generation 1): " +
		"it can no longer act for the session, and nothing was changed"
	for _, call := range []struct {
		tool string
		args map[string]any
	}{
		{agents.ToolHandoffWrite, map[string]any{"summary": "late: my context is cluttered"}},
		{agents.ToolLockAcquire, map[string]any{"name": "src/limiter.go"}},
		{agents.ToolContextStatus, nil},
	} {
		res := s.mcpCallAs("api", "solo", 0, call.tool, call.args)
		require.True(t, res.IsError, call.tool)
		require.Equal(t, refused, agents.ToolText(res), call.tool)
	}
	require.Equal(t, signals, handoffSignals(t, c, "api", "solo"), "no handoff_write signal reached the session")
	require.Empty(t, s.board("api").Locks, "the board took no lock")
	v := s.session(c, "api", "solo")
	require.False(t, v.HandoffPending)
	require.Equal(t, 1, v.Context.Rotations)

	res := s.mcpCallAs("api", "solo", 1, agents.ToolLockAcquire, map[string]any{"name": "src/limiter.go"})
	require.False(t, res.IsError, agents.ToolText(res))
	require.Equal(t, `lock "src/limiter.go" is yours`, agents.ToolText(res))
	locks := s.board("api").Locks
	require.Len(t, locks, 1)
	require.Equal(t, "solo", locks[0].Holder)
	st := contextStatusOf(t, s.mcpCallAs("api", "solo", 1, agents.ToolContextStatus, nil))
	require.Equal(t, 1, st.Rotations)
}

func contextStatusOf(t *testing.T, res *mcp.CallToolResult) worker.ContextStatus {
	t.Helper()
	require.False(t, res.IsError, agents.ToolText(res))
	b, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	var st worker.ContextStatus
	require.NoError(t, json.Unmarshal(b, &st))
	require.Equal(t, st.Summary, agents.ToolText(res))
	return st
}

// handoffSignals counts the handoff_write signals in the session's
// history.
func handoffSignals(t *testing.T, c client.Client, group, name string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	it := c.GetWorkflowHistory(ctx, workflows.SessionID(group, name), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	n := 0
	for it.HasNext() {
		e, err := it.Next()
		require.NoError(t, err)
		if a := e.GetWorkflowExecutionSignaledEventAttributes(); a != nil && a.GetSignalName() == workflows.SignalHandoffWrite {
			n++
		}
	}
	return n
}
