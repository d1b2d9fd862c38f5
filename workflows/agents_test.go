package workflows

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/nid-dev/nid/activities"
	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/config"
)

func TestRateLimitedWhileTheTurnRetries(t *testing.T) {
	h := newHarness(t)
	h.agent.onTurn = func(in activities.TurnInput) {
		if in.Prompt == "message 2" {
			h.env.SignalWorkflow(SignalRateLimit, RateLimit{Limited: true})
		}
	}
	// A late signal, after its turn ended, changes nothing.
	h.at(30*time.Minute, func() { h.env.SignalWorkflow(SignalRateLimit, RateLimit{Limited: true}) })
	h.send(time.Minute, 3)
	v := h.run(sessionInput(policy(config.ModeAuto, 85, 0)), time.Hour)

	require.Equal(t, []string{"rate limited: the vendor is overloaded or limiting; the agent retries"}, eventTexts(v, EventRateLimited))
	require.Equal(t, StatusIdle, v.Status, "the status ends with the turn")
	require.Equal(t, 3, v.Context.TotalTurns, "a rate-limited turn is not a failed one")
	var order []string
	for _, e := range v.Events {
		if e.Kind == EventTurn || e.Kind == EventRateLimited {
			order = append(order, e.Kind)
		}
	}
	require.Equal(t, []string{EventTurn, EventRateLimited, EventTurn, EventTurn}, order)
}

func TestRateLimitOverGoesBackToWorking(t *testing.T) {
	h := newHarness(t)
	h.agent.onTurn = func(in activities.TurnInput) {
		h.env.SignalWorkflow(SignalRateLimit, RateLimit{Limited: true})
		h.env.SignalWorkflow(SignalRateLimit, RateLimit{Limited: false})
	}
	h.send(time.Minute, 1)
	v := h.run(sessionInput(policy(config.ModeAuto, 85, 0)), time.Hour)
	require.Equal(t, []string{
		"rate limited: the vendor is overloaded or limiting; the agent retries",
		"rate limit over: the turn goes on",
	}, eventTexts(v, EventRateLimited))
	require.Equal(t, StatusIdle, v.Status)
}

// A conversation past its window cannot take another turn, not even the
// request for a handoff: the session hands off at once with the last
// output, and goes on in the fresh conversation.
func TestContextFullForcesAHandoff(t *testing.T) {
	h := newHarness(t)
	h.env.OnActivity(activities.RunTurnName, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.TurnInput) (activities.TurnResult, error) {
			if in.Prompt == "message 2" && in.Conversation == "conv-1" {
				return activities.TurnResult{}, temporal.NewNonRetryableApplicationError(
					"claude: the conversation no longer fits the context window (prompt_too_long)", activities.ErrContextFull, nil)
			}
			return h.agent.RunTurn(ctx, in)
		})
	h.send(time.Minute, 2)
	h.send(20*time.Minute, 1)
	v := h.run(sessionInput(policy(config.ModeOff, 85, 0)), time.Hour)

	rots := rotations(v)
	require.Len(t, rots, 1)
	require.Equal(t, config.ModeHandoff, rots[0].Method)
	require.Equal(t, ReasonContextFull, rots[0].Reason)
	require.Equal(t, "conv-1", rots[0].OldConversation)
	require.Equal(t, "conv-2", rots[0].NewConversation)
	require.Equal(t, SummaryFromLastOutput, rots[0].SummarySource)
	require.Equal(t, "output of turn in conv-1", rots[0].Summary)
	require.Empty(t, h.agent.turnsOfKind(agents.TurnHandoffRequest), "the full conversation is not asked for a handoff")
	require.Equal(t, []string{"conv-1"}, h.agent.stops)
	require.Contains(t, eventTexts(v, EventTurnFailed)[0], "prompt_too_long")
	require.Empty(t, h.inbox, "a forced handoff that worked needs no human")
	require.Equal(t, StatusIdle, v.Status)
	require.Equal(t, "conv-2", v.Conversation)
	// The next message went to the fresh conversation.
	work := h.agent.turnsOfKind(agents.TurnWork)
	require.Equal(t, "conv-2", work[len(work)-1].Conversation)
}

func TestTurnTimeoutComesFromTheSpec(t *testing.T) {
	tests := []struct {
		spec agents.AgentSpec
		want time.Duration
	}{
		{agents.AgentSpec{Kind: agents.KindSim, Sim: config.Sim{TurnDelay: config.Duration(time.Second)}}, time.Second + 2*time.Minute},
		{agents.AgentSpec{Kind: agents.KindClaude, TurnTimeout: config.Duration(5 * time.Minute)}, 6 * time.Minute},
		{agents.AgentSpec{Kind: agents.KindCodex}, config.DefaultTurnTimeout + time.Minute},
	}
	for _, tt := range tests {
		h := newHarness(t)
		var got time.Duration
		h.env.OnActivity(activities.RunTurnName, mock.Anything, mock.Anything).Return(
			func(ctx context.Context, in activities.TurnInput) (activities.TurnResult, error) {
				got = activity.GetInfo(ctx).StartToCloseTimeout
				return h.agent.RunTurn(ctx, in)
			})
		h.send(time.Minute, 1)
		in := sessionInput(policy(config.ModeOff, 85, 0))
		in.Spec = tt.spec
		h.run(in, time.Hour)
		require.Equal(t, tt.want, got, tt.spec.Kind)
	}
}
