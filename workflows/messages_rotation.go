package workflows

// The rotation child workflow's input and result.

import (
	"github.com/nid-dev/nid/agents"
)

// ======== Rotation: nid/<group>/<session>/rotation-<n> ========

// RotationInput is what a rotation child workflow needs.
type RotationInput struct {
	Number        int               `json:"number"`
	Session       agents.SessionRef `json:"session"`
	Spec          agents.AgentSpec  `json:"spec"`
	ActivityQueue string            `json:"activityQueue"`
	Conversation  string            `json:"conversation"`
	Method        string            `json:"method"` // auto | compact | handoff
	Reason        string            `json:"reason"`
	// Summary is the handoff the agent already wrote, if any.
	Summary string `json:"summary,omitempty"`
	// LastOutput stands in for a summary the agent never writes.
	LastOutput string `json:"lastOutput,omitempty"`
	// Board is what board_read shows, for the fresh conversation.
	Board        string `json:"board,omitempty"`
	BeforeTokens int64  `json:"beforeTokens"`
	// WorkDir is where the agent runs.
	WorkDir string `json:"workdir,omitempty"`
	// Held are the ids of the tasks and the names of the locks the session
	// holds, which the fresh conversation's acknowledgement is checked
	// against (VersionVouchedHandoff).
	HeldTasks []string `json:"heldTasks,omitempty"`
	HeldLocks []string `json:"heldLocks,omitempty"`
	// Generation is the session's conversation generation: the old
	// conversation's turns run with it, the fresh one's with one more.
	Generation int `json:"generation,omitempty"`
	// Move, when set, makes the handoff a move onto another host.
	Move *MoveSpec `json:"move,omitempty"`
}

// MoveSpec is what a rotation needs to move a session: the hosts, whether
// the one it leaves is down (nothing can be asked or saved there), and the
// worktree to save and make again (empty without a repo).
type MoveSpec struct {
	From     string `json:"from"`
	To       string `json:"to"`
	FromDown bool   `json:"fromDown,omitempty"`
	Repo     string `json:"repo,omitempty"`
	Worktree string `json:"worktree,omitempty"`
	// Number numbers the session's moves, for its salvage ref.
	Number int `json:"number"`
}

// RotationResult is a rotation's outcome.
type RotationResult struct {
	RotationEvent
	// Usage is the context after the rotation, as the agent reported it.
	Usage agents.Usage `json:"usage"`
	// Output is the fresh conversation's first answer, if there was one.
	Output string `json:"output,omitempty"`
	// CompactError says why a compaction failed before an auto fallback.
	CompactError string `json:"compactError,omitempty"`
	// Stuck is true when the session has no working conversation left.
	Stuck bool `json:"stuck,omitempty"`
	// Cost is what the rotation's turns cost, charged to the group.
	Cost Charge `json:"cost"`
}

// Where a handoff summary came from.
const (
	SummaryFromAgent      = "agent"       // handoff_write
	SummaryFromNid        = "nid"         // nid built it from the transcript: the agent gave none
	SummaryFromLastOutput = "last-output" // the agent never wrote one, and the transcript had nothing
)

// Whether a fresh conversation acknowledged what it resumes (handoff_ack)
// as the board says.
const (
	VerifiedTrue  = "true"  // it named the tasks it holds
	VerifiedFalse = "false" // it named others
	VerifiedNone  = "none"  // it did not say
	// VerifiedNotAsked: its kind calls no tools, so nothing asked it to
	// acknowledge (VersionLostTurns; before, such a handoff was none).
	VerifiedNotAsked = "not-asked"
)
