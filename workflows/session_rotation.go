package workflows

import (
	"fmt"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/config"
)

// rotate runs one rotation as a child workflow and folds its result into
// the session. summary is the handoff the trigger already holds, if any.
func (s *session) rotate(ctx workflow.Context, req RotateRequest, summary string) {
	s.st.RotationAttempts++
	n := s.st.RotationAttempts
	reserved := s.granted()
	if s.has(VersionRotationBudget) {
		s.st.useReservation()
	}
	s.setStatus(ctx, StatusRotating)
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:            RotationID(s.in.Group, s.in.Name, n),
		TaskQueue:             workflow.GetInfo(ctx).TaskQueueName,
		TypedSearchAttributes: temporal.NewSearchAttributes(groupKey.ValueSet(s.in.Group), sessionKey.ValueSet(s.in.Name), agentKey.ValueSet(s.in.Spec.Kind)),
		StaticSummary:         fmt.Sprintf("rotation %d of %s/%s: %s (%s)", n, s.in.Group, s.in.Name, req.Mode, req.Reason),
	})
	s.running = &req
	cctx, s.cancelRotation = workflow.WithCancel(cctx)
	s.child = workflow.ExecuteChildWorkflow(cctx, RotationWorkflowName, RotationInput{
		Number:        n,
		Session:       s.ref(),
		Spec:          s.in.Spec,
		ActivityQueue: s.queue(),
		Conversation:  s.st.Conversation,
		Method:        req.Mode,
		Reason:        req.Reason,
		Summary:       summary,
		LastOutput:    s.st.LastOutput,
		Board:         s.boardText(),
		BeforeTokens:  s.st.Context.UsedTokens,
		WorkDir:       s.workDir(),
		Generation:    s.st.Generation,
		HeldTasks:     s.heldTasks(),
		HeldLocks:     s.heldLocks(),
		Move:          s.moving,
	})
	s.rotationLost = ""
	var res RotationResult
	err := s.child.Get(ctx, &res)
	s.child, s.running, s.cancelRotation = nil, nil, nil

	lost := s.rotationLost != "" && temporal.IsCanceledError(err)
	if err != nil && (s.st.Stopped || lost) && temporal.IsCanceledError(err) {
		// Stopped mid-rotation, or lost with its host: not a failure for
		// the inbox.
		if s.st.SlotAsked {
			s.giveSlotBack(ctx)
		}
		why := "the session was stopped"
		if !s.st.Stopped {
			why = s.rotationLost
		}
		ev := Event{Kind: EventRotationFailed, Text: fmt.Sprintf("✗ %s rotation (%s) cancelled: %s", req.Mode, req.Reason, why)}
		if s.has(VersionLostTurns) {
			// Its number is taken: the receipts say where it went.
			receipt := RotationEvent{Number: n, Method: req.Mode, Reason: req.Reason, Cancelled: true,
				Error: "cancelled: " + why, OldConversation: s.st.Conversation, BeforeTokens: s.st.Context.UsedTokens}
			ev.Rotation = &receipt
			s.st.keepReceipt(receipt, workflow.Now(ctx))
		}
		s.record(ctx, ev)
		s.setStatus(ctx, StatusIdle)
		return
	}
	if err != nil {
		res = RotationResult{RotationEvent: RotationEvent{Method: req.Mode, Reason: req.Reason, Error: ErrorText(err), OldConversation: s.st.Conversation}}
	}
	res.Number = n
	if s.st.SlotAsked {
		s.giveSlotBack(ctx)
	}
	cost := res.Cost
	if s.has(VersionRotationBudget) {
		// A rotation costs one turn, counted when it was reserved.
		cost.Turns = 1
		if reserved {
			cost.Turns = 0
		}
	}
	s.charge(ctx, cost)
	s.applyRotation(ctx, res)
	s.arrive(ctx, res)
}

// boardText is the board as the session last saw it, for a fresh
// conversation's first message.
func (s *rules) boardText() string {
	if s.st.Board != nil {
		return BoardText(*s.st.Board, s.in.Name)
	}
	return BoardText(BoardView{Group: s.in.Group, Goal: s.in.Goal}, s.in.Name)
}

func (s *session) applyRotation(ctx workflow.Context, res RotationResult) {
	now := workflow.Now(ctx)
	if res.FellBack {
		s.record(ctx, Event{Kind: EventRotationFailed, Text: "✗ compact failed, falling back to handoff: " + res.CompactError, Rotation: &RotationEvent{
			Number: res.Number, Method: config.ModeCompact, Reason: res.Reason, Error: res.CompactError,
			OldConversation: res.OldConversation, BeforeTokens: res.BeforeTokens,
		}})
	}
	ev := res.RotationEvent
	if !res.OK {
		s.rotationFailed(ctx, res, ev)
		return
	}
	s.st.RotationFailures = 0
	if res.Method == config.ModeHandoff && s.has(VersionRotateWhileHalted) {
		// Written by the conversation just replaced: the fresh one never
		// asked to start over.
		s.st.takeHandoff()
	}
	s.st.rotatedInto(res, now)
	s.st.applyUsage(res.Usage, s.in.Spec.Kind, s.has(VersionThresholds))
	rec := s.st.Context
	text := fmt.Sprintf("↻ %s (%s)", res.Method, res.Reason)
	if res.ToHost != "" {
		text += fmt.Sprintf(" host %s → %s", res.FromHost, res.ToHost)
	}
	s.record(ctx, Event{Kind: EventRotation, Text: text, Rotation: &ev, Context: &rec})
	if s.has(VersionVouchedHandoff) {
		s.st.keepReceipt(ev, workflow.Now(ctx))
		s.st.plot(res.Method, res.Reason)
		if ev.VerifyNote != "" {
			s.toInbox(ctx, "handoff-unverified", ev.VerifyNote)
		}
		if ev.FactsNote != "" {
			s.toInbox(ctx, "facts-refused", ev.FactsNote)
		}
	}
	if s.has(VersionThresholds) {
		s.judgeRotation(ctx, res)
	}
	s.setStatus(ctx, StatusIdle)
}

// heldTasks are the ids of the tasks the session holds, as its board says.
func (s *rules) heldTasks() []string {
	var out []string
	if b := s.st.Board; b != nil && s.has(VersionVouchedHandoff) {
		for _, t := range b.Tasks {
			if t.Holder == s.in.Name && t.Status == TaskClaimed {
				out = append(out, t.ID)
			}
		}
	}
	return out
}

// heldLocks are the names of the locks the session holds.
func (s *rules) heldLocks() []string {
	var out []string
	if b := s.st.Board; b != nil && s.has(VersionVouchedHandoff) {
		for _, l := range b.Locks {
			if l.Holder == s.in.Name {
				out = append(out, l.Name)
			}
		}
	}
	return out
}

// vendorCompacted records a compaction the agent's CLI did by itself: nid
// does not fight it, it keeps the meter honest. When the vendor acted
// before nid's threshold, nid learns its point and rotates a margin before
// it from then on (VersionThresholds), for this session at once and, through
// the group, for every session of the same kind and model.
func (s *session) vendorCompacted(ctx workflow.Context, v agents.VendorCompaction, u agents.Usage) {
	s.st.Context.rotated(RotationMark{Method: config.ModeCompact, Reason: ReasonVendor, At: workflow.Now(ctx), OK: true})
	ev := RotationEvent{
		Number: s.st.Context.Rotations, Method: config.ModeCompact, Reason: ReasonVendor, OK: true,
		OldConversation: s.st.Conversation, NewConversation: s.st.Conversation,
		BeforeTokens: v.BeforeTokens, AfterTokens: v.AfterTokens,
	}
	s.record(ctx, Event{Kind: EventRotation, Text: "↻ compact (vendor)", Rotation: &ev})
	if s.has(VersionVouchedHandoff) {
		s.st.keepReceipt(ev, workflow.Now(ctx))
		// The vendor's compaction marks the chart where it happened: before
		// the turn's own point.
		s.st.plotAt(v.BeforeTokens, config.ModeCompact, ReasonVendor)
	}
	if !s.has(VersionThresholds) {
		return
	}
	model := cmpOr(u.Model, s.st.Context.Model)
	window := cmpOr(u.WindowTokens, s.st.Context.WindowTokens)
	learned := learnedFor(s.st.Learned, s.in.Spec.Kind, model)
	t := EffectiveThreshold(s.st.Policy, learned, window)
	point, ok := learnFromVendor(s.in.Spec.Kind, model, v.BeforeTokens, window, t)
	if !ok || (learned != nil && learned.Set) {
		return
	}
	s.st.learn(point)
	s.record(ctx, Event{Kind: EventPolicy, Text: "learned: " + LearnedText(point)})
	// Not awaited: the group may be gone, and the session has learned it
	// for itself already.
	workflow.SignalExternalWorkflow(ctx, GroupID(s.in.Group), "", SignalLearned, point)
}

// judgeRotation checks that a rotation that worked helped (VersionThresholds):
// one that left the context above its threshold less a margin only sets up
// the next. After a compaction, the next policy rotation is a handoff; after
// a handoff, whose fresh conversation starts that full, no rotation can
// help, so the policy stops for this session, which keeps working. And a
// session rotating by itself faster than the breaker allows is thrashing:
// its policy rotations stop too. Either goes to the inbox.
func (s *session) judgeRotation(ctx workflow.Context, res RotationResult) {
	ref := s.in.Group + "/" + s.in.Name
	c := s.st.Context
	t := s.st.threshold(s.in.Spec.Kind)
	helped := c.Source == agents.SourceUnknown || t.helped(c.UsedTokens, c.WindowTokens)
	switch {
	case helped && res.Method == config.ModeHandoff:
		s.st.HandoffNext = false
	case !helped && res.Method == config.ModeCompact:
		s.st.HandoffNext = true
		s.record(ctx, Event{Kind: EventPolicy, Text: fmt.Sprintf("the compaction left %s, not well below the threshold %s: the next policy rotation is a handoff",
			TokensText(c.UsedTokens), t.Text(c.WindowTokens))})
	case !helped:
		s.haltPolicy(ctx, fmt.Sprintf("%s's fresh conversation starts at %s, not well below its rotate threshold %s: its first message (the handoff, the board, the prompt) or its tools are bigger than the policy allows, so no rotation can help. "+
			"Raise contextPercent or contextTokens (nid group set %s rotate=...), or give it a larger window; nid rotate still works",
			ref, TokensText(c.UsedTokens), t.Text(c.WindowTokens), s.in.Group))
		return
	}
	switch res.Reason {
	case ReasonContext, ReasonAgent, ReasonContextFull:
	default:
		return // asked for, or on a schedule: not thrashing
	}
	if turns, thrashing := s.st.selfRotated(c.TotalTurns); thrashing {
		s.haltPolicy(ctx, fmt.Sprintf("%s rotated by itself %d times in %d turns: it is thrashing. Its policy rotations stop; it keeps working. "+
			"Look at what fills its context (nid transcript %s), then change the policy (nid group set %s rotate=...) to start them again; nid rotate still works",
			ref, breakerRotations+1, turns, ref, s.in.Group))
	}
}

// haltPolicy stops the session's policy rotations until the policy changes,
// and says why in the feed and the inbox.
func (s *session) haltPolicy(ctx workflow.Context, why string) {
	s.st.halt(why)
	s.record(ctx, Event{Kind: EventPolicy, Text: "policy rotations stopped: " + why})
	s.toInbox(ctx, EventPolicy, "policy rotations stopped: "+why)
}

// cmpOr is the first of a, b that is not zero.
func cmpOr[T comparable](a, b T) T {
	var zero T
	if a != zero {
		return a
	}
	return b
}

// rotationFailed records a rotation that did not complete and tells the
// inbox. Failures settle rather than loop: the policy waits longer after
// each failure in a row, and after rotationFailuresBeforeAttention the
// session needs the human, told what to change.
func (s *session) rotationFailed(ctx workflow.Context, res RotationResult, ev RotationEvent) {
	s.st.Context.LastRotation = &RotationMark{Method: res.Method, Reason: res.Reason, At: workflow.Now(ctx), OK: false}
	s.st.holdPolicy(s.st.Context.TotalTurns)
	s.record(ctx, Event{Kind: EventRotationFailed, Text: fmt.Sprintf("✗ %s rotation failed (%s): %s", res.Method, res.Reason, res.Error), Rotation: &ev})
	text := fmt.Sprintf("%s rotation (%s) failed: %s", res.Method, res.Reason, res.Error)
	attention := res.Stuck
	if s.has(VersionFailuresSettle) {
		n := s.st.rotationFailed()
		if n >= rotationFailuresBeforeAttention && !res.Stuck {
			attention = true
			text = fmt.Sprintf("%d rotations failed in a row, the last: %s; policy rotations and turns stop until you act: %s",
				n, text, s.rotationAdvice(res))
		}
	}
	if s.has(VersionVouchedHandoff) {
		s.st.keepReceipt(ev, workflow.Now(ctx))
	}
	s.toInbox(ctx, EventRotationFailed, text)
	if res.Stuck {
		s.st.Conversation = ""
	}
	if attention {
		s.setStatus(ctx, StatusNeedsAttention)
		return
	}
	s.setStatus(ctx, StatusIdle)
}

// rotationAdvice says what the human can change after rotations keep
// failing.
func (s *rules) rotationAdvice(res RotationResult) string {
	ref := s.in.Group + "/" + s.in.Name
	if res.Method == config.ModeCompact && !agents.KindOf(s.in.Spec.Kind).Compacts {
		return fmt.Sprintf("%s agents cannot compact, so set the group's rotate mode to handoff or auto (nid group set %s rotate='{\"mode\":\"auto\"}') and send %s a message to resume",
			s.in.Spec.Kind, s.in.Group, ref)
	}
	return fmt.Sprintf("see why in nid watch %s, mend it (nid group set %s rotate=... changes the policy), then send %s a message to resume", ref, s.in.Group, ref)
}
