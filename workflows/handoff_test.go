package workflows

import (
	"context"
	"fmt"
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

// darkModeFacts is what GatherFacts reads of lead's worktree in these tests.
var darkModeFacts = &activities.Facts{
	Repo: true, Branch: "nid/web/lead", Head: "abc1234", Base: "def5678",
	Commits:  []string{"abc1234 add the dark mode toggle", "bcd2345 theme variables"},
	Status:   []string{" M src/settings.tsx", "?? src/theme.css"},
	Diffstat: " src/settings.tsx | 12 ++++++++----\n 1 file changed, 8 insertions(+), 4 deletions(-)",
}

// holdTaskAndLock gives lead task t1 and the lock src/settings.tsx on the
// group's board, as task_claim and lock_acquire would. The fake agent's
// turns take no time and it never finishes t1, so a budget of three turns
// keeps the session from going on with it forever.
func holdTaskAndLock(h *harness) {
	h.at(30*time.Second, func() {
		h.group.update(func(b *BoardState) {
			b.Budget.Turns = 3
			t := b.add("Dark mode toggle", "")
			b.claim("lead", t.ID, time.Time{})
			b.add("Someone else's task", "")
			b.acquire("lead", "src/settings.tsx", time.Time{})
		})
	})
}

// rotateAt asks the session for a handoff at d, as nid rotate does.
func rotateAt(h *harness, d time.Duration) {
	h.at(d, func() {
		h.env.SignalWorkflow(SignalRotate, RotateRequest{Mode: config.ModeHandoff, Reason: ReasonManual})
	})
}

func freshPrompt(t *testing.T, h *harness) string {
	t.Helper()
	fresh := h.agent.turnsOfKind(agents.TurnFresh)
	require.Len(t, fresh, 1)
	return fresh[0].Prompt
}

// A handoff's first message carries the agent's handoff, what nid reads of
// the work itself, and what the session holds, and asks the fresh
// conversation to acknowledge it; a correct acknowledgement makes the
// receipt verified, and nobody is bothered.
func TestAHandoffCarriesTheFactsAndWhatTheSessionHolds(t *testing.T) {
	h := newHarness(t)
	h.agent.facts = darkModeFacts
	holdTaskAndLock(h)
	h.send(time.Minute, 2)
	rotateAt(h, 10*time.Minute)
	v := h.run(sessionInput(policy(config.ModeAuto, 90, 0)), time.Hour)

	prompt := freshPrompt(t, h)
	for _, want := range []string{
		"Handoff from your previous conversation:\nhandoff from conv-1",
		"What nid reads of your work now (facts, not the handoff's words):\n" + darkModeFacts.Text(),
		"You hold task t1 and the locks src/settings.tsx.",
		agents.AckRequest([]string{"t1"}),
	} {
		require.Contains(t, prompt, want)
	}
	require.Contains(t, darkModeFacts.Text(), "src/theme.css", "the facts name the files changed")

	rots := rotations(v)
	require.Len(t, rots, 1)
	r := rots[0]
	require.Equal(t, SummaryFromAgent, r.SummarySource)
	require.Equal(t, len("handoff from conv-1"), r.SummaryBytes)
	require.Equal(t, &FactsDigest{Repo: true, Branch: "nid/web/lead", Head: "abc1234", Commits: 2, Changed: 2}, r.Facts)
	require.Equal(t, VerifiedTrue, r.Verified)
	require.Empty(t, r.VerifyNote)
	require.Equal(t, h.agent.used["conv-1"]+h.agent.used["conv-2"], r.CostTokens,
		"the handoff request turn and the fresh turn are the rotation's cost")
	require.Len(t, v.Receipts, 1)
	receipt := r
	receipt.Summary, receipt.At = "", v.Receipts[0].At
	require.Equal(t, []RotationEvent{receipt}, v.Receipts, "the receipt is the event's, less the summary's text")
	require.False(t, receipt.At.IsZero(), "a receipt says when")
	require.Empty(t, h.inbox)
}

// A fresh conversation that names other tasks, or none, or says nothing,
// is an inbox item with what differed; the rotation itself stands.
func TestAnUnverifiedHandoffIsAnInboxItem(t *testing.T) {
	for _, tc := range []struct {
		ack, verified, note string
	}{
		{config.SimAckWrong, VerifiedFalse, "web/lead's fresh conversation says it resumes task t999, but it holds task t1"},
		{config.SimAckNone, VerifiedNone, "web/lead's fresh conversation did not acknowledge what it resumes (handoff_ack) in its first turn; it holds task t1"},
		// Only the fresh conversation's word counts: the old one's late
		// call says nothing about what the new one resumes.
		{"stale", VerifiedNone, "web/lead's fresh conversation did not acknowledge what it resumes (handoff_ack) in its first turn; it holds task t1"},
	} {
		t.Run(tc.ack, func(t *testing.T) {
			h := newHarness(t)
			h.agent.ack = tc.ack
			holdTaskAndLock(h)
			h.send(time.Minute, 2)
			rotateAt(h, 10*time.Minute)
			v := h.run(sessionInput(policy(config.ModeAuto, 90, 0)), time.Hour)

			rots := rotations(v)
			require.Len(t, rots, 1)
			require.True(t, rots[0].OK)
			require.Equal(t, tc.verified, rots[0].Verified)
			require.Equal(t, tc.note, rots[0].VerifyNote)
			require.Len(t, h.inbox, 1)
			require.Equal(t, "handoff-unverified", h.inbox[0].Kind)
			require.Equal(t, tc.note, h.inbox[0].Text)
			require.Equal(t, 1, v.Generation, "the session moved on to the fresh conversation")
		})
	}
}

// An agent that writes no handoff gets one nid builds from the transcript,
// said to be nid's in the fresh message and the receipt; with nothing in
// the transcript either, its last output stands in, as before.
func TestNidRescuesAHandoffTheAgentDidNotWrite(t *testing.T) {
	rescued := "nid wrote this handoff from the session's transcript, because the agent gave no handoff of its own.\nPrompts: message 1, message 2"
	for _, tc := range []struct {
		name, rescued, source, says string
	}{
		{"from the transcript", rescued, SummaryFromNid,
			"Your previous conversation could not write a handoff. nid wrote this one from its transcript:\n" + rescued},
		{"nothing to rescue", "", SummaryFromLastOutput,
			"Your previous conversation wrote no handoff. Its last output stands in for one:\noutput of turn in conv-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.agent.noHandoff = true
			h.agent.rescued = tc.rescued
			h.agent.facts = darkModeFacts
			h.send(time.Minute, 2)
			rotateAt(h, 10*time.Minute)
			v := h.run(sessionInput(policy(config.ModeAuto, 90, 0)), time.Hour)

			require.Contains(t, freshPrompt(t, h), tc.says)
			require.Contains(t, freshPrompt(t, h), darkModeFacts.Text(), "a rescued handoff has the facts too")
			require.Equal(t, []activities.RescueInput{{Session: agents.SessionRef{Group: "web", Name: "lead", WorkflowID: "nid/web/lead"}, Conversation: "conv-1"}}, h.agent.rescues)
			rots := rotations(v)
			require.Len(t, rots, 1)
			require.Equal(t, tc.source, rots[0].SummarySource)
			require.Equal(t, VerifiedTrue, rots[0].Verified, "holding nothing and saying so is verified")
		})
	}
}

// A handoff the agent wrote is not second-guessed from the transcript.
func TestAnAgentsOwnHandoffIsNotRescued(t *testing.T) {
	h := newHarness(t)
	h.agent.rescued = "never used"
	h.send(time.Minute, 2)
	rotateAt(h, 10*time.Minute)
	h.run(sessionInput(policy(config.ModeAuto, 90, 0)), time.Hour)
	require.Empty(t, h.agent.rescues)
}

// Facts nid cannot read leave them out; the handoff still happens, and
// the receipt and the inbox say why: a worktree whose links an agent
// pointed elsewhere is refused, and the human should look at it.
func TestAHandoffWithoutFacts(t *testing.T) {
	h := newHarness(t)
	refused := "reading the git facts of /state/worktrees/web/lead: its .git file no longer says what git made it say; nid refused to follow it and ran nothing"
	h.agent.factsErr = temporal.NewNonRetryableApplicationError(refused, activities.ErrAgentFailed, nil)
	h.send(time.Minute, 2)
	rotateAt(h, 10*time.Minute)
	v := h.run(sessionInput(policy(config.ModeAuto, 90, 0)), time.Hour)

	require.NotContains(t, freshPrompt(t, h), "What nid reads of your work")
	rots := rotations(v)
	require.Len(t, rots, 1)
	require.True(t, rots[0].OK)
	require.Nil(t, rots[0].Facts)
	require.Equal(t, VerifiedTrue, rots[0].Verified)
	note := "web/lead's fresh conversation got no git facts: " + refused
	require.Equal(t, note, rots[0].FactsNote)
	require.Len(t, h.inbox, 1)
	require.Equal(t, "facts-refused", h.inbox[0].Kind)
	require.Equal(t, note, h.inbox[0].Text)
}

// An agent that calls no tools (exec) is not asked to acknowledge, and its
// receipt says none without an inbox item: there was nothing it could do.
func TestAToollessAgentIsNotAskedToAcknowledge(t *testing.T) {
	h := newHarness(t)
	h.send(time.Minute, 2)
	rotateAt(h, 10*time.Minute)
	in := sessionInput(policy(config.ModeHandoff, 90, 0))
	in.Spec.Kind = agents.KindExec
	v := h.run(in, time.Hour)

	require.NotContains(t, freshPrompt(t, h), agents.ToolHandoffAck)
	rots := rotations(v)
	require.Len(t, rots, 1)
	require.Equal(t, VerifiedNotAsked, rots[0].Verified, "nothing asked it: not a handoff that went unverified")
	require.Empty(t, rots[0].VerifyNote)
	require.Empty(t, h.inbox)
}

// Every turn is a point of the context chart, every rotation a marked
// point with the threshold it rotated at; receipts keep failed rotations
// and the vendor's own compactions too.
func TestTheChartAndTheReceipts(t *testing.T) {
	h := newHarness(t)
	h.agent.vendorAt = 50_000
	h.send(time.Minute, 7)
	h.at(30*time.Minute, func() { h.agent.failCompact = true })
	h.at(31*time.Minute, func() {
		h.env.SignalWorkflow(SignalRotate, RotateRequest{Mode: config.ModeCompact, Reason: ReasonManual})
	})
	v := h.run(sessionInput(policy(config.ModeAuto, 90, 0)), time.Hour)

	var marks []string
	for _, p := range v.Points {
		marks = append(marks, fmt.Sprintf("%d:%d:%d:%d:%s/%s", p.Turn, p.Used, p.Window, p.Threshold, p.Rotation, p.Reason))
	}
	// The vendor compacted at the start of turn 6 (50k to 5k), before that
	// turn's own point and below the threshold, so nid learned its point
	// and rotates a margin below it from then on.
	require.Equal(t, []string{
		"1:10009:100000:90000:/", "2:20009:100000:90000:/", "3:30009:100000:90000:/",
		"4:40009:100000:90000:/", "5:50009:100000:90000:/",
		"6:50009:100000:90000:compact/vendor", "6:15000:100000:47000:/", "7:25000:100000:47000:/",
	}, marks)

	require.Len(t, v.Receipts, 2)
	require.Equal(t, ReasonVendor, v.Receipts[0].Reason)
	require.True(t, v.Receipts[0].OK)
	require.Equal(t, ReasonManual, v.Receipts[1].Reason)
	require.False(t, v.Receipts[1].OK, "a failed rotation keeps its receipt")
}

// A session still on a rung before the chart (VersionVouchedHandoff) draws
// none, through its turns, a vendor's compaction and its rotations alike:
// its history recorded no points.
func TestAnOlderRungDrawsNoChart(t *testing.T) {
	h := newHarness(t)
	h.env.OnGetVersion(versionChangeID, workflow.DefaultVersion, workflow.Version(versionLatest)).Return(workflow.Version(VersionGovernor))
	h.agent.vendorAt = 50_000
	h.send(time.Minute, 7)
	h.at(31*time.Minute, func() {
		h.env.SignalWorkflow(SignalRotate, RotateRequest{Mode: config.ModeCompact, Reason: ReasonManual})
	})
	v := h.run(sessionInput(policy(config.ModeAuto, 90, 0)), time.Hour)

	require.Equal(t, 7, v.Context.TotalTurns)
	require.NotEmpty(t, rotations(v), "it rotated")
	require.Empty(t, v.Points)
}

// The chart and the receipts are bounded however long a session runs.
func TestTheChartAndReceiptsAreBounded(t *testing.T) {
	var c ConversationState
	for i := range maxPoints + 5 {
		c.Context.TotalTurns = i + 1
		c.plot("", "")
	}
	require.Len(t, c.Points, maxPoints)
	require.Equal(t, 6, c.Points[0].Turn, "the oldest points go first")
	for i := range maxReceipts + 3 {
		c.keepReceipt(RotationEvent{Number: i + 1, Summary: "a handoff"}, time.Time{})
	}
	require.Len(t, c.Receipts, maxReceipts)
	require.Equal(t, 4, c.Receipts[0].Number)
	require.Empty(t, c.Receipts[0].Summary, "a receipt keeps the summary's size, not its text")
}

// An acknowledgement with no rotation running checks nothing: the feed
// says so, and nobody is bothered.
func TestAnAckOutsideARotationChecksNothing(t *testing.T) {
	h := newHarness(t)
	h.send(time.Minute, 1)
	h.at(10*time.Minute, func() {
		h.env.SignalWorkflow(SignalHandoffAck, HandoffAck{Tasks: []string{"t1"}, Generation: 0})
	})
	v := h.run(sessionInput(policy(config.ModeAuto, 90, 0)), time.Hour)

	require.Equal(t, []string{"handoff_ack outside a rotation (task t1): nothing to check"}, eventTexts(v, EventHandoffAck))
	require.Empty(t, rotations(v))
	require.Empty(t, h.inbox)
}

// Whatever keeps the agent from giving a handoff, nid builds one from the
// transcript: a conversation past its window (no request at all), a
// handoff request turn that fails, one that times out.
func TestNidRescuesWhenTheAgentCannotHandOff(t *testing.T) {
	rescued := "nid wrote this handoff from the session's transcript, because the agent gave no handoff of its own."
	full := temporal.NewNonRetryableApplicationError("claude: the conversation no longer fits the context window (prompt_too_long)", activities.ErrContextFull, nil)
	for _, tc := range []struct {
		name   string
		fail   func(in activities.TurnInput) error
		reason string
	}{
		{"the conversation no longer fits", func(in activities.TurnInput) error {
			if in.Prompt == "message 2" && in.Conversation == "conv-1" {
				return full
			}
			return nil
		}, ReasonContextFull},
		{"the request turn fails", func(in activities.TurnInput) error {
			if in.Kind == agents.TurnHandoffRequest {
				return temporal.NewNonRetryableApplicationError("claude exited with status 1", activities.ErrAgentFailed, nil)
			}
			return nil
		}, ReasonManual},
		{"the request turn times out", func(in activities.TurnInput) error {
			if in.Kind == agents.TurnHandoffRequest {
				// What an adapter says of a turn past its turnTimeout.
				return temporal.NewNonRetryableApplicationError("claude: the turn ran past its timeout of 30m0s; its process group was killed", activities.ErrAgentFailed, nil)
			}
			return nil
		}, ReasonManual},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.agent.rescued = rescued
			h.env.OnActivity(activities.RunTurnName, mock.Anything, mock.Anything).Return(
				func(ctx context.Context, in activities.TurnInput) (activities.TurnResult, error) {
					if err := tc.fail(in); err != nil {
						return activities.TurnResult{}, err
					}
					return h.agent.RunTurn(ctx, in)
				})
			h.send(time.Minute, 2)
			if tc.reason == ReasonManual {
				rotateAt(h, 10*time.Minute)
			}
			v := h.run(sessionInput(policy(config.ModeOff, 85, 0)), time.Hour)

			rots := rotations(v)
			require.Len(t, rots, 1)
			require.True(t, rots[0].OK)
			require.Equal(t, tc.reason, rots[0].Reason)
			require.Equal(t, SummaryFromNid, rots[0].SummarySource)
			require.Contains(t, freshPrompt(t, h), "nid wrote this one from its transcript:\n"+rescued)
			require.Len(t, h.agent.rescues, 1)
			require.Equal(t, "conv-1", h.agent.rescues[0].Conversation)
		})
	}
}
