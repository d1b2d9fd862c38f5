package agents_test

import (
	"context"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/activities"
	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/internal/agenttest"
	"github.com/nid-dev/nid/internal/fakemodel"
	"github.com/nid-dev/nid/workflows"
)

// Conformance cases for nid's MCP tools as the agents reach them: what
// context_status answers, and which of a session's conversations may act.

// context_status is listed to the agent's model, and a call answers with
// the session's context record: used and window tokens, percent, the
// threshold in both units, turns since the last rotation and rotations.
// The sim calls no model, so only the tools its own rules call (it never
// asks how full it is); an exec agent calls a tool only if its command
// does, as the suite's does when its model asks, through the URL with the
// token in it (NIDAGENT_MCP_URL).
func conformContextStatus(t *testing.T, kind agents.Kind) {
	r := newRig(t, kind)
	if r.vendor == nil {
		require.False(t, kind.Process)
		t.Skipf("%s calls no model: it calls only the tools its own rules call", kind.Name)
	}
	pct := 62.0
	r.sessions.setView(func(v *workflows.SessionView) {
		v.Policy = config.Rotate{Mode: config.ModeAuto, ContextPercent: 80}
		v.Context = workflows.ContextRecord{Usage: agents.Usage{UsedTokens: 124000, WindowTokens: 200000, Source: agents.SourceReported}, Percent: &pct,
			Turns: 7, Rotations: 2, Threshold: &workflows.Threshold{Tokens: 160000, Percent: 80, By: "contextPercent"}}
	})
	r.model.Script(
		fakemodel.Reply{Tool: agents.ToolContextStatus, ToolInput: map[string]any{}, Input: 4000, Output: 10},
		fakemodel.Reply{Text: "my context is 62% full", Input: 4100, Output: 5},
	)
	rep, err := r.turn("", "how full is your context?", agents.TurnWork)
	require.NoError(t, err)
	require.Equal(t, "my context is 62% full", rep.Output)

	reqs := r.model.Requests()
	require.Len(t, reqs, 2)
	if kind.Tools {
		// Claude Code names it among its deferred tools; Codex lists nid's
		// namespace with the server's instructions, which name it.
		require.Contains(t, reqs[0].Body, agents.ToolContextStatus, "the tool is listed to the model")
		calls := r.toolCalls()
		require.Len(t, calls, 1)
		require.Contains(t, calls[0], agents.ToolContextStatus)
	}
	answer := reqs[1].Body
	require.Contains(t, answer, "context 62% full (124k of 200k tokens, reported); nid rotates at 80% = 160k of 200k (contextPercent); "+
		"7 turns since the last rotation, 2 rotations.", "the call answered the model with the session's numbers")
}

// Across a handoff the MCP tokens follow the conversations: the old one
// acts until its rotation ends (it writes the handoff), the fresh one from
// its first turn; once the rotation is over, a call with the old one's token
// (a late retry of its turn, a process that outlived it) is refused with a
// clear error and reaches neither the session nor the board, while the
// fresh one's calls still work. A process that outlives its turns (Codex's
// app-server) runs each conversation with that conversation's token.
func conformOldConversationsCannotAct(t *testing.T, kind agents.Kind) {
	r := newRig(t, kind)
	callsTools := r.vendor != nil // the sim calls handoff_write when asked, by its own rule
	const (
		handoff = "HANDOFF: dark mode half done"
		late    = "LATE: written by the old conversation"
		again   = "AGAIN: the fresh conversation's own handoff"
	)
	write := func(summary string) []fakemodel.Reply {
		return []fakemodel.Reply{
			{Tool: agents.ToolHandoffWrite, ToolInput: map[string]any{"summary": summary}, Input: 4100, Output: 40},
			{Text: "called handoff_write", Input: 4200, Output: 5},
		}
	}

	r.model.Script(fakemodel.Reply{Text: "worked", Input: 4000, Output: 20})
	rep, err := r.turn("", "work on dark mode", agents.TurnWork)
	require.NoError(t, err)

	// The rotation: the old conversation writes its handoff, the agent is
	// stopped, the fresh conversation starts and calls a tool.
	r.sessions.setView(func(v *workflows.SessionView) { v.Rotating = &workflows.RotateRequest{Mode: config.ModeHandoff} })
	r.model.Script(write(handoff)...)
	_, err = r.turn(rep.Conversation, "call handoff_write now", agents.TurnHandoffRequest)
	require.NoError(t, err)
	require.Len(t, r.sessions.Summaries(), 1, "the old conversation acts while its rotation runs")
	require.NoError(t, r.stop(rep.Conversation))
	r.generation = 1
	if callsTools {
		r.model.Script(fakemodel.Reply{Tool: agents.ToolBoardRead, ToolInput: map[string]any{}, Input: 900, Output: 5})
	}
	r.model.Script(fakemodel.Reply{Text: "continuing fresh", Input: 1000, Output: 5})
	fresh, err := r.turn("", workflows.FreshMessage(r.ref, workflows.ReasonManual, handoff, workflows.SummaryFromAgent, testBoard), agents.TurnFresh)
	require.NoError(t, err)
	if callsTools {
		require.Contains(t, lastRequest(t, r.model).Body, testBoard, "the fresh conversation acts from its first turn")
	}
	r.sessions.setView(func(v *workflows.SessionView) { v.Generation, v.Rotating = 1, nil })

	// The fresh conversation acts after the rotation: the process the
	// rotation started for it has its token.
	r.model.Script(write(again)...)
	_, err = r.turn(fresh.Conversation, "call handoff_write now", agents.TurnHandoffRequest)
	require.NoError(t, err)
	require.Len(t, r.sessions.Summaries(), 2)
	if callsTools {
		require.Equal(t, again, r.sessions.Summaries()[1])
	}
	res := callWith(t, r.access(1), agents.ToolTaskClaim, map[string]any{"task_id": "t1"})
	require.False(t, res.IsError, agents.ToolText(res))
	require.Equal(t, []string{workflows.UpdateTaskClaim}, r.sessions.Updates())

	// A late retry of the old conversation's turn, with its token (Codex
	// resumes the old thread on an app-server of its own).
	r.generation = 0
	r.model.Script(write(late)...)
	_, err = r.turn(rep.Conversation, "call handoff_write now", agents.TurnHandoffRequest)
	const refused = "refused: this conversation of web/lead was rotated away (its token is of generation 0; the session is on generation 1)"
	if callsTools {
		require.NoError(t, err)
		require.Contains(t, lastRequest(t, r.model).Body, refused, "the agent's model was told why")
	} else {
		agenttest.RequireFinal(t, err, activities.ErrAgentFailed, refused)
	}
	// And the same token straight at the board.
	res = callWith(t, r.access(0), agents.ToolTaskClaim, map[string]any{"task_id": "t1"})
	require.True(t, res.IsError)
	require.Contains(t, agents.ToolText(res), refused)
	require.Len(t, r.sessions.Summaries(), 2, "no handoff reached the session")
	require.Equal(t, []string{workflows.UpdateTaskClaim}, r.sessions.Updates(), "the board was not changed")
}

// callWith calls one of nid's tools with access, as an agent would.
func callWith(t *testing.T, access agents.MCPAccess, tool string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "late-agent", Version: "1"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: access.TokenURL(), DisableStandaloneSSE: true}, nil)
	require.NoError(t, err)
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	require.NoError(t, err)
	return res
}
