package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/internal/clip"
)

// The session's signal handlers. Each folds its signal into the state at
// once; the run loop acts on it at its next boundary.

func (s *session) signalSelector(ctx workflow.Context) workflow.Selector {
	sel := workflow.NewSelector(ctx)
	onSignal(ctx, sel, SignalRotate, s.onRotate)
	onSignal(ctx, sel, SignalHandoffWrite, s.onHandoffWrite)
	onSignal(ctx, sel, SignalHandoffAck, s.onHandoffAck)
	onSignal(ctx, sel, SignalMessage, s.onMessage)
	onSignal(ctx, sel, SignalPolicy, s.onPolicy)
	onSignal(ctx, sel, SignalConfig, s.onConfig)
	onSignal(ctx, sel, SignalRateLimit, s.onRateLimit)
	onSignal(ctx, sel, SignalBoard, s.onBoard)
	onSignal(ctx, sel, SignalStop, s.onStop)
	onSignal(ctx, sel, SignalStart, s.onStart)
	onSignal(ctx, sel, SignalHost, s.onHost)
	onSignal(ctx, sel, SignalMove, s.onMove)
	onSignal(ctx, sel, SignalCannotStart, s.onCannotStart)
	onSignal(ctx, sel, SignalAttachRenew, s.onAttachRenew)
	return sel
}

// onRotate takes a manual request as DecideRotate decides it: the answer
// `nid rotate` gave is what happens.
func (s *session) onRotate(ctx workflow.Context, req RotateRequest) {
	v, _ := s.view()
	d := DecideRotate(req.Mode, v)
	switch {
	case d.Refused != "", d.join == joinRunning, d.join == joinHandoff:
	case d.join == joinPending:
		if mode := d.modeAsked(req.Mode); mode != "" {
			s.st.PendingRotate.Mode = mode
		}
	default:
		// Whoever sent it, a rotate signal is a manual request: the policy
		// and the agent's own handoff have their own paths.
		s.st.PendingRotate = &RotateRequest{Mode: d.modeAsked(req.Mode), Reason: ReasonManual}
	}
	s.record(ctx, Event{Kind: EventRotateQueued, Text: d.sentence(s.in.Group + "/" + s.in.Name)})
}

func (s *session) onHandoffWrite(ctx workflow.Context, hw HandoffWrite) {
	if why := summaryRefusal(hw.Summary); why != "" && s.has(VersionCheckedInput) {
		s.record(ctx, Event{Kind: EventHandoffWritten, Text: "handoff not taken: " + why})
		return
	}
	if s.st.Stopped && s.has(VersionStopDropsHandoffs) {
		// Its agent was still answering a turn the stop cut off.
		s.record(ctx, Event{Kind: EventHandoffWritten, Text: "handoff written after the stop: ignored, so nid start goes on in the same conversation (nid start --fresh starts a fresh one)"})
		return
	}
	if s.child != nil {
		// A rotation is asking for this handoff: hand it to the child.
		s.child.SignalChildWorkflow(ctx, SignalHandoffWrite, hw)
		s.record(ctx, Event{Kind: EventHandoffWritten, Text: "handoff written for the running rotation"})
		return
	}
	s.st.Handoff, s.st.HandoffPending = hw.Summary, true
	if s.has(VersionRotateWhileHalted) && s.st.PolicyHalted != "" {
		s.record(ctx, Event{Kind: EventHandoffWritten, Text: "agent wrote a handoff: it waits, for policy rotations are stopped; nid rotate rotates with it"})
		return
	}
	s.record(ctx, Event{Kind: EventHandoffWritten, Text: "agent wrote a handoff: rotating when this turn ends"})
}

// onHandoffAck hands a fresh conversation's acknowledgement to the rotation
// that started it; one outside a rotation checks nothing.
func (s *session) onHandoffAck(ctx workflow.Context, ack HandoffAck) {
	if why := ackRefusal(ack); why != "" && s.has(VersionCheckedInput) {
		s.record(ctx, Event{Kind: EventHandoffAck, Text: "handoff_ack not taken: " + why})
		return
	}
	if s.child != nil {
		s.child.SignalChildWorkflow(ctx, SignalHandoffAck, ack)
		return
	}
	s.record(ctx, Event{Kind: EventHandoffAck, Text: fmt.Sprintf("handoff_ack outside a rotation (%s): nothing to check", heldText(ack.Tasks))})
}

func (s *session) onMessage(ctx workflow.Context, m Message) {
	v, _ := s.view()
	if refusal := MessageRefusal(m.Text, v); refusal != "" {
		s.record(ctx, Event{Kind: EventMessage, Text: "message not queued: " + s.in.Group + "/" + s.in.Name + " " + refusal})
		return
	}
	// The human has looked at a session that needs them: their message
	// is the next turn.
	s.st.queueMessage(m.Text, s.st.Status == StatusNeedsAttention && s.has(VersionFailuresSettle))
	text := "message queued: " + clip.Runes(m.Text, 80)
	if s.held() {
		text += " (delivered once " + s.st.Attach.Who + " hands the session back)"
	}
	s.record(ctx, Event{Kind: EventMessage, Text: text})
	if s.st.Status == StatusNeedsAttention {
		// The human has looked: their message is the next turn.
		s.st.Status = StatusIdle
		s.st.TurnFailures, s.st.RotationFailures = 0, 0
		s.record(ctx, Event{Kind: EventResumed, Text: "resumed by a message from the human"})
	}
}

func (s *session) onConfig(ctx workflow.Context, c SessionConfig) {
	if why := configRefusal(c); why != "" && s.has(VersionCheckedInput) {
		s.record(ctx, Event{Kind: EventConfig, Text: "configuration not taken: " + why})
		return
	}
	if c.Goal == s.in.Goal && c.Spec == s.in.Spec {
		return
	}
	s.in.Goal, s.in.Spec = c.Goal, c.Spec
	s.published.valid = false // the agent kind is a search attribute too
	s.record(ctx, Event{Kind: EventConfig, Text: "configuration changed: applies from the next turn"})
}

// onRateLimit shows a turn held up by the vendor's rate limiting as the
// rate-limited status until it gets through or ends. A late signal for a
// turn that already ended changes nothing.
func (s *session) onRateLimit(ctx workflow.Context, r RateLimit) {
	switch {
	case r.Limited && s.st.Status == StatusWorking:
		s.st.Status = StatusRateLimited
		s.record(ctx, Event{Kind: EventRateLimited, Text: "rate limited: the vendor is overloaded or limiting; the agent retries"})
	case !r.Limited && s.st.Status == StatusRateLimited:
		s.st.Status = StatusWorking
		s.record(ctx, Event{Kind: EventRateLimited, Text: "rate limit over: the turn goes on"})
	default:
		return
	}
	s.publish(ctx)
}

func (s *session) onPolicy(ctx workflow.Context, p PolicyChange) {
	if why := policyRefusal(p); why != "" && s.has(VersionCheckedInput) {
		s.record(ctx, Event{Kind: EventPolicy, Text: "policy not taken: " + why})
		return
	}
	changed := p.Rotate != s.st.Policy
	s.st.Policy = p.Rotate
	if s.has(VersionThresholds) {
		s.st.Learned = p.Learned
		s.st.noteThreshold(s.in.Spec.Kind)
		if changed && s.st.PolicyHalted != "" {
			// The human changed the policy: it may help now.
			s.st.unhalt()
			s.record(ctx, Event{Kind: EventPolicy, Text: "policy rotations start again under the new policy"})
		}
		if !changed {
			return // only what was learned changed; the session said so
		}
	}
	s.record(ctx, Event{Kind: EventPolicy, Text: "policy: " + PolicyText(p.Rotate)})
}

func (s *session) onBoard(ctx workflow.Context, b BoardView) {
	if why := boardRefusal(b); why != "" && s.has(VersionCheckedInput) {
		s.record(ctx, Event{Kind: EventTask, Text: "board not taken: " + why})
		return
	}
	before := s.st.Board
	if before != nil && b.Rev != 0 && b.Rev < before.Rev {
		// Overtaken by a newer push: its grants and claims are out of date.
		return
	}
	s.st.takeBoard(b)
	if b.Exhausted != "" && s.st.reserving() && !s.granted() {
		// Refused: the budget ran out first. Ask again once it is raised.
		s.st.useReservation()
	}
	if s.has(VersionSpentBudgetStartsNothing) && b.costSpent() && s.granted() && !s.busy() {
		// Granted before a tokens or usd limit was reached, not started:
		// starting it now would only spend further past the limit. Its
		// turn goes back to the group; it asks again once it is raised.
		s.st.useReservation()
		s.charge(ctx, Charge{Turns: -1})
	}
	mine := b.HeldBy(s.in.Name)
	if s.has(VersionHosts) && before != nil && s.taskFinished(*before, b) && config.IsRepoURL(s.in.Repo) && s.st.Worktree != "" {
		// Each host's clone is its own: the remote is where a task's
		// work outlives the host.
		s.st.PushPending = true
	}
	if mine != nil && (before == nil || before.HeldBy(s.in.Name) == nil || before.HeldBy(s.in.Name).ID != mine.ID) {
		s.record(ctx, Event{Kind: EventTask, Text: fmt.Sprintf("claimed task %s: %s", mine.ID, clip.Runes(mine.Title, 60))})
	}
	if before != nil && before.Exhausted != b.Exhausted {
		if b.Exhausted != "" {
			s.record(ctx, Event{Kind: EventBudget, Text: "budget exhausted (" + b.Exhausted + "): " + s.pauseText()})
		} else {
			s.record(ctx, Event{Kind: EventBudget, Text: "budget raised: resuming"})
		}
	}
}

// pauseText says when a session that just heard its budget is spent
// pauses: at once, or (since VersionSpentBudgetStartsNothing says it) once
// the step it runs, or the turn its group granted within a turns limit, is
// over.
func (s *rules) pauseText() string {
	switch {
	case !s.has(VersionSpentBudgetStartsNothing):
		return "paused"
	case s.st.Status == StatusRotating:
		return "it pauses when the running rotation ends"
	case s.busy():
		return "it pauses when the running turn ends"
	case s.granted():
		return "it pauses after the turn it was granted within the limit"
	}
	return "paused"
}

func (s *session) onStop(ctx workflow.Context, req StopRequest) {
	if s.st.Stopped {
		return
	}
	if s.has(VersionCheckedInput) {
		req.Why = clip.Runes(req.Why, MaxWhyChars)
	}
	s.st.Stopped = true
	s.st.Messages = nil
	s.st.PendingRotate = nil
	if s.has(VersionStopDropsHandoffs) {
		s.st.takeHandoff()
	}
	text := "stopped: its claims and locks are released"
	if req.Why != "" {
		text = "stopped (" + req.Why + "): its claims and locks are released"
	}
	s.record(ctx, Event{Kind: EventStopped, Text: text})
	if s.st.SlotAsked && s.st.Status != StatusRotating {
		s.giveSlotBack(ctx)
	}
	if s.has(VersionStopAtOnce) {
		if s.cancelRotation != nil {
			s.cancelRotation()
			s.record(ctx, Event{Kind: EventStopped, Text: "the running rotation is cancelled: no fresh conversation starts"})
		}
		s.publish(ctx)
	}
}

// onStart brings a stopped session back where it was: the same
// conversation, or with Fresh a fresh one by handoff before its next turn.
// Its agent process was stopped; the vendor conversation resumes.
func (s *session) onStart(ctx workflow.Context, req SessionStart) {
	if !s.st.Stopped {
		return
	}
	s.st.Stopped, s.st.StopDone = false, false
	s.st.ClaimAsked = false
	s.st.Status = StatusIdle
	text := "started again: it goes on in the same conversation"
	if req.Fresh && s.st.Conversation != "" {
		s.st.PendingRotate = &RotateRequest{Mode: config.ModeHandoff, Reason: ReasonManual}
		text = "started again: it rotates by handoff into a fresh conversation first"
	}
	s.record(ctx, Event{Kind: EventResumed, Text: text})
	s.publish(ctx)
	s.tellRegistry(ctx)
}

// onCannotStart takes the word of the worker that applied nid.yaml: the
// session's agent cannot run on its host. A session that waits for its
// first prompt would otherwise show idle until a turn tried and failed;
// it needs attention now, as nid up said. A message from the human, or
// nid start after a stop, lets it try again.
func (s *session) onCannotStart(ctx workflow.Context, c CannotStart) {
	if !s.has(VersionLostTurns) || s.st.Stopped || s.st.Status != StatusIdle && s.st.Status != StatusRetrying {
		return
	}
	if c.Host != "" && s.st.Host != "" && c.Host != s.st.Host {
		return // checked on another host than the one it runs on
	}
	text := fmt.Sprintf("%s/%s cannot run its agent: %s", s.in.Group, s.in.Name, clip.Runes(c.Text, MaxInboxText))
	s.record(ctx, Event{Kind: EventTurnFailed, Text: text})
	s.toInbox(ctx, EventTurnFailed, text)
	s.setStatus(ctx, StatusNeedsAttention)
	s.publish(ctx)
}
