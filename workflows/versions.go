package workflows

// Every behaviour change to a workflow that running histories could observe
// is guarded by workflow.GetVersion with a change id listed here, newest last,
// each with what it changed. A recorded history under testdata/ covers each
// rung, and TestReplay replays them all, so sessions that have been running
// for weeks survive an upgrade.
//
// The ladder (none yet: v1 is the first release; histories recorded from it
// live in testdata/ and must keep replaying).
