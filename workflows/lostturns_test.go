package workflows

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/nid-dev/nid/activities"
	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/internal/clip"
)

// workerDied is how a turn's attempt ends when its worker died under it
// and the next start fails what it left (worker/attempts.go).
func workerDied() error {
	return temporal.NewApplicationError("the worker running this attempt (pid 1) stopped before it ended", activities.ErrWorkerStopped)
}

// hangUntilCancelled is a turn whose host went away: no answer comes. The
// test environment holds its clock while an activity runs, so the attempt
// ends after a second of real time with an error the session would retry:
// a session that waited for it fails the test by retrying it on the dead
// host.
func hangUntilCancelled(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Second):
		return temporal.NewApplicationError("the turn was never cut", "NeverCut")
	}
}

func TestAMoveOffAHostThatIsDownCutsTheTurnLostThere(t *testing.T) {
	h := newMoveHarness(t)
	in := sessionInput(policy(config.ModeOff, 85, 0))
	in.Host = "a"
	h.agent.cut = func(ctx context.Context, in activities.TurnInput) error {
		if activity.GetInfo(ctx).TaskQueue != HostQueue("a") || !strings.Contains(in.Prompt, "message 2") {
			return nil
		}
		// Mid-turn, the host dies and the human moves the session.
		h.env.SignalWorkflow(SignalHost, HostState{Host: "a", Alive: false})
		h.env.SignalWorkflow(SignalMove, MoveRequest{Host: "b"})
		return hangUntilCancelled(ctx)
	}
	h.send(time.Minute, 1)
	h.at(2*time.Minute, func() { h.env.SignalWorkflow(SignalMessage, Message{Text: "message 2"}) })
	v := h.run(in, time.Hour)

	require.Equal(t, "b", v.Host, "it runs on the new host")
	require.Equal(t, StatusIdle, v.Status)
	rots := rotations(v)
	require.Len(t, rots, 1)
	require.Equal(t, ReasonMove, rots[0].Reason)
	require.Equal(t, SummaryFromLastOutput, rots[0].SummarySource, "it hands off with what it last said")
	require.Equal(t, []string{
		"host a is down: waiting for it",
		"moving from host a, which is down, to host b: it hands off at once with what it last said",
		"moved from host a to host b",
	}, eventTexts(v, EventHost))
	require.Contains(t, eventTexts(v, EventTurnFailed), "the turn running on host a is lost with it: the move hands off with what the session last said")
	var onB []string
	for i, turn := range h.agent.turns {
		if h.agent.queues[i] == HostQueue("b") {
			onB = append(onB, turn.Kind+": "+clip.Runes(turn.Prompt, 200))
		}
	}
	require.Len(t, onB, 2, "the fresh conversation, then the human's message the lost turn had")
	require.True(t, strings.HasPrefix(onB[0], agents.TurnFresh))
	require.Equal(t, agents.TurnWork+": message 2", onB[1], "the message is not lost with the turn")
	require.Equal(t, 2, v.Context.TotalTurns, "the lost turn is not counted")
}

func TestAStoppedSessionDoesNotRunAgainATurnItsWorkerLeftCut(t *testing.T) {
	h := newHarness(t)
	attempts := 0
	h.agent.cut = func(ctx context.Context, in activities.TurnInput) error {
		if in.Prompt != "message 2" {
			return nil
		}
		attempts++
		if attempts == 1 {
			// nid stop mid-turn, then the worker is killed: its next
			// start fails the attempt it left.
			h.env.SignalWorkflow(SignalStop, StopRequest{})
			return workerDied()
		}
		return nil
	}
	h.send(time.Minute, 1)
	h.at(2*time.Minute, func() { h.env.SignalWorkflow(SignalMessage, Message{Text: "message 2"}) })
	v := h.run(sessionInput(policy(config.ModeOff, 85, 0)), time.Hour)

	require.Equal(t, 1, attempts, "a stopped session runs the cut attempt no more")
	require.Equal(t, StatusStopped, v.Status)
	require.Equal(t, 1, v.Context.TotalTurns)
	require.Contains(t, strings.Join(eventTexts(v, EventStopped), "\n"), "the turn running when it was stopped did not finish")
	require.Empty(t, eventTexts(v, EventTurn)[1:], "no turn after the first")
}

func TestAnAttemptItsWorkerLeftCutRunsAgainForARunningSession(t *testing.T) {
	h := newHarness(t)
	attempts := 0
	h.agent.cut = func(ctx context.Context, in activities.TurnInput) error {
		attempts++
		if attempts == 1 {
			return workerDied()
		}
		return nil
	}
	h.send(time.Minute, 1)
	v := h.run(sessionInput(policy(config.ModeOff, 85, 0)), time.Hour)
	require.Equal(t, 2, attempts, "tried again, as the retry policy did")
	require.Equal(t, 1, v.Context.TotalTurns)
	require.Empty(t, eventTexts(v, EventTurnFailed), "a retried attempt is no failed turn")
	require.Equal(t, []string{"turn 1"}, eventTexts(v, EventTurn))
}

func TestATurnThatEndsAfterTheStopIsTheStops(t *testing.T) {
	h := newHarness(t)
	h.agent.onTurn = func(in activities.TurnInput) {
		if in.Prompt == "message 2" {
			h.env.SignalWorkflow(SignalStop, StopRequest{Why: "it left nid.yaml"})
		}
	}
	h.send(time.Minute, 2)
	v := h.run(sessionInput(policy(config.ModeOff, 85, 0)), time.Hour)
	require.Equal(t, []string{"turn 1"}, eventTexts(v, EventTurn), "no turn event after the stop")
	require.Equal(t, []string{
		"stopped (it left nid.yaml): its claims and locks are released",
		"the turn running when it was stopped ended (turn 2); it takes no more",
		"its agent is stopped",
	}, eventTexts(v, EventStopped))
}

func TestAnAgentThatDidNotStopIsSaidInTheFeed(t *testing.T) {
	h := newHarness(t)
	h.env.OnActivity(activities.StopAgentName, mock.Anything, mock.Anything).Return(activities.StopResult{},
		temporal.NewNonRetryableApplicationError("no session web/lead in this worker's nid.yaml", activities.ErrBadInput, nil))
	h.send(time.Minute, 1)
	h.at(10*time.Minute, func() { h.env.SignalWorkflow(SignalStop, StopRequest{}) })
	v := h.run(sessionInput(policy(config.ModeOff, 85, 0)), time.Hour)
	stops := eventTexts(v, EventStopped)
	require.Len(t, stops, 2)
	require.Contains(t, stops[1], "its agent's process may still run: nid could not stop it (")
	require.Contains(t, stops[1], "no session web/lead in this worker's nid.yaml")
}

func TestASessionThatCannotStartNeedsAttentionAtOnce(t *testing.T) {
	h := newHarness(t)
	in := sessionInput(policy(config.ModeOff, 85, 0))
	var before SessionView
	h.at(time.Minute, func() { before = h.view() })
	h.at(2*time.Minute, func() {
		h.env.SignalWorkflow(SignalCannotStart, CannotStart{Text: "claude: not found on PATH"})
	})
	var after SessionView
	h.at(3*time.Minute, func() { after = h.view() })
	h.send(10*time.Minute, 1)
	v := h.run(in, time.Hour)
	require.Equal(t, StatusIdle, before.Status)
	require.Equal(t, StatusNeedsAttention, after.Status, "nid ls says what nid up said")
	require.Len(t, h.inbox, 1)
	require.Equal(t, "web/lead cannot run its agent: claude: not found on PATH", h.inbox[0].Text)
	require.Equal(t, StatusIdle, v.Status, "the human's message lets it try")
	require.Equal(t, 1, v.Context.TotalTurns)
}

func TestARotationTheStopCancelledKeepsItsReceipt(t *testing.T) {
	h := newHarness(t)
	h.agent.noHandoff = true
	stopped := false
	h.env.OnActivity(activities.RunTurnName, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.TurnInput) (activities.TurnResult, error) {
			if in.Kind == agents.TurnHandoffRequest && !stopped {
				stopped = true
				h.env.SignalWorkflow(SignalStop, StopRequest{})
			}
			return h.agent.RunTurn(ctx, in)
		})
	h.send(time.Minute, 1)
	h.at(10*time.Minute, func() { h.env.SignalWorkflow(SignalRotate, RotateRequest{Mode: config.ModeHandoff}) })
	h.at(20*time.Minute, func() { h.env.SignalWorkflow(SignalStart, SessionStart{}) })
	h.at(21*time.Minute, func() { h.env.SignalWorkflow(SignalRotate, RotateRequest{Mode: config.ModeHandoff}) })
	v := h.run(sessionInput(policy(config.ModeOff, 85, 0)), time.Hour)

	require.Len(t, v.Receipts, 2, "the cancelled rotation's number is taken: the receipts say where it went")
	r := v.Receipts[0]
	require.Equal(t, 1, r.Number)
	require.True(t, r.Cancelled)
	require.False(t, r.OK)
	require.Equal(t, "cancelled: the session was stopped", r.Error)
	require.Equal(t, 2, v.Receipts[1].Number)
	require.True(t, v.Receipts[1].OK)
}

func TestRotateOnASessionWhoseHostIsDownWaitsForIt(t *testing.T) {
	v := SessionView{Status: StatusHostDown, Host: "a", Conversation: "c1", Context: ContextRecord{TotalTurns: 3}, Agent: agents.KindSim}
	a := DecideRotate("", v).Answer("web/lead")
	require.Equal(t, RotateWhenHostBack, a.When)
	require.Equal(t, "web/lead's host a is down, so nothing runs: it rotates (auto) when the host is back; nid move web/lead HOST hands it off onto another host at once", a.Text)
}
