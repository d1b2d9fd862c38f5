package cli

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/internal/temporaltest"
	"github.com/nid-dev/nid/workflows"
)

func TestHosts(t *testing.T) {
	t.Parallel()
	empty := newSite(t, "")
	out, errOut, err := empty.nid("hosts")
	require.NoError(t, err)
	require.Equal(t, "HOST  ALIVE  SEEN  SESSIONS  FREE  PLACED\n", out)
	require.Equal(t, "no hosts (nid up and nid worker register theirs)\n", errOut)
	require.Equal(t, "[]\n", empty.mustNid("hosts", "--json"))

	s := newSite(t, teamGroups)
	var hosts []workflows.HostView
	require.NoError(t, json.Unmarshal([]byte(s.mustNid("hosts", "--json")), &hosts))
	require.Len(t, hosts, 1)
	h := hosts[0]
	require.Equal(t, temporaltest.Host, h.Name)
	require.True(t, h.Alive)
	require.Equal(t, 8, h.MaxSessions)
	require.Equal(t, []string{"api/exec", "web/lead", "web/worker"}, h.Sessions, "every session nid up placed, sorted")
	require.Equal(t, 5, h.Free)
	require.Equal(t, s.node.HTTP, h.HTTP, "the host's own HTTP server")

	text := s.mustNid("hosts")
	require.Regexp(t, `^HOST\s+ALIVE\s+SEEN\s+SESSIONS\s+FREE\s+PLACED\ntesthost\s+yes\s+\d+s ago\s+3/8\s+5\s+api/exec web/lead web/worker\n$`, text)

	_, _, err = s.nid("hosts", "extra")
	require.EqualError(t, err, `nid hosts takes no arguments (got "extra")`)
}

func TestMoveRefusesWhatMakesNoSense(t *testing.T) {
	t.Parallel()
	s := newSite(t, teamGroups)
	temporaltest.Session(t, s.c, "web", "lead")
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"web/lead"}, "nid move takes GROUP/SESSION HOST, e.g. nid move web/lead box-b (got 1 arguments)"},
		{[]string{"web/lead", "testhost"}, "web/lead is on host testhost already"},
		{[]string{"web/lead", "box-z"}, "no host box-z: the hosts are testhost (nid hosts)"},
		{[]string{"web/lead", "a b"}, `host: "a b" is not a host name (letters, digits, '.', '-' or '_'; nid hosts lists them)`},
		{[]string{"web/nobody", "testhost"}, `no session "web/nobody"; sessions in web: lead, worker`},
	} {
		_, _, err := s.nid(append([]string{"move"}, tt.args...)...)
		require.EqualError(t, err, tt.want, "nid move %v", tt.args)
	}
	v := temporaltest.Session(t, s.c, "web", "lead")
	require.Empty(t, v.Moving, "nothing refused reached the session")
	require.Equal(t, temporaltest.Host, v.Host)
}

func TestAHostPastItsCapacitySaysByHowMany(t *testing.T) {
	require.Equal(t, "3", freeText(3))
	require.Equal(t, "0", freeText(0))
	require.Equal(t, "0 (1 over)", freeText(-1))
}
