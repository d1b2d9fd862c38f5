package workflows

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/nid-dev/nid/config"
)

// BoardState is a group's board and budget as the group workflow keeps it.
// Its check methods say why a change is refused (naming the holder) and
// change nothing; the matching methods apply a change that passed its check.
type BoardState struct {
	Tasks    []Task         `json:"tasks,omitempty"`
	Locks    []Lock         `json:"locks,omitempty"`
	NextTask int            `json:"nextTask"`
	Budget   config.Budget  `json:"budget"`
	Spent    Spend          `json:"spent"`
	Prompts  config.Prompts `json:"prompts"`
	// Noted is the limit already reported to the inbox, so one exhaustion
	// is one item.
	Noted string `json:"noted,omitempty"`
	// Grants is, by session, the last turn reservation granted.
	Grants map[string]int64 `json:"grants,omitempty"`
	// Slots are the sessions rotating by the group's leave; Queue the ones
	// waiting for a slot, fullest first (see the governor methods).
	Slots []SlotRequest `json:"slots,omitempty"`
	Queue []SlotRequest `json:"queue,omitempty"`
}

// budgetLimited says the budget has a limit, so turns are reserved before
// they start and a turn limit holds exactly, however many sessions there are.
func budgetLimited(b config.Budget) bool { return b.Turns > 0 || b.Tokens > 0 || b.USD > 0 }

// costSpent says a tokens or usd limit of the board's budget is reached:
// limits known only after the turns that pass them, unlike a turns limit,
// which reservations hold exactly.
func (v BoardView) costSpent() bool {
	return v.Budget.Tokens > 0 && v.Spent.Tokens >= v.Budget.Tokens || v.Budget.USD > 0 && v.Spent.USD >= v.Budget.USD
}

func (b *BoardState) task(id string) *Task {
	for i := range b.Tasks {
		if b.Tasks[i].ID == id {
			return &b.Tasks[i]
		}
	}
	return nil
}

func (b *BoardState) unknownTask(id string) error {
	ids := make([]string, 0, len(b.Tasks))
	for _, t := range b.Tasks {
		ids = append(ids, t.ID)
	}
	if len(ids) == 0 {
		return fmt.Errorf("no task %q: the board has no tasks", id)
	}
	return fmt.Errorf("no task %q (tasks: %s)", id, strings.Join(ids, ", "))
}

func checkTaskText(title, detail string) error {
	switch {
	case strings.TrimSpace(title) == "":
		return fmt.Errorf("a task needs a title")
	case len(title) > MaxTaskTitle:
		return fmt.Errorf("task title is %d bytes; the limit is %d", len(title), MaxTaskTitle)
	case len(detail) > MaxTaskDetail:
		return fmt.Errorf("task detail is %d bytes; the limit is %d", len(detail), MaxTaskDetail)
	}
	return nil
}

func (b *BoardState) add(title, detail string) Task {
	b.NextTask++
	t := Task{ID: fmt.Sprintf("t%d", b.NextTask), Title: strings.TrimSpace(title), Detail: strings.TrimSpace(detail), Status: TaskTodo}
	b.Tasks = append(b.Tasks, t)
	return t
}

func (b *BoardState) checkClaim(session, id string) error {
	t := b.task(id)
	switch {
	case t == nil:
		return b.unknownTask(id)
	case t.Status == TaskDone:
		return fmt.Errorf("task %s is done", id)
	case t.Status == TaskClaimed && t.Holder != session:
		return fmt.Errorf("task %s is claimed by %s", id, t.Holder)
	}
	return nil
}

func (b *BoardState) claim(session, id string, now time.Time) Task {
	t := b.task(id)
	if t.Holder != session {
		t.Status, t.Holder, t.ClaimedAt = TaskClaimed, session, &now
	}
	return *t
}

func (b *BoardState) checkDone(session, id string) error {
	t := b.task(id)
	switch {
	case t == nil:
		return b.unknownTask(id)
	case t.Status == TaskDone:
		return fmt.Errorf("task %s is already done", id)
	case t.Holder != session && t.Holder != "":
		return fmt.Errorf("task %s is claimed by %s, not %s", id, t.Holder, session)
	case t.Holder == "":
		return fmt.Errorf("task %s is not claimed: claim it first", id)
	}
	return nil
}

func (b *BoardState) done(id string, now time.Time) Task {
	t := b.task(id)
	t.Status, t.DoneAt = TaskDone, &now
	return *t
}

func (b *BoardState) lock(name string) *Lock {
	for i := range b.Locks {
		if b.Locks[i].Name == name {
			return &b.Locks[i]
		}
	}
	return nil
}

func (b *BoardState) checkAcquire(session, name string) error {
	switch {
	case strings.TrimSpace(name) == "":
		return fmt.Errorf("a lock needs a name (typically a path)")
	case len(name) > MaxLockName:
		return fmt.Errorf("lock name is %d bytes; the limit is %d", len(name), MaxLockName)
	}
	l := b.lock(name)
	switch {
	case l != nil && l.Holder != session:
		return fmt.Errorf("lock %q is held by %s", name, l.Holder)
	case l != nil:
		return nil // already its own
	case b.locksHeld(session) >= MaxLocksPerSession:
		return fmt.Errorf("%s holds %d locks, the most a session may: release one first", session, MaxLocksPerSession)
	case len(b.Locks) >= MaxLocks:
		return fmt.Errorf("the group's sessions hold %d locks, the most a group may: release some first", MaxLocks)
	}
	return nil
}

func (b *BoardState) locksHeld(session string) int {
	n := 0
	for _, l := range b.Locks {
		if l.Holder == session {
			n++
		}
	}
	return n
}

// checkRoom refuses n more tasks on a full board.
func (b *BoardState) checkRoom(n int) error {
	if len(b.Tasks)+n > MaxTasks {
		return fmt.Errorf("the board holds %d tasks and keeps at most %d", len(b.Tasks), MaxTasks)
	}
	return nil
}

func (b *BoardState) acquire(session, name string, now time.Time) Lock {
	if l := b.lock(name); l != nil {
		return *l
	}
	l := Lock{Name: name, Holder: session, At: now}
	b.Locks = append(b.Locks, l)
	slices.SortFunc(b.Locks, func(x, y Lock) int { return strings.Compare(x.Name, y.Name) })
	return l
}

func (b *BoardState) checkRelease(session, name string) error {
	l := b.lock(name)
	switch {
	case l == nil:
		return fmt.Errorf("lock %q is not held", name)
	case l.Holder != session:
		return fmt.Errorf("lock %q is held by %s, not %s", name, l.Holder, session)
	}
	return nil
}

func (b *BoardState) release(name string) {
	b.Locks = slices.DeleteFunc(b.Locks, func(l Lock) bool { return l.Name == name })
}

// releaseAll lets go of everything session holds: its open tasks go back
// to todo, its locks are freed.
func (b *BoardState) releaseAll(session string) []string {
	var released []string
	for i := range b.Tasks {
		t := &b.Tasks[i]
		if t.Holder == session && t.Status == TaskClaimed {
			t.Status, t.Holder, t.ClaimedAt = TaskTodo, "", nil
			released = append(released, "task "+t.ID)
		}
	}
	for _, l := range b.Locks {
		if l.Holder == session {
			released = append(released, "lock "+l.Name)
		}
	}
	b.Locks = slices.DeleteFunc(b.Locks, func(l Lock) bool { return l.Holder == session })
	return released
}

// held is the open task session holds, if any.
func (b *BoardState) held(session string) *Task {
	for i := range b.Tasks {
		if b.Tasks[i].Holder == session && b.Tasks[i].Status == TaskClaimed {
			return &b.Tasks[i]
		}
	}
	return nil
}

func (b *BoardState) nextOpen() *Task {
	for i := range b.Tasks {
		if b.Tasks[i].Status == TaskTodo {
			return &b.Tasks[i]
		}
	}
	return nil
}

// reserve grants session its turn seq while the budget lasts, counting the
// turn as spent at once, so two sessions cannot both take the last one. It
// says whether it granted.
func (b *BoardState) reserve(session string, seq int64) bool {
	if b.exhausted() != "" {
		return false
	}
	if b.Grants == nil {
		b.Grants = map[string]int64{}
	}
	b.Grants[session] = seq
	b.charge(Charge{Session: session, Turns: 1})
	return true
}

// claimNext gives session the next open task, unless it holds one or the
// budget is spent; it returns the task claimed, if any.
func (b *BoardState) claimNext(session string, now time.Time) *Task {
	if b.held(session) != nil || b.exhausted() != "" {
		return nil
	}
	t := b.nextOpen()
	if t == nil {
		return nil
	}
	claimed := b.claim(session, t.ID, now)
	return &claimed
}

func (b *BoardState) charge(c Charge) {
	b.Spent.Turns += c.Turns
	b.Spent.Tokens += c.Tokens
	b.Spent.USD += c.USD
}

// exhausted names the first budget limit reached, or "".
func (b *BoardState) exhausted() string {
	switch {
	case b.Budget.Turns > 0 && b.Spent.Turns >= b.Budget.Turns:
		return "turns"
	case b.Budget.Tokens > 0 && b.Spent.Tokens >= b.Budget.Tokens:
		return "tokens"
	case b.Budget.USD > 0 && b.Spent.USD >= b.Budget.USD:
		return "usd"
	}
	return ""
}

func (b *BoardState) view(group, goal string) BoardView {
	v := BoardView{
		Group: group, Goal: goal,
		Tasks: slices.Clone(b.Tasks), Locks: slices.Clone(b.Locks),
		Budget: b.Budget, Spent: b.Spent, Exhausted: b.exhausted(),
		Prompts: b.Prompts.WithDefaults(),
		Grants:  maps.Clone(b.Grants),
		Slots:   slices.Clone(b.Slots),
	}
	if v.Tasks == nil {
		v.Tasks = []Task{}
	}
	if v.Locks == nil {
		v.Locks = []Lock{}
	}
	return v
}

// seat is the board as session is sent it (since VersionTargetedBoard):
// its own tasks, with their detail, and the open ones without it; the
// tasks other sessions claimed or finished only counted (Others); its own
// grant and no other's. The session acts on nothing else of them, and its
// copy of them would be out of date anyway: the group no longer tells a
// session of the others' claims. Every grant and every task went with
// every push before, which at a thousand sessions and a full board was
// most of a group's history. With lean (VersionLeanBoard) the open ones
// are counted (Open) rather than listed: a session takes no turn without
// a task, and asks the group for the next (claim_next) rather than picking
// one, so it reads no more of them than whether there are any; 300 open
// titles in each grant were most of what a busy group still wrote.
func (v BoardView) seat(session string, lean bool) BoardView {
	out := v
	out.Grants = nil
	if g, ok := v.Grants[session]; ok {
		out.Grants = map[string]int64{session: g}
	}
	out.Tasks = make([]Task, 0, len(v.Tasks))
	for _, t := range v.Tasks {
		switch {
		case t.Holder == session:
			out.Tasks = append(out.Tasks, t)
		case t.Status == TaskTodo && lean:
			out.Open++
		case t.Status == TaskTodo:
			t.Detail = ""
			out.Tasks = append(out.Tasks, t)
		default:
			out.Others++
		}
	}
	return out
}

// HeldBy is the open task session holds on the board, if any.
func (v BoardView) HeldBy(session string) *Task {
	for i := range v.Tasks {
		if v.Tasks[i].Holder == session && v.Tasks[i].Status == TaskClaimed {
			return &v.Tasks[i]
		}
	}
	return nil
}

// HasOpen says whether a task waits to be claimed: listed, or counted in
// a session's copy (Open).
func (v BoardView) HasOpen() bool {
	return v.Open > 0 || slices.ContainsFunc(v.Tasks, func(t Task) bool { return t.Status == TaskTodo })
}

// The governor: at most max sessions rotate by themselves at once (0: no
// limit); the others wait in a queue, fullest first, and get a slot as one
// is given back.

// askSlot takes req's request for a slot, replacing any the session had,
// and says whether it was granted at once.
func (b *BoardState) askSlot(req SlotRequest, max int) bool {
	b.releaseSlot(req.Session)
	if max <= 0 || len(b.Slots) < max {
		b.Slots = append(b.Slots, req)
		return true
	}
	b.Queue = append(b.Queue, req)
	slices.SortStableFunc(b.Queue, func(x, y SlotRequest) int {
		return cmp.Or(cmp.Compare(y.Fullness, x.Fullness), strings.Compare(x.Session, y.Session))
	})
	return false
}

// releaseSlot gives back session's slot, or its place in the queue.
func (b *BoardState) releaseSlot(session string) {
	mine := func(r SlotRequest) bool { return r.Session == session }
	b.Slots = slices.DeleteFunc(b.Slots, mine)
	b.Queue = slices.DeleteFunc(b.Queue, mine)
}

// grantWaiting gives free slots to the fullest waiting, and returns who
// got one.
func (b *BoardState) grantWaiting(max int) []string {
	var granted []string
	for len(b.Queue) > 0 && (max <= 0 || len(b.Slots) < max) {
		next := b.Queue[0]
		b.Queue = b.Queue[1:]
		b.Slots = append(b.Slots, next)
		granted = append(granted, next.Session)
	}
	return granted
}

// holds says the view grants req's slot.
func (v BoardView) holds(req SlotRequest) bool {
	return slices.ContainsFunc(v.Slots, func(s SlotRequest) bool { return s.Session == req.Session && s.Seq == req.Seq })
}
