package workflows

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/nid-dev/nid/activities"
	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/config"
)

// update sends a session update now and records its outcome in r.
func (h *harness) update(r *updateResult, name string, arg any) *updateResult {
	h.env.UpdateWorkflow(name, "", &testsuite.TestUpdateCallback{
		OnReject: func(err error) { r.rejected, r.done = err, true },
		OnAccept: func() {},
		OnComplete: func(v interface{}, err error) {
			r.value, r.err, r.done = v, err, true
		},
	}, arg)
	return r
}

// attachAt attaches as who with lease at d.
func (h *harness) attachAt(d time.Duration, who, lease string) *updateResult {
	r := &updateResult{}
	h.at(d, func() { h.update(r, UpdateAttach, AttachRequest{Who: who, Lease: lease}) })
	return r
}

// attachDuring asks for the hold while the turn with prompt runs, as a
// person who steps in on a working session does.
func (h *harness) attachDuring(prompt, who, lease string) *updateResult {
	r := &updateResult{}
	h.agent.onTurn = func(in activities.TurnInput) {
		if in.Prompt == prompt {
			h.update(r, UpdateAttach, AttachRequest{Who: who, Lease: lease})
		}
	}
	return r
}

// releaseAt hands the session back by lease at d.
func (h *harness) releaseAt(d time.Duration, lease string) *updateResult {
	r := &updateResult{}
	h.at(d, func() { h.update(r, UpdateAttachRelease, AttachRelease{Lease: lease}) })
	return r
}

// renew renews lease every AttachRenewEvery from from until until, as
// nid attach does while its command runs.
func (h *harness) renew(lease string, from, until time.Duration) {
	for d := from; d < until; d += AttachRenewEvery {
		h.at(d, func() { h.env.SignalWorkflow(SignalAttachRenew, AttachRenewal{Lease: lease}) })
	}
}

func answerOf(t *testing.T, r *updateResult) AttachAnswer {
	t.Helper()
	require.True(t, r.done, "the attach update did not end")
	require.NoError(t, r.rejected)
	require.NoError(t, r.err)
	return r.value.(AttachAnswer)
}

func handbackOf(t *testing.T, r *updateResult) Handback {
	t.Helper()
	require.True(t, r.done, "the release update did not end")
	require.NoError(t, r.rejected)
	require.NoError(t, r.err)
	return r.value.(Handback)
}

func TestAttachWhileIdleClosesTheAgentAndHolds(t *testing.T) {
	h := newHarness(t)
	h.send(time.Minute, 2)
	att := h.attachAt(10*time.Minute, "alice@box", "l1")
	h.renew("l1", 10*time.Minute, time.Hour)
	h.send(20*time.Minute, 1)
	var during SessionView
	h.at(30*time.Minute, func() { during = h.view() })
	v := h.run(sessionInput(policy(config.ModeOff, 85, 0)), time.Hour)

	a := answerOf(t, att)
	require.True(t, a.Ready, "an idle session is ready at once")
	require.Equal(t, "conv-1", a.Conversation, "the person resumes the session's conversation")
	require.Equal(t, 2, a.Context.TotalTurns)
	require.Equal(t, []string{"conv-1"}, h.agent.stops, "the agent's process is closed for the person's CLI")
	require.Equal(t, StatusAttached, during.Status)
	require.NotNil(t, during.Attach)
	require.Equal(t, "alice@box", during.Attach.Who)
	require.True(t, during.Attach.Ready)
	require.Equal(t, StatusAttached, v.Status, "renewed, the hold lasts")
	require.Len(t, h.agent.turnsOfKind(agents.TurnWork), 2, "no turn starts while held")
	require.Equal(t, 1, v.QueuedMessages, "the message waits for the hand-back")
	require.Contains(t, eventTexts(v, EventAttach), "attached by alice@box: no turn starts until they hand it back")
	require.Contains(t, eventTexts(v, EventMessage), "message queued: message 1 (delivered once alice@box hands the session back)")
	require.Equal(t, "queued for web/lead: it is attached by alice@box (nid attach), and its next turn takes the message once they hand it back",
		QueuedText("web/lead", v))
}

func TestAttachDuringATurnWaitsForItThenClosesTheAgent(t *testing.T) {
	h := newHarness(t)
	att := h.attachDuring("message 2", "alice@box", "l1")
	h.send(time.Minute, 3)
	h.renew("l1", time.Minute+AttachRenewEvery, time.Hour)
	v := h.run(sessionInput(policy(config.ModeOff, 85, 0)), time.Hour)

	a := answerOf(t, att)
	require.False(t, a.Ready)
	require.Equal(t, 2, a.WaitingForTurn, "nid attach says which turn it waits for")
	require.True(t, v.Attach.Ready, "ready once the turn ended and the agent was closed")
	require.Zero(t, v.Attach.WaitingForTurn)
	require.Len(t, h.agent.turnsOfKind(agents.TurnWork), 2, "the turn running ends; the next waits")
	require.Equal(t, []string{"conv-1"}, h.agent.stops)
	texts := eventTexts(v, EventAttach)
	require.Equal(t, []string{"attached by alice@box: it waits for turn 2 to end", "ready for alice@box: its agent's process is closed"}, texts)
}

// A hand-back compares the context with what the person found: that of
// the turn the hold waited for, not the one the session had when they
// asked.
func TestAHandbackAfterATurnEndedComparesWithThatTurn(t *testing.T) {
	h := newHarness(t)
	att := h.attachDuring("message 2", "alice@box", "l1")
	h.send(time.Minute, 3)
	h.renew("l1", time.Minute+AttachRenewEvery, 20*time.Minute)
	rel := h.releaseAt(20*time.Minute, "l1")
	h.run(sessionInput(policy(config.ModeOff, 85, 0)), time.Hour)

	require.Equal(t, 1, answerOf(t, att).Context.TotalTurns, "asked after the first turn")
	hb := handbackOf(t, rel)
	require.Equal(t, 2, hb.Before.TotalTurns, "before: the context after the turn waited for")
	require.Equal(t, hb.Before, hb.After, "nothing done by hand")
}

func TestASecondAttachIsRefusedWithWhoHoldsIt(t *testing.T) {
	h := newHarness(t)
	h.send(time.Minute, 1)
	h.attachAt(10*time.Minute, "alice@box", "l1")
	h.renew("l1", 10*time.Minute, time.Hour)
	second := h.attachAt(10*time.Minute+34*time.Second, "bob@other", "l2")
	again := h.attachAt(11*time.Minute, "alice@box", "l1")
	h.run(sessionInput(policy(config.ModeOff, 85, 0)), time.Hour)

	require.True(t, second.done)
	require.Error(t, second.rejected)
	require.Regexp(t, `^web/lead is attached by alice@box since \d\d:\d\d \(lease renewed 4s ago\); wait for them to hand it back$`, second.rejected.Error())
	require.True(t, answerOf(t, again).Ready, "the same lease asking again gets the hold it has")
}

func TestAttachRefusals(t *testing.T) {
	st := &SessionState{Status: StatusIdle}
	r := rules{in: &SessionInput{Group: "web", Name: "lead", Spec: agents.AgentSpec{Kind: agents.KindSim}}, st: st, ladder: ladder{versionLatest}}
	ok := AttachRequest{Who: "alice@box", Host: "box", Lease: "l1"}
	require.Equal(t, "the sim agent has no interactive CLI to attach to: nid send gives it a message for its next turn, and nid transcript shows what it did",
		r.attachRefusal(time.Time{}, ok))
	r.in.Spec.Kind = agents.KindExec
	st.Host = "box"
	require.Empty(t, r.attachRefusal(time.Time{}, ok))
	require.Equal(t, "web/lead runs on host other: run nid attach there, or nid move it here first",
		func() string { st.Host = "other"; return r.attachRefusal(time.Time{}, ok) }())
	st.Host = "box"
	st.Stopped = true
	require.Equal(t, "web/lead is stopped (nid stop): nid start it, then attach", r.attachRefusal(time.Time{}, ok))
	st.Stopped = false
	st.HostDown = true
	require.Equal(t, "web/lead's host box is down (its nid up does not answer): start nid up there, then attach", r.attachRefusal(time.Time{}, ok))
	st.HostDown = false
	require.Contains(t, r.attachRefusal(time.Time{}, AttachRequest{Who: strings.Repeat("w", MaxAttachWho+1), Lease: "l"}), "who attaches")
	require.Contains(t, r.attachRefusal(time.Time{}, AttachRequest{Who: "w", Lease: strings.Repeat("l", MaxLeaseBytes+1)}), "lease id")
}

func TestMessagesAndRotateRequestsWaitForTheHandback(t *testing.T) {
	h := newHarness(t)
	h.send(time.Minute, 1)
	h.attachAt(10*time.Minute, "alice@box", "l1")
	h.renew("l1", 10*time.Minute, 30*time.Minute)
	h.send(12*time.Minute, 2)
	var answer RotateAnswer
	h.at(13*time.Minute, func() {
		answer = DecideRotate(config.ModeHandoff, h.view()).Answer("web/lead")
		h.env.SignalWorkflow(SignalRotate, RotateRequest{Mode: config.ModeHandoff, Reason: ReasonManual})
	})
	var held SessionView
	h.at(29*time.Minute, func() { held = h.view() })
	rel := h.releaseAt(30*time.Minute, "l1")
	v := h.run(sessionInput(policy(config.ModeOff, 85, 0)), time.Hour)

	require.Equal(t, RotateAfterHandback, answer.When)
	require.Equal(t, "web/lead is attached by alice@box (nid attach): it rotates (handoff) when they hand it back", answer.Text)
	require.Contains(t, eventTexts(v, EventRotateQueued), "web/lead is attached by alice@box (nid attach): it rotates (handoff) when they hand it back")
	require.Equal(t, 2, held.QueuedMessages)
	require.NotNil(t, held.PendingRotate)
	require.Empty(t, rotations(held), "nothing rotates while held")

	handbackOf(t, rel)
	require.Nil(t, v.Attach)
	require.Equal(t, StatusIdle, v.Status)
	require.Zero(t, v.QueuedMessages, "the messages are delivered after the hand-back")
	rots := rotations(v)
	require.Len(t, rots, 1, "the rotation asked for runs after the hand-back")
	require.Equal(t, config.ModeHandoff, rots[0].Method)
	work := h.agent.turnsOfKind(agents.TurnWork)
	require.Len(t, work, 3)
	require.Equal(t, "message 1", work[1].Prompt)
}

func TestAHandbackFoldsTheVendorsRecordsAndRotatesOverTheThreshold(t *testing.T) {
	h := newHarness(t)
	h.agent.handback = agents.Handback{
		Found: true, Conversation: "conv-9", HandTurns: 3,
		Usage:       agents.Usage{UsedTokens: 90_000, WindowTokens: 100_000, Source: agents.SourceReported, Model: "fake-1"},
		Compactions: []agents.VendorCompaction{{BeforeTokens: 95_000, AfterTokens: 20_000}},
	}
	h.send(time.Minute, 2)
	h.attachAt(10*time.Minute, "alice@box", "l1")
	h.renew("l1", 10*time.Minute, 30*time.Minute)
	rel := h.releaseAt(30*time.Minute, "l1")
	v := h.run(sessionInput(policy(config.ModeHandoff, 80, 0)), time.Hour)

	hb := handbackOf(t, rel)
	require.Equal(t, "alice@box", hb.Who)
	require.Equal(t, 3, hb.HandTurns)
	require.Equal(t, 1, hb.Compactions)
	require.Equal(t, "conv-9", hb.Conversation, "the conversation the person ended in is the session's")
	require.InDelta(t, 20.0, *hb.Before.Percent, 0.1)
	require.InDelta(t, 90.0, *hb.After.Percent, 0.01)
	require.Equal(t, 5, hb.After.TotalTurns, "turns by hand count")
	require.EqualValues(t, 2+3+1, chargedTurns(h.group.charges), "the two turns, the three by hand and the policy's rotation are charged to the group's budget")
	require.False(t, hb.Expired)
	require.Len(t, h.agent.handbacks, 1)
	require.Equal(t, "conv-1", h.agent.handbacks[0].Conversation)
	require.Contains(t, eventTexts(v, EventAttach), "handed back by alice@box: context 20% → 90%, 3 turns by hand, 1 compaction")

	rots := rotations(v)
	require.Len(t, rots, 2, "the person's compaction counts as the vendor's, then the policy rotates at once")
	require.Equal(t, ReasonVendor, rots[0].Reason)
	require.Equal(t, ReasonContext, rots[1].Reason)
	require.Equal(t, "conv-9", rots[1].OldConversation)
	require.Equal(t, v.LastHandback.After.TotalTurns, hb.After.TotalTurns)
}

func TestAHandbackThatCannotReadTheRecordsStillLetsGo(t *testing.T) {
	h := newHarness(t)
	h.agent.handbackErr = errors.New("transcript unreadable")
	h.send(time.Minute, 1)
	h.attachAt(10*time.Minute, "alice@box", "l1")
	rel := h.releaseAt(10*time.Minute+30*time.Second, "l1")
	h.send(20*time.Minute, 1)
	v := h.run(sessionInput(policy(config.ModeOff, 85, 0)), time.Hour)

	hb := handbackOf(t, rel)
	require.Contains(t, hb.Note, "the vendor's records could not be read")
	require.Equal(t, hb.Before.TotalTurns, hb.After.TotalTurns)
	require.Nil(t, v.Attach)
	require.Len(t, h.agent.turnsOfKind(agents.TurnWork), 2, "the session goes on")
}

func TestALeaseNotRenewedHandsBackByItself(t *testing.T) {
	h := newHarness(t)
	h.send(time.Minute, 1)
	h.attachAt(10*time.Minute, "alice@box", "l1")
	h.renew("l1", 10*time.Minute, 20*time.Minute)
	h.send(12*time.Minute, 1)
	var held, free SessionView
	h.at(20*time.Minute+40*time.Second, func() { held = h.view() })
	h.at(21*time.Minute+5*time.Second, func() { free = h.view() })
	late := h.releaseAt(25*time.Minute, "l1")
	h.at(25*time.Minute, func() { h.env.SignalWorkflow(SignalAttachRenew, AttachRenewal{Lease: "l1"}) })
	v := h.run(sessionInput(policy(config.ModeOff, 85, 0)), time.Hour)

	require.NotNil(t, held.Attach, "renewed until 19:50, the hold lasts a lease more")
	require.Nil(t, free.Attach, "taken back within the lease")
	require.True(t, free.LastHandback.Expired)
	require.Len(t, h.agent.handbacks, 1, "the records are read as at a hand-back")
	require.Len(t, h.agent.turnsOfKind(agents.TurnWork), 2, "and the queued message is delivered")
	require.Contains(t, strings.Join(eventTexts(v, EventAttach), "\n"), "taken back from alice@box (nid attach stopped renewing its lease): context")
	require.True(t, handbackOf(t, late).Expired, "a release after the lease ran out gets the hand-back's answer")
	require.Contains(t, eventTexts(v, EventAttach), "attach renewal not taken: lease l1 does not hold the session")
}

func TestContinueAsNewWhileAttachedKeepsTheHold(t *testing.T) {
	h := newHarness(t)
	h.send(time.Minute, 1)
	h.attachAt(10*time.Minute, "alice@box", "l1")
	h.renew("l1", 10*time.Minute, 20*time.Minute)
	h.at(15*time.Minute, func() { h.env.SetContinueAsNewSuggested(true) })
	h.env.ExecuteWorkflow(SessionWorkflowName, sessionInput(policy(config.ModeOff, 85, 0)))
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(h.env.GetWorkflowError(), &can), "got %v", h.env.GetWorkflowError())
	var next SessionInput
	require.NoError(t, decodeFirst(can, &next))
	require.NotNil(t, next.State.Attach)
	require.Equal(t, "alice@box", next.State.Attach.Who)
	require.True(t, next.State.Attach.Ready)

	h2 := newHarness(t)
	h2.agent.convs = 1
	h2.send(time.Minute, 1)
	h2.renew("l1", 0, 5*time.Minute)
	var held SessionView
	h2.at(4*time.Minute, func() { held = h2.view() })
	rel := h2.releaseAt(5*time.Minute, "l1")
	v := h2.run(next, time.Hour)

	require.Equal(t, StatusAttached, held.Status, "the new run holds on")
	require.Equal(t, 1, held.QueuedMessages)
	require.Len(t, h2.agent.stops, 0, "the agent was closed by the run before")
	handbackOf(t, rel)
	require.Len(t, h2.agent.turnsOfKind(agents.TurnWork), 1, "after the hand-back the message runs")
	require.Equal(t, StatusIdle, v.Status)
}

// Claude Code's transcripts do not say the window: a hand-back on the
// model the session's turns reported keeps the window they reported, so
// the context is still a percent; on another model it is unknown.
func TestAHandbackWithoutAWindowKeepsTheModelsWindow(t *testing.T) {
	for _, tt := range []struct {
		model   string
		percent bool
	}{{"fake-1", true}, {"other-model", false}} {
		h := newHarness(t)
		h.agent.handback = agents.Handback{Found: true, HandTurns: 1,
			Usage: agents.Usage{UsedTokens: 30_000, Source: agents.SourceReported, Model: tt.model}}
		h.send(time.Minute, 1)
		h.attachAt(10*time.Minute, "alice@box", "l1")
		h.renew("l1", 10*time.Minute, 30*time.Minute)
		rel := h.releaseAt(30*time.Minute, "l1")
		h.run(sessionInput(policy(config.ModeOff, 85, 0)), time.Hour)

		hb := handbackOf(t, rel)
		require.EqualValues(t, 30_000, hb.After.UsedTokens)
		if tt.percent {
			require.Equal(t, hb.Before.WindowTokens, hb.After.WindowTokens, "model %q", tt.model)
			require.NotNil(t, hb.After.Percent, "model %q", tt.model)
		} else {
			require.Nil(t, hb.After.Percent, "model %q: another model's window is not known", tt.model)
		}
	}
}

// A move's rotation takes the session to another host: a hold taken on
// the old host meanwhile would be ready on the new one, with the person's
// CLI on the old one.
func TestAttachDuringAMoveIsRefused(t *testing.T) {
	h := newMoveHarness(t)
	in := sessionInput(policy(config.ModeOff, 85, 0))
	in.Host, in.Repo = "a", "/repo"
	att := &updateResult{}
	h.onSave = func() { h.update(att, UpdateAttach, AttachRequest{Who: "alice@a", Host: "a", Lease: "l1"}) }
	h.send(time.Minute, 1)
	h.at(10*time.Minute, func() { h.env.SignalWorkflow(SignalMove, MoveRequest{Host: "b"}) })
	v := h.run(in, time.Hour)

	require.Equal(t, "b", v.Host)
	require.True(t, att.done)
	require.EqualError(t, att.rejected, "web/lead is moving to host b: attach there once it has moved")
	require.Nil(t, v.Attach)
}

// A person who ended in a conversation of their own (a /clear, a new
// thread) hands back a session whose turns since the last rotation are
// the ones they took there: maxTurns counts from the fresh conversation.
func TestAHandbackInANewConversationCountsItsTurnsFromThere(t *testing.T) {
	h := newHarness(t)
	h.agent.handback = agents.Handback{Found: true, Conversation: "conv-new", HandTurns: 1,
		Usage: agents.Usage{UsedTokens: 5_000, WindowTokens: 100_000, Source: agents.SourceReported, Model: "fake-1"}}
	h.send(time.Minute, 3)
	h.attachAt(10*time.Minute, "alice@box", "l1")
	h.renew("l1", 10*time.Minute, 30*time.Minute)
	rel := h.releaseAt(30*time.Minute, "l1")
	h.run(sessionInput(policy(config.ModeOff, 85, 0)), time.Hour)

	hb := handbackOf(t, rel)
	require.Equal(t, "conv-new", hb.Conversation)
	require.Equal(t, 1, hb.After.Turns, "the one turn taken in the new conversation")
	require.Equal(t, 4, hb.After.TotalTurns)
}

// The hand-back reads the vendor's records from when the hold became
// ready, once the session's own agent was closed, not from when the
// person asked: what came before is the agent's, not theirs.
func TestAHandbackReadsFromWhenTheHoldWasReady(t *testing.T) {
	h := newHarness(t)
	h.env.OnActivity(activities.StopAgentName, mock.Anything, mock.Anything).After(30 * time.Second).Return(h.agent.Stop)
	h.send(time.Minute, 1)
	var asked time.Time
	h.at(10*time.Minute, func() { asked = h.env.Now() })
	h.attachAt(10*time.Minute, "alice@box", "l1")
	h.renew("l1", 10*time.Minute, 20*time.Minute)
	h.releaseAt(20*time.Minute, "l1")
	h.run(sessionInput(policy(config.ModeOff, 85, 0)), time.Hour)

	require.Len(t, h.agent.handbacks, 1)
	require.Equal(t, asked.Add(30*time.Second).UTC(), h.agent.handbacks[0].Since.UTC(), "the closing of the agent took 30s")
}
