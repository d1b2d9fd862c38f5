package workflows

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/nid-dev/nid/activities"
	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/config"
)

func TestEffectiveThreshold(t *testing.T) {
	claude := &LearnedPoint{Kind: "claude", Model: "m", Percent: 80}
	tests := []struct {
		name    string
		policy  config.Rotate
		learned *LearnedPoint
		window  int64
		want    Threshold
		text    string
	}{
		{"percent of the window", policy(config.ModeAuto, 85, 0), nil, 200_000, Threshold{Tokens: 170_000, Percent: 85, By: "contextPercent"}, "85% = 170k of 200k (contextPercent)"},
		{"tokens first on a large window", config.Rotate{Mode: config.ModeAuto, ContextPercent: 85, ContextTokens: 150_000}, nil, 1_000_000,
			Threshold{Tokens: 150_000, Percent: 15, By: "contextTokens"}, "15% = 150k of 1M (contextTokens)"},
		{"percent first on a small window", config.Rotate{Mode: config.ModeAuto, ContextPercent: 85, ContextTokens: 150_000}, nil, 100_000,
			Threshold{Tokens: 85_000, Percent: 85, By: "contextPercent"}, "85% = 85k of 100k (contextPercent)"},
		{"learned below the policy", policy(config.ModeAuto, 85, 0), claude, 200_000, Threshold{Tokens: 160_000, Percent: 80, By: "learned"}, "80% = 160k of 200k (learned)"},
		{"tokens without a window", config.Rotate{Mode: config.ModeAuto, ContextPercent: 85, ContextTokens: 150_000}, claude, 0,
			Threshold{Tokens: 150_000, By: "contextTokens"}, "150k tokens (contextTokens)"},
		{"nothing to go by", policy(config.ModeAuto, 85, 0), nil, 0, Threshold{}, "unknown until the agent reports its window"},
	}
	for _, tt := range tests {
		got := EffectiveThreshold(tt.policy, tt.learned, tt.window)
		require.Equal(t, tt.want, got, tt.name)
		require.Equal(t, tt.text, got.Text(tt.window), tt.name)
	}
}

func TestApplyLearnedJSON(t *testing.T) {
	seen := []LearnedPoint{{Kind: "claude", Model: "m", Percent: 80, SeenTokens: 166_000, Window: 200_000}}
	got, err := ApplyLearnedJSON(seen, `{"codex/gpt-5.5": 75, "claude/m": null}`)
	require.NoError(t, err)
	require.Equal(t, []LearnedPoint{{Kind: "codex", Model: "gpt-5.5", Percent: 75, Set: true}}, got)
	_, err = ApplyLearnedJSON(seen, `{"claude": 75, "codex/x": 120}`)
	require.EqualError(t, err, `learned: "claude" is not kind/model, e.g. claude/claude-sonnet-4-5; codex/x: 120 is outside 1..100 (null forgets it)`)
	_, err = ApplyLearnedJSON(seen, `[75]`)
	require.ErrorContains(t, err, `is not a JSON object of kind/model to a percent or null`)
}

// A token threshold rotates a session on a large window long before its
// percent would.
func TestContextTokensRotateFirst(t *testing.T) {
	h := newHarness(t)
	h.agent.window = 1_000_000
	h.agent.perTurn = 40_000
	h.send(time.Minute, 5)
	v := h.run(sessionInput(config.Rotate{Mode: config.ModeCompact, ContextPercent: 85, ContextTokens: 150_000}), time.Hour)

	rots := rotations(v)
	require.Len(t, rots, 1)
	require.Equal(t, ReasonContext, rots[0].Reason)
	require.GreaterOrEqual(t, rots[0].BeforeTokens, int64(150_000))
	require.Less(t, rots[0].BeforeTokens, int64(200_000), "at 4 turns of 40k, not at 85% of 1M")
	require.NotNil(t, v.Context.Threshold)
	require.Equal(t, Threshold{Tokens: 150_000, Percent: 15, By: "contextTokens"}, *v.Context.Threshold)
}

// A vendor that compacts by itself before nid's threshold teaches nid its
// point: the session (and, through the group, its siblings) rotates a
// margin below it from then on, and says so once.
func TestAVendorCompactionBelowTheThresholdIsLearned(t *testing.T) {
	h := newHarness(t)
	// 8.3k per turn of 100k: the vendor compacts at 83k, before nid's 85%.
	h.agent.perTurn = 8_300
	h.agent.vendorAt = 83_000
	h.send(time.Minute, 20)
	v := h.run(sessionInput(policy(config.ModeCompact, 85, 0)), time.Hour)

	require.Len(t, h.learned, 1, "told to the group once")
	require.Equal(t, LearnedPoint{Kind: "fake", Model: "fake-1", Percent: 80, SeenTokens: 83_009, Window: 100_000}, h.learned[0])
	learned := eventTexts(v, EventPolicy)
	require.Equal(t, []string{"learned: fake compacted itself at 83% of 100k; nid now rotates fake-1 sessions at 80%"}, learned)
	require.Equal(t, Threshold{Tokens: 80_000, Percent: 80, By: "learned"}, *v.Context.Threshold)
	// Turn 10 reached 83k; turn 11 began with the vendor's compaction.
	// From there nid's own rotation comes first: at turn 19, 83k, past 80%
	// and before the vendor's next turn would have compacted again.
	rots := rotations(v)
	require.Len(t, rots, 2)
	require.Equal(t, ReasonVendor, rots[0].Reason)
	require.Equal(t, ReasonContext, rots[1].Reason)
	require.Equal(t, int64(83_000), rots[1].BeforeTokens)
}

// A compaction that leaves the context near the threshold makes the next
// policy rotation a handoff rather than a loop of compactions.
func TestAnIneffectiveCompactionIsFollowedByAHandoff(t *testing.T) {
	h := newHarness(t)
	h.agent.compactTo = 0.9 // 80k → 72k: not well below 80% (70k)
	h.send(time.Minute, 12)
	v := h.run(sessionInput(policy(config.ModeCompact, 80, 0)), time.Hour)

	rots := rotations(v)
	require.GreaterOrEqual(t, len(rots), 2)
	require.Equal(t, config.ModeCompact, rots[0].Method)
	require.Equal(t, config.ModeHandoff, rots[1].Method, "the compaction did not help")
	require.Contains(t, strings.Join(eventTexts(v, EventPolicy), "\n"), "the next policy rotation is a handoff")
	require.False(t, v.HandoffNext, "a handoff that helped clears it")
}

// A fresh conversation that starts above the threshold cannot be helped by
// rotating: the policy stops for the session, which keeps working, the
// inbox says what to change, and a new policy starts it again.
func TestAFreshConversationAboveTheThresholdStopsThePolicy(t *testing.T) {
	h := newHarness(t)
	h.agent.freshTokens = 79_000 // the handoff, the board and the tools
	h.send(time.Minute, 12)
	var halted SessionView
	h.at(30*time.Minute, func() { halted = h.view() })
	h.at(40*time.Minute, func() {
		h.env.SignalWorkflow(SignalPolicy, PolicyChange{Rotate: policy(config.ModeHandoff, 100, 0)})
	})
	v := h.run(sessionInput(policy(config.ModeHandoff, 80, 0)), time.Hour)

	require.Len(t, rotations(halted), 1, "one handoff, then no more")
	require.Equal(t, 12, halted.Context.TotalTurns, "the session keeps working")
	require.Contains(t, halted.PolicyHalted, "fresh conversation starts at 89k, not well below its rotate threshold 80% = 80k of 100k")
	require.Len(t, h.inbox, 1)
	require.Contains(t, h.inbox[0].Text, "Raise contextPercent or contextTokens (nid group set web rotate=...)")
	require.Empty(t, v.PolicyHalted, "a new policy starts it again")
	require.Contains(t, eventTexts(v, EventPolicy), "policy rotations start again under the new policy")
}

// A session that keeps rotating by itself is thrashing: a circuit breaker
// stops its policy rotations and tells the inbox.
func TestTheBreakerStopsASessionThatThrashes(t *testing.T) {
	h := newHarness(t)
	h.agent.perTurn = 100
	h.agent.onTurn = func(in activities.TurnInput) {
		// Every turn the agent asks for a fresh start.
		h.env.SignalWorkflow(SignalHandoffWrite, HandoffWrite{Summary: "again"})
	}
	h.send(time.Minute, 8)
	v := h.run(sessionInput(policy(config.ModeAuto, 85, 0)), time.Hour)

	require.Len(t, rotations(v), breakerRotations+1)
	require.Contains(t, v.PolicyHalted, "rotated by itself 4 times in 3 turns: it is thrashing")
	require.Equal(t, 8, v.Context.TotalTurns, "it keeps working")
	require.Len(t, h.inbox, 1)
}

// Once the breaker has stopped a session's policy rotations, nid rotate
// still works, as the inbox says, though the agent's own handoff waits.
func TestNidRotateWorksAfterTheBreaker(t *testing.T) {
	h := newHarness(t)
	h.agent.perTurn = 100
	h.agent.onTurn = func(in activities.TurnInput) {
		h.env.SignalWorkflow(SignalHandoffWrite, HandoffWrite{Summary: "again: " + in.Prompt})
	}
	h.send(time.Minute, 8)
	var halted SessionView
	h.at(30*time.Minute, func() { halted = h.view() })
	h.at(31*time.Minute, func() { h.env.SignalWorkflow(SignalRotate, RotateRequest{}) })
	v := h.run(sessionInput(policy(config.ModeAuto, 85, 0)), time.Hour)

	require.NotEmpty(t, halted.PolicyHalted)
	require.Len(t, rotations(halted), breakerRotations+1)
	rots := rotations(v)
	require.Len(t, rots, breakerRotations+2, "nid rotate ran: %v", eventTexts(v, EventRotateQueued))
	last := rots[len(rots)-1]
	require.Equal(t, ReasonManual, last.Reason)
	require.Equal(t, config.ModeHandoff, last.Method, "the agent's handoff is the one it rotates with")
	require.Equal(t, "again: message 8", last.Summary)
	require.False(t, v.HandoffPending, "nothing left pending from the old conversation")
	written := eventTexts(v, EventHandoffWritten)
	require.Contains(t, written, "agent wrote a handoff: it waits, for policy rotations are stopped; nid rotate rotates with it")
	require.Equal(t, []string{"rotating web/lead now (handoff), with the handoff its agent wrote (it waited: policy rotations are stopped)"},
		eventTexts(v, EventRotateQueued))
}

// A conversation past its window hands off even while the policy is
// stopped, with the handoff its agent wrote and left waiting.
func TestAFullContextHandsOffWithTheWaitingHandoff(t *testing.T) {
	h := newHarness(t)
	h.agent.perTurn = 100
	full := true
	h.env.OnActivity(activities.RunTurnName, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.TurnInput) (activities.TurnResult, error) {
			if in.Prompt == "message 9" && full {
				full = false // the fresh conversation takes it
				return activities.TurnResult{}, temporal.NewNonRetryableApplicationError("prompt_too_long", activities.ErrContextFull, nil)
			}
			res, err := h.agent.RunTurn(ctx, in)
			if in.Kind == agents.TurnWork && in.Prompt != "message 9" {
				h.env.SignalWorkflow(SignalHandoffWrite, HandoffWrite{Summary: "again: " + in.Prompt})
			}
			return res, err
		})
	h.send(time.Minute, 9)
	v := h.run(sessionInput(policy(config.ModeAuto, 85, 0)), time.Hour)

	require.NotEmpty(t, v.PolicyHalted)
	rots := rotations(v)
	require.Len(t, rots, breakerRotations+2)
	last := rots[len(rots)-1]
	require.Equal(t, ReasonContextFull, last.Reason)
	require.Equal(t, "again: message 8", last.Summary, "the agent's own summary, not its last output")
	require.False(t, v.HandoffPending)
}

// What a session learned of its vendor, and the policy's judgement of its
// rotations, cross continue-as-new: the next run rotates before the vendor
// as this one did.
func TestWhatASessionLearnedCrossesContinueAsNew(t *testing.T) {
	h := newHarness(t)
	h.agent.perTurn = 8_300
	h.agent.vendorAt = 83_000
	h.send(time.Minute, 12)
	h.at(30*time.Minute, func() { h.env.SetContinueAsNewSuggested(true) })
	h.env.ExecuteWorkflow(SessionWorkflowName, sessionInput(policy(config.ModeCompact, 85, 0)))
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(h.env.GetWorkflowError(), &can), "got %v", h.env.GetWorkflowError())
	var next SessionInput
	require.NoError(t, decodeFirst(can, &next))
	require.Equal(t, []LearnedPoint{{Kind: "fake", Model: "fake-1", Percent: 80, SeenTokens: 83_009, Window: 100_000}}, next.State.Learned)
	require.Equal(t, &Threshold{Tokens: 80_000, Percent: 80, By: "learned"}, next.State.Context.Threshold)
}
