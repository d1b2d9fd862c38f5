package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/config"
)

// A session is split by concern: this file is its state and run loop;
// session_signals.go folds signals into the state; triggers.go decides when
// it rotates and session_rotation.go runs and applies a rotation;
// session_turn.go runs a turn and picks its prompt; session_team.go is its
// place on the group's board and budget; session_view.go is what it shows
// (queries, events, inbox, search attributes). Texts are in texts.go.

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
	// TurnFailures counts failed turns in a row; RotationFailures failed
	// rotations.
	TurnFailures     int     `json:"turnFailures,omitempty"`
	RotationFailures int     `json:"rotationFailures,omitempty"`
	Events           []Event `json:"events,omitempty"`
	NextSeq          int64   `json:"nextSeq"`
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

	// Learned are the points the group learned of agent kinds and models
	// that compact by themselves (VersionThresholds).
	Learned []LearnedPoint `json:"learned,omitempty"`
	// HandoffNext makes the next policy rotation a handoff: a compaction
	// did not help.
	HandoffNext bool `json:"handoffNext,omitempty"`
	// PolicyHalted says why policy rotations stopped for this session;
	// empty while they run. A new policy starts them again.
	PolicyHalted string `json:"policyHalted,omitempty"`
	// SelfRotations are the TotalTurns at the session's recent rotations
	// that it started by itself, for the circuit breaker.
	SelfRotations []int `json:"selfRotations,omitempty"`
	// Generation numbers the session's conversations: one more at each
	// handoff. Agents' MCP tokens are bound to it.
	Generation int `json:"generation,omitempty"`
	// Receipts are the session's recent rotations, each with what it cost
	// and kept; Points its context after each recent turn and rotation,
	// for the chart (VersionVouchedHandoff).
	Receipts []RotationEvent `json:"receipts,omitempty"`
	Points   []ContextPoint  `json:"points,omitempty"`
	// SlotAsked is true from asking the group for a rotation slot until
	// giving it back; SlotSeq numbers the requests (VersionGovernor).
	SlotAsked bool  `json:"slotAsked,omitempty"`
	SlotSeq   int64 `json:"slotSeq,omitempty"`

	// Host is the host the session runs on, decided once (VersionHosts);
	// HostDown is true while the registry says that host is down, since
	// HostDownSince; HostDownTold once the inbox heard of it.
	Host          string    `json:"host,omitempty"`
	HostDown      bool      `json:"hostDown,omitempty"`
	HostDownSince time.Time `json:"hostDownSince,omitempty"`
	HostDownTold  bool      `json:"hostDownTold,omitempty"`
	// PendingMove is the host nid move asked for, until the move runs;
	// Moves numbers the moves; Salvage is what a move saved that the next
	// worktree made on the new host still has to take.
	PendingMove string `json:"pendingMove,omitempty"`
	Moves       int    `json:"moves,omitempty"`
	Salvage     string `json:"salvage,omitempty"`
	// PushPending is true from a task done until the branch is pushed to
	// the remote of a URL repo.
	PushPending bool `json:"pushPending,omitempty"`
}

type session struct {
	in    SessionInput
	st    *SessionState
	child workflow.ChildWorkflowFuture
	// running is the rotation in progress, if any; cancelRotation cancels
	// it.
	running        *RotateRequest
	cancelRotation workflow.CancelFunc
	// published is what the search attributes and memo last said, so an
	// unchanged record is not written to history again.
	published published
	// publishDue says a paced write of the context is waiting its turn
	// (publishPaced).
	publishDue bool
	// ladder is the rung of the version ladder this run follows.
	ladder
	// stopWatchingHost cancels the wait that tells the inbox of a host
	// down too long.
	stopWatchingHost workflow.CancelFunc
	// moving is the move the rotation starting now carries, if any.
	moving *MoveSpec
	// turning is true while a turn runs, its tries and the waits between
	// them included; cancelTurn cancels the try running (VersionLostTurns);
	// turnLost, once set, says why the turn was cut.
	turning    bool
	cancelTurn workflow.CancelFunc
	turnLost   string
	// rotationLost says why the running rotation was cancelled, when it
	// was lost with its host rather than stopped.
	rotationLost string
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
			Context: ContextRecord{Source: agents.SourceUnknown},
			Learned: in.Learned,
		}
	}
	in.State, in.Learned = nil, nil
	return &session{in: in, st: st}
}

func (s *session) setup(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, QuerySession, s.view); err != nil {
		return err
	}
	if err := workflow.SetQueryHandler(ctx, QueryEvents, s.eventsAfter); err != nil {
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
	listenSignals(ctx, s.signalSelector, s.listEvents)
	if s.st.NextSeq == 0 {
		s.record(ctx, Event{Kind: EventStarted, Text: fmt.Sprintf("session started (%s)", s.in.Spec.Kind)})
	}
	if s.has(VersionHosts) {
		s.hostStart(ctx)
	}
	s.publish(ctx)
	if s.has(VersionTeam) {
		s.teamStart(ctx)
	}
	return nil
}

func (s *session) ref() agents.SessionRef {
	return agents.SessionRef{Group: s.in.Group, Name: s.in.Name, WorkflowID: SessionID(s.in.Group, s.in.Name)}
}

// run is the session's loop: wait until there is something to do, then do
// the first of: stop the agent, rotate, continue as new, ask for a task,
// prepare the worktree, reserve a turn of budget, run a turn.
func (s *session) run(ctx workflow.Context) error {
	for {
		if err := s.awaitWork(ctx, func() bool {
			_, _, due := s.rotationDue()
			return due || s.turnReady() || s.historyFull(ctx) ||
				s.needClaim() || (s.st.Stopped && !s.st.StopDone) || s.slotNotWanted()
		}); err != nil {
			return err
		}
		if s.st.Stopped {
			s.stopAgent(ctx)
			continue
		}
		if s.st.PendingMove != "" {
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
		if s.historyFull(ctx) {
			return continueAsNew(ctx, s.ladder, s.signalSelector, SessionWorkflowName, func() any {
				in := s.in
				in.State = s.st
				return in
			})
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
		ready = func() bool { return s.st.PendingMove != "" || !s.st.HostDown && (s.st.PushPending || work()) }
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

// historyFull says the session should continue as new. The main loop only
// asks between turns and rotations, never mid-rotation.
func (s *session) historyFull(ctx workflow.Context) bool {
	return historyFull(ctx, s.st.HistoryLimit)
}
