package workflows

// What a session shows of itself, as QuerySession answers: its view, its
// statuses, its context record, its events and rotation receipts.

import (
	"fmt"
	"time"

	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/config"
)

type SessionView struct {
	Group string `json:"group"`
	Name  string `json:"name"`
	Agent string `json:"agent"`
	// Spec is what the session's workflow carries of its agent (the kind,
	// the sim's settings, the turn timeout); how the agent runs is the
	// worker's nid.yaml's.
	Spec          agents.AgentSpec `json:"spec"`
	Status        string           `json:"status"`
	Conversation  string           `json:"conversation,omitempty"`
	Context       ContextRecord    `json:"context"`
	Policy        config.Rotate    `json:"policy"`
	PendingRotate *RotateRequest   `json:"pendingRotate,omitempty"`
	// Rotating is the rotation running now, if any.
	Rotating *RotateRequest `json:"rotating,omitempty"`
	// HandoffPending is true when the agent wrote a handoff that the next
	// turn boundary will act on.
	HandoffPending bool `json:"handoffPending,omitempty"`
	// ContextFull is true when the vendor refused a turn because the
	// conversation no longer fits its window: a handoff runs next.
	ContextFull bool `json:"contextFull,omitempty"`
	// PolicyHalted says why the policy no longer rotates this session
	// (nid rotate still does); HandoffNext that its next policy rotation
	// is a handoff, a compaction having not helped.
	PolicyHalted   string  `json:"policyHalted,omitempty"`
	HandoffNext    bool    `json:"handoffNext,omitempty"`
	QueuedMessages int     `json:"queuedMessages"`
	QueuedBytes    int     `json:"queuedBytes"`
	LastOutput     string  `json:"lastOutput,omitempty"`
	Events         []Event `json:"events"`
	// Generation numbers the session's conversations (one more at each
	// handoff); while a rotation runs, the fresh conversation's is one
	// more than this.
	Generation int `json:"generation"`
	// Receipts are its recent rotations, oldest first; Points its context
	// after each recent turn and rotation.
	Receipts []RotationEvent `json:"receipts"`
	Points   []ContextPoint  `json:"points"`
	// Worktree and Branch are the session's own (empty without a repo);
	// WorkDir is where its agent runs.
	Worktree string `json:"worktree,omitempty"`
	Branch   string `json:"branch,omitempty"`
	WorkDir  string `json:"workdir,omitempty"`
	// Task is the task it holds; Locks the locks it holds.
	Task  *Task    `json:"task,omitempty"`
	Locks []string `json:"locks,omitempty"`
	// Rung is the rung of the version ladder (versions.go) the session's
	// run follows: DecideRotate and MessageRefusal decide by its rules, as
	// the session does, so a session that has not continued as new since
	// an upgrade is answered as it acts. Zero, in a view a test builds,
	// is the newest.
	Rung Version `json:"rung,omitempty"`
	// Host is the host it runs on (empty before VersionHosts); HostDown
	// is true while that host's worker is gone, and the session waits.
	Host     string `json:"host,omitempty"`
	HostDown bool   `json:"hostDown,omitempty"`
	// Moving is the host nid move asked for, until the move runs.
	Moving string `json:"moving,omitempty"`
	// Attach is who holds the session with nid attach, while they do;
	// LastHandback what the last hand-back found.
	Attach       *AttachView `json:"attach,omitempty"`
	LastHandback *Handback   `json:"lastHandback,omitempty"`
}

// Session statuses.
const (
	StatusIdle           = "idle"
	StatusWorking        = "working"
	StatusRotating       = "rotating"
	StatusRateLimited    = "rate-limited"
	StatusPaused         = "paused"
	StatusNeedsAttention = "needs-attention"
	StatusStopped        = "stopped"
	// StatusRetrying: a turn failed and the session waits a little before
	// it tries again.
	StatusRetrying = "retrying"
	// StatusWaitingToRotate: a rotation is due, and the session waits for
	// one of its group's rotation slots (maxConcurrentRotations).
	StatusWaitingToRotate = "waiting-to-rotate"
	// StatusHostDown: the session's host is down, and it waits for it
	// (VersionHosts).
	StatusHostDown = "host-down"
)

// Why a rotation happened.
const (
	ReasonContext  = "context"  // context percent reached the policy's threshold
	ReasonMaxTurns = "maxTurns" // turns since the last rotation reached maxTurns
	ReasonManual   = "manual"   // nid rotate, the Rotate button, session.rotate
	ReasonAgent    = "agent"    // the agent called handoff_write by itself
	ReasonVendor   = "vendor"   // the agent's CLI compacted by itself
	// ReasonContextFull: the vendor refused a turn because the conversation
	// no longer fits its window; only a handoff helps.
	ReasonContextFull = "context-full"
	// ReasonMove: nid move hands the session off onto another host.
	ReasonMove = "move"
)

// ContextRecord is Session.context: how full the session's context is, where
// the numbers came from, and its rotations.
type ContextRecord struct {
	// Usage is the agent's last report of its context: the tokens used,
	// the window, where the numbers came from, and the model the
	// conversation runs on, when known. Embedded, so its fields are the
	// record's in JSON.
	agents.Usage
	// Percent is nil when the window or the use is unknown: a meter never
	// shows a guess as a fact (see UsedPercent).
	Percent *float64 `json:"percent,omitempty"`
	// Turns counts turns since the last rotation.
	Turns        int           `json:"turns"`
	TotalTurns   int           `json:"totalTurns"`
	Rotations    int           `json:"rotations"`
	LastRotation *RotationMark `json:"lastRotation,omitempty"`
	// Threshold is where the policy rotates it, when that can be known.
	Threshold *Threshold `json:"threshold,omitempty"`
}

// UsedPercent is the part of its window u says the context fills, in
// percent: nil when the window or the use is unknown. It is the one place
// the percent nid shows (nid ls, the dashboard, context_status) is made.
func UsedPercent(u agents.Usage) *float64 {
	if u.Source == "" || u.Source == agents.SourceUnknown || u.WindowTokens <= 0 {
		return nil
	}
	p := float64(u.UsedTokens) * 100 / float64(u.WindowTokens)
	return &p
}

// RotationMark is the context record's note of the last rotation.
type RotationMark struct {
	Method string    `json:"method"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
	OK     bool      `json:"ok"`
}

// Text is the rotation in words: "compact (context) ok".
func (r RotationMark) Text() string {
	outcome := "ok"
	if !r.OK {
		outcome = "failed"
	}
	return fmt.Sprintf("%s (%s) %s", r.Method, r.Reason, outcome)
}

// Event is one line of a session's feed.
type Event struct {
	Seq      int64          `json:"seq"`
	At       time.Time      `json:"at"`
	Group    string         `json:"group"`
	Session  string         `json:"session"`
	Kind     string         `json:"kind"`
	Text     string         `json:"text"`
	Rotation *RotationEvent `json:"rotation,omitempty"`
	// Context is the context record after a turn event.
	Context *ContextRecord `json:"context,omitempty"`
}

// Event kinds.
const (
	EventStarted        = "started"
	EventTurn           = "turn"
	EventRotation       = "rotation"
	EventRotationFailed = "rotation-failed"
	EventRotateQueued   = "rotate-queued"
	EventHandoffWritten = "handoff-written"
	EventHandoffAck     = "handoff-ack"
	EventMessage        = "message"
	EventPolicy         = "policy"
	EventTurnFailed     = "turn-failed"
	EventConfig         = "config"
	EventResumed        = "resumed"
	EventTask           = "task"
	EventBudget         = "budget"
	EventStopped        = "stopped"
	EventRateLimited    = "rate-limited"
	EventHost           = "host"
)

// RotationEvent is the rotation part of an Event.
type RotationEvent struct {
	Number          int    `json:"number"`
	Method          string `json:"method"`
	Reason          string `json:"reason"`
	OK              bool   `json:"ok"`
	FellBack        bool   `json:"fellBack,omitempty"`
	OldConversation string `json:"oldConversation,omitempty"`
	NewConversation string `json:"newConversation,omitempty"`
	Summary         string `json:"summary,omitempty"`
	SummarySource   string `json:"summarySource,omitempty"`
	BeforeTokens    int64  `json:"beforeTokens"`
	AfterTokens     int64  `json:"afterTokens"`
	Error           string `json:"error,omitempty"`
	// Cancelled says nid stop cancelled the rotation before it ended
	// (VersionLostTurns): its number is taken, and nothing changed.
	Cancelled bool `json:"cancelled,omitempty"`

	// The receipt (VersionVouchedHandoff): what the rotation itself cost,
	// how big its summary was, the facts nid read, and whether the fresh
	// conversation acknowledged what it resumes.
	CostTokens   int64        `json:"costTokens,omitempty"`
	CostUSD      float64      `json:"costUSD,omitempty"`
	SummaryBytes int          `json:"summaryBytes,omitempty"`
	Facts        *FactsDigest `json:"facts,omitempty"`
	Verified     string       `json:"verified,omitempty"`
	VerifyNote   string       `json:"verifyNote,omitempty"`
	// FactsNote says why nid could not read the facts (VersionCheckedInput):
	// a worktree whose .git file or commondir an agent pointed elsewhere
	// is refused, not followed, and the human hears of it.
	FactsNote string `json:"factsNote,omitempty"`
	// At is when the session took the rotation's result: set on the
	// receipts a session keeps (SessionView.Receipts), whose summary text
	// is left to the event and the transcript.
	At time.Time `json:"at,omitzero"`

	// A move (nid move, VersionHosts): the host left and the host
	// arrived on, the salvage ref of the uncommitted work (empty: none, or
	// the old host was down), where the branch was pushed, and the fresh
	// worktree on the new host.
	FromHost string `json:"fromHost,omitempty"`
	ToHost   string `json:"toHost,omitempty"`
	Salvage  string `json:"salvage,omitempty"`
	Pushed   string `json:"pushed,omitempty"`
	Worktree string `json:"worktree,omitempty"`
}

// ContextPoint is the session's context after one turn or rotation, for
// the chart of its context over time.
type ContextPoint struct {
	Turn   int   `json:"turn"`
	Used   int64 `json:"used"`
	Window int64 `json:"window,omitempty"`
	// Threshold is where the policy rotated it then, in tokens (0:
	// unknown).
	Threshold int64 `json:"threshold,omitempty"`
	// Rotation is the method when the point is a rotation's (compact,
	// handoff), with its Reason (vendor for the CLI's own compaction).
	Rotation string `json:"rotation,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// FactsDigest is what a rotation's receipt keeps of the facts nid read: not
// the diff, only where the work stood.
type FactsDigest struct {
	Repo    bool   `json:"repo"`
	Branch  string `json:"branch,omitempty"`
	Head    string `json:"head,omitempty"`
	Commits int    `json:"commits"`
	Changed int    `json:"changed"`
}
