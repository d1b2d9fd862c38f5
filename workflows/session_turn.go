package workflows

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/nid-dev/nid/activities"
	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/internal/clip"
)

// A session's turns: which prompt goes next, the activity that runs it, and
// folding its report into the context record.

// nextPrompt is the prompt the next turn would send: the human's first,
// then the goal, then a nudge to go on with it. A session with no goal and
// no message is idle.
func (s *rules) nextPrompt() string {
	if s.st.Status == StatusNeedsAttention {
		return ""
	}
	if s.has(VersionTeam) {
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

// takePrompt takes the next prompt off the queue; fromHuman says it is the
// human's message.
func (s *session) takePrompt() (prompt string, fromHuman bool) {
	p := s.nextPrompt()
	switch {
	case len(s.st.Messages) > 0:
		s.st.Messages = s.st.Messages[1:]
		return p, true
	case s.has(VersionTeam):
		s.st.tookTeamPrompt(s.in.Name)
	default:
		s.st.Briefed = true
	}
	return p, false
}

// teamPrompt is the next prompt of a VersionTeam session: the human's
// message first; then its task (briefed once, continued after); a board
// without tasks means the group's goal, as before the board existed.
func (s *rules) teamPrompt() string {
	// A turn granted before the budget ran out still runs.
	if s.st.Stopped || (s.exhausted() && !s.granted()) || s.st.Board == nil {
		return ""
	}
	if len(s.st.Messages) > 0 {
		return s.st.Messages[0]
	}
	b := s.st.Board
	p := b.Prompts.WithDefaults()
	vars := []string{"group", s.in.Group, "session", s.in.Name, "goal", s.in.Goal, "board", BoardText(*b, s.in.Name)}
	// A board whose tasks the group left out of this session's copy
	// (BoardView.Others, BoardView.Open) has tasks: no goal turns.
	if len(b.Tasks) == 0 && b.Others == 0 && b.Open == 0 {
		if s.in.Goal == "" {
			return ""
		}
		if !s.st.Briefed {
			return config.RenderPrompt(p.Goal, vars...)
		}
		return config.RenderPrompt(p.GoalContinue, vars...)
	}
	t := b.HeldBy(s.in.Name)
	if t == nil {
		return ""
	}
	vars = append(vars, "task.id", t.ID, "task.title", t.Title, "task.detail", t.Detail)
	if s.st.BriefedTask != t.ID {
		return config.RenderPrompt(p.Task, vars...)
	}
	return config.RenderPrompt(p.Continue, vars...)
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
				activities.ErrUnknownAgent, activities.ErrBadInput, activities.ErrAgentFailed, activities.ErrSandboxUnavailable,
			},
		},
	}
}

// turnTimeout bounds one turn. The sim's own delay is known; a process
// agent has its turnTimeout (config.DefaultTurnTimeout when unset), which
// its adapter enforces by killing the process group. The activity gets a
// minute more, so that the adapter's clear error is what the session sees.
func turnTimeout(spec agents.AgentSpec) time.Duration {
	if spec.Kind == agents.KindSim {
		return spec.Sim.TurnDelay.D() + 2*time.Minute
	}
	if spec.TurnTimeout > 0 {
		return spec.TurnTimeout.D() + time.Minute
	}
	return config.DefaultTurnTimeout + time.Minute
}

// turn runs one work turn with prompt; fromHuman says it is the human's
// message.
func (s *session) turn(ctx workflow.Context, prompt string, fromHuman bool) {
	s.setStatus(ctx, StatusWorking)
	// Whether the group already counted this turn is known now; a board
	// arriving during the turn must not change the answer.
	reserved := s.granted()
	res, err := s.runTurn(ctx, prompt)
	s.st.useReservation()
	if err != nil && s.has(VersionFailuresSettle) && fromHuman && !(s.has(VersionLostTurns) && s.st.Stopped) {
		// The human's message is not lost with the turn: it goes first
		// again, unless the session now needs the human (turnFailed).
		s.st.queueMessage(prompt, true)
	}
	if err != nil && s.has(VersionLostTurns) && s.st.Stopped {
		// The stop let the turn end, and it ended without an answer:
		// a stopped session runs it no more.
		s.record(ctx, Event{Kind: EventStopped, Text: "the turn running when it was stopped did not finish (" + ErrorText(err) + "); a stopped session does not run it again"})
		return
	}
	if err != nil && s.has(VersionLostTurns) && temporal.IsCanceledError(err) && s.turnLost != "" {
		s.record(ctx, Event{Kind: EventTurnFailed, Text: s.turnLost})
		s.setStatus(ctx, StatusIdle)
		return
	}
	if err != nil && isContextFull(err) {
		s.contextFull(ctx, err)
		return
	}
	if err != nil {
		s.turnFailed(ctx, err, fromHuman)
		return
	}
	c := turnCharge(res.TurnReport)
	if reserved {
		c.Turns = 0 // counted when the group granted it
	}
	s.charge(ctx, c)
	s.st.turnDone(res)
	if res.Vendor != nil {
		s.vendorCompacted(ctx, *res.Vendor, res.Usage)
	}
	s.st.applyUsage(res.Usage, s.in.Spec.Kind, s.has(VersionThresholds))
	if s.has(VersionVouchedHandoff) {
		s.st.plot("", "")
	}
	rec := s.st.Context
	if s.has(VersionLostTurns) && s.st.Stopped {
		// Its feed said stopped already: this is the step the stop let end.
		s.record(ctx, Event{Kind: EventStopped, Text: fmt.Sprintf("the turn running when it was stopped ended (turn %d); it takes no more", rec.TotalTurns), Context: &rec})
	} else {
		s.record(ctx, Event{Kind: EventTurn, Text: fmt.Sprintf("turn %d", rec.TotalTurns), Context: &rec})
	}
	s.setStatus(ctx, StatusIdle)
}

// turnAttempts is how often a turn runs at most, its first attempt
// included, as the activities' retry policy says (activityOptions).
const turnAttempts = 3

// runTurn runs the turn's activity. Since VersionLostTurns the session,
// not the server, tries a failed attempt again, as the retry policy
// would, so that a stopped session runs no cut attempt again and a move
// off a host that is down can cut the attempt lost there (cutTurn).
func (s *session) runTurn(ctx workflow.Context, prompt string) (activities.TurnResult, error) {
	opts := activityOptions(s.queue(), turnTimeout(s.in.Spec))
	if !s.has(VersionLostTurns) {
		var res activities.TurnResult
		err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), activities.RunTurnName, s.turnInput(prompt)).Get(ctx, &res)
		return res, err
	}
	s.turnLost, s.turning = "", true
	defer func() { s.turning = false }()
	policy := *opts.RetryPolicy
	backoff := policy.InitialInterval
	for attempt := 1; ; attempt++ {
		opts.TaskQueue = s.queue()
		opts.RetryPolicy = &temporal.RetryPolicy{MaximumAttempts: 1}
		tctx, cancel := workflow.WithCancel(ctx)
		s.cancelTurn = cancel
		var res activities.TurnResult
		err := workflow.ExecuteActivity(workflow.WithActivityOptions(tctx, opts), activities.RunTurnName, s.turnInput(prompt)).Get(ctx, &res)
		s.cancelTurn = nil
		cancel()
		if err == nil || attempt >= turnAttempts || s.st.Stopped || s.turnLost != "" || !retryable(err, policy.NonRetryableErrorTypes) {
			return res, err
		}
		if err := workflow.Sleep(ctx, backoff); err != nil {
			return res, err
		}
		backoff = min(time.Duration(float64(backoff)*policy.BackoffCoefficient), policy.MaximumInterval)
		if s.st.Stopped || s.turnLost != "" {
			return res, temporal.NewCanceledError()
		}
	}
}

// turnInput is the work turn's activity input for prompt.
func (s *rules) turnInput(prompt string) activities.TurnInput {
	return activities.TurnInput{
		Session:      s.ref(),
		Spec:         s.in.Spec,
		Conversation: s.st.Conversation,
		Prompt:       prompt,
		Kind:         agents.TurnWork,
		Generation:   s.st.Generation,
	}
}

// retryable says the server's retry policy would have tried an
// activity's failure again: not a cancellation, and not an application
// error marked non-retryable or of one of the types nonRetryable lists.
func retryable(err error, nonRetryable []string) bool {
	if temporal.IsCanceledError(err) {
		return false
	}
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return !app.NonRetryable() && !slices.Contains(nonRetryable, app.Type())
	}
	return true
}

// cutTurn cancels the turn running on a host that is down, which no
// answer will come from, or, between its tries, runs it no more: why says
// so in the feed.
func (s *turnRun) cutTurn(why string) bool {
	if !s.turning {
		return false
	}
	s.turnLost = why
	if s.cancelTurn != nil {
		s.cancelTurn()
	}
	return true
}

func (s *session) turnFailed(ctx workflow.Context, err error, fromHuman bool) {
	s.st.TurnFailures++
	text := "turn failed: " + ErrorText(err)
	s.record(ctx, Event{Kind: EventTurnFailed, Text: text})
	if s.has(VersionFailuresSettle) && needsHuman(err) {
		// No retry can help: the agent cannot run here at all.
		s.toInbox(ctx, EventTurnFailed, fmt.Sprintf("%s/%s cannot run its agent: %s", s.in.Group, s.in.Name, ErrorText(err)))
		s.setStatus(ctx, StatusNeedsAttention)
		return
	}
	if s.st.TurnFailures >= turnFailuresBeforeAttention {
		text := fmt.Sprintf("%d turns failed in a row; last: %s", s.st.TurnFailures, ErrorText(err))
		if s.has(VersionFailuresSettle) && fromHuman {
			// It may be the message that fails: the human decides whether
			// to send it again.
			text += "; your message was not run: " + clip.Runes(s.st.Messages[0], 80)
			s.st.Messages = s.st.Messages[1:]
		}
		s.toInbox(ctx, EventTurnFailed, text)
		s.setStatus(ctx, StatusNeedsAttention)
		return
	}
	waiting := StatusIdle
	if s.has(VersionFailuresSettle) {
		waiting = StatusRetrying
	}
	s.setStatus(ctx, waiting)
	// Give a failing agent room before the next automatic turn; a rotation
	// or a message from the human still gets through at once.
	s.publish(ctx)
	queued := 0
	if s.has(VersionFailuresSettle) {
		queued = len(s.st.Messages) // a message put back does not end the wait
	}
	_, _ = awaitWithin(ctx, s.ladder, time.Duration(s.st.TurnFailures)*10*time.Second, func() bool {
		_, _, due := s.rotationDue()
		return due || len(s.st.Messages) > queued || (s.has(VersionFailuresSettle) && s.st.Stopped)
	})
	if s.st.Status == StatusRetrying {
		s.st.Status = StatusIdle
	}
}

// needsHuman says a turn failed in a way only the human can mend: the agent
// cannot run on this host at all.
func needsHuman(err error) bool {
	var app *temporal.ApplicationError
	if !errors.As(err, &app) {
		return false
	}
	switch app.Type() {
	case activities.ErrSandboxUnavailable, activities.ErrUnknownAgent, activities.ErrBadInput:
		return true
	}
	return false
}

// contextFull handles a turn the vendor refused because the conversation no
// longer fits its window: no retry can help, so the next boundary rotates
// by handoff (see triggers) without asking this conversation for anything
// more.
func (s *session) contextFull(ctx workflow.Context, err error) {
	s.st.ContextFull = true
	s.record(ctx, Event{Kind: EventTurnFailed, Text: "turn failed: " + ErrorText(err) + "; rotating by handoff"})
	s.setStatus(ctx, StatusIdle)
}

func isContextFull(err error) bool {
	var app *temporal.ApplicationError
	return errors.As(err, &app) && app.Type() == activities.ErrContextFull
}

// prepareWorkspace creates the session's worktree and branch once, on the
// host that runs its activities; a rotation never changes them.
func (s *session) prepareWorkspace(ctx workflow.Context) {
	if !s.has(VersionTeam) || s.in.Repo == "" || s.st.Worktree != "" {
		return
	}
	actx := workflow.WithActivityOptions(ctx, activityOptions(s.queue(), 5*time.Minute))
	var res activities.WorkspaceResult
	err := workflow.ExecuteActivity(actx, activities.PrepareWorkspaceName, activities.WorkspaceInput{
		Session: s.ref(), Salvage: s.st.Salvage,
	}).Get(ctx, &res)
	if err != nil {
		s.record(ctx, Event{Kind: EventTurnFailed, Text: "worktree not prepared: " + ErrorText(err)})
		s.toInbox(ctx, EventTurnFailed, "worktree not prepared: "+ErrorText(err))
		s.setStatus(ctx, StatusNeedsAttention)
		return
	}
	s.st.worktreeMade(res)
	s.record(ctx, Event{Kind: EventStarted, Text: fmt.Sprintf("worktree %s on branch %s", res.Worktree, res.Branch)})
}

// workDir is where the session's agent runs.
func (s *rules) workDir() string {
	if s.st.Worktree != "" {
		return s.st.Worktree
	}
	return s.in.WorkDir
}

// stopAgent ends the agent's process once the session is stopped.
func (s *session) stopAgent(ctx workflow.Context) {
	if s.st.StopDone {
		return
	}
	s.st.StopDone = true
	if s.st.Conversation != "" {
		actx := workflow.WithActivityOptions(ctx, activityOptions(s.queue(), time.Minute))
		if err := workflow.ExecuteActivity(actx, activities.StopAgentName, activities.StopInput{
			Session: s.ref(), Spec: s.in.Spec, Conversation: s.st.Conversation,
		}).Get(ctx, nil); err != nil {
			if s.has(VersionLostTurns) {
				s.record(ctx, Event{Kind: EventStopped, Text: "its agent's process may still run: nid could not stop it (" + ErrorText(err) + ")"})
			} else {
				workflow.GetLogger(ctx).Warn("agent did not stop", "error", err)
			}
		} else if s.has(VersionLostTurns) {
			s.record(ctx, Event{Kind: EventStopped, Text: "its agent is stopped"})
		}
	}
	s.setStatus(ctx, StatusStopped)
	// Its place on the host stays, its share of the capacity does not.
	s.tellRegistry(ctx)
}
