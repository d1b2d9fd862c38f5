package agents

import "time"

// SetIdleTimeout makes an adapter that keeps a process per session end one
// that sat idle for d instead of liveIdleTimeout, and says whether the
// adapter keeps such processes at all.
func SetIdleTimeout(a Agent, d time.Duration) bool {
	switch a := a.(type) {
	case *Claude:
		a.procs.setIdle(d)
	case *Codex:
		a.servers.setIdle(d)
	default:
		return false
	}
	return true
}

// The Codex sandbox's settings, for the test that reads them.
var (
	CodexSandbox       = codexSandbox
	PlaceReadOnlyFiles = placeReadOnlyFiles
	TomlString         = tomlString
)

// CodexProfile is the permission profile nid gives Codex.
const CodexProfile = codexProfile

// Where a session's sandbox lets it write git's files, for the tests that
// check they come from nid's record.
var (
	GitDirs     = gitDirs
	GitWritable = gitWritable
)
