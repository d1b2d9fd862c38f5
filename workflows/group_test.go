package workflows

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/nid-dev/nid/config"
)

type groupHarness struct {
	t      *testing.T
	env    *testsuite.TestWorkflowEnvironment
	mu     sync.Mutex
	pushed map[string][]config.Rotate
	// pushedLearned is what each policy push carried of learned points.
	pushedLearned map[string][][]LearnedPoint
	boards        map[string][]BoardView
	stops         []string
	// missing are the sessions (workflow ids) that do not run yet: a
	// board sent to one is not delivered.
	missing map[string]bool
}

func newGroupHarness(t *testing.T) *groupHarness {
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	h := &groupHarness{t: t, env: suite.NewTestWorkflowEnvironment(), pushed: map[string][]config.Rotate{}, pushedLearned: map[string][][]LearnedPoint{}}
	h.env.RegisterWorkflowWithOptions(GroupWorkflow, workflow.RegisterOptions{Name: GroupWorkflowName})
	onSignalOut(h.env, "", SignalPolicy, func(id string, p PolicyChange) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.pushed[id] = append(h.pushed[id], p.Rotate)
		h.pushedLearned[id] = append(h.pushedLearned[id], p.Learned)
	})
	h.boards, h.missing = map[string][]BoardView{}, map[string]bool{}
	h.env.OnSignalExternalWorkflow(mock.Anything, mock.Anything, "", SignalBoard, mock.Anything).Return(
		func(_, id, _, _ string, arg interface{}) error {
			h.mu.Lock()
			defer h.mu.Unlock()
			if h.missing[id] {
				return &temporal.UnknownExternalWorkflowExecutionError{}
			}
			h.boards[id] = append(h.boards[id], arg.(BoardView))
			return nil
		})
	onSignalOut(h.env, "", SignalStop, func(id string, _ StopRequest) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.stops = append(h.stops, id)
	})
	return h
}

// lastBoard is the last board pushed to a session.
func (h *groupHarness) lastBoard(session string) BoardView {
	h.mu.Lock()
	defer h.mu.Unlock()
	b := h.boards[SessionID("web", session)]
	require.NotEmpty(h.t, b, "no board pushed to %s", session)
	return b[len(b)-1]
}

// update runs an update at d and records its outcome.
type updateResult struct {
	rejected error
	err      error
	value    interface{}
	done     bool
}

func (h *groupHarness) update(d time.Duration, name string, arg interface{}, out interface{}) *updateResult {
	r := &updateResult{}
	h.env.RegisterDelayedCallback(func() {
		h.env.UpdateWorkflow(name, "", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { r.rejected, r.done = err, true },
			OnAccept: func() {},
			OnComplete: func(v interface{}, err error) {
				r.err, r.done = err, true
				if err == nil && out != nil {
					r.value = v
				}
			},
		}, arg)
	}, d)
	return r
}

func (h *groupHarness) run(in GroupInput, end time.Duration) GroupView {
	var v GroupView
	h.env.RegisterDelayedCallback(func() {
		q, err := h.env.QueryWorkflow(QueryGroup)
		require.NoError(h.t, err)
		require.NoError(h.t, q.Get(&v))
		h.env.CancelWorkflow()
	}, end)
	h.env.ExecuteWorkflow(GroupWorkflowName, in)
	var canceled *temporal.CanceledError
	require.True(h.t, errors.As(h.env.GetWorkflowError(), &canceled), "group ended with %v", h.env.GetWorkflowError())
	return v
}

func groupInput() GroupInput {
	return GroupInput{Name: "web", Goal: "Add dark mode", Policy: config.DefaultRotate(), Sessions: []string{"lead", "worker"}}
}

func TestGroupSetPolicyValidatesStoresAndPushes(t *testing.T) {
	h := newGroupHarness(t)
	good := h.update(time.Minute, UpdateSetPolicy, SetPolicy{RotateJSON: `{"mode":"handoff","maxTurns":40}`}, &config.Rotate{})
	bad := h.update(2*time.Minute, UpdateSetPolicy, SetPolicy{RotateJSON: `{"mode":"fast"}`}, nil)
	unknown := h.update(3*time.Minute, UpdateSetPolicy, SetPolicy{RotateJSON: `{"maxturns":3}`}, nil)
	v := h.run(groupInput(), time.Hour)

	require.True(t, good.done)
	require.NoError(t, good.rejected)
	require.NoError(t, good.err)
	want := config.Rotate{Mode: config.ModeHandoff, ContextPercent: 85, MaxTurns: 40, MaxConcurrentRotations: 2}
	require.Equal(t, want, v.Policy)
	require.Equal(t, []config.Rotate{want}, h.pushed[SessionID("web", "lead")])
	require.Equal(t, []config.Rotate{want}, h.pushed[SessionID("web", "worker")])

	require.Error(t, bad.rejected, "a bad mode is refused before anything changes")
	require.Contains(t, bad.rejected.Error(), "fast")
	require.Contains(t, bad.rejected.Error(), "auto, compact, handoff, off")
	require.Error(t, unknown.rejected)
	require.Contains(t, unknown.rejected.Error(), "maxturns")
}

func TestGroupSyncAppliesTheFileOnlyWhenItChanged(t *testing.T) {
	h := newGroupHarness(t)
	in := groupInput()
	h.update(time.Minute, UpdateSetPolicy, SetPolicy{RotateJSON: `{"maxTurns":7}`}, nil)
	// nid up again with the same file: the policy set by hand stays.
	h.update(2*time.Minute, UpdateSync, GroupSync{Goal: in.Goal, Rotate: in.Policy, Sessions: []string{"lead", "worker", "critic"}}, nil)
	v1 := GroupView{}
	h.env.RegisterDelayedCallback(func() {
		q, err := h.env.QueryWorkflow(QueryGroup)
		require.NoError(t, err)
		require.NoError(t, q.Get(&v1))
	}, 3*time.Minute)
	// The file changed its policy: the file wins.
	edited := config.Rotate{Mode: config.ModeCompact, ContextPercent: 70}
	h.update(4*time.Minute, UpdateSync, GroupSync{Goal: "Dark mode, everywhere", Rotate: edited, Sessions: []string{"lead"}}, nil)
	bad := h.update(5*time.Minute, UpdateSync, GroupSync{Rotate: config.Rotate{Mode: "sometimes", ContextPercent: 85}}, nil)
	v := h.run(in, time.Hour)

	require.Equal(t, 7, v1.Policy.MaxTurns)
	require.Equal(t, []string{"critic", "lead", "worker"}, v1.Sessions)
	require.Equal(t, edited, v.Policy)
	require.Equal(t, "Dark mode, everywhere", v.Goal)
	require.Equal(t, []string{"critic", "lead", "worker"}, v.Sessions, "sessions are never dropped by a sync")
	require.Error(t, bad.rejected)
	require.Contains(t, h.pushed[SessionID("web", "critic")], edited)
}

func TestGroupInboxKeepsItemsInOrder(t *testing.T) {
	h := newGroupHarness(t)
	h.env.RegisterDelayedCallback(func() {
		h.env.SignalWorkflow(SignalInbox, InboxItem{Group: "web", Session: "lead", Kind: EventRotationFailed, Text: "compact failed"})
		h.env.SignalWorkflow(SignalInbox, InboxItem{Group: "web", Session: "worker", Kind: EventTurnFailed, Text: "3 turns failed"})
	}, time.Minute)
	v := h.run(groupInput(), time.Hour)
	require.Len(t, v.Inbox, 2)
	require.Equal(t, int64(1), v.Inbox[0].Seq)
	require.Equal(t, "compact failed", v.Inbox[0].Text)
	require.Equal(t, "worker", v.Inbox[1].Session)
}

func TestGroupContinuesAsNewWithItsState(t *testing.T) {
	h := newGroupHarness(t)
	h.update(time.Minute, UpdateSetPolicy, SetPolicy{RotateJSON: `{"mode":"off"}`}, nil)
	h.env.RegisterDelayedCallback(func() {
		h.env.SignalWorkflow(SignalInbox, InboxItem{Group: "web", Kind: EventRotationFailed, Text: "x"})
	}, 2*time.Minute)
	learned := LearnedPoint{Kind: "claude", Model: "claude-sonnet-4-5", Percent: 80, SeenTokens: 166_000, Window: 200_000}
	h.env.RegisterDelayedCallback(func() { h.env.SignalWorkflow(SignalLearned, learned) }, 150*time.Second)
	h.env.RegisterDelayedCallback(func() { h.env.SetContinueAsNewSuggested(true) }, 3*time.Minute)
	h.env.ExecuteWorkflow(GroupWorkflowName, groupInput())
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(h.env.GetWorkflowError(), &can))
	var next GroupInput
	require.NoError(t, decodeFirst(can, &next))
	require.Equal(t, config.ModeOff, next.State.Policy.Mode)
	require.Equal(t, []LearnedPoint{learned}, next.State.Learned, "what it learned of a vendor goes on")
	require.Len(t, next.State.Inbox, 2, "the failure and what it learned")
	require.Equal(t, []string{"lead", "worker"}, next.State.Sessions)

	// Every push is numbered after the last, and the next run goes on from
	// there: a session can tell an old board from a new one.
	boards := h.boards[SessionID("web", "lead")]
	require.NotEmpty(t, boards)
	for i, b := range boards {
		require.EqualValues(t, i+1, b.Rev)
	}
	require.EqualValues(t, len(boards), next.State.BoardRev)
}

func TestBoardTextNamesGoalTasksLocksAndWhatIsYours(t *testing.T) {
	var b BoardState
	b.add("Dark mode toggle", "")
	b.add("Settings page", "")
	b.claim("lead", "t1", time.Time{})
	b.acquire("worker", "src/settings.tsx", time.Time{})
	text := BoardText(b.view("web", "Add dark mode"), "lead")
	require.Equal(t, "Board of group web\n"+
		"Goal: Add dark mode\n"+
		"Tasks:\n"+
		"  t1 [claimed] Dark mode toggle (claimed by lead) <- yours\n"+
		"  t2 [todo] Settings page\n"+
		"Locks:\n"+
		"  src/settings.tsx (held by worker)\n", text)
}

func boardInput() GroupInput {
	in := groupInput()
	in.Tasks = []config.Task{{Title: "Dark mode toggle"}, {Title: "Settings page", Detail: "the form"}}
	return in
}

func TestGroupClaimConflictsNameTheHolder(t *testing.T) {
	h := newGroupHarness(t)
	claim := h.update(time.Minute, UpdateTaskClaim, BoardRequest{Session: "lead", TaskID: "t1"}, &BoardResult{})
	again := h.update(2*time.Minute, UpdateTaskClaim, BoardRequest{Session: "lead", TaskID: "t1"}, &BoardResult{})
	stolen := h.update(3*time.Minute, UpdateTaskClaim, BoardRequest{Session: "worker", TaskID: "t1"}, nil)
	notYours := h.update(4*time.Minute, UpdateTaskDone, BoardRequest{Session: "worker", TaskID: "t1"}, nil)
	unknown := h.update(5*time.Minute, UpdateTaskClaim, BoardRequest{Session: "worker", TaskID: "t9"}, nil)
	stranger := h.update(6*time.Minute, UpdateTaskClaim, BoardRequest{Session: "ghost", TaskID: "t2"}, nil)
	done := h.update(7*time.Minute, UpdateTaskDone, BoardRequest{Session: "lead", TaskID: "t1"}, &BoardResult{})
	reclaim := h.update(8*time.Minute, UpdateTaskClaim, BoardRequest{Session: "worker", TaskID: "t1"}, nil)
	v := h.run(boardInput(), time.Hour)

	require.NoError(t, claim.rejected)
	require.NoError(t, again.rejected, "claiming your own task again is granted")
	require.EqualError(t, stolen.rejected, "task t1 is claimed by lead")
	require.EqualError(t, notYours.rejected, "task t1 is claimed by lead, not worker")
	require.EqualError(t, unknown.rejected, `no task "t9" (tasks: t1, t2)`)
	require.EqualError(t, stranger.rejected, `no session "ghost" in group web (sessions: lead, worker)`)
	require.NoError(t, done.rejected)
	require.EqualError(t, reclaim.rejected, "task t1 is done")
	require.Equal(t, TaskDone, v.Board.Tasks[0].Status)
	require.Equal(t, TaskTodo, v.Board.Tasks[1].Status)
	require.Equal(t, TaskDone, h.lastBoard("lead").Tasks[0].Status, "the session that changed the board hears it")
	require.Equal(t, 2, h.lastBoard("worker").Open, "a claim and a task done concern only the session that made them")
}

// A group of many sessions sends a board change only to the sessions it
// concerns: one signal for a claim, a lock or a task done, the sessions
// without a task for a task added, and each its seat's board.
func TestGroupPushesABoardOnlyWhereItConcerns(t *testing.T) {
	h := newGroupHarness(t)
	in := boardInput()
	in.Sessions = nil
	for i := range 50 {
		in.Sessions = append(in.Sessions, fmt.Sprintf("s%02d", i))
	}
	counts := func() int {
		h.mu.Lock()
		defer h.mu.Unlock()
		n := 0
		for _, b := range h.boards {
			n += len(b)
		}
		return n
	}
	var afterStart, afterChanges, afterAdd int
	h.env.RegisterDelayedCallback(func() { afterStart = counts() }, 30*time.Second)
	claim := h.update(time.Minute, UpdateTaskClaim, BoardRequest{Session: "s01", TaskID: "t2"}, &BoardResult{})
	h.update(2*time.Minute, UpdateLockAcquire, BoardRequest{Session: "s02", Lock: "src/app.go"}, nil)
	h.update(3*time.Minute, UpdateLockRelease, BoardRequest{Session: "s02", Lock: "src/app.go"}, nil)
	h.update(4*time.Minute, UpdateTaskDone, BoardRequest{Session: "s01", TaskID: "t2"}, nil)
	h.env.RegisterDelayedCallback(func() { h.env.SignalWorkflow(SignalClaimNext, ClaimNext{Session: "s03"}) }, 5*time.Minute)
	h.env.RegisterDelayedCallback(func() { afterChanges = counts() }, 6*time.Minute)
	h.update(7*time.Minute, UpdateTaskAdd, BoardRequest{Title: "Docs", Detail: "the README"}, nil)
	h.env.RegisterDelayedCallback(func() { afterAdd = counts() }, 8*time.Minute)
	h.run(in, time.Hour)

	require.Equal(t, 50, afterStart, "a new group's first board goes to every session")
	require.Equal(t, 5, afterChanges-afterStart, "five changes, each for one session, are five signals, not 250")
	require.Equal(t, 49, afterAdd-afterChanges, "a task added goes to the 49 sessions without one")
	require.Equal(t, TaskDone, taskOf(h.lastBoard("s01"), "t2").Status)
	mine := h.lastBoard("s03")
	require.Equal(t, "s03", mine.HeldBy("s03").Holder)
	require.Equal(t, []string{"t1"}, taskIDs(mine), "a session is sent its own tasks")
	other := h.lastBoard("s04")
	require.Empty(t, taskIDs(other), "the others' tasks and the open ones are counted")
	require.Equal(t, 2, other.Others)
	require.Equal(t, 1, other.Open)
	require.True(t, other.HasOpen(), "so that it asks for the open one")
	text := BoardText(other, "s04")
	require.Contains(t, text, "Tasks: none yours.")
	require.Contains(t, text, "(and 2 claimed or done by other sessions: board_read lists them)")
	require.Contains(t, text, "(and 1 open: board_read lists them)")
	require.Equal(t, "the form", taskOf(h.lastBoard("s01"), "t2").Detail, "its own task keeps its detail")
	answered := claim.value.(BoardResult)
	require.Equal(t, "t2", answered.Task.ID)
	require.Nil(t, answered.Board, "a claim is answered with the task, and no board")
}

func taskOf(b BoardView, id string) Task {
	for _, t := range b.Tasks {
		if t.ID == id {
			return t
		}
	}
	return Task{}
}

func taskIDs(b BoardView) []string {
	var ids []string
	for _, t := range b.Tasks {
		ids = append(ids, t.ID)
	}
	return ids
}

// A group that continues as new sends no board: its sessions have it.
func TestGroupContinuedPushesNoBoard(t *testing.T) {
	h := newGroupHarness(t)
	in := boardInput()
	in.State = &GroupState{Sessions: in.Sessions, Board: BoardState{Tasks: []Task{{ID: "t1", Title: "Dark mode toggle", Status: TaskTodo}}}, BoardRev: 7}
	h.update(time.Minute, UpdateLockAcquire, BoardRequest{Session: "lead", Lock: "src/app.go"}, nil)
	h.run(in, time.Hour)
	require.Len(t, h.boards[SessionID("web", "lead")], 1, "only the lock's push")
	require.EqualValues(t, 8, h.lastBoard("lead").Rev)
	require.Empty(t, h.boards[SessionID("web", "worker")])
}

func TestGroupLockConflictsNameTheHolder(t *testing.T) {
	h := newGroupHarness(t)
	h.update(time.Minute, UpdateLockAcquire, BoardRequest{Session: "lead", Lock: "src/app.go"}, nil)
	taken := h.update(2*time.Minute, UpdateLockAcquire, BoardRequest{Session: "worker", Lock: "src/app.go"}, nil)
	notYours := h.update(3*time.Minute, UpdateLockRelease, BoardRequest{Session: "worker", Lock: "src/app.go"}, nil)
	notHeld := h.update(4*time.Minute, UpdateLockRelease, BoardRequest{Session: "worker", Lock: "src/other.go"}, nil)
	empty := h.update(5*time.Minute, UpdateLockAcquire, BoardRequest{Session: "worker", Lock: " "}, nil)
	released := h.update(6*time.Minute, UpdateLockRelease, BoardRequest{Session: "lead", Lock: "src/app.go"}, nil)
	after := h.update(7*time.Minute, UpdateLockAcquire, BoardRequest{Session: "worker", Lock: "src/app.go"}, nil)
	v := h.run(boardInput(), time.Hour)

	require.EqualError(t, taken.rejected, `lock "src/app.go" is held by lead`)
	require.EqualError(t, notYours.rejected, `lock "src/app.go" is held by lead, not worker`)
	require.EqualError(t, notHeld.rejected, `lock "src/other.go" is not held`)
	require.Error(t, empty.rejected)
	require.NoError(t, released.rejected)
	require.NoError(t, after.rejected)
	require.Equal(t, []Lock{{Name: "src/app.go", Holder: "worker", At: v.Board.Locks[0].At}}, v.Board.Locks)
}

func TestGroupStopReleasesClaimsAndLocks(t *testing.T) {
	h := newGroupHarness(t)
	h.update(time.Minute, UpdateTaskClaim, BoardRequest{Session: "lead", TaskID: "t2"}, nil)
	h.update(2*time.Minute, UpdateLockAcquire, BoardRequest{Session: "lead", Lock: "src/app.go"}, nil)
	stop := h.update(3*time.Minute, UpdateStopSession, BoardRequest{Session: "lead"}, &BoardResult{})
	twice := h.update(4*time.Minute, UpdateStopSession, BoardRequest{Session: "lead"}, nil)
	late := h.update(5*time.Minute, UpdateTaskClaim, BoardRequest{Session: "lead", TaskID: "t1"}, nil)
	v := h.run(boardInput(), time.Hour)

	require.NoError(t, stop.rejected)
	require.Equal(t, []string{"task t2", "lock src/app.go"}, stop.value.(BoardResult).Released)
	require.Equal(t, TaskTodo, v.Board.Tasks[1].Status, "the task goes back to the board")
	require.Empty(t, v.Board.Tasks[1].Holder)
	require.Empty(t, v.Board.Locks)
	require.Equal(t, []string{"lead"}, v.Stopped)
	require.Equal(t, []string{SessionID("web", "lead")}, h.stops)
	require.EqualError(t, twice.rejected, "session web/lead is stopped")
	require.EqualError(t, late.rejected, "session web/lead is stopped")
}

func TestGroupClaimNextHandsOutOpenTasksInOrder(t *testing.T) {
	h := newGroupHarness(t)
	h.env.RegisterDelayedCallback(func() {
		h.env.SignalWorkflow(SignalClaimNext, ClaimNext{Session: "lead"})
		h.env.SignalWorkflow(SignalClaimNext, ClaimNext{Session: "worker"})
		h.env.SignalWorkflow(SignalClaimNext, ClaimNext{Session: "lead"}) // already holds one
	}, time.Minute)
	v := h.run(boardInput(), time.Hour)
	require.Equal(t, "lead", v.Board.Tasks[0].Holder)
	require.Equal(t, "worker", v.Board.Tasks[1].Holder)
	require.Equal(t, "lead", h.lastBoard("lead").HeldBy("lead").Holder)
}

func TestGroupBudgetExhaustsOnceAndRaisingResumes(t *testing.T) {
	h := newGroupHarness(t)
	in := boardInput()
	in.Budget = config.Budget{Turns: 3}
	h.env.RegisterDelayedCallback(func() {
		for i := 0; i < 5; i++ {
			h.env.SignalWorkflow(SignalCharge, Charge{Session: "lead", Turns: 1, Tokens: 100})
		}
	}, time.Minute)
	var spent GroupView
	h.env.RegisterDelayedCallback(func() {
		q, err := h.env.QueryWorkflow(QueryGroup)
		require.NoError(t, err)
		require.NoError(t, q.Get(&spent))
	}, 2*time.Minute)
	bad := h.update(3*time.Minute, UpdateSetBudget, SetBudget{BudgetJSON: `{"turns":-1}`}, nil)
	raised := h.update(4*time.Minute, UpdateSetBudget, SetBudget{BudgetJSON: `{"turns":10}`}, &config.Budget{})
	v := h.run(in, time.Hour)

	require.Equal(t, "turns", spent.Board.Exhausted)
	require.EqualValues(t, 5, spent.Board.Spent.Turns, "turns already running are still counted")
	require.Len(t, spent.Inbox, 1, "one exhaustion is one inbox item")
	require.Contains(t, spent.Inbox[0].Text, "budget exhausted (turns): turns 3 of 3 spent (0 left)")
	require.Equal(t, "turns", h.lastBoardAt(SessionID("web", "worker"), 1).Exhausted, "sessions hear of it")
	require.Error(t, bad.rejected)
	require.NoError(t, raised.rejected)
	require.Empty(t, v.Board.Exhausted)
	require.Empty(t, h.lastBoard("lead").Exhausted, "raising the budget resumes the sessions")
}

// lastBoardAt is the board pushed to a session n pushes before the last.
func (h *groupHarness) lastBoardAt(id string, n int) BoardView {
	h.mu.Lock()
	defer h.mu.Unlock()
	b := h.boards[id]
	require.Greater(h.t, len(b), n)
	return b[len(b)-1-n]
}

func TestGroupReservationsNeverGrantMoreTurnsThanTheBudget(t *testing.T) {
	h := newGroupHarness(t)
	in := boardInput()
	in.Budget = config.Budget{Turns: 1}
	h.env.RegisterDelayedCallback(func() {
		h.env.SignalWorkflow(SignalReserve, Reserve{Session: "lead", Seq: 1})
		h.env.SignalWorkflow(SignalReserve, Reserve{Session: "worker", Seq: 1})
	}, time.Minute)
	v := h.run(in, time.Hour)
	require.Equal(t, map[string]int64{"lead": 1}, v.Board.Grants, "the last turn goes to one session")
	require.EqualValues(t, 1, v.Board.Spent.Turns)
	require.Equal(t, "turns", v.Board.Exhausted)
	require.Equal(t, "turns", h.lastBoard("worker").Exhausted, "the other session hears it is refused")
}

// Locks are capped per session and per group; a refusal says which cap and
// takes back nothing already held.
func TestLockCapsRefuseAndKeepWhatIsHeld(t *testing.T) {
	h := newGroupHarness(t)
	in := groupInput()
	in.Sessions = nil
	for i := 0; i < MaxLocks/MaxLocksPerSession+1; i++ {
		in.Sessions = append(in.Sessions, fmt.Sprintf("s%d", i))
	}
	in.State = &GroupState{Sessions: in.Sessions, Board: BoardState{Prompts: config.DefaultPrompts()}}
	for _, s := range in.Sessions[:len(in.Sessions)-1] {
		for j := 0; j < MaxLocksPerSession; j++ {
			in.State.Board.Locks = append(in.State.Board.Locks, Lock{Name: fmt.Sprintf("%s/f%02d", s, j), Holder: s})
		}
	}
	last := in.Sessions[len(in.Sessions)-1]
	perSession := h.update(time.Minute, UpdateLockAcquire, BoardRequest{Session: "s0", Lock: "one/more"}, nil)
	again := h.update(2*time.Minute, UpdateLockAcquire, BoardRequest{Session: "s0", Lock: "s0/f00"}, nil)
	perGroup := h.update(3*time.Minute, UpdateLockAcquire, BoardRequest{Session: last, Lock: "src/app.go"}, nil)
	release := h.update(4*time.Minute, UpdateLockRelease, BoardRequest{Session: "s1", Lock: "s1/f00"}, nil)
	after := h.update(5*time.Minute, UpdateLockAcquire, BoardRequest{Session: last, Lock: "src/app.go"}, nil)
	v := h.run(in, time.Hour)

	require.EqualError(t, perSession.rejected, "s0 holds 32 locks, the most a session may: release one first")
	require.NoError(t, again.rejected, "taking a lock it holds is no new lock")
	require.EqualError(t, perGroup.rejected, "the group's sessions hold 256 locks, the most a group may: release some first")
	require.NoError(t, release.rejected)
	require.NoError(t, after.rejected, "room again once one is released")
	require.Len(t, v.Board.Locks, MaxLocks)
	require.True(t, slices.ContainsFunc(v.Board.Locks, func(l Lock) bool { return l.Name == "s0/f31" && l.Holder == "s0" }))
}

func TestABoardKeepsAtMostMaxTasks(t *testing.T) {
	h := newGroupHarness(t)
	in := groupInput()
	in.State = &GroupState{Sessions: in.Sessions, Board: BoardState{Prompts: config.DefaultPrompts()}}
	for i := 0; i < MaxTasks; i++ {
		in.State.Board.add(fmt.Sprintf("task %d", i), "")
	}
	add := h.update(time.Minute, UpdateTaskAdd, BoardRequest{Title: "one too many"}, nil)
	sync := h.update(2*time.Minute, UpdateSync, GroupSync{Rotate: in.Policy, Tasks: []config.Task{{Title: "task 1"}, {Title: "new"}}}, nil)
	v := h.run(in, time.Hour)
	require.EqualError(t, add.rejected, "the board holds 300 tasks and keeps at most 300")
	require.Error(t, sync.rejected)
	require.Contains(t, sync.rejected.Error(), "keeps at most 300")
	require.Len(t, v.Board.Tasks, MaxTasks)
}

// A failure that repeats is one inbox item with a count; another kind of
// news in between starts a new item. Clearing removes what the human saw.
func TestInboxCountsRepeatsAndClears(t *testing.T) {
	h := newGroupHarness(t)
	h.env.RegisterDelayedCallback(func() {
		for i := 1; i <= 3; i++ {
			h.env.SignalWorkflow(SignalInbox, InboxItem{Group: "web", Session: "lead", Kind: EventRotationFailed, Text: fmt.Sprintf("compact failed %d", i)})
		}
		h.env.SignalWorkflow(SignalInbox, InboxItem{Group: "web", Session: "worker", Kind: EventRotationFailed, Text: "worker failed"})
		h.env.SignalWorkflow(SignalInbox, InboxItem{Group: "web", Session: "lead", Kind: EventRotationFailed, Text: "compact failed 4"})
		h.env.SignalWorkflow(SignalInbox, InboxItem{Group: "web", Session: "lead", Kind: EventTurnFailed, Text: "turns failed"})
	}, time.Minute)
	var before GroupView
	h.env.RegisterDelayedCallback(func() {
		q, err := h.env.QueryWorkflow(QueryGroup)
		require.NoError(t, err)
		require.NoError(t, q.Get(&before))
	}, 2*time.Minute)
	bad := h.update(3*time.Minute, UpdateInboxClear, InboxClear{Through: -1}, nil)
	cleared := h.update(4*time.Minute, UpdateInboxClear, InboxClear{Through: 2}, new(int))
	v := h.run(groupInput(), time.Hour)

	require.Len(t, before.Inbox, 3)
	require.Equal(t, "compact failed 4", before.Inbox[0].Text)
	require.Equal(t, 4, before.Inbox[0].Count, "the lead's repeats, with the worker's item between them on another session")
	require.Equal(t, "worker failed", before.Inbox[1].Text)
	require.Equal(t, "turns failed", before.Inbox[2].Text)
	require.Equal(t, 0, before.Inbox[2].Count)
	require.Error(t, bad.rejected)
	require.NoError(t, cleared.err)
	require.Equal(t, 2, cleared.value)
	require.Len(t, v.Inbox, 1)
	require.Equal(t, "turns failed", v.Inbox[0].Text)
}

// What a session learns of its vendor reaches every session of the group,
// and the inbox once; the human can set or forget a point, and a point set
// stays as set.
func TestGroupLearnsAVendorsPointOnceAndTheHumanCanOverride(t *testing.T) {
	h := newGroupHarness(t)
	seen := LearnedPoint{Kind: "claude", Model: "claude-sonnet-4-5", Percent: 80, SeenTokens: 166_000, Window: 200_000}
	h.env.RegisterDelayedCallback(func() {
		h.env.SignalWorkflow(SignalLearned, seen)
		h.env.SignalWorkflow(SignalLearned, seen) // the sibling saw it too
	}, time.Minute)
	var learned GroupView
	h.env.RegisterDelayedCallback(func() {
		q, err := h.env.QueryWorkflow(QueryGroup)
		require.NoError(t, err)
		require.NoError(t, q.Get(&learned))
	}, 2*time.Minute)
	set := h.update(3*time.Minute, UpdateSetLearned, SetLearned{LearnedJSON: `{"claude/claude-sonnet-4-5": 75}`}, &[]LearnedPoint{})
	bad := h.update(4*time.Minute, UpdateSetLearned, SetLearned{LearnedJSON: `{"claude/claude-sonnet-4-5": 0.5}`}, nil)
	h.env.RegisterDelayedCallback(func() {
		h.env.SignalWorkflow(SignalLearned, LearnedPoint{Kind: "claude", Model: "claude-sonnet-4-5", Percent: 70, SeenTokens: 146_000, Window: 200_000})
	}, 5*time.Minute)
	v := h.run(groupInput(), time.Hour)

	require.Equal(t, []LearnedPoint{seen}, learned.Learned)
	require.Len(t, learned.Inbox, 1, "said once")
	require.Equal(t, `Claude Code compacted itself at 83% of 200k; nid now rotates claude-sonnet-4-5 sessions at 80% (nid group set web learned='{"claude/claude-sonnet-4-5": null}' forgets it)`,
		learned.Inbox[0].Text)
	pushes := h.pushedLearned[SessionID("web", "worker")]
	require.NotEmpty(t, pushes)
	require.Equal(t, []LearnedPoint{seen}, pushes[0], "every session hears of it")

	require.NoError(t, set.err)
	require.Error(t, bad.rejected)
	require.Equal(t, []LearnedPoint{{Kind: "claude", Model: "claude-sonnet-4-5", Percent: 75, Set: true}}, v.Learned,
		"what the human set stays as set")
	require.Len(t, v.Inbox, 1)
}

// The group gives at most maxConcurrentRotations rotation slots, tells a
// session when it has one, and gives a slot given back (or freed by a stop,
// or by a higher limit) to the fullest waiting.
func TestGroupGovernsRotationSlots(t *testing.T) {
	h := newGroupHarness(t)
	in := groupInput()
	in.Sessions = []string{"a", "b", "c", "d"}
	in.Policy.MaxConcurrentRotations = 1
	ask := func(d time.Duration, s string, full float64) {
		h.env.RegisterDelayedCallback(func() {
			h.env.SignalWorkflow(SignalSlot, SlotRequest{Session: s, Seq: 1, Want: true, Fullness: full})
		}, d)
	}
	ask(time.Minute, "a", 81)
	ask(2*time.Minute, "b", 82)
	ask(2*time.Minute, "c", 95)
	ask(2*time.Minute, "d", 90)
	var one GroupView
	h.env.RegisterDelayedCallback(func() {
		q, err := h.env.QueryWorkflow(QueryGroup)
		require.NoError(t, err)
		require.NoError(t, q.Get(&one))
		h.env.SignalWorkflow(SignalSlot, SlotRequest{Session: "a", Seq: 1})
	}, 3*time.Minute)
	stop := h.update(4*time.Minute, UpdateStopSession, BoardRequest{Session: "c"}, nil)
	raise := h.update(5*time.Minute, UpdateSetPolicy, SetPolicy{RotateJSON: `{"maxConcurrentRotations":3}`}, nil)
	v := h.run(in, time.Hour)

	require.Equal(t, []SlotRequest{{Session: "a", Seq: 1, Want: true, Fullness: 81}}, one.Board.Slots, "one at a time")
	require.True(t, h.lastBoard("c").holds(SlotRequest{Session: "c", Seq: 1}), "the fullest waiting got a's slot")
	require.NoError(t, stop.err)
	require.NoError(t, raise.err)
	require.True(t, h.lastBoard("d").holds(SlotRequest{Session: "d", Seq: 1}), "c's stop freed its slot for d")
	require.True(t, h.lastBoard("b").holds(SlotRequest{Session: "b", Seq: 1}), "the higher limit let b in")
	require.Len(t, v.Board.Slots, 2)
}

// A session joining a running group is given the board as the group would
// send it: its own task, the open ones counted, the others' counted.
func TestSeatOfARunningGroupsBoard(t *testing.T) {
	v := GroupView{Board: BoardView{Group: "web", Rev: 9, Tasks: []Task{
		{ID: "t1", Title: "Open", Status: TaskTodo},
		{ID: "t2", Title: "Another's", Status: TaskClaimed, Holder: "lead"},
		{ID: "t3", Title: "Its own", Status: TaskClaimed, Holder: "late"},
	}, Grants: map[string]int64{"lead": 3}}}
	seat := SeatOf(v, "late")
	require.Equal(t, []Task{v.Board.Tasks[2]}, seat.Tasks)
	require.Equal(t, 1, seat.Open)
	require.Equal(t, 1, seat.Others)
	require.Empty(t, seat.Grants)
}

// A group nid up starts while giving the sessions it starts their board
// (VersionQuietStart) sends its first board only to the sessions nid up
// found running, and only to those of its own that the input names.
func TestAGroupNidUpStartsSendsItsFirstBoardOnlyToThoseRunning(t *testing.T) {
	h := newGroupHarness(t)
	in := boardInput()
	in.Sessions = []string{"lead", "worker", "third"}
	in.BoardsAtStart, in.Running = true, []string{"worker", "ghost", "../../etc"}
	h.run(in, time.Hour)
	require.Len(t, h.boards, 1, "pushed to: %v", slices.Collect(maps.Keys(h.boards)))
	require.Len(t, h.boards[SessionID("web", "worker")], 1)

	// One that no nid up told what runs sends it to every session.
	h = newGroupHarness(t)
	in.BoardsAtStart, in.Running = false, nil
	h.run(in, time.Hour)
	require.Len(t, h.boards, 3)
}

// A board that found a session not yet running is sent again once nid up
// says the session started, and only then; a session it reached, one the
// group does not have and one stopped since are not sent it again.
func TestABoardThatFoundNoSessionIsSentAgainOnceItStarted(t *testing.T) {
	h := newGroupHarness(t)
	in := boardInput()
	in.Sessions = []string{"lead", "worker", "late", "gone"}
	in.BoardsAtStart = true
	for _, s := range []string{"late", "gone"} {
		h.missing[SessionID("web", s)] = true
	}
	count := func(s string) int {
		h.mu.Lock()
		defer h.mu.Unlock()
		return len(h.boards[SessionID("web", s)])
	}
	var before map[string]int
	h.update(time.Minute, UpdateTaskAdd, BoardRequest{Title: "Docs"}, nil)
	h.env.RegisterDelayedCallback(func() {
		before = map[string]int{"lead": count("lead"), "worker": count("worker"), "late": count("late")}
		h.mu.Lock()
		h.missing = map[string]bool{}
		h.mu.Unlock()
	}, 2*time.Minute)
	h.update(3*time.Minute, UpdateStopSession, BoardRequest{Session: "gone"}, nil)
	h.env.RegisterDelayedCallback(func() {
		h.env.SignalWorkflow(SignalStarted, SessionsStarted{Sessions: []string{"lead", "worker", "late", "gone", "ghost", "../../etc"}})
	}, 4*time.Minute)
	h.run(in, time.Hour)

	require.Equal(t, map[string]int{"lead": 1, "worker": 1, "late": 0}, before, "the task added went to all four; two did not run")
	require.Equal(t, 1, count("late"), "sent again once started")
	require.Equal(t, h.lastBoard("lead").Open, h.lastBoard("late").Open, "with the task added")
	require.Equal(t, 1, count("lead"), "a session the board reached is not sent it again")
	require.Zero(t, count("gone"), "nor one stopped since")
}

// A session nid up says it started while the board sent to it before it
// ran is still on its way is owed the board again: the group learns only
// once that board's turn comes whether it reached the session. A name that
// is not a session of the group's, or one stopped, is owed nothing.
func TestABoardOnItsWayWhenItsSessionStartsIsOwedAgain(t *testing.T) {
	g := &group{name: "web", ladder: ladder{versionLatest}, st: &GroupState{
		Sessions: []string{"done", "gone", "late", "lost"}, Stopped: []string{"gone"},
		Unreached: []string{"lost"},
	}}
	g.sending = []string{"done", "gone", "late"}
	g.onStarted(nil, SessionsStarted{Sessions: []string{"late", "lost", "gone", "ghost", "../../etc"}})
	require.Equal(t, []string{"late", "lost"}, g.st.Owed)
	require.Empty(t, g.st.Unreached)
}
