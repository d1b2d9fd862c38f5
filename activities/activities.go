// Package activities is the layer Temporal calls for nid's workflows: a
// turn, a compaction, a stop, a worktree, the facts of a fresh
// conversation, a move's salvage and push, each as an activity.
//
// Each activity checks its input (names only: a session's group and name,
// never a path, a command or a URL), finds what the session needs in the
// worker's own nid.yaml and records (places.go), calls an adapter or the
// git runner of package agents, and records the result. Build one
// Activities value in the worker with the agents this host can run and
// register its methods under the names below.
package activities

import "github.com/nid-dev/nid/agents"

// Activity type names. They are stable: renaming a method must not strand
// running workflow histories.
const (
	RunTurnName   = "nid.RunTurn"
	CompactName   = "nid.Compact"
	StopAgentName = "nid.StopAgent"
	// PrepareWorkspaceName creates a session's worktree and branch.
	PrepareWorkspaceName = "nid.PrepareWorkspace"
)

// Error types workflows branch on (temporal.ApplicationError types): the
// adapters' (see agents.Error), which no retry can fix.
const (
	ErrUnknownAgent       = agents.ErrUnknownAgent
	ErrBadInput           = agents.ErrBadInput
	ErrAgentFailed        = agents.ErrAgentFailed
	ErrContextFull        = agents.ErrContextFull
	ErrSandboxUnavailable = agents.ErrSandboxUnavailable
)

// MaxOutputBytes bounds the agent output kept in workflow history; the rest
// stays with the agent's own transcript.
const MaxOutputBytes = 4 << 10

// TurnInput is one turn for a session.
type TurnInput struct {
	Session      agents.SessionRef `json:"session"`
	Spec         agents.AgentSpec  `json:"spec"`
	Conversation string            `json:"conversation,omitempty"`
	Prompt       string            `json:"prompt"`
	Kind         string            `json:"kind"`
	// Generation numbers the session's conversations: it grows by one at
	// each handoff. The agent's MCP token is bound to it, so a
	// conversation rotated away cannot act.
	Generation int `json:"generation,omitempty"`
}

// TurnResult is a turn's report with the output cut to MaxOutputBytes.
type TurnResult struct {
	agents.TurnReport
	// OutputDigest is the SHA-256 of the whole output, hex.
	OutputDigest string `json:"outputDigest"`
	// OutputBytes is the length of the whole output.
	OutputBytes int `json:"outputBytes"`
}

// CompactInput asks for a compaction of a session's conversation.
type CompactInput struct {
	Session      agents.SessionRef `json:"session"`
	Spec         agents.AgentSpec  `json:"spec"`
	Conversation string            `json:"conversation"`
	// Generation is the conversation's (see TurnInput.Generation): a
	// compaction keeps it. An agent process the compaction starts gets
	// this generation's MCP token.
	Generation int `json:"generation,omitempty"`
}

// StopInput ends a session's agent process.
type StopInput struct {
	Session      agents.SessionRef `json:"session"`
	Spec         agents.AgentSpec  `json:"spec"`
	Conversation string            `json:"conversation"`
}

// StopResult is empty; it exists so the activity's signature can grow.
type StopResult struct{}
