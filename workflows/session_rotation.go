package workflows

import (
	"fmt"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/nid-dev/nid/activities"
	"github.com/nid-dev/nid/config"
)

// rotate runs one rotation as a child workflow and folds its result into
// the session. summary is the handoff the trigger already holds, if any.
func (s *session) rotate(ctx workflow.Context, req RotateRequest, summary string) {
	s.st.RotationAttempts++
	n := s.st.RotationAttempts
	s.setStatus(ctx, StatusRotating)
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:            RotationID(s.in.Group, s.in.Name, n),
		TaskQueue:             workflow.GetInfo(ctx).TaskQueueName,
		TypedSearchAttributes: temporal.NewSearchAttributes(groupKey.ValueSet(s.in.Group), sessionKey.ValueSet(s.in.Name), agentKey.ValueSet(s.in.Spec.Kind)),
		StaticSummary:         fmt.Sprintf("rotation %d of %s/%s: %s (%s)", n, s.in.Group, s.in.Name, req.Mode, req.Reason),
	})
	s.running = &req
	s.child = workflow.ExecuteChildWorkflow(cctx, RotationWorkflowName, RotationInput{
		Number:        n,
		Session:       s.ref(),
		Spec:          s.in.Spec,
		ActivityQueue: s.in.ActivityQueue,
		Conversation:  s.st.Conversation,
		Method:        req.Mode,
		Reason:        req.Reason,
		Summary:       summary,
		LastOutput:    s.st.LastOutput,
		Board:         s.boardText(),
		BeforeTokens:  s.st.Context.UsedTokens,
		WorkDir:       s.workDir(),
	})
	var res RotationResult
	err := s.child.Get(ctx, &res)
	s.child, s.running = nil, nil

	if err != nil {
		res = RotationResult{RotationEvent: RotationEvent{Method: req.Mode, Reason: req.Reason, Error: ErrorText(err), OldConversation: s.st.Conversation}}
	}
	res.Number = n
	s.charge(ctx, res.Cost)
	s.applyRotation(ctx, res)
}

// boardText is the board as the session last saw it, for a fresh
// conversation's first message.
func (s *session) boardText() string {
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
		s.st.Context.LastRotation = &RotationMark{Method: res.Method, Reason: res.Reason, At: now, OK: false}
		s.st.PolicyHeldAtTurn = s.st.Context.TotalTurns
		s.record(ctx, Event{Kind: EventRotationFailed, Text: fmt.Sprintf("✗ %s rotation failed (%s): %s", res.Method, res.Reason, res.Error), Rotation: &ev})
		s.toInbox(ctx, EventRotationFailed, fmt.Sprintf("%s rotation (%s) failed: %s", res.Method, res.Reason, res.Error))
		if res.Stuck {
			s.st.Conversation = ""
			s.setStatus(ctx, StatusNeedsAttention)
			return
		}
		s.setStatus(ctx, StatusIdle)
		return
	}
	s.st.Conversation = res.NewConversation
	s.st.Context.Rotations++
	s.st.Context.Turns = 0
	s.st.Context.LastRotation = &RotationMark{Method: res.Method, Reason: res.Reason, At: now, OK: true}
	s.st.TurnFailures = 0
	if res.Output != "" {
		s.st.LastOutput = res.Output
	}
	s.applyUsage(res.Usage)
	rec := s.st.Context
	s.record(ctx, Event{Kind: EventRotation, Text: fmt.Sprintf("↻ %s (%s)", res.Method, res.Reason), Rotation: &ev, Context: &rec})
	s.setStatus(ctx, StatusIdle)
}

// vendorCompacted records a compaction the agent's CLI did by itself: nid
// does not fight it, it keeps the meter honest.
func (s *session) vendorCompacted(ctx workflow.Context, v activities.VendorCompaction) {
	s.st.Context.Rotations++
	s.st.Context.Turns = 0
	mark := &RotationMark{Method: config.ModeCompact, Reason: ReasonVendor, At: workflow.Now(ctx), OK: true}
	s.st.Context.LastRotation = mark
	s.record(ctx, Event{Kind: EventRotation, Text: "↻ compact (vendor)", Rotation: &RotationEvent{
		Number: s.st.Context.Rotations, Method: config.ModeCompact, Reason: ReasonVendor, OK: true,
		OldConversation: s.st.Conversation, NewConversation: s.st.Conversation,
		BeforeTokens: v.BeforeTokens, AfterTokens: v.AfterTokens,
	}})
}
