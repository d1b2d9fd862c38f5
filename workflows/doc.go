// Package workflows holds nid's durable, deterministic workflows: Session
// (one per agent seat, forever), Rotation (a child per rotation), Group
// (policy, board, budget and inbox) and Hosts (the registry of workers).
// Only deterministic code lives here: workflow.Now, workflow.Go, selectors
// and activities; no wall clock, no goroutines, no unsorted map iteration.
//
// What the rest of nid sees is in messages*.go: every workflow, signal,
// query and update name with its payload (messages.go the shared ids, the
// session's signals and input, the hosts registry's and the search
// attributes; messages_view.go what a session shows; messages_rotation.go
// the rotation child's input and result; messages_group.go the group's and
// its board). The CLI, the HTTP server and the MCP endpoint use those names
// and never spell one twice. decide.go and threshold.go are the pure
// decisions they share with the session (what a manual rotate does, where
// a policy rotates); caps.go checks what enters a workflow; texts.go holds
// the words nid writes; signals.go the signal and continue-as-new helpers
// every long-running workflow uses.
//
// A session's state, SessionState in session_state.go, is made of parts
// embedded without a JSON name, so the state's JSON is flat as it always
// was: the conversation (its context record, queued messages, receipts and
// chart), the rotation state (policy, learned points, pending requests,
// failures and the breaker), the seat on the group's board (the board,
// claims, reservations, charges, rotation slots), the placement on a host
// (worktree, host, moves, salvage, push) and the feed (events). Each part's
// methods change that part alone. The running session (session.go) is its
// rules, which decide from input and state without acting (whether a turn
// or a rotation is due, which prompt goes next: session_team.go,
// triggers.go, session_turn.go), the runtime parts that act for it
// (groupLink sends the group what it asks and owes; listingRun keeps the
// search attributes and memo in search.go), and its own loop and handlers:
// session_signals.go folds signals in, session_turn.go runs turns,
// session_rotation.go runs and applies rotations, session_hosts.go follows
// its host and moves it, session_view.go makes its view in one function.
// triggers.go is the one ordered table of rotation triggers.
//
// Every behaviour change a running history could observe is a rung of the
// typed ladder in versions.go, checked with has(VersionX) on the rung a run
// read when it started; a recorded history of each rung under testdata/
// replays in TestReplay, so a session running for weeks survives an
// upgrade, and a refactor that keeps the JSON shapes needs no rung.
package workflows
