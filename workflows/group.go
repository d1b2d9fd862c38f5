package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/internal/clip"
)

// maxInbox bounds the inbox a group keeps.
const maxInbox = 500

// GroupState is everything a group carries across continue-as-new.
type GroupState struct {
	Goal   string        `json:"goal,omitempty"`
	Policy config.Rotate `json:"policy"`
	// FilePolicy is the policy nid.yaml last said. `nid up` applies the
	// file's policy only when the file changed it, so a `nid group set`
	// survives restarts until the file is edited. FileBudget likewise.
	FilePolicy config.Rotate `json:"filePolicy"`
	FileBudget config.Budget `json:"fileBudget"`
	Sessions   []string      `json:"sessions"`
	Stopped    []string      `json:"stopped,omitempty"`
	Inbox      []InboxItem   `json:"inbox,omitempty"`
	NextSeq    int64         `json:"nextSeq"`
	Board      BoardState    `json:"board"`
	// BoardRev is the Rev of the last board pushed.
	BoardRev int64 `json:"boardRev,omitempty"`
	// HistoryLimit overrides defaultHistoryLimit (tests use a small one).
	HistoryLimit int `json:"historyLimit,omitempty"`
	// Learned is what sessions saw of vendors that compact by themselves,
	// or the human set, by agent kind and model.
	Learned []LearnedPoint `json:"learned,omitempty"`
	// Owed are the sessions owed the board (since VersionTargetedBoard),
	// sorted: each is sent the board as it is when its turn comes, so
	// changes made meanwhile go in one push, and a push to every session
	// goes out in batches that may span a continue-as-new.
	Owed []string `json:"owed,omitempty"`
	// Unreached are the sessions, sorted, that a board was sent to before
	// they ran (since VersionQuietStart): each is sent it again once nid
	// up says it started.
	Unreached []string `json:"unreached,omitempty"`
}

type group struct {
	name string
	st   *GroupState
	// ladder is the rung of the version ladder this run follows.
	ladder
	// continued says this run took its state over from the run before,
	// whose sessions have their boards already.
	continued bool
	// delivering counts the pushes whose signals are not yet delivered
	// (since VersionTargetedBoard): the run continues as new only once
	// they are, as the server drops a signal whose sender has closed.
	delivering int
	// live notes whether this instance of the run was rebuilt by replay
	// (since VersionContinueFromCache; nil before).
	live *liveness
	// boardsAtStart and runningAtStart are GroupInput's BoardsAtStart and
	// Running: who a first run sends its first board.
	boardsAtStart  bool
	runningAtStart []string
	// sending is the batch of boards sendOwed has sent and not yet seen
	// delivered.
	sending []string
}

// GroupWorkflow owns a group's policy, board, budget and inbox. It changes
// them through validated updates and pushes them to the group's sessions.
func GroupWorkflow(ctx workflow.Context, in GroupInput) error {
	g := &group{name: in.Name, st: in.State, continued: in.State != nil, boardsAtStart: in.BoardsAtStart, runningAtStart: in.Running}
	if g.st == nil {
		g.st = startingState(in)
	}
	if err := g.setup(ctx); err != nil {
		return err
	}
	return g.run(ctx)
}

// startingState is the state of a group that starts afresh with in.
func startingState(in GroupInput) *GroupState {
	st := &GroupState{
		Goal: in.Goal, Policy: in.Policy, FilePolicy: in.Policy, FileBudget: in.Budget,
		Sessions: slices.Clone(in.Sessions),
		Board:    BoardState{Budget: in.Budget, Prompts: in.Prompts},
	}
	for _, t := range in.Tasks {
		st.Board.add(t.Title, t.Detail)
	}
	return st
}

// StartingBoard is the board a group that starts afresh with in sends
// session first (SessionInput.Board).
func StartingBoard(in GroupInput, session string) BoardView {
	g := &group{name: in.Name, st: startingState(in), ladder: ladder{versionLatest}}
	return g.seat(g.board(), session)
}

// SeatOf is the board a running group whose view is v sends session, as
// the group's latest rung makes it (SessionInput.Board).
func SeatOf(v GroupView, session string) BoardView {
	g := &group{ladder: ladder{versionLatest}}
	return g.seat(v.Board, session)
}

func (g *group) setup(ctx workflow.Context) error {
	g.version = versionOf(ctx)
	if g.has(VersionContinueFromCache) {
		g.live = watchLiveness(ctx)
	}
	if g.has(VersionCheckedInput) {
		if err := checkNames("name", g.name, "", ""); err != nil {
			return err
		}
		for _, s := range g.st.Sessions {
			if err := checkNames("name", g.name, "sessions", s); err != nil {
				return err
			}
		}
	}
	publishRung(ctx, g.ladder)
	if err := workflow.SetQueryHandler(ctx, QueryGroup, g.view); err != nil {
		return err
	}
	updates := []struct {
		name      string
		handler   interface{}
		validator interface{}
	}{
		{UpdateSetPolicy, g.setPolicy, g.validateSetPolicy},
		{UpdateSync, g.sync, g.validateSync},
		{UpdateSetBudget, g.setBudget, g.validateSetBudget},
		{UpdateSetLearned, g.setLearned, g.validateSetLearned},
		{UpdateTaskAdd, g.taskAdd, g.validateTaskAdd},
		{UpdateTaskClaim, g.taskClaim, g.validateTaskClaim},
		{UpdateTaskDone, g.taskDone, g.validateTaskDone},
		{UpdateLockAcquire, g.lockAcquire, g.validateLockAcquire},
		{UpdateLockRelease, g.lockRelease, g.validateLockRelease},
		{UpdateStopSession, g.stopSession, g.validateStopSession},
		{UpdateStartSession, g.startSession, g.validateStartSession},
		{UpdateInboxClear, g.inboxClear, g.validateInboxClear},
	}
	for _, u := range updates {
		if err := workflow.SetUpdateHandlerWithOptions(ctx, u.name, u.handler,
			workflow.UpdateHandlerOptions{Validator: u.validator}); err != nil {
			return err
		}
	}
	listenSignals(ctx, g.signalSelector, nil)
	if g.has(VersionTargetedBoard) {
		workflow.Go(ctx, g.sendOwed)
	}
	if g.has(VersionTeam) && !(g.continued && g.has(VersionTargetedBoard)) {
		// Sessions wait for their first board; a restart of nid finds them
		// waiting. A run that continues one before pushes nothing: its
		// sessions have the board already.
		g.firstPush(ctx)
	}
	return nil
}

// firstPush sends a first run's board: to every session, or since
// VersionQuietStart only to those nid up found running when it gave the
// others their board at start.
func (g *group) firstPush(ctx workflow.Context) {
	if !g.has(VersionQuietStart) || !g.boardsAtStart {
		g.push(ctx, "")
		return
	}
	g.pushTo(ctx, slices.DeleteFunc(g.running(), func(s string) bool { return !slices.Contains(g.runningAtStart, s) }))
}

// run waits until the history is full, then continues as new: everything
// else a group does answers a signal or an update.
func (g *group) run(ctx workflow.Context) error {
	if err := workflow.Await(ctx, func() bool { return historyFull(ctx, g.st.HistoryLimit) }); err != nil {
		return err
	}
	delivered := func() bool { return g.delivering == 0 }
	return continueAsNewWhen(ctx, g.ladder, g.live, g.signalSelector, delivered, GroupWorkflowName, func() any {
		return GroupInput{Name: g.name, State: g.st}
	})
}

func (g *group) signalSelector(ctx workflow.Context) workflow.Selector {
	sel := workflow.NewSelector(ctx)
	onSignal(ctx, sel, SignalInbox, g.onInbox)
	onSignal(ctx, sel, SignalCharge, g.onCharge)
	onSignal(ctx, sel, SignalClaimNext, g.onClaimNext)
	onSignal(ctx, sel, SignalReserve, g.onReserve)
	onSignal(ctx, sel, SignalLearned, g.onLearned)
	onSignal(ctx, sel, SignalSlot, g.onSlot)
	onSignal(ctx, sel, SignalStarted, g.onStarted)
	return sel
}

// onInbox takes a session's news for the inbox: from one of the group's
// sessions, or the group's own, with its text clipped to MaxInboxText.
func (g *group) onInbox(ctx workflow.Context, item InboxItem) {
	if g.has(VersionCheckedInput) {
		if item.Session != "" && !slices.Contains(g.st.Sessions, item.Session) {
			warnRefused(ctx, SignalInbox, fmt.Sprintf("no session %q in group %s", clip.Runes(item.Session, 80), g.name))
			return
		}
		item.Group, item.Kind, item.Text = g.name, clip.Runes(item.Kind, MaxKindBytes), clip.Runes(item.Text, MaxInboxText)
	}
	g.addInbox(item)
}

// addInbox adds an item, or counts it on the session's last item when that
// is the same kind of news: a failure that repeats is one item with a
// count, not a flood.
func (g *group) addInbox(item InboxItem) {
	if item.Session != "" {
		for i := len(g.st.Inbox) - 1; i >= 0; i-- {
			last := &g.st.Inbox[i]
			if last.Session != item.Session {
				continue
			}
			if last.Kind == item.Kind {
				last.Count = max(last.Count, 1) + 1
				last.At, last.Text = item.At, item.Text
				return
			}
			break
		}
	}
	g.st.NextSeq++
	item.Seq = g.st.NextSeq
	g.st.Inbox = append(g.st.Inbox, item)
	if len(g.st.Inbox) > maxInbox {
		g.st.Inbox = append([]InboxItem(nil), g.st.Inbox[len(g.st.Inbox)-maxInbox:]...)
	}
}

func (g *group) validateInboxClear(_ workflow.Context, req InboxClear) error {
	if req.Through < 0 {
		return fmt.Errorf("through: %d is not an inbox item number (they start at 1; 0 clears every item)", req.Through)
	}
	return nil
}

// inboxClear removes the items the human has dealt with.
func (g *group) inboxClear(_ workflow.Context, req InboxClear) (int, error) {
	before := len(g.st.Inbox)
	g.st.Inbox = slices.DeleteFunc(g.st.Inbox, func(it InboxItem) bool { return req.Through == 0 || it.Seq <= req.Through })
	return before - len(g.st.Inbox), nil
}

func (g *group) board() BoardView { return g.st.Board.view(g.name, g.st.Goal) }

// whole is the whole board, for the answers of the updates a person makes
// (a task added, a session stopped or started): rare, and read by nothing
// either, but kept as they were.
func (g *group) whole() *BoardView {
	b := g.board()
	return &b
}

// answer is the board an update of session answers with: since
// VersionTargetedBoard its seat's (BoardView.seat), as the session is sent
// it; since VersionLeanBoard none. No client reads more of an answer than
// the task or lock it names, and the board in every answer was most of a
// large group's history.
func (g *group) answer(session string) *BoardView {
	switch {
	case g.has(VersionLeanBoard):
		return nil
	case g.has(VersionTargetedBoard):
		b := g.seat(g.board(), session)
		return &b
	}
	return g.whole()
}

// seat is board b as session is sent it (BoardView.seat).
func (g *group) seat(b BoardView, session string) BoardView {
	return b.seat(session, g.has(VersionLeanBoard))
}

func (g *group) view() (GroupView, error) {
	v := GroupView{
		Name: g.name, Goal: g.st.Goal, Policy: g.st.Policy,
		Sessions: slices.Clone(g.st.Sessions), Stopped: slices.Clone(g.st.Stopped),
		Inbox: slices.Clone(g.st.Inbox), Board: g.board(), Learned: slices.Clone(g.st.Learned),
		FilePolicy: g.st.FilePolicy, FileBudget: g.st.FileBudget,
	}
	if v.Inbox == nil {
		v.Inbox = []InboxItem{}
	}
	return v, nil
}

func (g *group) validateSetPolicy(_ workflow.Context, req SetPolicy) error {
	_, err := config.ApplyRotateJSON(g.st.Policy, req.RotateJSON) //workflowcheck:ignore decoding JSON is deterministic
	return err
}

func (g *group) setPolicy(ctx workflow.Context, req SetPolicy) (config.Rotate, error) {
	p, err := config.ApplyRotateJSON(g.st.Policy, req.RotateJSON) //workflowcheck:ignore decoding JSON is deterministic
	if err != nil {
		return g.st.Policy, err
	}
	g.st.Policy = p
	g.pushPolicy(ctx)
	g.grantSlots(ctx) // a higher limit frees slots at once
	return p, nil
}

func (g *group) validateSetBudget(_ workflow.Context, req SetBudget) error {
	_, err := config.ApplyBudgetJSON(g.st.Board.Budget, req.BudgetJSON) //workflowcheck:ignore decoding JSON is deterministic
	return err
}

func (g *group) setBudget(ctx workflow.Context, req SetBudget) (config.Budget, error) {
	b, err := config.ApplyBudgetJSON(g.st.Board.Budget, req.BudgetJSON) //workflowcheck:ignore decoding JSON is deterministic
	if err != nil {
		return g.st.Board.Budget, err
	}
	g.applyBudget(ctx, b)
	return b, nil
}

func (g *group) applyBudget(ctx workflow.Context, b config.Budget) {
	g.st.Board.Budget = b
	if g.st.Board.exhausted() == "" {
		g.st.Board.Noted = ""
	}
	g.push(ctx, "")
}

func (g *group) validateSync(_ workflow.Context, req GroupSync) error {
	var problems []string
	if err := req.Rotate.Validate(); err != nil {
		problems = append(problems, err.Error())
	}
	if err := req.Budget.Validate(); err != nil {
		problems = append(problems, err.Error())
	}
	for _, s := range req.Sessions {
		if !ValidName(s) {
			problems = append(problems, fmt.Sprintf("session name %q is not valid", s))
		}
	}
	added := 0
	for _, t := range req.Tasks {
		if err := checkTaskText(t.Title, t.Detail); err != nil {
			problems = append(problems, err.Error())
		}
		if !g.hasTask(t.Title) {
			added++
		}
	}
	if err := g.st.Board.checkRoom(added); err != nil {
		problems = append(problems, err.Error())
	}
	if len(problems) > 0 {
		return fmt.Errorf("group %s: %s", g.name, strings.Join(problems, "; "))
	}
	return nil
}

func (g *group) sync(ctx workflow.Context, req GroupSync) (GroupView, error) {
	g.st.Goal = req.Goal
	for _, s := range req.Sessions {
		if !slices.Contains(g.st.Sessions, s) {
			g.st.Sessions = append(g.st.Sessions, s)
		}
	}
	slices.Sort(g.st.Sessions)
	if req.Rotate != g.st.FilePolicy {
		g.st.FilePolicy = req.Rotate
		g.st.Policy = req.Rotate
		g.pushPolicy(ctx)
		g.grantSlots(ctx)
	}
	if g.has(VersionTeam) {
		// Tasks from the file are added once, known by their title, so a
		// restart does not put them on the board again.
		for _, t := range req.Tasks {
			if !g.hasTask(t.Title) {
				g.st.Board.add(t.Title, t.Detail)
			}
		}
		g.st.Board.Prompts = req.Prompts
		if req.Budget != g.st.FileBudget {
			g.st.FileBudget = req.Budget
			g.st.Board.Budget = req.Budget
			if g.st.Board.exhausted() == "" {
				g.st.Board.Noted = ""
			}
		}
		g.push(ctx, "")
	}
	return g.view()
}

// hasTask says the board has a task titled title: tasks from the file are
// known by their title.
func (g *group) hasTask(title string) bool {
	return slices.ContainsFunc(g.st.Board.Tasks, func(have Task) bool { return have.Title == title })
}

func (g *group) validateTaskAdd(_ workflow.Context, req BoardRequest) error {
	if err := g.st.Board.checkRoom(1); err != nil {
		return err
	}
	return checkTaskText(req.Title, req.Detail)
}

func (g *group) taskAdd(ctx workflow.Context, req BoardRequest) (BoardResult, error) {
	t := g.st.Board.add(req.Title, req.Detail)
	g.pushOpened(ctx)
	return BoardResult{Task: &t, Board: g.whole()}, nil
}

func (g *group) member(session string) error {
	switch {
	case !slices.Contains(g.st.Sessions, session):
		return fmt.Errorf("no session %q in group %s (sessions: %s)", session, g.name, strings.Join(g.st.Sessions, ", "))
	case slices.Contains(g.st.Stopped, session):
		return fmt.Errorf("session %s/%s is stopped", g.name, session)
	}
	return nil
}

func (g *group) validateTaskClaim(_ workflow.Context, req BoardRequest) error {
	if err := g.member(req.Session); err != nil {
		return err
	}
	return g.st.Board.checkClaim(req.Session, req.TaskID)
}

func (g *group) taskClaim(ctx workflow.Context, req BoardRequest) (BoardResult, error) {
	t := g.st.Board.claim(req.Session, req.TaskID, workflow.Now(ctx))
	g.pushFor(ctx, req.Session)
	return BoardResult{Task: &t, Board: g.answer(req.Session)}, nil
}

func (g *group) validateTaskDone(_ workflow.Context, req BoardRequest) error {
	if err := g.member(req.Session); err != nil {
		return err
	}
	return g.st.Board.checkDone(req.Session, req.TaskID)
}

func (g *group) taskDone(ctx workflow.Context, req BoardRequest) (BoardResult, error) {
	t := g.st.Board.done(req.TaskID, workflow.Now(ctx))
	g.pushFor(ctx, req.Session)
	return BoardResult{Task: &t, Board: g.answer(req.Session)}, nil
}

func (g *group) validateLockAcquire(_ workflow.Context, req BoardRequest) error {
	if err := g.member(req.Session); err != nil {
		return err
	}
	return g.st.Board.checkAcquire(req.Session, req.Lock)
}

func (g *group) lockAcquire(ctx workflow.Context, req BoardRequest) (BoardResult, error) {
	l := g.st.Board.acquire(req.Session, req.Lock, workflow.Now(ctx))
	g.pushFor(ctx, req.Session)
	return BoardResult{Lock: &l, Board: g.answer(req.Session)}, nil
}

func (g *group) validateLockRelease(_ workflow.Context, req BoardRequest) error {
	if err := g.member(req.Session); err != nil {
		return err
	}
	return g.st.Board.checkRelease(req.Session, req.Lock)
}

func (g *group) lockRelease(ctx workflow.Context, req BoardRequest) (BoardResult, error) {
	g.st.Board.release(req.Lock)
	g.pushFor(ctx, req.Session)
	return BoardResult{Board: g.answer(req.Session)}, nil
}

func (g *group) validateStopSession(_ workflow.Context, req BoardRequest) error {
	return g.member(req.Session)
}

func (g *group) stopSession(ctx workflow.Context, req BoardRequest) (BoardResult, error) {
	released := g.st.Board.releaseAll(req.Session)
	g.st.Board.releaseSlot(req.Session)
	g.st.Stopped = append(g.st.Stopped, req.Session)
	slices.Sort(g.st.Stopped)
	if req.Why != "" {
		text := fmt.Sprintf("%s/%s stopped: %s", g.name, req.Session, req.Why)
		if len(released) > 0 {
			text += "; released " + strings.Join(released, ", ")
		}
		g.addInbox(InboxItem{At: workflow.Now(ctx), Group: g.name, Session: req.Session, Kind: EventStopped, Text: text})
	}
	if err := workflow.SignalExternalWorkflow(ctx, SessionID(g.name, req.Session), "", SignalStop, StopRequest{Why: req.Why}).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("stop not delivered", "session", req.Session, "error", err)
	}
	switch {
	case !g.has(VersionTargetedBoard):
		g.push(ctx, "")
	case slices.ContainsFunc(released, func(r string) bool { return strings.HasPrefix(r, "task ") }):
		// Its tasks are open again: the sessions without one may take
		// them. Its locks concern nobody else until they ask.
		g.pushOpened(ctx)
	}
	g.grantSlots(ctx)
	return BoardResult{Released: released, Board: g.whole()}, nil
}

func (g *group) validateStartSession(_ workflow.Context, req SessionStart) error {
	switch {
	case !slices.Contains(g.st.Sessions, req.Session):
		return fmt.Errorf("no session %q in group %s (sessions: %s)", req.Session, g.name, strings.Join(g.st.Sessions, ", "))
	case !slices.Contains(g.st.Stopped, req.Session):
		return fmt.Errorf("session %s/%s is not stopped", g.name, req.Session)
	}
	return nil
}

// startSession lets a stopped session work again: it may claim and lock
// again, and it hears the board it missed.
func (g *group) startSession(ctx workflow.Context, req SessionStart) (BoardResult, error) {
	g.st.Stopped = slices.DeleteFunc(g.st.Stopped, func(s string) bool { return s == req.Session })
	if err := workflow.SignalExternalWorkflow(ctx, SessionID(g.name, req.Session), "", SignalStart, req).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("start not delivered", "session", req.Session, "error", err)
	}
	g.push(ctx, req.Session)
	return BoardResult{Board: g.whole()}, nil
}

func (g *group) onCharge(ctx workflow.Context, c Charge) {
	if g.has(VersionCheckedInput) {
		if why := chargeRefusal(c, g.st.Sessions); why != "" {
			warnRefused(ctx, SignalCharge, why)
			return
		}
	}
	before := g.st.Board.exhausted()
	g.st.Board.charge(c)
	g.charged(ctx, before)
}

// charged tells the inbox and the sessions when a charge spent the budget
// that was not spent before.
func (g *group) charged(ctx workflow.Context, before string) {
	limit := g.st.Board.exhausted()
	if limit == "" || limit == before {
		return
	}
	if g.st.Board.Noted != limit {
		g.st.Board.Noted = limit
		g.addInbox(InboxItem{At: workflow.Now(ctx), Group: g.name, Kind: "budget-exhausted",
			Text: fmt.Sprintf("budget exhausted (%s): %s; sessions are paused until it is raised (nid group set %s budget=...)",
				limit, BudgetText(g.st.Board.Budget, g.st.Board.Spent), g.name)})
	}
	g.push(ctx, "")
}

// onLearned keeps what a session saw of its vendor compacting by itself
// before nid's threshold, tells the inbox once, and pushes it to every
// session: all sessions of that kind and model rotate a margin before it.
// A point the human set stays as set.
func (g *group) onLearned(ctx workflow.Context, p LearnedPoint) {
	have := learnedFor(g.st.Learned, p.Kind, p.Model)
	if g.has(VersionCheckedInput) {
		switch {
		case len(p.Kind) > MaxKindBytes || len(p.Model) > MaxKindBytes:
			warnRefused(ctx, SignalLearned, fmt.Sprintf("a kind or model name is past %d bytes", MaxKindBytes))
			return
		case have == nil && len(g.st.Learned) >= MaxLearned:
			warnRefused(ctx, SignalLearned, fmt.Sprintf("the group keeps %d learned thresholds, the most it may", MaxLearned))
			return
		}
	}
	switch {
	case have != nil && (have.Set || have.Percent == p.Percent):
		return
	case have != nil:
		*have = p
	default:
		g.st.Learned = append(g.st.Learned, p)
		slices.SortFunc(g.st.Learned, func(a, b LearnedPoint) int { return strings.Compare(a.Key(), b.Key()) })
	}
	g.addInbox(InboxItem{At: workflow.Now(ctx), Group: g.name, Kind: "learned",
		Text: LearnedText(p) + fmt.Sprintf(" (nid group set %s learned='{\"%s\": null}' forgets it)", g.name, p.Key())})
	g.pushPolicy(ctx)
}

func (g *group) validateSetLearned(_ workflow.Context, req SetLearned) error {
	_, err := ApplyLearnedJSON(g.st.Learned, req.LearnedJSON) //workflowcheck:ignore decoding JSON is deterministic
	return err
}

func (g *group) setLearned(ctx workflow.Context, req SetLearned) ([]LearnedPoint, error) {
	learned, err := ApplyLearnedJSON(g.st.Learned, req.LearnedJSON) //workflowcheck:ignore decoding JSON is deterministic
	if err != nil {
		return g.st.Learned, err
	}
	g.st.Learned = learned
	g.pushPolicy(ctx)
	return slices.Clone(learned), nil
}

// onSlot takes a session's request for a rotation slot, or its slot given
// back, and pushes the board to whoever got one.
func (g *group) onSlot(ctx workflow.Context, r SlotRequest) {
	if g.member(r.Session) != nil && r.Want {
		return
	}
	if r.Want {
		if g.st.Board.askSlot(r, g.st.Policy.MaxConcurrentRotations) {
			g.push(ctx, r.Session)
		}
		return
	}
	g.st.Board.releaseSlot(r.Session)
	g.grantSlots(ctx)
}

// grantSlots gives free rotation slots to the fullest waiting sessions and
// tells each.
func (g *group) grantSlots(ctx workflow.Context) {
	for _, s := range g.st.Board.grantWaiting(g.st.Policy.MaxConcurrentRotations) {
		g.push(ctx, s)
	}
}

// onReserve grants a session one turn while the budget lasts (see
// BoardState.reserve) and answers it with the board.
func (g *group) onReserve(ctx workflow.Context, r Reserve) {
	if g.member(r.Session) != nil {
		return
	}
	if !g.st.Board.reserve(r.Session, r.Seq) {
		g.push(ctx, r.Session)
		return
	}
	g.charged(ctx, "")
	if g.st.Board.exhausted() == "" {
		g.push(ctx, r.Session)
	}
}

// onClaimNext gives a session without a task the next open one (see
// BoardState.claimNext).
func (g *group) onClaimNext(ctx workflow.Context, c ClaimNext) {
	if g.member(c.Session) != nil {
		return
	}
	if g.st.Board.claimNext(c.Session, workflow.Now(ctx)) != nil {
		g.pushFor(ctx, c.Session)
		return
	}
	g.push(ctx, c.Session)
}

// push sends the board to every running session (or only to one), in name
// order. Paths a pre-VersionTeam history can reach check g.has(VersionTeam) first;
// the others answer signals and updates such histories never had.
func (g *group) push(ctx workflow.Context, only string) {
	if g.has(VersionTargetedBoard) {
		if only != "" {
			g.pushTo(ctx, []string{only})
		} else {
			g.pushTo(ctx, g.running())
		}
		return
	}
	g.st.BoardRev++
	b := g.board()
	b.Rev = g.st.BoardRev
	for _, s := range g.st.Sessions {
		if (only != "" && s != only) || slices.Contains(g.st.Stopped, s) {
			continue
		}
		err := workflow.SignalExternalWorkflow(ctx, SessionID(g.name, s), "", SignalBoard, b).Get(ctx, nil)
		logUndelivered(ctx, "board", s, err)
	}
}

// pushFor sends the board after a change that concerns session alone (its
// claim, its task done, its lock): since VersionTargetedBoard to it only,
// before to every session.
func (g *group) pushFor(ctx workflow.Context, session string) {
	if g.has(VersionTargetedBoard) {
		g.push(ctx, session)
		return
	}
	g.push(ctx, "")
}

// pushOpened sends the board after a task opened (added, or given back by
// a stopped session): since VersionTargetedBoard to the sessions that hold
// no task, the only ones that may claim it; before to every session.
func (g *group) pushOpened(ctx workflow.Context) {
	if !g.has(VersionTargetedBoard) {
		g.push(ctx, "")
		return
	}
	var seeking []string
	for _, s := range g.running() {
		if g.st.Board.held(s) == nil {
			seeking = append(seeking, s)
		}
	}
	g.pushTo(ctx, seeking)
}

// running is the group's sessions that are not stopped, in name order.
func (g *group) running() []string {
	return slices.DeleteFunc(slices.Clone(g.st.Sessions), func(s string) bool { return slices.Contains(g.st.Stopped, s) })
}

// pushTo owes each of sessions the board; sendOwed sends it.
func (g *group) pushTo(_ workflow.Context, sessions []string) {
	for _, s := range sessions {
		g.st.Owed = insertSorted(g.st.Owed, s)
	}
}

// Bounds on one batch of board pushes, which one workflow task sends: the
// server refuses a task's answer past a few megabytes, and a history
// passing its size limit ends the run.
const (
	pushBatchBytes    = 1 << 20
	pushBatchSessions = 200
)

// sendOwed is the coroutine that sends the sessions owed the board their
// seat's board (see BoardView.seat), a batch at a time under one new Rev,
// and awaits each batch before the next. The handler that owed it goes on
// at once: an update is answered, and the next signal taken, without
// waiting for a session's workflow task. It starts no batch once the
// history is full: the sessions still owed are carried to the next run.
func (g *group) sendOwed(ctx workflow.Context) {
	for {
		if err := workflow.Await(ctx, func() bool { return len(g.st.Owed) > 0 && !historyFull(ctx, g.st.HistoryLimit) }); err != nil {
			return
		}
		g.st.BoardRev++
		b := g.board()
		b.Rev = g.st.BoardRev
		batch := g.takeOwed(b)
		sent := make([]workflow.Future, len(batch))
		for i, s := range batch {
			sent[i] = workflow.SignalExternalWorkflow(ctx, SessionID(g.name, s), "", SignalBoard, g.seat(b, s))
		}
		g.delivering++
		g.sending = batch
		for i, f := range sent {
			err := f.Get(ctx, nil)
			if g.has(VersionQuietStart) {
				g.noteReached(batch[i], err)
			}
			logUndelivered(ctx, "board", batch[i], err)
		}
		g.sending = nil
		g.delivering--
	}
}

// noteReached keeps a session that a board did not reach because it does
// not run yet among the unreached, and takes one it reached out of them.
func (g *group) noteReached(session string, err error) {
	var unknown *temporal.UnknownExternalWorkflowExecutionError
	switch {
	case err == nil:
		g.st.Unreached = deleteSorted(g.st.Unreached, session)
	case errors.As(err, &unknown):
		g.st.Unreached = insertSorted(g.st.Unreached, session)
	}
}

// onStarted sends the board again to the sessions nid up says it started
// that a board did not reach before (since VersionQuietStart), or may not
// have: one whose board is still on its way may have been sent it before
// it ran, and the group hears so only once its turn in the batch comes.
// Anything else it names is no concern of the group's: a name that is not
// one of its sessions, or one a board reached.
func (g *group) onStarted(ctx workflow.Context, req SessionsStarted) {
	if !g.has(VersionQuietStart) {
		return
	}
	var again []string
	for _, s := range req.Sessions {
		_, unreached := slices.BinarySearch(g.st.Unreached, s)
		if (unreached || slices.Contains(g.sending, s)) && g.member(s) == nil {
			g.st.Unreached = deleteSorted(g.st.Unreached, s)
			again = append(again, s)
		}
	}
	g.pushTo(ctx, again)
}

// takeOwed takes the next batch of sessions owed board b, leaving out
// those stopped since.
func (g *group) takeOwed(b BoardView) []string {
	owed := slices.DeleteFunc(g.st.Owed, func(s string) bool { return slices.Contains(g.st.Stopped, s) })
	if len(owed) == 0 {
		g.st.Owed = nil
		return nil
	}
	size, _ := json.Marshal(g.seat(b, owed[0])) //workflowcheck:ignore encoding JSON is deterministic
	n := min(len(owed), pushBatchSessions, max(1, pushBatchBytes/max(len(size), 1)))
	batch := slices.Clone(owed[:n])
	g.st.Owed = slices.Clone(owed[n:])
	return batch
}

// deliver awaits the signals sent to sessions, and notes those that did
// not arrive, apart from the handler that sent them.
func (g *group) deliver(ctx workflow.Context, what string, sessions []string, sent []workflow.Future) {
	g.delivering++
	workflow.Go(ctx, func(ctx workflow.Context) {
		defer func() { g.delivering-- }()
		for i, f := range sent {
			logUndelivered(ctx, what, sessions[i], f.Get(ctx, nil))
		}
	})
}

// pushPolicy sends the policy, with what was learned, to every session, in
// name order.
func (g *group) pushPolicy(ctx workflow.Context) {
	change := PolicyChange{Rotate: g.st.Policy, Learned: slices.Clone(g.st.Learned)}
	if g.has(VersionTargetedBoard) {
		sent := make([]workflow.Future, len(g.st.Sessions))
		for i, s := range g.st.Sessions {
			sent[i] = workflow.SignalExternalWorkflow(ctx, SessionID(g.name, s), "", SignalPolicy, change)
		}
		g.deliver(ctx, "policy", g.st.Sessions, sent)
		return
	}
	for _, s := range g.st.Sessions {
		err := workflow.SignalExternalWorkflow(ctx, SessionID(g.name, s), "", SignalPolicy, change).Get(ctx, nil)
		logUndelivered(ctx, "policy", s, err)
	}
}

// logUndelivered notes a push that did not reach a session. A session that
// does not exist yet is expected while nid up starts a group before its
// sessions: each new session asks for the board itself.
func logUndelivered(ctx workflow.Context, what, session string, err error) {
	var unknown *temporal.UnknownExternalWorkflowExecutionError
	switch {
	case err == nil:
	case errors.As(err, &unknown):
		workflow.GetLogger(ctx).Debug(what+" not delivered: no such session yet", "session", session)
	default:
		workflow.GetLogger(ctx).Warn(what+" not delivered", "session", session, "error", err)
	}
}
