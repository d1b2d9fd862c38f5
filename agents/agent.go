package agents

import (
	"context"
	"regexp"
	"time"

	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/internal/clip"
)

// Where a context record's numbers came from.
const (
	SourceReported   = "reported"   // the agent printed them
	SourceConfigured = "configured" // the window comes from config, the use from the agent
	SourceUnknown    = "unknown"    // the agent reports nothing
)

// Turn kinds, so an adapter can tell a rotation's turns from work.
const (
	TurnWork           = "work"            // an ordinary prompt
	TurnHandoffRequest = "handoff-request" // asks the agent to call handoff_write
	TurnFresh          = "fresh"           // first message of a fresh conversation after a handoff
)

// AgentSpec says which agent a session runs. It travels in workflow input
// and history, where anything that can signal the workflow can change it, so
// it decides nothing that runs: the command, arguments, environment and model
// of a process agent come from the worker's own nid.yaml at activity time
// (see Activities.Settings), and a spec whose kind differs from what that
// file gives the session is refused. Histories from before this still carry
// "command" and "model"; decoding ignores them.
type AgentSpec struct {
	Kind string     `json:"kind"`
	Sim  config.Sim `json:"sim,omitempty"`
	// TurnTimeout sizes the workflow's activity timeout for one turn; zero
	// means config.DefaultTurnTimeout. The process itself is bounded by the
	// worker's own setting.
	TurnTimeout config.Duration `json:"turnTimeout,omitempty"`
}

// Process is how the worker runs a process agent for one session, all of it
// from the worker's own nid.yaml. It never leaves the worker.
type Process struct {
	// Kind is the agent kind, whose entry names the worker's variables
	// the process gets (Kind.Env).
	Kind    string
	Command string
	Args    []string
	// Env is the session's env: from nid.yaml, added to what ProcessEnv
	// takes from the worker's environment.
	Env     map[string]string
	Model   string
	WorkDir string
	Timeout time.Duration
	// PidDir records the process while it runs (see ReapOrphans); empty:
	// not recorded.
	PidDir string
	// Permissions is what the agent may change (config.PermissionsModes);
	// empty means config.DefaultPermissions. Network says whether its
	// commands may reach the network when it runs sandboxed: the worker
	// resolves it from nid.yaml, else from its kind's entry (Kind.Network).
	Permissions string
	Network     bool
	// TempDir is the session's own directory for temporary files and
	// caches, which its sandbox lets it write; empty means none.
	TempDir string
	// GitDirs is the file recording where the session's worktree keeps its
	// git directories (see recordGitDirs); empty means none.
	GitDirs string
	// Window is the context window nid.yaml gives the session (its
	// window key), for an agent that reports its use but not its window;
	// 0: none (see Usage.WithWindow).
	Window int64
	// StateDir is nid's state directory, absolute; empty means none. Its
	// credentials and the other sessions' places in it are kept out of a
	// sandboxed agent's reads (see readPolicy).
	StateDir string
}

// Sandboxed reports whether the process runs in its vendor's sandbox.
func (p Process) Sandboxed() bool { return p.Permissions != config.PermissionsFull }

// readonly reports whether the process may change nothing.
func (p Process) readonly() bool { return p.Permissions == config.PermissionsReadonly }

// network reports whether the process's commands may reach the network:
// always without a sandbox, else as Network says.
func (p Process) network() bool { return !p.Sandboxed() || p.Network }

// SessionRef names a session and what it needs on this host.
type SessionRef struct {
	Group string `json:"group"`
	Name  string `json:"name"`
	// WorkflowID is the session workflow's id, used by the MCP endpoint to
	// route the agent's tool calls back to its own session.
	WorkflowID string `json:"workflowID"`
}

// SessionWorkflowID is the workflow id of a session: nid/<group>/<session>.
func SessionWorkflowID(group, name string) string { return "nid/" + group + "/" + name }

// CheckSession refuses a ref whose group or session is not a name nid.yaml
// could hold (adapters and activities build paths from them), and sets
// its workflow id from them: the one in the input is not believed.
func CheckSession(ref *SessionRef) error {
	for _, part := range []struct{ what, name string }{{"group", ref.Group}, {"session", ref.Name}} {
		if !config.ValidName(part.name) {
			return BadInput("%s %q is not a name: %s", part.what, clip.Runes(part.name, 80), config.NameRule)
		}
	}
	ref.WorkflowID = SessionWorkflowID(ref.Group, ref.Name)
	return nil
}

// MaxConversationBytes bounds a vendor's conversation id: theirs are
// UUIDs.
const MaxConversationBytes = 128

// conversationID is what a vendor's conversation id is made of. It starts
// with a letter or digit: an id reaches the vendor CLI's command line
// (claude --resume, codex resume), where one starting with '-' would be
// an option of the attacker's, such as an MCP server to start.
var conversationID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]*$`)

// CheckConversation refuses a conversation id, from a session's record or
// a vendor's, that is not one a vendor CLI makes.
func CheckConversation(conv string) error {
	if len(conv) > MaxConversationBytes || !conversationID.MatchString(conv) {
		return BadInput("%q is not a conversation id: one is letters, digits, '.', '_', ':' and '-', starting with a letter or digit, at most %d bytes",
			clip.Runes(conv, 80), MaxConversationBytes)
	}
	return nil
}

// Usage is what an agent said about its context after a turn.
type Usage struct {
	UsedTokens   int64  `json:"usedTokens"`
	WindowTokens int64  `json:"windowTokens"`
	Source       string `json:"source"`
	// Model is the model the conversation runs on, when the agent says or
	// the worker configured one: where a vendor compacts by itself depends
	// on it.
	Model string `json:"model,omitempty"`
}

// WithWindow is u with window, the one nid.yaml configures for the
// session, when the agent reported what its conversation holds but not its
// window: the use is the agent's, the window the configuration's
// (SourceConfigured). A window the agent reports wins, and an agent that
// reports nothing still reports nothing.
func (u Usage) WithWindow(window int64) Usage {
	if window > 0 && u.Source == SourceReported && u.WindowTokens <= 0 {
		u.WindowTokens, u.Source = window, SourceConfigured
	}
	return u
}

// VendorCompaction is a compaction the agent's CLI did by itself inside a
// turn (Claude Code's auto-compact, Codex's contextCompaction item).
type VendorCompaction struct {
	BeforeTokens int64 `json:"beforeTokens"`
	AfterTokens  int64 `json:"afterTokens"`
}

// EnvMCPToken is the variable that carries the session's MCP token to
// Claude Code and Codex, which send it as a bearer token.
const EnvMCPToken = "NIDAGENT_MCP_TOKEN"

// MCPAccess is how an agent reaches its session's own MCP endpoint. The
// token is a secret of one conversation of the session (its generation):
// it goes to the agent in a header read from the agent's environment, never
// on a command line, which every local user can read.
type MCPAccess struct {
	// URL is the endpoint without the token.
	URL string
	// Token authenticates the session: "Authorization: Bearer <Token>".
	Token string
}

// TokenURL is the endpoint with the token as its last path segment, for
// agents that cannot send a header (an exec agent gets it in
// NIDAGENT_MCP_URL). Empty when there is no endpoint.
func (m MCPAccess) TokenURL() string {
	if m.URL == "" || m.Token == "" {
		return m.URL
	}
	return m.URL + "/" + m.Token
}

// TurnRequest is one prompt for an agent.
type TurnRequest struct {
	Session SessionRef `json:"session"`
	Spec    AgentSpec  `json:"spec"`
	// Conversation is the vendor conversation to continue; empty starts a
	// new one.
	Conversation string `json:"conversation,omitempty"`
	Prompt       string `json:"prompt"`
	Kind         string `json:"kind"`
	// Generation numbers the session's conversations, one more at each
	// handoff (TurnInput.Generation): the sim numbers a new conversation
	// after it, so a session moved to a host that never saw it goes on
	// from its number there too.
	Generation int `json:"generation,omitempty"`
	// MCP is the session's own MCP endpoint.
	MCP MCPAccess `json:"-"`
	// StateDir is where the agent may keep per-session files.
	StateDir string `json:"stateDir"`
	// Process is how to run the agent; the sim ignores it.
	Process Process `json:"-"`
	// RateLimited, when set, is told mid-turn that the vendor is answering
	// 429 or 529 and the CLI is retrying (true), and when it is over (false).
	RateLimited func(limited bool) `json:"-"`
	// ToolCalled, when set, is told of each tool the agent calls, in short
	// (the tool's name and a clipped argument), for the session's
	// transcript.
	ToolCalled func(call string) `json:"-"`
}

// toolCalled reports a tool call to ToolCalled, if anyone listens.
func (r TurnRequest) toolCalled(call string) {
	if r.ToolCalled != nil {
		r.ToolCalled(call)
	}
}

// TurnReport is what came back from one turn.
type TurnReport struct {
	Conversation string            `json:"conversation"`
	Output       string            `json:"output"`
	Usage        Usage             `json:"usage"`
	Vendor       *VendorCompaction `json:"vendor,omitempty"`
	RateLimited  bool              `json:"rateLimited,omitempty"`
	// BilledTokens is what the turn cost in tokens, when the agent says
	// (0: the context it sent stands in); CostUSD likewise in dollars.
	BilledTokens int64   `json:"billedTokens,omitempty"`
	CostUSD      float64 `json:"costUSD,omitempty"`
}

// CompactRequest asks an agent to compact its conversation in place.
type CompactRequest struct {
	Session      SessionRef `json:"session"`
	Spec         AgentSpec  `json:"spec"`
	Conversation string     `json:"conversation"`
	MCP          MCPAccess  `json:"-"`
	StateDir     string     `json:"stateDir"`
	// Process is how to run the agent; the sim ignores it.
	Process Process `json:"-"`
}

// CompactReport is the vendor's answer to a compaction. OK is true only when
// the vendor confirmed it.
type CompactReport struct {
	OK           bool   `json:"ok"`
	Conversation string `json:"conversation"`
	BeforeTokens int64  `json:"beforeTokens"`
	AfterTokens  int64  `json:"afterTokens"`
	Usage        Usage  `json:"usage"`
	// Detail says why a compaction the vendor refused failed.
	Detail string `json:"detail,omitempty"`
}

// StopRequest ends an agent's process for a session.
type StopRequest struct {
	Session      SessionRef `json:"session"`
	Spec         AgentSpec  `json:"spec"`
	Conversation string     `json:"conversation"`
	StateDir     string     `json:"stateDir"`
	// Process is how to run the agent; the sim ignores it.
	Process Process `json:"-"`
}

// Tools nid serves every agent over MCP, by the names agents call them.
const (
	ToolHandoffWrite = "handoff_write"
	ToolBoardRead    = "board_read"
	ToolTaskClaim    = "task_claim"
	ToolTaskDone     = "task_done"
	ToolLockAcquire  = "lock_acquire"
	ToolLockRelease  = "lock_release"
	// ToolContextStatus shows the agent how full its own context is and
	// where nid rotates it.
	ToolContextStatus = "context_status"
	// ToolHandoffAck is how a fresh conversation says which tasks it
	// resumes, which nid checks against the board.
	ToolHandoffAck = "handoff_ack"
)

// Agent is what every vendor adapter implements. Implementations must be
// safe for concurrent use by different sessions.
type Agent interface {
	Turn(ctx context.Context, req TurnRequest) (TurnReport, error)
	Compact(ctx context.Context, req CompactRequest) (CompactReport, error)
	Stop(ctx context.Context, req StopRequest) error
}
