package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/activities"
	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/config"
)

// A stopped session started again goes on where it was: the same
// conversation, or a fresh one by handoff when asked.
func TestAStoppedSessionStartsAgain(t *testing.T) {
	for _, fresh := range []bool{false, true} {
		h := newHarness(t)
		h.send(time.Minute, 2)
		h.at(10*time.Minute, func() { h.env.SignalWorkflow(SignalStop, StopRequest{}) })
		var stopped SessionView
		h.at(15*time.Minute, func() { stopped = h.view() })
		h.at(20*time.Minute, func() { h.env.SignalWorkflow(SignalStart, SessionStart{Session: "lead", Fresh: fresh}) })
		h.send(30*time.Minute, 1)
		v := h.run(sessionInput(policy(config.ModeOff, 85, 0)), time.Hour)

		require.Equal(t, StatusStopped, stopped.Status)
		require.Equal(t, StatusIdle, v.Status)
		require.Equal(t, 3, v.Context.TotalTurns, "it takes turns again")
		work := h.agent.turnsOfKind(agents.TurnWork)
		if fresh {
			rots := rotations(v)
			require.Len(t, rots, 1)
			require.Equal(t, config.ModeHandoff, rots[0].Method)
			require.Equal(t, "conv-2", work[2].Conversation, "a fresh conversation")
			require.Contains(t, eventTexts(v, EventResumed), "started again: it rotates by handoff into a fresh conversation first")
		} else {
			require.Empty(t, rotations(v))
			require.Equal(t, "conv-1", work[2].Conversation, "the same conversation")
			require.Contains(t, eventTexts(v, EventResumed), "started again: it goes on in the same conversation")
		}
	}
}

// The group starts only a stopped session, lets it claim again, pushes it
// the board it missed; a stop nid makes by itself says why in the inbox.
func TestGroupStartsAStoppedSession(t *testing.T) {
	h := newGroupHarness(t)
	var starts []SessionStart
	onSignalOut(h.env, "", SignalStart, func(_ string, start SessionStart) { starts = append(starts, start) })
	notStopped := h.update(time.Minute, UpdateStartSession, SessionStart{Session: "lead"}, nil)
	stop := h.update(2*time.Minute, UpdateStopSession, BoardRequest{Session: "lead", Why: "it left nid.yaml"}, nil)
	start := h.update(3*time.Minute, UpdateStartSession, SessionStart{Session: "lead", Fresh: true}, nil)
	claim := h.update(4*time.Minute, UpdateLockAcquire, BoardRequest{Session: "lead", Lock: "src/app.go"}, nil)
	v := h.run(groupInput(), time.Hour)

	require.EqualError(t, notStopped.rejected, "session web/lead is not stopped")
	require.NoError(t, stop.err)
	require.NoError(t, start.err)
	require.NoError(t, claim.rejected, "a started session may lock again")
	require.Empty(t, v.Stopped)
	require.Equal(t, []SessionStart{{Session: "lead", Fresh: true}}, starts)
	require.Len(t, v.Inbox, 1)
	require.Equal(t, "web/lead stopped: it left nid.yaml", v.Inbox[0].Text)
}

// A stopped session keeps no handoff of its agent, written during the turn
// the stop came in or by a tool call that arrived after it: started again,
// it goes on in the same conversation, as nid start says.
func TestAStoppedSessionKeepsNoHandoff(t *testing.T) {
	for _, after := range []bool{false, true} {
		h := newHarness(t)
		if after {
			h.send(time.Minute, 1)
			h.at(10*time.Minute, func() { h.env.SignalWorkflow(SignalStop, StopRequest{}) })
			h.at(12*time.Minute, func() { h.env.SignalWorkflow(SignalHandoffWrite, HandoffWrite{Summary: "late"}) })
		} else {
			first := true
			h.agent.onTurn = func(activities.TurnInput) {
				if first {
					first = false
					h.env.SignalWorkflow(SignalHandoffWrite, HandoffWrite{Summary: "mine"})
					h.env.SignalWorkflow(SignalStop, StopRequest{})
				}
			}
			h.send(time.Minute, 1)
		}
		h.at(20*time.Minute, func() { h.env.SignalWorkflow(SignalStart, SessionStart{Session: "lead"}) })
		h.send(30*time.Minute, 1)
		v := h.run(sessionInput(policy(config.ModeOff, 85, 0)), time.Hour)

		require.Empty(t, rotations(v), "after=%v: no rotation after the start", after)
		work := h.agent.turnsOfKind(agents.TurnWork)
		require.Len(t, work, 2)
		require.Equal(t, "conv-1", work[1].Conversation, "the same conversation")
		if after {
			require.Contains(t, eventTexts(v, EventHandoffWritten),
				"handoff written after the stop: ignored, so nid start goes on in the same conversation (nid start --fresh starts a fresh one)")
		}
	}
}
