package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/nid-dev/nid/agents"
)

// A session's place in its team: the board the group pushes, the task it
// holds, and the budget it reserves and charges. All of it is VersionTeam
// behaviour; a history from before it never reaches these paths.

// teamStart asks the group for the board (and a task) when the session has
// none yet, so a new or restarted session is never left without one.
func (s *groupLink) teamStart(ctx workflow.Context) {
	if s.st.Board == nil && !s.st.Stopped {
		s.askClaim(ctx)
	}
}

// startWithBoard takes the board the session was started with
// (VersionBoardAtStart) as a push of the group's: checked like one, and
// older than any (Rev 0), so the group's first push replaces it. Before
// VersionQuietStart it asks the group for its board and a task as
// teamStart does, but in a coroutine of its own: the first turn waits for
// the answer only when the board has an open task to claim. Since, it asks
// nothing: the loop claims an open task (needClaim), and a change the
// group made before the session ran reaches it once nid up says it
// started (SignalStarted).
func (s *session) startWithBoard(ctx workflow.Context) {
	b := *s.in.Board
	if why := boardRefusal(b); why != "" {
		s.record(ctx, Event{Kind: EventTask, Text: "board not taken: " + why})
		s.teamStart(ctx)
		return
	}
	b.Rev = 0
	s.st.takeBoard(b)
	if s.has(VersionQuietStart) {
		return
	}
	s.st.ClaimAsked = true
	workflow.Go(ctx, s.sendClaim)
}

// budgeted says the group's budget has a limit: each work turn is reserved
// with the group before it starts.
func (s *rules) budgeted() bool {
	return s.has(VersionTeam) && s.st.Board != nil && budgetLimited(s.st.Board.Budget)
}

// granted says the group granted the reservation not yet used.
func (s *rules) granted() bool {
	return s.st.reserving() && s.st.Board != nil && s.st.Board.Grants[s.in.Name] >= s.st.ReserveSeq
}

// turnReady says a work turn may start now: there is a prompt and, on a
// budget, either a grant or no request in flight yet (the loop asks).
func (s *rules) turnReady() bool {
	if s.held() || s.nextPrompt() == "" {
		return false
	}
	if s.st.SlotAsked && !s.holdsSlot() {
		// A rotation is due and waits for its slot at the turn boundary:
		// another turn would only fill the context more.
		return false
	}
	return !s.budgeted() || s.granted() || !s.st.reserving()
}

func (s *groupLink) askReserve(ctx workflow.Context) {
	seq := s.st.nextReservation()
	err := workflow.SignalExternalWorkflow(ctx, GroupID(s.in.Group), "", SignalReserve, Reserve{Session: s.in.Name, Seq: seq}).Get(ctx, nil)
	if err != nil {
		workflow.GetLogger(ctx).Warn("group did not take the reservation", "error", err)
		s.st.useReservation()
	}
}

// exhausted says the group's budget is spent: no new turns, no policy
// rotations.
func (s *rules) exhausted() bool {
	return s.has(VersionTeam) && s.st.Board != nil && s.st.Board.Exhausted != ""
}

// needClaim says the session should ask the group for a task.
func (s *rules) needClaim() bool {
	b := s.st.Board
	return s.has(VersionTeam) && !s.st.Stopped && b != nil && !s.st.ClaimAsked && b.Exhausted == "" &&
		b.HeldBy(s.in.Name) == nil && b.HasOpen()
}

func (s *groupLink) askClaim(ctx workflow.Context) {
	s.st.ClaimAsked = true
	s.sendClaim(ctx)
}

// sendClaim sends the group the claim_next that askClaim notes, and waits
// until it is taken.
func (s *groupLink) sendClaim(ctx workflow.Context) {
	err := workflow.SignalExternalWorkflow(ctx, GroupID(s.in.Group), "", SignalClaimNext, ClaimNext{Session: s.in.Name}).Get(ctx, nil)
	if err != nil {
		// No group (yet): wait for its first board push instead.
		workflow.GetLogger(ctx).Warn("group did not take the claim request", "error", err)
	}
}

// charge bills the group for turns the session ran.
//
// Without a budget limit the bill only feeds `nid group show`, so it is sent
// every chargeBatch turns and whenever the session goes idle, not after
// every turn: a turn never waits on the group.
func (s *groupLink) charge(ctx workflow.Context, c Charge) {
	if !s.has(VersionTeam) {
		return
	}
	if u := s.st.bill(c); s.budgeted() || u.Turns >= chargeBatch {
		s.flushCharge(ctx)
	}
}

// chargeBatch is how many turns a session without a budget limit bills at once.
const chargeBatch = 10

func (s *groupLink) flushCharge(ctx workflow.Context) {
	if u := s.st.Unbilled; !s.has(VersionTeam) || (u.Turns == 0 && u.Tokens == 0 && u.USD == 0) {
		return
	}
	c := s.st.takeUnbilled()
	c.Session = s.in.Name
	// Not awaited: the group may be gone (removed from the file) and the
	// session must not wait on its bill.
	workflow.SignalExternalWorkflow(ctx, GroupID(s.in.Group), "", SignalCharge, c)
}

// turnCharge is what one turn cost: the tokens the agent was billed for, or
// the context it sent when it reports no bill.
func turnCharge(r agents.TurnReport) Charge {
	tokens := r.BilledTokens
	if tokens == 0 {
		tokens = r.Usage.UsedTokens
	}
	return Charge{Turns: 1, Tokens: tokens, USD: r.CostUSD}
}
