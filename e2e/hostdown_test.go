package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/workflows"
)

// joinedHost is a site that runs only nid worker, as host name, against
// the nid server of srv, with srv's groups: a worker takes what it runs
// from its own nid.yaml.
func joinedHost(t *testing.T, srv *site, name string) *site {
	h := newSite(t, srv.groups)
	h.worker = "  host: " + name + "\n  maxSessions: 4\n  heartbeat: 1s\n"
	h.join(srv)
	return h
}

// A session busy with a turn on a host whose worker is killed: nid rotate
// says nothing runs until the host is back, and nid move takes it to the
// other host at once. The turn is lost with the host, the session hands
// off with what it last said, its fresh conversation (numbered on from
// the old one, not sim-1 again) runs on the new host, and the human's
// message the lost turn carried runs there.
func TestABusySessionMovesOffAHostThatIsDown(t *testing.T) {
	groups := `  web:
    rotate: {mode: off}
    sessions:
      - {agent: sim, name: lead, host: host-a, sim: {window: 1000000, tokensPerTurn: 100, turnDelay: 10s}}
`
	srv := newSite(t, groups)
	srv.serveNid("server")
	hostA, hostB := joinedHost(t, srv, "host-a"), joinedHost(t, srv, "host-b")
	workerA := hostA.serveNid("worker")
	hostB.serveNid("worker")
	coord := newSite(t, groups)
	coord.worker = "  maxSessions: 0\n"
	coord.join(srv)
	up := coord.up()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("nid up:\n%s\nhost-a:\n%s", up.out.String(), workerA.out.String())
		}
	})

	c := coord.client()
	coord.mustNid("send", "web/lead", "Write the parser")
	coord.eventually("the first turn", 2*time.Minute, func() bool {
		v, err := querySessionView(c, "web", "lead")
		return err == nil && v.Context.TotalTurns == 1 && v.Status == workflows.StatusIdle
	})
	require.Equal(t, "host-a", coord.ls()["web/lead"].Host)
	coord.mustNid("send", "web/lead", "Write the printer")
	coord.eventually("the second turn to reach host-a", time.Minute, func() bool { return turnInFlight(t, c, "web", "lead") })
	workerA.kill()

	coord.eventually("web/lead to wait for host-a", time.Minute, func() bool {
		return coord.ls()["web/lead"].Status == workflows.StatusHostDown
	})
	rotate, errOut, code := coord.nid("rotate", "web/lead")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, rotate, "web/lead's host host-a is down, so nothing runs: it rotates (auto) when the host is back")
	require.NotContains(t, rotate, "rotating web/lead now")

	move, errOut, code := coord.nid("move", "web/lead", "host-b")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, move, "its host is down, so it hands off at once with what it last said")
	moved := time.Now()
	coord.eventually("web/lead to run on host-b", time.Minute, func() bool {
		row := coord.ls()["web/lead"]
		return row.Host == "host-b" && row.Status != workflows.StatusHostDown
	})
	require.Less(t, time.Since(moved), 30*time.Second, "the move does not wait for the lost turn")
	coord.eventually("the human's message to run on host-b", 2*time.Minute, func() bool {
		v, err := querySessionView(c, "web", "lead")
		return err == nil && v.Context.TotalTurns >= 2 && strings.Contains(v.LastOutput, "Write the printer")
	})

	v := coord.session(c, "web", "lead")
	var hand *workflows.RotationEvent
	for _, r := range rotationEvents(v) {
		if r.Reason == workflows.ReasonMove {
			hand = &r
		}
	}
	require.NotNil(t, hand, "the move is a rotation")
	require.Equal(t, workflows.SummaryFromLastOutput, hand.SummarySource, "it hands off with what it last said")
	require.Equal(t, "sim-1", hand.OldConversation)
	require.Equal(t, "sim-2", hand.NewConversation, "the fresh conversation is not sim-1 again")
	var feed []string
	for _, e := range v.Events {
		feed = append(feed, e.Text)
	}
	require.Contains(t, feed, "the turn running on host host-a is lost with it: the move hands off with what the session last said")
	require.NotEmpty(t, simConversations(t, hostB, "web", "lead"), "the fresh conversation ran on host-b")
}
