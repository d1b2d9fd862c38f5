// Package activities runs agents for nid's workflows: one turn, one
// compaction, one stop at a time, each as a Temporal activity.
//
// Build one Activities value in the worker with the agents this host can run
// and register its methods under the names below. Adapters implement Agent;
// the built-in sim agent needs nothing but nid's own MCP endpoint.
package activities

// Activity type names. They are stable: renaming a method must not strand
// running workflow histories.
const (
	RunTurnName   = "nid.RunTurn"
	CompactName   = "nid.Compact"
	StopAgentName = "nid.StopAgent"
	// PrepareWorkspaceName creates a session's worktree and branch.
	PrepareWorkspaceName = "nid.PrepareWorkspace"
)

// Error types workflows branch on (temporal.ApplicationError types). All are
// non-retryable: retrying cannot fix them.
const (
	// ErrUnknownAgent is an agent this host cannot run: no adapter for
	// its kind, or (the checks nid doctor shares with every turn) its CLI
	// is not installed or nothing it could log in with is found. The
	// message says what to install or set.
	ErrUnknownAgent = "UnknownAgent"
	ErrBadInput     = "BadInput"    // the request itself is malformed
	ErrAgentFailed  = "AgentFailed" // the agent ran and reported a failure it cannot recover from
	// ErrContextFull is a turn the vendor refused because the conversation
	// no longer fits its context window: only a fresh conversation helps.
	ErrContextFull = "ContextFull"
	// ErrSandboxUnavailable is an agent nid would not start because the
	// sandbox its permissions ask for cannot work on this host (bubblewrap
	// missing, user namespaces refused, a kind with no sandbox). The
	// message says what to install, or to set permissions: full. nid never
	// runs such an agent unsandboxed instead.
	ErrSandboxUnavailable = "SandboxUnavailable"
)

// MaxOutputBytes bounds the agent output kept in workflow history; the rest
// stays with the agent's own transcript.
const MaxOutputBytes = 4 << 10

// TurnInput is one turn for a session.
type TurnInput struct {
	Session      SessionRef `json:"session"`
	Spec         AgentSpec  `json:"spec"`
	Conversation string     `json:"conversation,omitempty"`
	Prompt       string     `json:"prompt"`
	Kind         string     `json:"kind"`
	// Generation numbers the session's conversations: it grows by one at
	// each handoff. The agent's MCP token is bound to it, so a
	// conversation rotated away cannot act.
	Generation int `json:"generation,omitempty"`
}

// TurnResult is a turn's report with the output cut to MaxOutputBytes.
type TurnResult struct {
	TurnReport
	// OutputDigest is the SHA-256 of the whole output, hex.
	OutputDigest string `json:"outputDigest"`
	// OutputBytes is the length of the whole output.
	OutputBytes int `json:"outputBytes"`
}

// CompactInput asks for a compaction of a session's conversation.
type CompactInput struct {
	Session      SessionRef `json:"session"`
	Spec         AgentSpec  `json:"spec"`
	Conversation string     `json:"conversation"`
	// Generation is the conversation's (see TurnInput.Generation): a
	// compaction keeps it. An agent process the compaction starts gets
	// this generation's MCP token.
	Generation int `json:"generation,omitempty"`
}

// StopInput ends a session's agent process.
type StopInput struct {
	Session      SessionRef `json:"session"`
	Spec         AgentSpec  `json:"spec"`
	Conversation string     `json:"conversation"`
}

// StopResult is empty; it exists so the activity's signature can grow.
type StopResult struct{}
