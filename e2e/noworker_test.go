package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/workflows"
)

// With every worker stopped (nid server keeps the sessions), nid show
// still answers from what the listing keeps, and every command that needs
// a workflow to answer says in one sentence that no worker runs, since
// when and what to start, from the first moment on: no gRPC words.
func TestCommandsWithoutAWorker(t *testing.T) {
	groups := `  web:
    rotate: {mode: off}
    sessions:
      - {agent: sim, name: lead, sim: {turnDelay: 0s}}
`
	host := newSite(t, groups)
	server := host.serveNid("server")
	guest := newSite(t, groups)
	guest.join(host)
	up := guest.up()
	guest.mustNid("send", "web/lead", "Write the parser")
	c := guest.client()
	guest.eventually("the first turn", time.Minute, func() bool {
		v := guest.session(c, "web", "lead")
		return v.Context.TotalTurns == 1 && v.Status == workflows.StatusIdle
	})
	require.NoError(t, up.interrupt(t))
	stopped := time.Now()

	out, errOut, code := guest.nid("show", "web/lead")
	require.Equal(t, 0, code, "%s%s", out, errOut)
	require.Contains(t, out, "status     idle\n")
	require.Contains(t, out, "turns      1 in all")
	require.Regexp(t, `^no worker is running \(the last one asked Temporal for nid's work at \d\d:\d\d:\d\d, \d+s ago\), so this is what web/lead last wrote`, errOut)

	for _, args := range [][]string{
		{"group", "show", "web"}, {"hosts"}, {"board"}, {"inbox"},
		{"stop", "web/lead"}, {"rotate", "web/lead"}, {"send", "web/lead", "hi"},
	} {
		out, errOut, code := guest.nid(args...)
		what := strings.Join(args, " ")
		require.Equal(t, 1, code, "nid %s: %s%s", what, out, errOut)
		require.Empty(t, out, "nid %s", what)
		require.Regexp(t, `did not answer: no worker is running \(the last one asked Temporal for nid's work at \d\d:\d\d:\d\d, \d+s ago\); start nid up or nid worker\n$`, errOut, "nid %s", what)
		require.Equal(t, 1, strings.Count(errOut, "\n"), "nid %s: one sentence:\n%s", what, errOut)
		for _, grpc := range []string{"RST_STREAM", "no poller", "deadline", "rpc error"} {
			require.NotContains(t, errOut, grpc, "nid %s", what)
		}
	}
	require.Less(t, time.Since(stopped), 2*time.Minute, "all within the two minutes the server counts the stopped worker as serving")
	require.Equal(t, workflows.StatusIdle, guest.ls()["web/lead"].Status, "nothing was stopped")
	require.NoError(t, server.interrupt(t))
}
