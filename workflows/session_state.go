package workflows

import (
	"strings"
	"time"

	"github.com/nid-dev/nid/activities"
	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/config"
)

// SessionState is everything a session carries across continue-as-new. It
// is made of parts, each with the fields one concern changes and the
// methods that change them; the parts are embedded without a JSON name, so
// their fields sit at the top of the state's JSON as they always did.
type SessionState struct {
	Status string `json:"status"`
	// Stopped is set by nid stop; StopDone once the agent was stopped.
	Stopped  bool `json:"stopped,omitempty"`
	StopDone bool `json:"stopDone,omitempty"`
	// HistoryLimit overrides defaultHistoryLimit (tests use a small one).
	HistoryLimit int `json:"historyLimit,omitempty"`

	ConversationState
	RotationState
	SeatState
	PlacementState
	FeedState
	AttachState
}

// ConversationState is the conversation: the prompts waiting for it, what
// it was briefed on, how full its context is, and what it last said.
type ConversationState struct {
	Conversation string        `json:"conversation,omitempty"`
	Context      ContextRecord `json:"context"`
	// Messages are the human's prompts waiting for a turn.
	Messages   []string `json:"messages,omitempty"`
	LastOutput string   `json:"lastOutput,omitempty"`
	// Briefed is true once the session's first prompt (the goal) was sent;
	// BriefedTask is the task the session was last briefed on.
	Briefed     bool   `json:"briefed,omitempty"`
	BriefedTask string `json:"briefedTask,omitempty"`
	// TurnFailures counts failed turns in a row.
	TurnFailures int `json:"turnFailures,omitempty"`
	// ContextFull is set when the vendor refused a turn because the
	// conversation no longer fits its window; a handoff clears it.
	ContextFull bool `json:"contextFull,omitempty"`
	// Generation numbers the session's conversations: one more at each
	// handoff. Agents' MCP tokens are bound to it.
	Generation int `json:"generation,omitempty"`
	// Receipts are the session's recent rotations, each with what it cost
	// and kept; Points its context after each recent turn and rotation,
	// for the chart (VersionVouchedHandoff).
	Receipts []RotationEvent `json:"receipts,omitempty"`
	Points   []ContextPoint  `json:"points,omitempty"`
}

// RotationState is what decides and follows the session's rotations: the
// group's policy and what it learned, the requests waiting, and the
// failures and breakers that hold the policy back.
type RotationState struct {
	Policy        config.Rotate  `json:"policy"`
	PendingRotate *RotateRequest `json:"pendingRotate,omitempty"`
	// Handoff is a summary the agent wrote outside a rotation; the next
	// turn boundary rotates with it.
	Handoff        string `json:"handoff,omitempty"`
	HandoffPending bool   `json:"handoffPending,omitempty"`
	// RotationAttempts numbers rotation child workflows, failed ones included,
	// so every child gets a fresh id.
	RotationAttempts int `json:"rotationAttempts"`
	// PolicyHeldAtTurn stops a failed policy rotation from retrying before
	// another turn has run: the policy is only checked when TotalTurns is
	// past it.
	PolicyHeldAtTurn int `json:"policyHeldAtTurn"`
	// RotationFailures counts failed rotations in a row.
	RotationFailures int `json:"rotationFailures,omitempty"`
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
}

// SeatState is the session's seat on its group's board: the board as last
// pushed, the task it asks for, the turns of budget it reserves and
// charges, and the rotation slot it asks for.
type SeatState struct {
	// Board is the group's board as last pushed; ClaimAsked is true while
	// a request for a task is on its way.
	Board      *BoardView `json:"board,omitempty"`
	ClaimAsked bool       `json:"claimAsked,omitempty"`
	// ReserveSeq numbers turn reservations asked of the group; UsedSeq is
	// the last one used (or given up).
	ReserveSeq int64 `json:"reserveSeq,omitempty"`
	UsedSeq    int64 `json:"usedSeq,omitempty"`
	// Unbilled is what the session spent and has not yet charged the group.
	Unbilled Charge `json:"unbilled,omitempty"`
	// SlotAsked is true from asking the group for a rotation slot until
	// giving it back; SlotSeq numbers the requests (VersionGovernor).
	SlotAsked bool  `json:"slotAsked,omitempty"`
	SlotSeq   int64 `json:"slotSeq,omitempty"`
}

// PlacementState is where the session works: its worktree and branch, the
// host it runs on and whether that host is up, and the moves between
// hosts with what they salvage and push.
type PlacementState struct {
	Worktree string `json:"worktree,omitempty"`
	Branch   string `json:"branch,omitempty"`
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

// AttachState is the hold a person has on the session with nid attach
// (VersionAttach), and what the last hand-back found. Both keys are
// omitted while empty, so a state from before the rung reads as never
// attached.
type AttachState struct {
	Attach       *AttachHold `json:"attach,omitempty"`
	LastHandback *Handback   `json:"lastHandback,omitempty"`
	// LastLease is the lease the last hand-back released, so a release
	// sent again (its answer was lost) gets the same answer.
	LastLease string `json:"lastLease,omitempty"`
}

// AttachHold is a person's hold on the session: who, from where, by which
// lease, since when and when nid attach last renewed it. Ready once the
// turn it waited for ended and the agent's process was closed; Expired
// once the lease ran out without a renewal.
type AttachHold struct {
	Who            string    `json:"who"`
	Host           string    `json:"host,omitempty"`
	Lease          string    `json:"lease"`
	Since          time.Time `json:"since"`
	RenewedAt      time.Time `json:"renewedAt"`
	Ready          bool      `json:"ready,omitempty"`
	WaitingForTurn int       `json:"waitingForTurn,omitempty"`
	Expired        bool      `json:"expired,omitempty"`
	// ReadyAt is when the hold became ready: what the vendor's records
	// say after it is the person's, before it the agent's own last turn.
	ReadyAt time.Time `json:"readyAt,omitempty"`
	// Before is the context record the person found: when they attached,
	// then, once the turn the hold waited for has ended, that turn's.
	Before ContextRecord `json:"before"`
}

// FeedState is the session's record of what happened: its recent events
// and the number of the next one.
type FeedState struct {
	Events  []Event `json:"events,omitempty"`
	NextSeq int64   `json:"nextSeq"`
}

// The state's own rules: each part's methods change that part alone;
// SessionState's methods are the few rules that read more than one.

func (st *SessionState) applyUsage(u agents.Usage, kind string, thresholds bool) {
	c := &st.Context
	c.Source = cmpOr(u.Source, agents.SourceUnknown)
	c.UsedTokens, c.WindowTokens = u.UsedTokens, u.WindowTokens
	c.Percent = UsedPercent(c.Usage)
	if thresholds {
		if u.Model != "" {
			c.Model = u.Model
		}
		st.noteThreshold(kind)
	}
}

// noteThreshold keeps the context record's threshold current, for the
// meters and the agent's context_status.
func (st *SessionState) noteThreshold(kind string) {
	c := &st.Context
	c.Threshold = nil
	if t := st.threshold(kind); t.Tokens > 0 {
		c.Threshold = &t
	}
}

// threshold is where the policy rotates this session now.
func (st *SessionState) threshold(kind string) Threshold {
	c := st.Context
	return EffectiveThreshold(st.Policy, learnedFor(st.Learned, kind, c.Model), c.WindowTokens)
}

// tookTeamPrompt notes what the prompt just taken briefed.
func (st *SessionState) tookTeamPrompt(name string) {
	if b := st.Board; b != nil {
		if t := b.HeldBy(name); t != nil {
			st.BriefedTask = t.ID
		}
	}
	st.Briefed = true
}

// keepReceipt keeps a rotation's receipt among the session's recent ones.
// A receipt keeps the summary's source and size, not its text: a hundred
// receipts of 16 KiB summaries would carry over a megabyte of state into
// every continue-as-new, and the text is in the rotation's event and the
// transcript.
func (c *ConversationState) keepReceipt(ev RotationEvent, at time.Time) {
	ev.Summary = ""
	ev.At = at
	c.Receipts = append(c.Receipts, ev)
	if len(c.Receipts) > maxReceipts {
		c.Receipts = append([]RotationEvent(nil), c.Receipts[len(c.Receipts)-maxReceipts:]...)
	}
}

// plot adds the context as it is now to the chart, marked as a rotation's
// when method is set.
func (c *ConversationState) plot(method, reason string) {
	c.plotAt(c.Context.UsedTokens, method, reason)
}

// plotAt adds a point at used tokens, for a compaction the vendor did before
// the turn's own point.
func (c *ConversationState) plotAt(used int64, method, reason string) {
	r := c.Context
	p := ContextPoint{Turn: r.TotalTurns, Used: used, Window: r.WindowTokens, Rotation: method, Reason: reason}
	if r.Threshold != nil {
		p.Threshold = r.Threshold.Tokens
	}
	c.Points = append(c.Points, p)
	if len(c.Points) > maxPoints {
		c.Points = append([]ContextPoint(nil), c.Points[len(c.Points)-maxPoints:]...)
	}
}

// turnDone takes a turn that ran: its conversation and answer, and one
// more turn on the count; the failures in a row are over.
func (c *ConversationState) turnDone(res activities.TurnResult) {
	c.TurnFailures = 0
	c.Conversation = res.Conversation
	c.LastOutput = res.Output
	c.Context.Turns++
	c.Context.TotalTurns++
}

// rotatedInto takes a rotation that worked: the conversation it left the
// session in (a handoff's is a new generation), and its first answer.
func (c *ConversationState) rotatedInto(res RotationResult, at time.Time) {
	if res.Method == config.ModeHandoff {
		c.Generation++
	}
	c.Conversation = res.NewConversation
	c.Context.rotated(RotationMark{Method: res.Method, Reason: res.Reason, At: at, OK: true})
	c.TurnFailures = 0
	if res.Output != "" {
		c.LastOutput = res.Output
	}
}

// queueMessage queues a prompt from the human; first puts it before the
// others.
func (c *ConversationState) queueMessage(text string, first bool) {
	if first {
		c.Messages = append([]string{text}, c.Messages...)
		return
	}
	c.Messages = append(c.Messages, text)
}

// rotated notes a rotation that worked, at mark: one more, and no turns
// since.
func (c *ContextRecord) rotated(mark RotationMark) {
	c.Rotations++
	c.Turns = 0
	c.LastRotation = &mark
}

// policyMode is the method of a policy rotation: the group's, but a
// handoff after a compaction that did not help.
func (r *RotationState) policyMode() string {
	if r.HandoffNext && r.Policy.Mode != config.ModeOff {
		return config.ModeHandoff
	}
	return r.Policy.Mode
}

// takeHandoff takes the summary the agent wrote outside a rotation.
func (r *RotationState) takeHandoff() string {
	summary := r.Handoff
	r.HandoffPending, r.Handoff = false, ""
	return summary
}

// learn keeps point, replacing what the session knew of its kind and
// model.
func (r *RotationState) learn(point LearnedPoint) {
	if have := learnedFor(r.Learned, point.Kind, point.Model); have != nil {
		*have = point
		return
	}
	r.Learned = append(r.Learned, point)
}

// halt stops the policy's rotations for why, forgetting the rotations
// the breaker counted.
func (r *RotationState) halt(why string) {
	r.PolicyHalted = why
	r.SelfRotations = nil
}

// unhalt starts the policy's rotations again, by its own method.
func (r *RotationState) unhalt() {
	r.PolicyHalted, r.HandoffNext = "", false
}

// selfRotated counts a rotation the session started by itself at turn
// total; thrashing says it made more than breakerRotations of them within
// breakerTurns, the last turns of which it returns.
func (r *RotationState) selfRotated(total int) (turns int, thrashing bool) {
	r.SelfRotations = append(r.SelfRotations, total)
	n := len(r.SelfRotations)
	if n <= breakerRotations {
		return 0, false
	}
	r.SelfRotations = r.SelfRotations[n-breakerRotations-1:]
	turns = total - r.SelfRotations[0]
	return turns, turns <= breakerTurns
}

// holdPolicy keeps the policy from rotating again before a turn after
// turn has run.
func (r *RotationState) holdPolicy(turn int) {
	r.PolicyHeldAtTurn = turn
}

// rotationFailed counts a failed rotation in a row and holds the policy
// back longer after each: 0, 1, 3, 7 turns more. It returns how many
// failed in a row.
func (r *RotationState) rotationFailed() int {
	r.RotationFailures++
	n := r.RotationFailures
	r.PolicyHeldAtTurn += 1<<(n-1) - 1
	return n
}

// reserving says a reservation is asked for and not yet used.
func (p *SeatState) reserving() bool { return p.ReserveSeq > p.UsedSeq }

// useReservation marks the last turn reserved used, or given up.
func (p *SeatState) useReservation() { p.UsedSeq = p.ReserveSeq }

// nextReservation numbers a new turn reservation.
func (p *SeatState) nextReservation() int64 {
	p.ReserveSeq++
	return p.ReserveSeq
}

// takeBoard keeps b as the board; a request for a task it answered is
// over.
func (p *SeatState) takeBoard(b BoardView) {
	p.Board = &b
	p.ClaimAsked = false
}

// bill adds c to what the group has not been charged yet, and returns it.
func (p *SeatState) bill(c Charge) Charge {
	u := &p.Unbilled
	u.Turns, u.Tokens, u.USD = u.Turns+c.Turns, u.Tokens+c.Tokens, u.USD+c.USD
	return *u
}

// takeUnbilled takes what the group is to be charged now.
func (p *SeatState) takeUnbilled() Charge {
	c := p.Unbilled
	p.Unbilled = Charge{}
	return c
}

// nextSlot numbers a new request for a rotation slot, asked now.
func (p *SeatState) nextSlot() int64 {
	p.SlotSeq++
	p.SlotAsked = true
	return p.SlotSeq
}

// settleHost decides the session's host once: the one the registry
// placed it on or, for a session that ran before hosts, the host whose
// queue it ran on. It says whether the session has a host.
func (p *PlacementState) settleHost(placed, activityQueue string) bool {
	if p.Host == "" {
		p.Host = placed
		if host, ok := strings.CutPrefix(activityQueue, HostQueue("")); ok && p.Host == "" {
			p.Host = host
		}
	}
	return p.Host != ""
}

// hostWentDown notes the registry's word that the host is down since now;
// the inbox has not heard of it yet.
func (p *PlacementState) hostWentDown(now time.Time) {
	p.HostDown, p.HostDownSince, p.HostDownTold = true, now, false
}

// startMove takes the move nid move asked for: the next move, from the
// host and worktree the session has, of the group's repo.
func (p *PlacementState) startMove(repo string) MoveSpec {
	to := p.PendingMove
	p.PendingMove = ""
	p.Moves++
	return MoveSpec{From: p.Host, To: to, FromDown: p.HostDown, Repo: repo, Worktree: p.Worktree, Number: p.Moves}
}

// arrived makes the host a move reached the session's host, with the
// worktree made there (withRepo: the session has one). A move that left
// the old worktree behind has no other until the next one is made with
// what the move saved.
func (p *PlacementState) arrived(res RotationResult, withRepo bool) {
	p.Host, p.HostDown, p.HostDownTold = res.ToHost, false, false
	if withRepo {
		p.Worktree, p.Salvage = res.Worktree, ""
		if res.Worktree == "" {
			p.Salvage = res.Salvage
		}
	}
}

// worktreeMade takes the worktree made for the session; what a move
// salvaged is in it now.
func (p *PlacementState) worktreeMade(res activities.WorkspaceResult) {
	p.Worktree, p.Branch, p.Salvage = res.Worktree, res.Branch, ""
}

// eventsAfter is the QueryEvents answer: the recent events after seq.
func (f *FeedState) eventsAfter(seq int64) ([]Event, error) {
	out := []Event{}
	for _, e := range f.Events {
		if e.Seq > seq {
			out = append(out, e)
		}
	}
	return out, nil
}

// add numbers e and keeps it among the recent events.
func (f *FeedState) add(e Event) {
	f.NextSeq++
	e.Seq = f.NextSeq
	f.Events = append(f.Events, e)
	if len(f.Events) > maxEvents {
		f.Events = append([]Event(nil), f.Events[len(f.Events)-maxEvents:]...)
	}
}
