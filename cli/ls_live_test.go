package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/internal/temporaltest"
	"github.com/nid-dev/nid/worker"
)

// liveConfig writes a nid.yaml for the site's namespace whose http.listen
// is the running node's address and whose token is token, as the nid.yaml
// nid up runs with would be.
func (s *site) liveConfig(token string) string {
	s.t.Helper()
	listen := strings.TrimPrefix(s.node.HTTP, "http://")
	file := filepath.Join(s.t.TempDir(), "nid.yaml")
	yaml := fmt.Sprintf("state: %s\ntemporal:\n  address: %s\n  namespace: %s\n  apiKey: %s\nhttp:\n  listen: %s\n  token: %s\n",
		filepath.Join(filepath.Dir(file), "state"), s.Address, s.Namespace, s.APIKey, listen, token)
	require.NoError(s.t, os.WriteFile(file, []byte(yaml), 0o600))
	return file
}

// With nid up running for the same configuration, nid ls takes the list
// from it and never dials Temporal; the answer is the one Temporal gives.
func TestLsAsksARunningNidUp(t *testing.T) {
	t.Parallel()
	s := newTeam(t)
	file := s.liveConfig(temporaltest.Token)
	want := "" +
		"SESSION     AGENT  STATUS  HOST      TURNS  CONTEXT\n" +
		"api/exec    sim    idle    testhost  1      — ↻1\n" +
		"web/lead    sim    idle    testhost  2      62% of 200k\n" +
		"web/worker  sim    idle    testhost  3      44% of 200k ↻2\n"
	for range 2 {
		out, errOut, err := runApp(t, Deps{}, "--config", file, "ls")
		require.NoError(t, err, errOut)
		require.Equal(t, want, out)
		require.Empty(t, errOut)
	}
	out, _, err := runApp(t, Deps{}, "--config", file, "ls", "api")
	require.NoError(t, err)
	require.Equal(t, "SESSION   AGENT  STATUS  HOST      TURNS  CONTEXT\napi/exec  sim    idle    testhost  1      — ↻1\n", out)

	live, _, err := runApp(t, Deps{}, "--config", file, "ls", "--json")
	require.NoError(t, err)
	direct, _, err := runApp(t, Deps{Environ: s.Environ(), Dial: worker.Dial}, "ls", "--json")
	require.NoError(t, err)
	require.JSONEq(t, direct, live)
}

// nid ls asks Temporal itself when the running nid up is not this
// configuration's own: its token is another's, or it does not serve the
// group asked for; and when none runs.
func TestLsAsksTemporalWhenNidUpCannotAnswer(t *testing.T) {
	t.Parallel()
	s := newTeam(t)
	var dials atomic.Int32
	deps := Deps{Dial: func(ctx context.Context, cfg *config.Config, l *slog.Logger) (client.Client, error) {
		dials.Add(1)
		return worker.Dial(ctx, cfg, l)
	}}
	out, _, err := runApp(t, deps, "--config", s.liveConfig("another-token-0123456789abcdef-0123"), "ls", "web")
	require.NoError(t, err)
	require.Contains(t, out, "web/lead ")
	require.EqualValues(t, 1, dials.Load(), "a token nid up refuses")

	_, _, err = runApp(t, deps, "--config", s.liveConfig(temporaltest.Token), "ls", "nosuch")
	require.EqualError(t, err, `no group "nosuch"; running groups: api, web`)
	require.EqualValues(t, 2, dials.Load(), "a group nid up does not know is Temporal's to tell")

	file := s.liveConfig(temporaltest.Token)
	s.down()
	out, _, err = runApp(t, deps, "--config", file, "ls", "web")
	require.NoError(t, err)
	require.Contains(t, out, "web/lead ")
	require.EqualValues(t, 3, dials.Load(), "no nid up")
}

// The token goes only to a listener this user holds, read from the
// kernel's socket tables.
func TestListenerOwner(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	require.True(t, ownListener(ln.Addr().String()))
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	require.True(t, ownListener("localhost:"+port))
	ln.Close()
	require.False(t, ownListener(ln.Addr().String()), "nothing listens there now")

	table := filepath.Join(t.TempDir(), "tcp")
	require.NoError(t, os.WriteFile(table, []byte(""+
		"  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"+
		"   0: 0100007F:1E61 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1234        0 1648 1\n"+
		"   1: 0100007F:1E62 0100007F:D58E 01 00000000:00000000 00:00000000 00000000     0        0 0 3\n"+
		"   2: 00000000:1E63 00000000:0000 0A 00000000:00000000 00:00000000 00000000    42        0 1649 1\n"), 0o600))
	uid, found := listenerIn(table, net.ParseIP("127.0.0.1"), 7777)
	require.True(t, found)
	require.Equal(t, 1234, uid, "another user's listener")
	_, found = listenerIn(table, net.ParseIP("127.0.0.1"), 7778)
	require.False(t, found, "a connection, not a listener")
	uid, found = listenerIn(table, net.ParseIP("127.0.0.1"), 7779)
	require.True(t, found, "a listener on every address")
	require.Equal(t, 42, uid)
	require.Equal(t, "::1", kernelIP("00000000000000000000000001000000").String())
}
