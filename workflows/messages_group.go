package workflows

// What a group receives and answers: its signals, updates and their
// payloads, its view, and the board and budget it pushes to its sessions.

import (
	"time"

	"github.com/nid-dev/nid/config"
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
	// SignalStarted carries a SessionsStarted: nid up started (or found
	// running) the group's sessions it names.
	SignalStarted = "started"
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
	// BoardsAtStart says that nid up gives each session it starts the
	// group's starting board (StartingBoard), so the group's first board
	// goes only to Running, the sessions it found running (since
	// VersionQuietStart).
	BoardsAtStart bool     `json:"boardsAtStart,omitempty"`
	Running       []string `json:"running,omitempty"`
}

// SessionsStarted is the SignalStarted payload: the sessions of the group
// nid up has started or found running. Any of them a board did not reach
// because it did not run yet is sent the board now.
type SessionsStarted struct {
	Sessions []string `json:"sessions"`
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
	Released []string `json:"released,omitempty"`
	// Board is the session's seat (BoardView.seat), from a group before
	// VersionLeanBoard; since, none: no client reads it, and it was most of
	// a large group's history.
	Board *BoardView `json:"board,omitempty"`
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
	// Others counts the tasks a session's copy of the board leaves out:
	// those other sessions claimed or finished (since
	// VersionTargetedBoard). board_read and nid board list them.
	Others int `json:"others,omitempty"`
	// Open counts the open tasks a session's copy leaves out (since
	// VersionLeanBoard, all of them): the group gives a session the next
	// when it asks (claim_next).
	Open int `json:"open,omitempty"`
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
