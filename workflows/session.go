package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/nid-dev/nid/agents"
)

// A session is split by concern (see doc.go): this file is the running
// session and its loop; session_state.go its state's parts and their
// methods; session_signals.go folds signals into the state; triggers.go
// decides when it rotates and session_rotation.go runs and applies a
// rotation; session_turn.go runs a turn and picks its prompt;
// session_team.go is its seat on the group's board and budget;
// session_hosts.go its host; session_view.go and search.go are what it
// shows. Texts are in texts.go.

// Limits that keep a session's history and state small however long it runs.
const (
	// maxEvents is how many recent events a session keeps for its feed,
	// maxReceipts rotation receipts, maxPoints points of its context chart.
	maxEvents   = 200
	maxReceipts = 100
	maxPoints   = 400
	// defaultHistoryLimit is the history length after which a session
	// continues as new even if the server has not suggested it yet.
	defaultHistoryLimit = 4000
	// turnFailuresBeforeAttention stops automatic turns after this many
	// failed turns in a row, so a broken agent is not driven in a loop.
	turnFailuresBeforeAttention = 3
	// rotationFailuresBeforeAttention stops policy rotations (and turns)
	// after this many failed rotations in a row.
	rotationFailuresBeforeAttention = 3
)

// session is a running session workflow: its rules over its state, and
// what the run holds in memory while it acts (never carried across
// continue-as-new). Its own methods act: they run turns and rotations,
// signal the group and the hosts registry, and fold signals into the
// state's parts through the parts' methods.
type session struct {
	rules
	rotationRun
	turnRun
	listingRun
	groupLink
	attachRun
	// stopWatchingHost cancels the wait that tells the inbox of a host
	// down too long.
	stopWatchingHost workflow.CancelFunc
}

// rules is what a session decides from its input and state at the rung of
// the ladder its run follows: whether a turn or a rotation is due, what it
// asks of its group, what prompt goes next, where it runs. Its methods
// change nothing and act on nothing (no activity, no signal, no event);
// the session acts on what they decide.
type rules struct {
	in *SessionInput
	st *SessionState
	// ladder is the rung of the version ladder this run follows.
	ladder
}

// rotationRun is the rotation the run has in progress.
type rotationRun struct {
	child workflow.ChildWorkflowFuture
	// running is the rotation in progress, if any; cancelRotation cancels
	// it.
	running        *RotateRequest
	cancelRotation workflow.CancelFunc
	// moving is the move the rotation starting now carries, if any.
	moving *MoveSpec
	// rotationLost says why the running rotation was cancelled, when it
	// was lost with its host rather than stopped.
	rotationLost string
}

// turnRun is the turn the run has in progress.
type turnRun struct {
	// turning is true while a turn runs, its tries and the waits between
	// them included; cancelTurn cancels the try running (VersionLostTurns);
	// turnLost, once set, says why the turn was cut.
	turning    bool
	cancelTurn workflow.CancelFunc
	turnLost   string
}

// listingRun writes the session to its search attributes and memo, and
// remembers what it last wrote.
type listingRun struct {
	*rules
	// published is what the search attributes and memo last said, so an
	// unchanged record is not written to history again.
	published published
	// publishDue says a paced write of the context is waiting its turn
	// (publishPaced).
	publishDue bool
	// listingDirty says publish was asked for since the listing was last
	// written; flushing, that the coroutine writing it runs (since
	// VersionQuietStart).
	listingDirty, flushing bool
}

// groupLink sends the session's group what the session asks of it and
// owes it: a task, a turn of budget, a rotation slot, its charges, and
// items for the inbox.
type groupLink struct {
	*rules
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
			Status:            StatusIdle,
			RotationState:     RotationState{Policy: in.Policy, Learned: in.Learned},
			ConversationState: ConversationState{Context: ContextRecord{Usage: agents.Usage{Source: agents.SourceUnknown}}},
		}
	}
	if in.State != nil {
		// A run after the first tells the registry where it is.
		in.Placed = false
	}
	in.State, in.Learned = nil, nil
	s := &session{rules: rules{in: &in, st: st}}
	s.listingRun.rules, s.groupLink.rules = &s.rules, &s.rules
	return s
}

func (s *session) setup(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, QuerySession, s.view); err != nil {
		return err
	}
	if err := workflow.SetQueryHandler(ctx, QueryEvents, s.st.eventsAfter); err != nil {
		return err
	}
	s.version = versionOf(ctx)
	if s.has(VersionCheckedInput) {
		// Before anything is scheduled: the names become paths, branches
		// and queue names on the worker.
		if err := checkNames("group", s.in.Group, "name", s.in.Name); err != nil {
			return err
		}
	}
	if err := s.attachSetup(ctx); err != nil {
		return err
	}
	listenSignals(ctx, s.signalSelector, s.listEvents)
	if s.st.NextSeq == 0 {
		s.record(ctx, Event{Kind: EventStarted, Text: fmt.Sprintf("session started (%s)", s.in.Spec.Kind)})
	}
	if s.has(VersionHosts) {
		s.hostStart(ctx)
	}
	s.publish(ctx)
	switch {
	case s.has(VersionBoardAtStart) && s.st.Board == nil && s.in.Board != nil:
		s.startWithBoard(ctx)
	case s.has(VersionTeam):
		s.teamStart(ctx)
	}
	s.in.Board = nil
	return nil
}

func (s *rules) ref() agents.SessionRef {
	return agents.SessionRef{Group: s.in.Group, Name: s.in.Name, WorkflowID: SessionID(s.in.Group, s.in.Name)}
}

// run is the session's loop: wait until there is something to do, then do
// the first of: stop the agent, rotate, continue as new, ask for a task,
// prepare the worktree, reserve a turn of budget, run a turn.
func (s *session) run(ctx workflow.Context) error {
	for {
		if err := s.awaitWork(ctx, func() bool {
			_, _, due := s.rotationDue()
			return due || s.turnReady() || historyFull(ctx, s.st.HistoryLimit) ||
				s.needClaim() || (s.st.Stopped && !s.st.StopDone) || s.slotNotWanted() || s.holdDue()
		}); err != nil {
			return err
		}
		if s.st.Stopped && !s.st.StopDone {
			s.stopAgent(ctx)
			continue
		}
		if s.holdDue() {
			s.holdStep(ctx)
			continue
		}
		if s.st.Stopped {
			s.stopAgent(ctx)
			continue
		}
		if s.st.PendingMove != "" && !s.held() {
			s.move(ctx)
			continue
		}
		if s.st.PushPending {
			s.pushBranch(ctx)
			continue
		}
		if s.slotNotWanted() {
			s.giveSlotBack(ctx)
			continue
		}
		if req, t, due := s.rotationDue(); due {
			if s.needsReservation(req.Reason) {
				s.askReserve(ctx)
				continue
			}
			if s.needsSlot(req.Reason) {
				s.askSlot(ctx)
				continue
			}
			s.rotate(ctx, req, t.take(s))
			continue
		}
		if historyFull(ctx, s.st.HistoryLimit) {
			// Only between turns and rotations, never mid-rotation.
			next := func() any {
				in := *s.in
				in.State = s.st
				return in
			}
			if s.has(VersionHostQueue) {
				// A session started on the shared queue, or moved since
				// it started, runs its next run where its turns run.
				return continueOn(ctx, SessionQueue(s.st.Host), s.ladder, s.signalSelector, SessionWorkflowName, next)
			}
			return continueAsNew(ctx, s.ladder, s.signalSelector, SessionWorkflowName, next)
		}
		if s.needClaim() {
			s.askClaim(ctx)
			continue
		}
		s.prepareWorkspace(ctx)
		if s.st.Status == StatusNeedsAttention || s.held() {
			// Taken over by nid attach while the worktree was made.
			continue
		}
		if s.budgeted() && !s.granted() {
			s.askReserve(ctx)
			continue
		}
		prompt, fromHuman := s.takePrompt()
		s.turn(ctx, prompt, fromHuman)
	}
}

// awaitWork waits for ready, publishing the status first when the session
// is about to sit still. Since VersionRotationBudget it also wakes when the
// budget runs out or is raised while it waits, so a waiting session shows
// paused exactly while the budget is spent.
func (s *session) awaitWork(ctx workflow.Context, ready func() bool) error {
	if s.has(VersionHosts) {
		// Everything the loop does runs on the session's host, or waits
		// for it (a stop too: the agent to stop is there).
		// A move is the way off a host that is down.
		work := ready
		// A move waits while a person holds the session (nid attach).
		ready = func() bool {
			return s.st.PendingMove != "" && !s.held() || !s.st.HostDown && (s.st.PushPending || work())
		}
	}
	if !s.has(VersionRotationBudget) {
		if !ready() {
			s.sitStill(ctx)
		}
		return workflow.Await(ctx, ready)
	}
	for !ready() {
		s.sitStill(ctx)
		paused := s.st.Status == StatusPaused
		if err := workflow.Await(ctx, func() bool {
			return ready() || (s.st.Status == StatusIdle || s.st.Status == StatusPaused) && s.exhausted() != paused
		}); err != nil {
			return err
		}
	}
	return nil
}

// sitStill bills what is unbilled and publishes the status of a session
// about to wait: paused while the budget is spent, waiting-to-rotate while
// it waits for a rotation slot, else as it was.
func (s *session) sitStill(ctx workflow.Context) {
	s.flushCharge(ctx)
	switch {
	case s.st.Status == StatusIdle && s.st.SlotAsked && !s.holdsSlot():
		s.st.Status = StatusWaitingToRotate
	case s.st.Status == StatusIdle && s.exhausted():
		s.st.Status = StatusPaused
	case s.st.Status == StatusPaused && !s.exhausted():
		s.st.Status = StatusIdle
	}
	s.publish(ctx)
}
