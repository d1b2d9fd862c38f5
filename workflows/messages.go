package workflows

// messages.go names every workflow, signal, query and update nid has, with
// their payloads, grouped by the workflow that receives them: first what
// all of them share (names, ids), then the session's, the rotation's and
// the group's, then the search attributes. The CLI, the HTTP server and the
// MCP endpoint use these names and never spell one twice.

import (
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/config"
)

// Workflow type names, registered explicitly so renaming a Go function never
// strands a running history.
const (
	SessionWorkflowName  = "nid.Session"
	RotationWorkflowName = "nid.Rotation"
	GroupWorkflowName    = "nid.Group"
	HostsWorkflowName    = "nid.Hosts"
)

// TaskQueue is the queue every worker polls for workflow tasks. Activities
// run on a per-host queue (SessionInput.ActivityQueue) because worktrees and
// agent processes live on one host.
const TaskQueue = "nid"

// HostQueue is the task queue of host's activities: the turns, rotations
// and git work of the sessions placed there.
func HostQueue(host string) string { return "nid@" + host }

// HostsID is the workflow id of the hosts registry.
const HostsID = "nid/hosts"

// SessionID is the workflow id of a session: nid/<group>/<session>.
func SessionID(group, name string) string { return agents.SessionWorkflowID(group, name) }

// GroupID is the workflow id of a group: nid/<group>.
func GroupID(group string) string { return "nid/" + group }

// RotationID is the workflow id of a session's n-th rotation.
func RotationID(group, name string, n int) string {
	return fmt.Sprintf("%s/rotation-%d", SessionID(group, name), n)
}

// ValidName reports whether s may name a group or a session (the rule is
// config.ValidName's: names are parts of workflow ids and URLs).
func ValidName(s string) bool { return config.ValidName(s) }

// ParseSessionRef splits "group/session".
func ParseSessionRef(ref string) (group, name string, err error) {
	group, name, ok := strings.Cut(ref, "/")
	if !ok || !ValidName(group) || !ValidName(name) {
		return "", "", fmt.Errorf("%q is not a session: write GROUP/SESSION, e.g. web/lead", ref)
	}
	return group, name, nil
}

// ======== Session: nid/<group>/<session> ========

// Signals a session receives.
const (
	// SignalRotate carries a RotateRequest from `nid rotate`, the dashboard
	// or HTTP session.rotate.
	SignalRotate = "rotate"
	// SignalHandoffWrite carries a HandoffWrite: the agent called its
	// handoff_write tool. A session hands it to its running rotation, if
	// any.
	SignalHandoffWrite = "handoff_write"
	// SignalHandoffAck carries a HandoffAck: a fresh conversation said
	// which tasks it resumes. A session hands it to its running rotation.
	SignalHandoffAck = "handoff_ack"
	// SignalMessage carries a Message from the human: the session's next prompt.
	SignalMessage = "message"
	// SignalPolicy carries a PolicyChange from the group to its sessions.
	SignalPolicy = "policy"
	// SignalConfig carries a SessionConfig: what nid.yaml says of a session
	// when nid up starts or finds it.
	SignalConfig = "config"
	// SignalRateLimit carries a RateLimit from a running turn: the vendor
	// answers 429 or 529 and the agent's CLI is retrying, or got through.
	SignalRateLimit = "rate_limit"
	// SignalBoard carries a BoardView from the group to its sessions after
	// every change.
	SignalBoard = "board"
	// SignalStop carries a StopRequest: the session stops its agent and
	// takes no more turns.
	SignalStop = "stop"
	// SignalStart carries a SessionStart: a stopped session works again.
	SignalStart = "start"
	// SignalHost carries a HostState from the hosts registry: the
	// session's host went down or came back.
	SignalHost = "host"
	// SignalMove carries a MoveRequest from `nid move`: the session hands
	// off onto another host.
	SignalMove = "move"
	// SignalCannotStart carries a CannotStart from the worker that applied
	// nid.yaml: the session's agent cannot run on its host, so it needs
	// attention before any turn tries (VersionLostTurns).
	SignalCannotStart = "cannot_start"
)

// MoveRequest asks a session to move to Host.
type MoveRequest struct {
	Host string `json:"host"`
}

// CannotStart says why a session's agent cannot run on Host (empty: the
// session's host, whichever it is), in the words of nid doctor's check.
type CannotStart struct {
	Host string `json:"host,omitempty"`
	Text string `json:"text"`
}

// Queries a session answers.
const (
	// QuerySession returns a SessionView.
	QuerySession = "session"
	// QueryEvents takes a sequence number and returns the session's recent
	// events after it ([]Event).
	QueryEvents = "events"
)

// RotateRequest asks a session to rotate. An empty Mode means the group's
// mode, or auto when the group says off.
type RotateRequest struct {
	Mode   string `json:"mode,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// HandoffWrite is the agent's handoff_write(summary) call.
type HandoffWrite struct {
	Summary string `json:"summary"`
}

// HandoffAck is the agent's handoff_ack(tasks) call: the ids of the tasks a
// fresh conversation says it resumes.
type HandoffAck struct {
	Tasks []string `json:"tasks"`
	// Generation is the conversation that called it, as its MCP token
	// says: only the fresh conversation's acknowledgement counts.
	Generation int `json:"generation"`
}

// MaxSummaryBytes bounds a handoff summary: it travels in workflow history and
// into the fresh conversation's first message.
const MaxSummaryBytes = 16 << 10

// Message is a prompt from the human for a session's next turn.
type Message struct {
	Text string `json:"text"`
}

// SessionConfig is a session's goal and agent settings as the file says
// them; a running session takes them from its next turn on.
type SessionConfig struct {
	Goal string           `json:"goal,omitempty"`
	Spec agents.AgentSpec `json:"spec"`
}

// RateLimit says whether a session's running turn is held up by the
// vendor's rate limiting or overload.
type RateLimit struct {
	Limited bool `json:"limited"`
}

// PolicyChange is the group's new rotate policy pushed to its sessions,
// with what it learned of vendors that compact by themselves.
type PolicyChange struct {
	Rotate  config.Rotate  `json:"rotate"`
	Learned []LearnedPoint `json:"learned,omitempty"`
}

// SessionInput starts (or continues as new) a session workflow.
type SessionInput struct {
	Group  string           `json:"group"`
	Name   string           `json:"name"`
	Goal   string           `json:"goal,omitempty"`
	Spec   agents.AgentSpec `json:"spec"`
	Policy config.Rotate    `json:"policy"`
	// Learned is what the group has learned of vendors that compact by
	// themselves when the session starts: a session that joins later
	// rotates before them as its siblings do. Read on first start only.
	Learned       []LearnedPoint `json:"learned,omitempty"`
	ActivityQueue string         `json:"activityQueue"`
	// Host is where the session runs, as the hosts registry placed it
	// (VersionHosts); its activities go to HostQueue(Host). Empty in a
	// session started before hosts: ActivityQueue says where it runs.
	Host string `json:"host,omitempty"`
	// Repo is the group's git repository (each session gets a worktree);
	// WorkDir the shared working directory without one.
	Repo    string `json:"repo,omitempty"`
	WorkDir string `json:"workdir,omitempty"`
	// State is nil on first start and carries everything across
	// continue-as-new.
	State *SessionState `json:"state,omitempty"`
}

// SessionView is the QuerySession answer: the Session object.
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
	UsedTokens   int64 `json:"usedTokens"`
	WindowTokens int64 `json:"windowTokens"`
	// Percent is nil when the window or the use is unknown: a meter never
	// shows a guess as a fact.
	Percent *float64 `json:"percent,omitempty"`
	Source  string   `json:"source"`
	// Turns counts turns since the last rotation.
	Turns        int           `json:"turns"`
	TotalTurns   int           `json:"totalTurns"`
	Rotations    int           `json:"rotations"`
	LastRotation *RotationMark `json:"lastRotation,omitempty"`
	// Model is the model the conversation runs on, when known.
	Model string `json:"model,omitempty"`
	// Threshold is where the policy rotates it, when that can be known.
	Threshold *Threshold `json:"threshold,omitempty"`
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

// ======== Group: nid/<group> ========

// Signals a group receives.
const (
	// SignalInbox carries an InboxItem from a session to its group.
	SignalInbox = "inbox"
	// SignalCharge carries a Charge from a session to its group.
	SignalCharge = "charge"
	// SignalClaimNext carries a ClaimNext: a session without a task asks
	// the group for the next open one.
	SignalClaimNext = "claim_next"
	// SignalReserve carries a Reserve: a session of a group with a budget
	// asks for one turn before it starts it.
	SignalReserve = "reserve"
	// SignalLearned carries a LearnedPoint: a session saw its vendor
	// compact by itself before nid's threshold.
	SignalLearned = "learned"
	// SignalSlot carries a SlotRequest: a session asks for (or gives
	// back) one of the group's rotation slots.
	SignalSlot = "slot"
)

// QueryGroup is the query a group answers: it returns a GroupView.
const QueryGroup = "group"

// Updates a group takes. Each needs an answer, so each is an update whose
// validator refuses (naming the holder, the key, what is allowed) before
// anything is written.
const (
	// UpdateSetPolicy takes a SetPolicy and returns the group's new
	// config.Rotate after validation.
	UpdateSetPolicy = "set_policy"
	// UpdateSetBudget takes a SetBudget and returns the new config.Budget.
	UpdateSetBudget = "set_budget"
	// UpdateSetLearned takes a SetLearned and returns the group's learned
	// points after it.
	UpdateSetLearned = "set_learned"
	// UpdateSync takes a GroupSync: `nid up` tells a running group what the
	// file now says.
	UpdateSync = "sync"
	// The board updates take a BoardRequest and return a BoardResult.
	UpdateTaskAdd     = "task_add"
	UpdateTaskClaim   = "task_claim"
	UpdateTaskDone    = "task_done"
	UpdateLockAcquire = "lock_acquire"
	UpdateLockRelease = "lock_release"
	// UpdateStopSession releases a session's claims and locks and stops it;
	// BoardRequest.Why, when set, goes to the inbox.
	UpdateStopSession = "stop_session"
	// UpdateStartSession takes a SessionStart: a stopped session works
	// again.
	UpdateStartSession = "start_session"
	// UpdateInboxClear takes an InboxClear and returns how many items it
	// removed.
	UpdateInboxClear = "inbox_clear"
)

// SetPolicy is the UpdateSetPolicy payload: a JSON object of the fields to
// change, as typed after `rotate=` in `nid group set`.
type SetPolicy struct {
	RotateJSON string `json:"rotateJSON"`
}

// SetLearned is the UpdateSetLearned payload: a JSON object from
// "kind/model" to the percent to rotate at, or null to forget what was
// learned, as typed after `learned=` in `nid group set`.
type SetLearned struct {
	LearnedJSON string `json:"learnedJSON"`
}

// SetBudget is the UpdateSetBudget payload: a JSON object of the fields to
// change, as typed after `budget=` in `nid group set`.
type SetBudget struct {
	BudgetJSON string `json:"budgetJSON"`
}

// GroupSync is what `nid up` found in nid.yaml for a running group.
type GroupSync struct {
	Goal     string        `json:"goal"`
	Rotate   config.Rotate `json:"rotate"`
	Sessions []string      `json:"sessions"`
	// Tasks, Budget and Prompts are the file's; tasks are added once (by
	// title), the budget and prompts apply when the file changed them.
	Tasks   []config.Task  `json:"tasks,omitempty"`
	Budget  config.Budget  `json:"budget"`
	Prompts config.Prompts `json:"prompts"`
}

// GroupInput starts (or continues as new) a group workflow.
type GroupInput struct {
	Name     string         `json:"name"`
	Goal     string         `json:"goal,omitempty"`
	Policy   config.Rotate  `json:"policy"`
	Sessions []string       `json:"sessions"`
	Tasks    []config.Task  `json:"tasks,omitempty"`
	Budget   config.Budget  `json:"budget"`
	Prompts  config.Prompts `json:"prompts"`
	State    *GroupState    `json:"state,omitempty"`
}

// GroupView is the QueryGroup answer.
type GroupView struct {
	Name     string        `json:"name"`
	Goal     string        `json:"goal,omitempty"`
	Policy   config.Rotate `json:"policy"`
	Sessions []string      `json:"sessions"`
	// Stopped lists the sessions stopped with nid stop.
	Stopped []string    `json:"stopped,omitempty"`
	Inbox   []InboxItem `json:"inbox"`
	Board   BoardView   `json:"board"`
	// Learned is what the group learned of vendors that compact by
	// themselves, or the human set.
	Learned []LearnedPoint `json:"learned,omitempty"`
	// FilePolicy and FileBudget are what nid.yaml last said: a file that
	// says otherwise changes the group when applied.
	FilePolicy config.Rotate `json:"filePolicy"`
	FileBudget config.Budget `json:"fileBudget"`
}

// InboxClear is the UpdateInboxClear payload: the items the human has dealt
// with, those numbered up to Through (0: every item).
type InboxClear struct {
	Through int64 `json:"through,omitempty"`
}

// InboxItem is something the human should look at.
type InboxItem struct {
	Seq     int64     `json:"seq"`
	At      time.Time `json:"at"`
	Group   string    `json:"group"`
	Session string    `json:"session,omitempty"`
	Kind    string    `json:"kind"`
	// Text is the newest occurrence's; Count how many there were (0 and 1
	// both mean once).
	Text  string `json:"text"`
	Count int    `json:"count,omitempty"`
}

// StopRequest is the SignalStop payload: why the session is stopped, for
// its feed, when it is not the human's nid stop.
type StopRequest struct {
	Why string `json:"why,omitempty"`
}

// SessionStart brings a stopped session back where it was: the same
// conversation, or with Fresh a fresh one by handoff.
type SessionStart struct {
	Session string `json:"session"`
	Fresh   bool   `json:"fresh,omitempty"`
}

// BoardRequest is the payload of every board update. Session names the
// session acting; the other fields are the ones the update needs.
type BoardRequest struct {
	Session string `json:"session,omitempty"`
	TaskID  string `json:"taskID,omitempty"`
	Title   string `json:"title,omitempty"`
	Detail  string `json:"detail,omitempty"`
	Lock    string `json:"lock,omitempty"`
	// Why says why a session is stopped when nid stops it by itself (it
	// left nid.yaml); it goes to the inbox.
	Why string `json:"why,omitempty"`
}

// BoardResult answers a board update.
type BoardResult struct {
	Task *Task `json:"task,omitempty"`
	Lock *Lock `json:"lock,omitempty"`
	// Released lists what a stopped session let go of ("task t3", "lock
	// src/app.go").
	Released []string  `json:"released,omitempty"`
	Board    BoardView `json:"board"`
}

// BoardView is a group's board and budget, as sessions and board_read see it.
type BoardView struct {
	Group  string        `json:"group"`
	Goal   string        `json:"goal,omitempty"`
	Tasks  []Task        `json:"tasks"`
	Locks  []Lock        `json:"locks"`
	Budget config.Budget `json:"budget"`
	Spent  Spend         `json:"spent"`
	// Exhausted names the budget limit reached ("turns", "tokens", "usd"),
	// empty while there is budget left.
	Exhausted string `json:"exhausted,omitempty"`
	// Prompts are the group's templates, with defaults filled in.
	Prompts config.Prompts `json:"prompts"`
	// Grants is, by session, the last turn reservation the group granted.
	Grants map[string]int64 `json:"grants,omitempty"`
	// Slots are the sessions rotating now by the group's leave
	// (maxConcurrentRotations), each with the request it was granted on.
	Slots []SlotRequest `json:"slots,omitempty"`
	// Rev numbers the boards a group pushes. Pushes made by different
	// handlers (a signal, an update, a new run's first push) can arrive out
	// of order; a session keeps the newest. Zero, from a history before
	// it, is always taken.
	Rev int64 `json:"rev,omitempty"`
}

// Task is one task on a group's board.
type Task struct {
	ID        string     `json:"id"`
	Title     string     `json:"title"`
	Detail    string     `json:"detail,omitempty"`
	Status    string     `json:"status"`
	Holder    string     `json:"holder,omitempty"`
	ClaimedAt *time.Time `json:"claimedAt,omitempty"`
	DoneAt    *time.Time `json:"doneAt,omitempty"`
}

// Task statuses.
const (
	TaskTodo    = "todo"
	TaskClaimed = "claimed"
	TaskDone    = "done"
)

// Lock is a named lock (typically a path) held by one session.
type Lock struct {
	Name   string    `json:"name"`
	Holder string    `json:"holder"`
	At     time.Time `json:"at"`
}

// Spend is what a group has used of its budget.
type Spend struct {
	Turns  int64   `json:"turns"`
	Tokens int64   `json:"tokens"`
	USD    float64 `json:"usd"`
}

// Charge is what one turn (or a rotation's turns) cost.
type Charge struct {
	Session string  `json:"session"`
	Turns   int64   `json:"turns"`
	Tokens  int64   `json:"tokens"`
	USD     float64 `json:"usd"`
}

// Reserve asks the group for one turn of its budget; Seq numbers the
// session's requests.
type Reserve struct {
	Session string `json:"session"`
	Seq     int64  `json:"seq"`
}

// SlotRequest asks the group for a rotation slot (Want) or gives one back.
// Seq numbers the session's requests, so a board granting an older one is
// not taken for a grant of this one; Fullness orders the waiting, fullest
// first.
type SlotRequest struct {
	Session  string  `json:"session"`
	Seq      int64   `json:"seq"`
	Want     bool    `json:"want"`
	Fullness float64 `json:"fullness,omitempty"`
}

// ClaimNext asks the group for a session's next task.
type ClaimNext struct {
	Session string `json:"session"`
}

// Caps on a board, which travels in every board push and in every
// session's state: a lock's name, a task's text, how many locks a session
// and a group hold, and how many tasks a board keeps.
const (
	MaxLockName        = 512
	MaxTaskTitle       = 200
	MaxTaskDetail      = 4 << 10
	MaxLocksPerSession = 32
	MaxLocks           = 256
	MaxTasks           = 300
)

// ======== Hosts registry: nid/hosts ========

// Signals the hosts registry receives.
const (
	// SignalHeartbeat carries a HostBeat: a worker is alive, with its
	// capacity.
	SignalHeartbeat = "heartbeat"
	// SignalHostAssign carries a HostAssign: a session says which host it
	// is on.
	SignalHostAssign = "host_assign"
)

// UpdatePlace takes a PlaceRequest and returns a Placement: where a new
// session runs.
const UpdatePlace = "place"

// QueryHosts returns a HostsView.
const QueryHosts = "hosts"

// HostBeat is a worker's heartbeat. Every is how often it beats; the
// registry counts the host down after hostMissedBeats beats missed. A clean
// stop says nothing: a worker restarting at once is no news to its
// sessions, and one that stays away is counted down like a killed one.
type HostBeat struct {
	Host        string        `json:"host"`
	MaxSessions int           `json:"maxSessions"`
	Every       time.Duration `json:"every"`
	HTTP        string        `json:"http,omitempty"`
}

// HostAssign says session (group/name) is on Host; Stopped that it is
// stopped there, taking none of the host's capacity until it starts again.
type HostAssign struct {
	Session string `json:"session"`
	Host    string `json:"host"`
	Stopped bool   `json:"stopped,omitempty"`
}

// HostState tells a session whether its host is alive.
type HostState struct {
	Host  string `json:"host"`
	Alive bool   `json:"alive"`
}

// PlaceRequest asks where session (group/name) runs; Want is the host
// nid.yaml pins it to, if any.
type PlaceRequest struct {
	Session string `json:"session"`
	Want    string `json:"want,omitempty"`
}

// Placement answers a PlaceRequest.
type Placement struct {
	Host string `json:"host"`
}

// HostsInput starts (or continues as new) the hosts registry.
type HostsInput struct {
	State *HostsState `json:"state,omitempty"`
}

// HostsView is the QueryHosts answer: every host the registry knows.
type HostsView struct {
	Hosts []HostView `json:"hosts"`
}

// HostView is one host: its record, and how many more sessions it takes
// (negative past its capacity).
type HostView struct {
	HostRecord
	Free int `json:"free"`
}

// ======== Search attributes and memo ========

// Search attributes nid keeps current on every session workflow (and the
// group and session names on rotations and groups), so the Temporal Web UI can
// filter and `nid ls` needs one list call.
const (
	SearchGroup          = "NidGroup"
	SearchSession        = "NidSession"
	SearchAgent          = "NidAgent"
	SearchStatus         = "NidStatus"
	SearchContextPercent = "NidContextPercent"
	SearchRotations      = "NidRotations"
	SearchHost           = "NidHost"
)

// SearchAttributes lists nid's custom search attributes and their types, for
// registering them on a namespace.
func SearchAttributes() map[string]enumspb.IndexedValueType {
	return map[string]enumspb.IndexedValueType{
		SearchGroup:          enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		SearchSession:        enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		SearchAgent:          enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		SearchStatus:         enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		SearchContextPercent: enumspb.INDEXED_VALUE_TYPE_DOUBLE,
		SearchRotations:      enumspb.INDEXED_VALUE_TYPE_INT,
		SearchHost:           enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	}
}

// MemoContext is the memo key holding a session's ContextRecord, so a
// visibility list shows the whole CONTEXT column without a query per session.
const MemoContext = "context"

// MemoEvents is the memo key holding the sequence number of a session's
// newest event (since VersionListedEvents), so a feed can tell which
// sessions have events it has not seen without asking each one.
const MemoEvents = "events"
