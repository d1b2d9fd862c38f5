package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/nid-dev/nid/activities"
	"github.com/nid-dev/nid/config"
)

// Limits that keep a session's history and state small however long it runs.
const (
	// maxEvents is how many recent events a session keeps for its feed.
	maxEvents = 200
	// defaultHistoryLimit is the history length after which a session
	// continues as new even if the server has not suggested it yet.
	defaultHistoryLimit = 4000
	// turnFailuresBeforeAttention stops automatic turns after this many
	// failed turns in a row, so a broken agent is not driven in a loop.
	turnFailuresBeforeAttention = 3
)

// SessionState is everything a session carries across continue-as-new.
type SessionState struct {
	Status       string        `json:"status"`
	Conversation string        `json:"conversation,omitempty"`
	Context      ContextRecord `json:"context"`
	Policy       config.Rotate `json:"policy"`
	// Messages are the human's prompts waiting for a turn.
	Messages      []string       `json:"messages,omitempty"`
	PendingRotate *RotateRequest `json:"pendingRotate,omitempty"`
	// Handoff is a summary the agent wrote outside a rotation; the next
	// turn boundary rotates with it.
	Handoff        string `json:"handoff,omitempty"`
	HandoffPending bool   `json:"handoffPending,omitempty"`
	LastOutput     string `json:"lastOutput,omitempty"`
	// Briefed is true once the session's first prompt (the goal) was sent.
	Briefed bool `json:"briefed,omitempty"`
	// RotationAttempts numbers rotation child workflows, failed ones included,
	// so every child gets a fresh id.
	RotationAttempts int `json:"rotationAttempts"`
	// PolicyHeldAtTurn stops a failed policy rotation from retrying before
	// another turn has run: the policy is only checked when TotalTurns is
	// past it.
	PolicyHeldAtTurn int `json:"policyHeldAtTurn"`
	// TurnFailures counts failed turns in a row.
	TurnFailures int     `json:"turnFailures,omitempty"`
	Events       []Event `json:"events,omitempty"`
	NextSeq      int64   `json:"nextSeq"`
	// HistoryLimit overrides defaultHistoryLimit (tests use a small one).
	HistoryLimit int `json:"historyLimit,omitempty"`
	// ContextFull is set when the vendor refused a turn because the
	// conversation no longer fits its window; a handoff clears it.
	ContextFull bool `json:"contextFull,omitempty"`

	// Board is the group's board as last pushed; ClaimAsked is true while
	// a request for a task is on its way. BriefedTask is the task the
	// session was last briefed on.
	Board       *BoardView `json:"board,omitempty"`
	ClaimAsked  bool       `json:"claimAsked,omitempty"`
	BriefedTask string     `json:"briefedTask,omitempty"`
	Worktree    string     `json:"worktree,omitempty"`
	Branch      string     `json:"branch,omitempty"`
	// Stopped is set by nid stop; StopDone once the agent was stopped.
	Stopped  bool `json:"stopped,omitempty"`
	StopDone bool `json:"stopDone,omitempty"`
	// ReserveSeq numbers turn reservations asked of the group; UsedSeq is
	// the last one used (or given up).
	ReserveSeq int64 `json:"reserveSeq,omitempty"`
	UsedSeq    int64 `json:"usedSeq,omitempty"`
	// Unbilled is what the session spent and has not yet charged the group.
	Unbilled Charge `json:"unbilled,omitempty"`
}

type session struct {
	in    SessionInput
	st    *SessionState
	child workflow.ChildWorkflowFuture
	// running is the rotation in progress, if any.
	running *RotateRequest
	// published is what the search attributes and memo last said, so an
	// unchanged record is not written to history again.
	published published
	// team is false when replaying a history from before VersionTeam.
	team bool
}

type published struct {
	status    string
	percent   *float64
	rotations int
	context   ContextRecord
	valid     bool
}

// SessionWorkflow is one agent seat in a group. It runs forever: it sends
// prompts as turns, folds each turn's report into the context record, and
// rotates the conversation when the policy, the human or the agent asks.
func SessionWorkflow(ctx workflow.Context, in SessionInput) error {
	s := newSession(in)
	if err := s.setup(ctx); err != nil {
		return err
	}
	return s.run(ctx)
}

func newSession(in SessionInput) *session {
	st := in.State
	if st == nil {
		st = &SessionState{
			Status:  StatusIdle,
			Policy:  in.Policy,
			Context: ContextRecord{Source: activities.SourceUnknown},
		}
	}
	in.State = nil
	return &session{in: in, st: st}
}

func (s *session) setup(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, QuerySession, s.view); err != nil {
		return err
	}
	if err := workflow.SetQueryHandler(ctx, QueryEvents, s.eventsAfter); err != nil {
		return err
	}
	s.team = workflow.GetVersion(ctx, VersionTeam, workflow.DefaultVersion, 1) == 1
	workflow.Go(ctx, s.listen)
	if s.st.NextSeq == 0 {
		s.record(ctx, Event{Kind: EventStarted, Text: fmt.Sprintf("session started (%s)", s.in.Spec.Kind)})
	}
	s.publish(ctx)
	if s.team {
		s.teamStart(ctx)
	}
	return nil
}

func (s *session) ref() activities.SessionRef {
	return activities.SessionRef{Group: s.in.Group, Name: s.in.Name, WorkflowID: SessionID(s.in.Group, s.in.Name)}
}

func (s *session) run(ctx workflow.Context) error {
	for {
		if err := s.awaitWork(ctx, func() bool {
			return s.rotationDue() != nil || s.turnReady() || s.historyFull(ctx) ||
				s.needClaim() || (s.st.Stopped && !s.st.StopDone)
		}); err != nil {
			return err
		}
		if s.st.Stopped {
			s.stopAgent(ctx)
			continue
		}
		if req := s.rotationDue(); req != nil {
			s.rotate(ctx, *req)
			continue
		}
		if s.historyFull(ctx) {
			return s.continueAsNew(ctx)
		}
		if s.needClaim() {
			s.askClaim(ctx)
			continue
		}
		s.prepareWorkspace(ctx)
		if s.st.Status == StatusNeedsAttention {
			continue
		}
		if s.budgeted() && !s.granted() {
			s.askReserve(ctx)
			continue
		}
		s.turn(ctx, s.takePrompt())
	}
}

// awaitWork waits for ready, publishing the status first when the session
// is about to sit still.
func (s *session) awaitWork(ctx workflow.Context, ready func() bool) error {
	if !ready() {
		s.flushCharge(ctx)
		switch {
		case s.st.Status == StatusIdle && s.exhausted():
			s.st.Status = StatusPaused
		case s.st.Status == StatusPaused && !s.exhausted():
			s.st.Status = StatusIdle
		}
		s.publish(ctx)
	}
	return workflow.Await(ctx, ready)
}

// listen folds signals into the state. It runs beside the main loop, so a
// signal that arrives mid-turn is seen at once (and shows in the view) but
// acted on at the next turn boundary.
//
// It waits for a pending signal before selecting: a selector blocked in
// Select takes a signal off its channel the moment it arrives, and if the
// main loop continues as new before this coroutine runs again, that signal
// would be lost. Left on the channel, continueAsNew drains it.
func (s *session) listen(ctx workflow.Context) {
	sel := s.signalSelector(ctx)
	for {
		if err := workflow.Await(ctx, sel.HasPending); err != nil {
			return
		}
		sel.Select(ctx)
	}
}

func (s *session) signalSelector(ctx workflow.Context) workflow.Selector {
	sel := workflow.NewSelector(ctx)
	onSignal(ctx, sel, SignalRotate, s.onRotate)
	onSignal(ctx, sel, SignalHandoffWrite, s.onHandoffWrite)
	onSignal(ctx, sel, SignalMessage, s.onMessage)
	onSignal(ctx, sel, SignalPolicy, s.onPolicy)
	onSignal(ctx, sel, SignalConfig, s.onConfig)
	onSignal(ctx, sel, SignalRateLimit, s.onRateLimit)
	onSignal(ctx, sel, SignalBoard, s.onBoard)
	onSignal(ctx, sel, SignalStop, s.onStop)
	return sel
}

// onSignal makes sel decode the named signal's payload and hand it to fn.
func onSignal[T any](ctx workflow.Context, sel workflow.Selector, name string, fn func(workflow.Context, T)) {
	sel.AddReceive(workflow.GetSignalChannel(ctx, name), func(c workflow.ReceiveChannel, _ bool) {
		var v T
		c.Receive(ctx, &v)
		fn(ctx, v)
	})
}

func (s *session) onRotate(ctx workflow.Context, req RotateRequest) {
	// Whoever sent it, a rotate signal is a manual request: the policy and
	// the agent's own handoff have their own paths.
	req.Reason = ReasonManual
	if s.st.Stopped {
		s.record(ctx, Event{Kind: EventRotateQueued, Text: "rotate request ignored: the session is stopped"})
		return
	}
	switch {
	case s.running != nil && s.running.Reason == ReasonManual && (req.Mode == "" || req.Mode == s.running.Mode):
		s.record(ctx, Event{Kind: EventRotateQueued, Text: "rotate request joins the manual rotation already running"})
	case s.st.PendingRotate != nil:
		if req.Mode != "" {
			s.st.PendingRotate.Mode = req.Mode
		}
		s.record(ctx, Event{Kind: EventRotateQueued, Text: fmt.Sprintf("rotate request (%s) joins the one already pending", s.manualMode(*s.st.PendingRotate))})
	default:
		s.st.PendingRotate = &req
		when := "now"
		switch s.st.Status {
		case StatusWorking, StatusRateLimited:
			when = "when the current turn ends"
		case StatusRotating:
			when = "when the running rotation ends"
		}
		s.record(ctx, Event{Kind: EventRotateQueued, Text: fmt.Sprintf("rotate (%s) requested: runs %s", s.manualMode(req), when)})
	}
}

func (s *session) onHandoffWrite(ctx workflow.Context, hw HandoffWrite) {
	if s.child != nil {
		// A rotation is asking for this handoff: hand it to the child.
		s.child.SignalChildWorkflow(ctx, SignalHandoffWrite, hw)
		s.record(ctx, Event{Kind: EventHandoffWritten, Text: "handoff written for the running rotation"})
		return
	}
	s.st.Handoff = hw.Summary
	s.st.HandoffPending = true
	s.record(ctx, Event{Kind: EventHandoffWritten, Text: "agent wrote a handoff: rotating when this turn ends"})
}

func (s *session) onMessage(ctx workflow.Context, m Message) {
	s.st.Messages = append(s.st.Messages, m.Text)
	s.record(ctx, Event{Kind: EventMessage, Text: "message queued: " + clip(m.Text, 80)})
	if s.st.Status == StatusNeedsAttention {
		// The human has looked: their message is the next turn.
		s.st.Status = StatusIdle
		s.st.TurnFailures = 0
		s.record(ctx, Event{Kind: EventResumed, Text: "resumed by a message from the human"})
	}
}

func (s *session) onConfig(ctx workflow.Context, c SessionConfig) {
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
	s.st.Policy = p.Rotate
	s.record(ctx, Event{Kind: EventPolicy, Text: "policy: " + PolicyText(p.Rotate)})
}

// PolicyText renders a rotate policy the way nid prints it everywhere.
func PolicyText(r config.Rotate) string {
	turns := "never"
	if r.MaxTurns > 0 {
		turns = fmt.Sprint(r.MaxTurns)
	}
	return fmt.Sprintf("mode=%s contextPercent=%d maxTurns=%s", r.Mode, r.ContextPercent, turns)
}

// manualMode is the method a manual request runs: its own mode, else the
// group's, else auto when the group says off.
func (s *session) manualMode(req RotateRequest) string {
	return EffectiveMode(req.Mode, s.st.Policy)
}

// rotationDue says which rotation, if any, the session should run now, in
// the order DESIGN.md gives: the agent's handoff, a manual request, the policy.
func (s *session) rotationDue() *RotateRequest {
	if s.st.Status == StatusWorking || s.st.Status == StatusRateLimited || s.st.Status == StatusRotating || s.st.Stopped {
		return nil
	}
	if s.st.HandoffPending {
		return &RotateRequest{Mode: config.ModeHandoff, Reason: ReasonAgent}
	}
	if s.st.ContextFull {
		return &RotateRequest{Mode: config.ModeHandoff, Reason: ReasonContextFull}
	}
	if s.st.PendingRotate != nil {
		return &RotateRequest{Mode: s.manualMode(*s.st.PendingRotate), Reason: s.st.PendingRotate.Reason}
	}
	// A policy rotation costs a turn: it waits while the budget is spent.
	if s.st.Status == StatusNeedsAttention || s.st.Context.TotalTurns <= s.st.PolicyHeldAtTurn || s.exhausted() {
		return nil
	}
	p := s.st.Policy
	if p.Mode == config.ModeOff || p.Mode == "" {
		return nil
	}
	c := s.st.Context
	if c.Percent != nil && p.ContextPercent > 0 && *c.Percent >= float64(p.ContextPercent) {
		return &RotateRequest{Mode: p.Mode, Reason: ReasonContext}
	}
	if p.MaxTurns > 0 && c.Turns >= p.MaxTurns {
		return &RotateRequest{Mode: p.Mode, Reason: ReasonMaxTurns}
	}
	return nil
}

// nextPrompt is the prompt the next turn would send: the human's first,
// then the goal, then a nudge to go on with it. A session with no goal and
// no message is idle.
func (s *session) nextPrompt() string {
	if s.st.Status == StatusNeedsAttention {
		return ""
	}
	if s.team {
		return s.teamPrompt()
	}
	if len(s.st.Messages) > 0 {
		return s.st.Messages[0]
	}
	if s.in.Goal == "" {
		return ""
	}
	if !s.st.Briefed {
		return briefing(s.in.Group, s.in.Name, s.in.Goal)
	}
	return continuePrompt(s.in.Goal)
}

func (s *session) takePrompt() string {
	p := s.nextPrompt()
	switch {
	case len(s.st.Messages) > 0:
		s.st.Messages = s.st.Messages[1:]
	case s.team:
		s.tookTeamPrompt()
	default:
		s.st.Briefed = true
	}
	return p
}

func briefing(group, name, goal string) string {
	return fmt.Sprintf("You are session %s/%s of the nid group %q.\nGoal: %s\nWork toward the goal. When your context feels cluttered, call the handoff_write tool with a self-contained handoff.", group, name, group, goal)
}

func continuePrompt(goal string) string {
	return "Continue working toward the goal: " + goal
}

func activityOptions(queue string, timeout time.Duration) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		TaskQueue:           queue,
		StartToCloseTimeout: timeout,
		// A worker killed mid-turn is noticed within this, and the turn runs
		// again on the next worker.
		HeartbeatTimeout: 20 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    time.Minute,
			MaximumAttempts:    3,
			NonRetryableErrorTypes: []string{
				activities.ErrUnknownAgent, activities.ErrBadInput, activities.ErrAgentFailed,
			},
		},
	}
}

// turnTimeout bounds one turn. The sim's own delay is known; a process
// agent has its turnTimeout (config.DefaultTurnTimeout when unset), which
// its adapter enforces by killing the process group. The activity gets a
// minute more, so that the adapter's clear error is what the session sees.
func turnTimeout(spec activities.AgentSpec) time.Duration {
	if spec.Kind == config.AgentSim {
		return spec.Sim.TurnDelay.D() + 2*time.Minute
	}
	if spec.TurnTimeout > 0 {
		return spec.TurnTimeout.D() + time.Minute
	}
	return config.DefaultTurnTimeout + time.Minute
}

func (s *session) turn(ctx workflow.Context, prompt string) {
	s.setStatus(ctx, StatusWorking)
	// Whether the group already counted this turn is known now; a board
	// arriving during the turn must not change the answer.
	reserved := s.granted()
	actx := workflow.WithActivityOptions(ctx, activityOptions(s.in.ActivityQueue, turnTimeout(s.in.Spec)))
	var res activities.TurnResult
	err := workflow.ExecuteActivity(actx, activities.RunTurnName, activities.TurnInput{
		Session:      s.ref(),
		Spec:         s.in.Spec,
		Conversation: s.st.Conversation,
		Prompt:       prompt,
		Kind:         activities.TurnWork,
		WorkDir:      s.workDir(),
	}).Get(ctx, &res)
	s.st.UsedSeq = s.st.ReserveSeq
	if err != nil && isContextFull(err) {
		s.contextFull(ctx, err)
		return
	}
	if err != nil {
		s.turnFailed(ctx, err)
		return
	}
	c := turnCharge(res.TurnReport)
	if reserved {
		c.Turns = 0 // counted when the group granted it
	}
	s.charge(ctx, c)
	s.st.TurnFailures = 0
	s.st.Conversation = res.Conversation
	s.st.LastOutput = res.Output
	s.st.Context.Turns++
	s.st.Context.TotalTurns++
	if res.Vendor != nil {
		s.vendorCompacted(ctx, *res.Vendor)
	}
	s.applyUsage(res.Usage)
	rec := s.st.Context
	s.record(ctx, Event{Kind: EventTurn, Text: fmt.Sprintf("turn %d", rec.TotalTurns), Context: &rec})
	s.setStatus(ctx, StatusIdle)
}

func (s *session) turnFailed(ctx workflow.Context, err error) {
	s.st.TurnFailures++
	text := "turn failed: " + ErrorText(err)
	s.record(ctx, Event{Kind: EventTurnFailed, Text: text})
	if s.st.TurnFailures >= turnFailuresBeforeAttention {
		s.toInbox(ctx, EventTurnFailed, fmt.Sprintf("%d turns failed in a row; last: %s", s.st.TurnFailures, ErrorText(err)))
		s.setStatus(ctx, StatusNeedsAttention)
		return
	}
	s.setStatus(ctx, StatusIdle)
	// Give a failing agent room before the next automatic turn; a rotation
	// or a message from the human still gets through at once.
	s.publish(ctx)
	_, _ = workflow.AwaitWithTimeout(ctx, time.Duration(s.st.TurnFailures)*10*time.Second, func() bool {
		return s.rotationDue() != nil || len(s.st.Messages) > 0
	})
}

// contextFull handles a turn the vendor refused because the conversation no
// longer fits its window: no retry can help, so the next boundary rotates
// by handoff (see rotationDue) without asking this conversation for
// anything more.
func (s *session) contextFull(ctx workflow.Context, err error) {
	s.st.ContextFull = true
	s.record(ctx, Event{Kind: EventTurnFailed, Text: "turn failed: " + ErrorText(err) + "; rotating by handoff"})
	s.setStatus(ctx, StatusIdle)
}

func isContextFull(err error) bool {
	var app *temporal.ApplicationError
	return errors.As(err, &app) && app.Type() == activities.ErrContextFull
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

func (s *session) applyUsage(u activities.Usage) {
	c := &s.st.Context
	c.Source = u.Source
	if c.Source == "" {
		c.Source = activities.SourceUnknown
	}
	c.UsedTokens, c.WindowTokens, c.Percent = u.UsedTokens, u.WindowTokens, nil
	if c.Source != activities.SourceUnknown && u.WindowTokens > 0 {
		p := float64(u.UsedTokens) * 100 / float64(u.WindowTokens)
		c.Percent = &p
	}
}

func (s *session) rotate(ctx workflow.Context, req RotateRequest) {
	s.st.RotationAttempts++
	n := s.st.RotationAttempts
	// The rotation takes the request it serves; one that arrives while it
	// runs waits for the next boundary.
	summary := ""
	switch req.Reason {
	case ReasonAgent:
		summary = s.st.Handoff
		s.st.HandoffPending, s.st.Handoff = false, ""
	case ReasonManual:
		s.st.PendingRotate = nil
	case ReasonContextFull:
		s.st.ContextFull = false
	}
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

func (s *session) toInbox(ctx workflow.Context, kind, text string) {
	item := InboxItem{At: workflow.Now(ctx), Group: s.in.Group, Session: s.in.Name, Kind: kind, Text: text}
	// The group may be gone (removed from the file); the event is recorded
	// here either way, so a failed delivery loses nothing.
	_ = workflow.SignalExternalWorkflow(ctx, GroupID(s.in.Group), "", SignalInbox, item).Get(ctx, nil)
}

func (s *session) record(ctx workflow.Context, e Event) {
	s.st.NextSeq++
	e.Seq = s.st.NextSeq
	e.At = workflow.Now(ctx)
	e.Group, e.Session = s.in.Group, s.in.Name
	s.st.Events = append(s.st.Events, e)
	if len(s.st.Events) > maxEvents {
		s.st.Events = append([]Event(nil), s.st.Events[len(s.st.Events)-maxEvents:]...)
	}
}

// setStatus publishes a busy status at once, before the turn or rotation
// starts; an idle one is published only if the session then actually waits
// (see awaitWork), so back-to-back turns cost one upsert, not two.
func (s *session) setStatus(ctx workflow.Context, status string) {
	s.st.Status = status
	if status == StatusWorking || status == StatusRotating {
		s.publish(ctx)
	}
}

func (s *session) view() (SessionView, error) {
	v := SessionView{
		Group:          s.in.Group,
		Name:           s.in.Name,
		Agent:          s.in.Spec.Kind,
		Status:         s.st.Status,
		Conversation:   s.st.Conversation,
		Context:        s.st.Context,
		Policy:         s.st.Policy,
		PendingRotate:  s.st.PendingRotate,
		Rotating:       s.running,
		HandoffPending: s.st.HandoffPending,
		QueuedMessages: len(s.st.Messages),
		LastOutput:     s.st.LastOutput,
		Events:         s.st.Events,
		Worktree:       s.st.Worktree,
		Branch:         s.st.Branch,
		WorkDir:        s.workDir(),
	}
	if b := s.st.Board; b != nil {
		v.Task = b.HeldBy(s.in.Name)
		for _, l := range b.Locks {
			if l.Holder == s.in.Name {
				v.Locks = append(v.Locks, l.Name)
			}
		}
	}
	if v.Events == nil {
		v.Events = []Event{}
	}
	return v, nil
}

func (s *session) eventsAfter(seq int64) ([]Event, error) {
	out := []Event{}
	for _, e := range s.st.Events {
		if e.Seq > seq {
			out = append(out, e)
		}
	}
	return out, nil
}

// historyFull says the session should continue as new. The main loop only
// asks between turns and rotations, never mid-rotation.
func (s *session) historyFull(ctx workflow.Context) bool {
	return historyFull(ctx, s.st.HistoryLimit)
}

func (s *session) continueAsNew(ctx workflow.Context) error {
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return err
	}
	// Signals that arrived but were not yet read must travel with the state.
	sel := s.signalSelector(ctx)
	for sel.HasPending() {
		sel.Select(ctx)
	}
	in := s.in
	in.State = s.st
	return workflow.NewContinueAsNewError(ctx, SessionWorkflowName, in)
}

// ErrorText is an error's own message, without the wrapping an activity,
// child workflow or refused update adds on its way: what a human should read.
func ErrorText(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.Message()
	}
	return err.Error()
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
