package e2e

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/workflows"
)

// A user's day with groups: nid group set answers a value set to 0 as it
// now is; a group whose rotate mode is off is not said to rotate at a
// threshold; nid start GROUP starts what nid stop GROUP stopped; a group
// that left nid.yaml is stopped by nid reload and forgotten by nid forget,
// which refuses while it is in the file or still runs.
func TestGroupsStartSetAndForget(t *testing.T) {
	const web = `  web:
    rotate: {mode: handoff, contextTokens: 150000}
    budget: {turns: 500}
    sessions:
      - {agent: sim, name: lead, sim: {turnDelay: 0s}}
`
	const api = `  api:
    rotate: {mode: off}
    sessions:
      - {agent: sim, name: exec, sim: {turnDelay: 0s}}
`
	s := newSite(t, web+api)
	s.up()

	require.Equal(t, "web rotate: mode=handoff contextPercent=85 maxTurns=never\n", s.mustNid("group", "set", "web", `rotate={"contextTokens":0}`))
	require.Equal(t, "web budget: turns 0 spent (no limit), tokens 0 spent (no limit), usd 0.00 spent (no limit)\n", s.mustNid("group", "set", "web", `budget={"turns":0}`))
	require.Contains(t, s.mustNid("group", "show", "api"), "thresholds  never by the policy: rotate mode is off")
	require.Contains(t, s.mustNid("show", "api/exec"), "rotates at    never by the policy: rotate mode is off")

	s.mustNid("stop", "web")
	s.eventually("web/lead stopped", time.Minute, func() bool { return s.ls()["web/lead"].Status == workflows.StatusStopped })
	require.Equal(t, "started web/lead; it goes on in the same conversation\n", s.mustNid("start", "web"))
	s.eventually("web/lead back", time.Minute, func() bool { return s.ls()["web/lead"].Status == workflows.StatusIdle })

	_, errOut, code := s.nid("forget", "api")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "group api is still in nid.yaml: remove it from the file and run nid reload")
	s.groups = web
	s.writeConfig()
	_, errOut, code = s.nid("forget", "api")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "group api still runs api/exec (idle): nid stop api stops its sessions, then nid forget api forgets it")

	s.mustNid("reload")
	s.eventually("api/exec stopped: it left nid.yaml", time.Minute, func() bool { return s.ls()["api/exec"].Status == workflows.StatusStopped })
	require.Equal(t, "forgot group api and its sessions exec; their histories stay in Temporal\n", s.mustNid("forget", "api"))
	s.eventually("api gone from nid ls", 30*time.Second, func() bool {
		_, listed := s.ls()["api/exec"]
		return !listed
	})
	require.NotContains(t, s.mustNid("inbox"), "api/")
	require.NotContains(t, s.mustNid("board"), "api")
}
