package agents_test

import (
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/activities"
	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/internal/fakemodel"
)

// The cases in this file are about an agent's process across turns: which
// turns share one, and when nid ends one and starts the next.

// A kind whose process outlives its turns (Claude Code's stream-json
// process, Codex's app-server) runs every turn and compaction of a
// conversation in one process, and they work as in a process of their
// own: the answer, the context, what the turn cost, nid's tools. A turn
// that would start the process differently (nid.yaml reloaded) runs in a
// new one, with the new settings, that resumes the conversation (and
// compacts it there); a turn of another conversation runs in a new one
// too when a process serves one conversation (Claude Code's). A kind whose process
// ends with its turn starts one for each.
func conformOneProcess(t *testing.T, kind agents.Kind) {
	runsAProcess(t, kind)
	r := newRig(t, kind)
	starts := r.countStarts()
	const summary = "HANDOFF: written from the second turn"
	first := fakemodel.Reply{Text: "first answer", Input: 5000, Output: 20}
	second := fakemodel.Reply{Text: "second answer", Input: 6000, Output: 30}
	r.model.Script(first)
	if kind.Tools {
		r.model.Script(
			fakemodel.Reply{Tool: agents.ToolBoardRead, ToolInput: map[string]any{}, Input: 5100, Output: 5},
			fakemodel.Reply{Tool: agents.ToolHandoffWrite, ToolInput: map[string]any{"summary": summary}, Input: 5200, Output: 5},
		)
	}
	r.model.Script(second, first)
	perTurn := func(n int) int {
		if r.serves {
			return 1
		}
		return n
	}

	rep, err := r.turn("", "remember the word pelican", agents.TurnWork)
	require.NoError(t, err)
	rep2, err := r.turn(rep.Conversation, "read the board, then write a handoff", agents.TurnWork)
	require.NoError(t, err)
	require.Equal(t, rep.Conversation, rep2.Conversation)
	require.Equal(t, "second answer", rep2.Output)
	require.Equal(t, r.usage(r.vendor.used(second), r.vendor.window), rep2.Usage)
	if kind.Tools {
		calls := r.toolCalls()
		require.Len(t, calls, 2)
		require.Contains(t, calls[0], agents.ToolBoardRead+"(")
		require.Contains(t, calls[1], agents.ToolHandoffWrite+"(")
		require.Equal(t, []string{summary}, r.sessions.Summaries(), "nid's tools answer in a later turn of the process")
	}
	rep3, err := r.turn(rep.Conversation, "once more", agents.TurnWork)
	require.NoError(t, err)
	require.Equal(t, "first answer", rep3.Output)
	require.InDelta(t, rep.CostUSD, rep3.CostUSD, 1e-9, "a turn costs what it costs, not what the process cost so far")
	require.Equal(t, rep.BilledTokens, rep3.BilledTokens)
	require.Len(t, starts(), perTurn(3), "turns of one conversation: %v", starts())

	begun := len(starts())

	// nid.yaml changes: the next turn runs as it now says.
	r.set.Env["NIDTEST_RELOADED"] = "yes"
	_, err = r.turn(rep.Conversation, "what was the word?", agents.TurnWork)
	require.NoError(t, err)
	require.Len(t, starts(), begun+1, "a new process for the new settings")
	require.Contains(t, lastRequest(t, r.model).Body, "pelican", "the new process resumed the conversation")
	if r.serves {
		pids := r.recorded()
		require.Len(t, pids, 1)
		env, err := os.ReadFile("/proc/" + strconv.Itoa(pids[0]) + "/environ")
		require.NoError(t, err)
		require.Contains(t, "\x00"+string(env), "\x00NIDTEST_RELOADED=yes\x00")
	}

	if kind.Compacts {
		cr, err := r.compact(rep.Conversation)
		require.NoError(t, err)
		require.True(t, cr.OK, cr.Detail)
		require.Len(t, starts(), begun+1, "the compaction ran in the conversation's process")
	}

	// Another conversation.
	fresh, err := r.turn("", "start afresh", agents.TurnFresh)
	require.NoError(t, err)
	require.NotEqual(t, rep.Conversation, fresh.Conversation)
	require.NotContains(t, lastRequest(t, r.model).Body, "pelican")
	if r.serves && !r.perConversation {
		require.Len(t, starts(), begun+1, "the process serves another conversation too")
	} else {
		require.Len(t, starts(), begun+2, "a new process for another conversation")
	}
	if r.serves {
		require.Len(t, r.recorded(), 1, "one process for the session: the old conversation's was closed")
	}
}

// When the agent's process dies mid-turn (killed, crashed), the turn fails
// with an error Temporal retries, and the next turn resumes the
// conversation in a new process.
func conformProcessDies(t *testing.T, kind agents.Kind) {
	runsAProcess(t, kind)
	r := newRig(t, kind)
	r.model.Script(fakemodel.Reply{Text: "first", Input: 1000, Output: 5})
	rep, err := r.turn("", "remember the word pelican", agents.TurnWork)
	require.NoError(t, err)

	// The agent's process (the group's leader: a crash leaves the rest to
	// nid) dies while its model call hangs.
	var armed atomic.Bool
	armed.Store(true)
	r.model.OnRequest(func() {
		if armed.CompareAndSwap(true, false) {
			for _, pid := range r.recorded() {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	r.model.Script(fakemodel.Reply{Hang: true}, fakemodel.Reply{Text: "back", Input: 1200, Output: 5})
	_, err = r.turn(rep.Conversation, "take your time", agents.TurnWork)
	typ, retried := failure(t, err)
	require.Equal(t, activities.ErrTransient, typ, "%v", err)
	require.True(t, retried, "%v", err)
	r.requireNoProcesses("the dead process's group is gone")

	rep2, err := r.turn(rep.Conversation, "what was the word?", agents.TurnWork)
	require.NoError(t, err)
	require.Equal(t, rep.Conversation, rep2.Conversation)
	require.Equal(t, "back", rep2.Output)
	require.Contains(t, lastRequest(t, r.model).Body, "pelican")
}

// A process that outlives its turns is ended once it sat idle (a worker
// holds hundreds of sessions, most of them waiting), recorded for the
// reaper until then; the next turn resumes the conversation in a new one.
// A kind whose process ends with its turn has none to end.
func conformIdle(t *testing.T, kind agents.Kind) {
	runsAProcess(t, kind)
	r := newRig(t, kind)
	agent := r.acts.Agents[kind.Name]
	if !r.serves {
		require.False(t, agents.SetIdleTimeout(agent, time.Millisecond), "%s keeps no process between turns", kind.Name)
		t.Skipf("%s's process ends with its turn", kind.Name)
	}
	starts := r.countStarts()
	r.model.Script(fakemodel.Reply{Text: "first", Input: 1000, Output: 5}, fakemodel.Reply{Text: "again", Input: 1100, Output: 5})
	rep, err := r.turn("", "remember the word pelican", agents.TurnWork)
	require.NoError(t, err)
	require.Len(t, r.recorded(), 1, "the process outlives the turn, recorded")

	// The idle time starts when a request is done with the process.
	require.True(t, agents.SetIdleTimeout(agent, 100*time.Millisecond))
	rep2, err := r.turn(rep.Conversation, "what was the word?", agents.TurnWork)
	require.NoError(t, err)
	require.Equal(t, "again", rep2.Output)
	require.Len(t, starts(), 1)
	require.Eventually(t, func() bool { return len(r.recorded()) == 0 }, 30*time.Second, 20*time.Millisecond, "the idle process was ended")
	r.requireNoProcesses("ended when idle")

	rep3, err := r.turn(rep.Conversation, "and now?", agents.TurnWork)
	require.NoError(t, err)
	require.Equal(t, rep.Conversation, rep3.Conversation)
	require.Contains(t, lastRequest(t, r.model).Body, "pelican")
	require.Len(t, starts(), 2, "%v", strings.Join(starts(), " "))
}
