package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/config"
)

// trigger is one reason a session rotates at a turn boundary. due says the
// method it asks for now ("" when it does not), by the session's rules;
// take, run by the session, consumes what asked for it when the rotation
// starts and returns the handoff summary the rotation starts from, if any.
type trigger struct {
	reason string
	due    func(s *rules) string
	take   func(s *session) string
}

// triggers is the one place a rotation trigger is added. They are read top
// to bottom, the first one due wins, as DESIGN.md lists them: the agent's
// own handoff, a conversation past its window, a manual request, then the
// group's policy.
func (s *rules) triggers() []trigger {
	return []trigger{
		{
			// The agent called handoff_write outside a rotation: rotate by
			// handoff with its summary, without asking again.
			// Since VersionThresholds not while the breaker holds: an agent
			// asking for a fresh start every turn is thrashing too.
			reason: ReasonAgent,
			due: func(s *rules) string {
				return when(s.st.HandoffPending && s.st.PolicyHalted == "", config.ModeHandoff)
			},
			take: func(s *session) string {
				summary := s.st.takeHandoff()
				s.joinPendingRequest()
				return summary
			},
		},
		{
			// The vendor refused a turn because the conversation no longer
			// fits its window: only a fresh conversation helps.
			reason: ReasonContextFull,
			due:    func(s *rules) string { return when(s.st.ContextFull, config.ModeHandoff) },
			take: func(s *session) string {
				s.st.ContextFull = false
				s.joinPendingRequest()
				return s.takeWaitingHandoff()
			},
		},
		{
			// nid rotate, the Rotate button, session.rotate.
			reason: ReasonManual,
			due: func(s *rules) string {
				if s.st.PendingRotate == nil {
					return ""
				}
				return EffectiveMode(s.st.PendingRotate.Mode, s.st.Policy)
			},
			take: func(s *session) string {
				mode := EffectiveMode(s.st.PendingRotate.Mode, s.st.Policy)
				s.st.PendingRotate = nil
				if mode != config.ModeHandoff {
					return ""
				}
				return s.takeWaitingHandoff()
			},
		},
		{
			// The context reached the policy's threshold: contextPercent,
			// contextTokens or a margin below the vendor's own point,
			// whichever comes first (see EffectiveThreshold).
			reason: ReasonContext,
			due: func(s *rules) string {
				c, p := s.st.Context, s.st.Policy
				if !s.has(VersionThresholds) {
					return when(s.policyMayRotate() && c.Percent != nil && p.ContextPercent > 0 &&
						*c.Percent >= float64(p.ContextPercent), p.Mode)
				}
				t := s.st.threshold(s.in.Spec.Kind)
				return when(s.policyMayRotate() && c.Source != agents.SourceUnknown && t.Tokens > 0 &&
					c.UsedTokens >= t.Tokens, s.st.policyMode())
			},
			take: takeNothing,
		},
		{
			// Turns since the last rotation reached the policy's maxTurns.
			reason: ReasonMaxTurns,
			due: func(s *rules) string {
				p := s.st.Policy
				return when(s.policyMayRotate() && p.MaxTurns > 0 && s.st.Context.Turns >= p.MaxTurns, s.st.policyMode())
			},
			take: takeNothing,
		},
	}
}

func takeNothing(*session) string { return "" }

func when(due bool, mode string) string {
	if !due {
		return ""
	}
	return mode
}

// rotationDue is the rotation the session should run now, if any: none
// while a turn or a rotation is running or once stopped, else the first
// trigger due that the budget and the group's rotation slots allow.
func (s *rules) rotationDue() (RotateRequest, trigger, bool) {
	return s.firstDue(true)
}

// firstDue is the first trigger due; governed says whether a rotation
// waiting for its slot counts as not due yet.
func (s *rules) firstDue(governed bool) (RotateRequest, trigger, bool) {
	if s.busy() || s.st.Stopped || s.held() {
		return RotateRequest{}, trigger{}, false
	}
	for _, t := range s.triggers() {
		if mode := t.due(s); mode != "" {
			if !s.rotationAffordable(t.reason) || (governed && s.waitingForSlot(t.reason)) {
				break
			}
			return RotateRequest{Mode: mode, Reason: t.reason}, t, true
		}
	}
	return RotateRequest{}, trigger{}, false
}

// busy says a turn or a rotation is running.
func (s *rules) busy() bool {
	switch s.st.Status {
	case StatusWorking, StatusRateLimited, StatusRotating:
		return true
	}
	return false
}

// rotationAffordable says a rotation for reason may start as far as the
// group's budget goes. Since VersionRotationBudget a rotation costs a turn:
// all but a manual one wait while the budget is spent, and on a limited
// budget wait for the turn the loop reserves (see needsReservation).
func (s *rules) rotationAffordable(reason string) bool {
	if !s.has(VersionRotationBudget) || reason == ReasonManual {
		return true
	}
	if s.exhausted() && !s.granted() {
		return false
	}
	return !s.budgeted() || s.granted() || !s.st.reserving()
}

// needsReservation says a rotation for reason must first reserve its turn
// with the group.
func (s *rules) needsReservation(reason string) bool {
	return s.has(VersionRotationBudget) && reason != ReasonManual && s.budgeted() && !s.granted()
}

// policyMayRotate says the group's policy may start a rotation now. A
// policy rotation costs a turn, so it waits while the budget is spent; it
// never runs on a session waiting for the human, nor again before another
// turn after one failed; off never rotates by itself.
func (s *rules) policyMayRotate() bool {
	p := s.st.Policy
	spent := s.exhausted()
	if s.has(VersionRotationBudget) {
		spent = spent && !s.granted() // its turn was reserved before the budget ran out
	}
	return p.Mode != config.ModeOff && p.Mode != "" && s.st.PolicyHalted == "" &&
		s.st.Status != StatusNeedsAttention && s.st.Context.TotalTurns > s.st.PolicyHeldAtTurn && !spent
}

// takeWaitingHandoff takes the agent's own handoff for a handoff that runs
// while it waits (VersionRotateWhileHalted): policy rotations are stopped,
// so only the human or a full context rotates, and the agent's summary of
// this conversation is the best start for the fresh one.
func (s *session) takeWaitingHandoff() string {
	if !s.has(VersionRotateWhileHalted) || !s.st.HandoffPending {
		return ""
	}
	return s.st.takeHandoff()
}

// joinPendingRequest lets a handoff the session runs anyway serve a manual
// request already pending, rather than a second rotation running on the
// fresh conversation.
func (s *session) joinPendingRequest() {
	if s.has(VersionOneRotateDecision) && s.st.PendingRotate != nil {
		s.st.PendingRotate = nil
	}
}

// The governor (VersionGovernor): a rotation the session starts by itself
// needs one of the group's rotation slots, of which there are the policy's
// maxConcurrentRotations; a manual one never waits.

// governed says a rotation for reason needs a slot.
func (s *rules) governed(reason string) bool {
	return s.has(VersionGovernor) && reason != ReasonManual && s.st.Board != nil && s.st.Policy.MaxConcurrentRotations > 0
}

// holdsSlot says the group granted the session's slot request.
func (s *rules) holdsSlot() bool {
	return s.st.SlotAsked && s.st.Board != nil && s.st.Board.holds(SlotRequest{Session: s.in.Name, Seq: s.st.SlotSeq})
}

// needsSlot says a rotation for reason must first ask for a slot.
func (s *rules) needsSlot(reason string) bool {
	return s.governed(reason) && !s.st.SlotAsked
}

// waitingForSlot says a rotation for reason waits for its slot.
func (s *rules) waitingForSlot(reason string) bool {
	return s.governed(reason) && s.st.SlotAsked && !s.holdsSlot()
}

// slotNotWanted says the session holds, or waits for, a slot it no longer
// needs: the rotation stopped being due (a manual one came first, the
// policy changed).
func (s *rules) slotNotWanted() bool {
	if !s.st.SlotAsked || s.st.Status == StatusRotating {
		return false
	}
	req, _, due := s.firstDue(false)
	return !due || !s.governed(req.Reason)
}

// askSlot asks the group for a rotation slot, fullest first.
func (s *groupLink) askSlot(ctx workflow.Context) {
	req := SlotRequest{Session: s.in.Name, Seq: s.st.nextSlot(), Want: true, Fullness: s.fullness()}
	if err := workflow.SignalExternalWorkflow(ctx, GroupID(s.in.Group), "", SignalSlot, req).Get(ctx, nil); err != nil {
		// No group to ask: nothing to wait for.
		workflow.GetLogger(ctx).Warn("group did not take the slot request", "error", err)
		s.st.SlotAsked = false
	}
}

// giveSlotBack returns the session's slot, or its place in the queue.
func (s *groupLink) giveSlotBack(ctx workflow.Context) {
	s.st.SlotAsked = false
	if s.st.Status == StatusWaitingToRotate {
		s.st.Status = StatusIdle
	}
	// Not awaited: the group may be gone.
	workflow.SignalExternalWorkflow(ctx, GroupID(s.in.Group), "", SignalSlot, SlotRequest{Session: s.in.Name, Seq: s.st.SlotSeq})
}

// fullness orders the sessions waiting for a slot: the percent of the
// window used, or of maxTurns when the window is unknown.
func (s *rules) fullness() float64 {
	c := s.st.Context
	if c.Percent != nil {
		return *c.Percent
	}
	if m := s.st.Policy.MaxTurns; m > 0 {
		return float64(c.Turns) * 100 / float64(m)
	}
	return 0
}
