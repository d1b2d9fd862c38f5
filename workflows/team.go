package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/nid-dev/nid/activities"
	"github.com/nid-dev/nid/config"
)

// A session's place in its team: its worktree, the board the group pushes,
// the task it holds, the budget, and stopping. All of it is VersionTeam
// behaviour; a history from before it never reaches these paths.

// teamStart asks the group for the board (and a task) when the session has
// none yet, so a new or restarted session is never left without one.
func (s *session) teamStart(ctx workflow.Context) {
	if s.st.Board == nil && !s.st.Stopped {
		s.askClaim(ctx)
	}
}

func (s *session) onBoard(ctx workflow.Context, b BoardView) {
	before := s.st.Board
	if before != nil && b.Rev != 0 && b.Rev < before.Rev {
		// Overtaken by a newer push: its grants and claims are out of date.
		return
	}
	s.st.Board = &b
	s.st.ClaimAsked = false
	if b.Exhausted != "" && s.reserving() && !s.granted() {
		// Refused: the budget ran out first. Ask again once it is raised.
		s.st.UsedSeq = s.st.ReserveSeq
	}
	mine := b.HeldBy(s.in.Name)
	if mine != nil && (before == nil || before.HeldBy(s.in.Name) == nil || before.HeldBy(s.in.Name).ID != mine.ID) {
		s.record(ctx, Event{Kind: EventTask, Text: fmt.Sprintf("claimed task %s: %s", mine.ID, clip(mine.Title, 60))})
	}
	if before != nil && before.Exhausted != b.Exhausted {
		if b.Exhausted != "" {
			s.record(ctx, Event{Kind: EventBudget, Text: "budget exhausted (" + b.Exhausted + "): paused"})
		} else {
			s.record(ctx, Event{Kind: EventBudget, Text: "budget raised: resuming"})
		}
	}
}

// budgeted says the group's budget has a limit: each work turn is reserved
// with the group before it starts.
func (s *session) budgeted() bool {
	return s.team && s.st.Board != nil && budgetLimited(s.st.Board.Budget)
}

// reserving says a reservation is asked for and not yet used.
func (s *session) reserving() bool { return s.st.ReserveSeq > s.st.UsedSeq }

// granted says the group granted the reservation not yet used.
func (s *session) granted() bool {
	return s.reserving() && s.st.Board != nil && s.st.Board.Grants[s.in.Name] >= s.st.ReserveSeq
}

// turnReady says a work turn may start now: there is a prompt and, on a
// budget, either a grant or no request in flight yet (the loop asks).
func (s *session) turnReady() bool {
	if s.nextPrompt() == "" {
		return false
	}
	return !s.budgeted() || s.granted() || !s.reserving()
}

func (s *session) askReserve(ctx workflow.Context) {
	s.st.ReserveSeq++
	err := workflow.SignalExternalWorkflow(ctx, GroupID(s.in.Group), "", SignalReserve, Reserve{Session: s.in.Name, Seq: s.st.ReserveSeq}).Get(ctx, nil)
	if err != nil {
		workflow.GetLogger(ctx).Warn("group did not take the reservation", "error", err)
		s.st.UsedSeq = s.st.ReserveSeq
	}
}

func (s *session) onStop(ctx workflow.Context, _ struct{}) {
	if s.st.Stopped {
		return
	}
	s.st.Stopped = true
	s.st.Messages = nil
	s.st.PendingRotate = nil
	s.record(ctx, Event{Kind: EventStopped, Text: "stopped: its claims and locks are released"})
}

// exhausted says the group's budget is spent: no new turns, no policy
// rotations.
func (s *session) exhausted() bool {
	return s.team && s.st.Board != nil && s.st.Board.Exhausted != ""
}

// needClaim says the session should ask the group for a task.
func (s *session) needClaim() bool {
	b := s.st.Board
	return s.team && !s.st.Stopped && b != nil && !s.st.ClaimAsked && b.Exhausted == "" &&
		b.HeldBy(s.in.Name) == nil && b.HasOpen()
}

func (s *session) askClaim(ctx workflow.Context) {
	s.st.ClaimAsked = true
	err := workflow.SignalExternalWorkflow(ctx, GroupID(s.in.Group), "", SignalClaimNext, ClaimNext{Session: s.in.Name}).Get(ctx, nil)
	if err != nil {
		// No group (yet): wait for its first board push instead.
		workflow.GetLogger(ctx).Warn("group did not take the claim request", "error", err)
	}
}

// teamPrompt is the next prompt of a VersionTeam session: the human's
// message first; then its task (briefed once, continued after); a board
// without tasks means the group's goal, as before the board existed.
func (s *session) teamPrompt() string {
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
	if len(b.Tasks) == 0 {
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

// tookTeamPrompt notes what the prompt just taken briefed.
func (s *session) tookTeamPrompt() {
	if b := s.st.Board; b != nil {
		if t := b.HeldBy(s.in.Name); t != nil {
			s.st.BriefedTask = t.ID
		}
	}
	s.st.Briefed = true
}

// prepareWorkspace creates the session's worktree and branch once, on the
// host that runs its activities; a rotation never changes them.
func (s *session) prepareWorkspace(ctx workflow.Context) {
	if !s.team || s.in.Repo == "" || s.st.Worktree != "" {
		return
	}
	actx := workflow.WithActivityOptions(ctx, activityOptions(s.in.ActivityQueue, 5*time.Minute))
	var res activities.WorkspaceResult
	err := workflow.ExecuteActivity(actx, activities.PrepareWorkspaceName, activities.WorkspaceInput{
		Session: s.ref(), Repo: s.in.Repo,
	}).Get(ctx, &res)
	if err != nil {
		s.record(ctx, Event{Kind: EventTurnFailed, Text: "worktree not prepared: " + ErrorText(err)})
		s.toInbox(ctx, EventTurnFailed, "worktree not prepared: "+ErrorText(err))
		s.setStatus(ctx, StatusNeedsAttention)
		return
	}
	s.st.Worktree, s.st.Branch = res.Worktree, res.Branch
	s.record(ctx, Event{Kind: EventStarted, Text: fmt.Sprintf("worktree %s on branch %s", res.Worktree, res.Branch)})
}

// workDir is where the session's agent runs.
func (s *session) workDir() string {
	if s.st.Worktree != "" {
		return s.st.Worktree
	}
	return s.in.WorkDir
}

// charge bills the group for turns the session ran.
//
// Without a budget limit the bill only feeds `nid group show`, so it is sent
// every chargeBatch turns and whenever the session goes idle, not after
// every turn: a turn never waits on the group.
func (s *session) charge(ctx workflow.Context, c Charge) {
	if !s.team {
		return
	}
	u := &s.st.Unbilled
	u.Turns, u.Tokens, u.USD = u.Turns+c.Turns, u.Tokens+c.Tokens, u.USD+c.USD
	if s.budgeted() || u.Turns >= chargeBatch {
		s.flushCharge(ctx)
	}
}

// chargeBatch is how many turns a session without a budget limit bills at once.
const chargeBatch = 10

func (s *session) flushCharge(ctx workflow.Context) {
	c := s.st.Unbilled
	if !s.team || (c.Turns == 0 && c.Tokens == 0 && c.USD == 0) {
		return
	}
	s.st.Unbilled = Charge{}
	c.Session = s.in.Name
	// Not awaited: the group may be gone (removed from the file) and the
	// session must not wait on its bill.
	workflow.SignalExternalWorkflow(ctx, GroupID(s.in.Group), "", SignalCharge, c)
}

// turnCharge is what one turn cost: the tokens the agent was billed for, or
// the context it sent when it reports no bill.
func turnCharge(r activities.TurnReport) Charge {
	tokens := r.BilledTokens
	if tokens == 0 {
		tokens = r.Usage.UsedTokens
	}
	return Charge{Turns: 1, Tokens: tokens, USD: r.CostUSD}
}

// stopAgent ends the agent's process once the session is stopped.
func (s *session) stopAgent(ctx workflow.Context) {
	if s.st.StopDone {
		return
	}
	s.st.StopDone = true
	if s.st.Conversation != "" {
		actx := workflow.WithActivityOptions(ctx, activityOptions(s.in.ActivityQueue, time.Minute))
		if err := workflow.ExecuteActivity(actx, activities.StopAgentName, activities.StopInput{
			Session: s.ref(), Spec: s.in.Spec, Conversation: s.st.Conversation,
		}).Get(ctx, nil); err != nil {
			workflow.GetLogger(ctx).Warn("agent did not stop", "error", err)
		}
	}
	s.setStatus(ctx, StatusStopped)
}
