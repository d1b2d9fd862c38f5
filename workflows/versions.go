package workflows

// Every behaviour change to a workflow that running histories could observe
// is guarded by workflow.GetVersion with a change id listed here, newest last,
// each with what it changed. A recorded history under testdata/ covers each
// rung, and TestReplay replays them all, so sessions that have been running
// for weeks survive an upgrade.
//
// The ladder. v1 is the first release; its histories (testdata/v1-*.json)
// must keep replaying.

// VersionTeam (1): the board, claims, locks and budget. Groups push their
// board to sessions; sessions prepare a worktree, ask for tasks, charge
// every turn to the group and pause while the budget is exhausted.
// Histories: testdata/v2-*.json, and v2-rec-compact-can.json.gz (a whole
// session run ending in continue-as-new) with v2-rec-compact-run-2.json.gz
// (the run that took its state over).
const VersionTeam = "team"

// Real agents (claude, codex, exec) needed no version: every change they
// brought runs only on input a v1 history never holds. The rate_limit
// signal (the rate-limited status), the ContextFull error type (a forced
// handoff with reason context-full, which skips the handoff request) and
// AgentSpec.TurnTimeout (the activity's start-to-close timeout, which replay
// does not compare) leave the commands of every recorded path as they were.

// Board revisions needed no version either: a group numbers its pushes
// (BoardView.Rev) and a session ignores a board older than its own, and it
// decides whether a turn was reserved when the turn starts rather than when
// it ends. Histories before them carry no Rev, which is always taken, and
// the charge a session sends differs only in its payload, which replay does
// not compare.
