package workflows

// messages*.go name every workflow, signal, query and update nid has, with
// their payloads, by the workflow that receives them. This file holds what
// all of them share (names, ids), the session's signals and input, the
// hosts registry's and the search attributes; messages_view.go what a
// session shows (its view, context record and events); messages_rotation.go
// the rotation child's input and result; messages_group.go the group's, its
// board included. The CLI, the HTTP server and the MCP endpoint use these
// names and never spell one twice.

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

// TaskQueue is the shared queue every worker polls for workflow tasks:
// the groups', the registry's, and those of sessions that run on no host's
// queue (SessionQueue).
const TaskQueue = "nid"

// HostQueue is host's task queue: the turns, rotations and git work of
// the sessions placed there, because worktrees and agent processes live on
// one host, and those sessions' workflows (SessionQueue).
func HostQueue(host string) string { return "nid@" + host }

// SessionQueue is the queue the workflow of a session placed on host runs
// on: its host's, where its activities go, so that the server hands a
// turn's activity to the worker with the workflow task that schedules it
// (eager dispatch) rather than queueing it for the host's next poll. While
// a host is down every other worker polls its queue for workflow tasks, so
// its sessions still answer. A session with no host yet runs on the shared
// queue. Sessions started before VersionHostQueue run on the shared queue
// until their second continue-as-new after the upgrade: the first starts a
// run at the newest rung, which moves at its own.
func SessionQueue(host string) string {
	if host == "" {
		return TaskQueue
	}
	return HostQueue(host)
}

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
	// Placed says the registry placed the session on Host just before this
	// start and found that host alive (Placement.Alive): the registry knows
	// where the session is and the session what the registry would answer,
	// so its first run tells the registry nothing
	// (VersionBatchedPlacement). Read on first start only.
	Placed bool `json:"placed,omitempty"`
	// Board is the session's group's board as nid up starting the session
	// knew it: the one a group it starts with the session begins with
	// (StartingBoard), or a running group's as it answered nid up (SeatOf;
	// since VersionBoardAtStart). A session whose group has no open task
	// works toward the goal at once rather than waiting for the group's
	// answer; the group's pushes replace it. Only a first run reads it.
	Board *BoardView `json:"board,omitempty"`
	// Repo is the group's git repository (each session gets a worktree);
	// WorkDir the shared working directory without one.
	Repo    string `json:"repo,omitempty"`
	WorkDir string `json:"workdir,omitempty"`
	// State is nil on first start and carries everything across
	// continue-as-new.
	State *SessionState `json:"state,omitempty"`
}

// SessionView is the QuerySession answer: the Session object.
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

// UpdatePlaceAll takes a PlaceBatch and returns a Placements: where each
// of many new sessions runs, decided in order as that many UpdatePlace
// would decide it, in one update (VersionBatchedPlacement).
const UpdatePlaceAll = "place_all"

// UpdateHeartbeat takes a HostBeat, as SignalHeartbeat does, and answers
// once the registry took it (VersionBeatUpdate): a beat sent as an update
// cannot refuse the registry's continue-as-new, where a signal does.
const UpdateHeartbeat = "heartbeat"

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

// Placement answers a PlaceRequest. Alive says the host was alive when the
// registry answered and holds the session there as running, not stopped
// (VersionBatchedPlacement: before it, always false).
type Placement struct {
	Host  string `json:"host"`
	Alive bool   `json:"alive,omitempty"`
}

// PlaceBatch asks where each of Sessions runs, in order; at most
// MaxPlaceBatch of them.
type PlaceBatch struct {
	Sessions []PlaceRequest `json:"sessions"`
}

// Placements answers a PlaceBatch: Placed[i] is where Sessions[i] runs.
type Placements struct {
	Placed []Placement `json:"placed"`
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
	// SearchListedAt is when a session last changed its listing (search
	// attributes or memo), since VersionListedAt.
	SearchListedAt = "NidListedAt"
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
		SearchListedAt:       enumspb.INDEXED_VALUE_TYPE_DATETIME,
	}
}

// MemoContext is the memo key holding a session's ContextRecord, so a
// visibility list shows the whole CONTEXT column without a query per session.
const MemoContext = "context"

// MemoEvents is the memo key holding the sequence number of a session's
// newest event (since VersionListedEvents), so a feed can tell which
// sessions have events it has not seen without asking each one.
const MemoEvents = "events"
