package worker

import (
	"bufio"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/internal/temporaltest"
)

// A dashboard left open and a client that connected but never asked for
// anything must not make stopping nid up fail: the event stream ends, the
// silent connection is closed, and Stop reports no error.
func TestStoppingEndsOpenStreamsAndSilentConnections(t *testing.T) {
	t.Parallel()
	env := temporaltest.New(t)
	c := env.Client(t)
	cfg := env.Config(t, webGroups)
	n, err := Start(t.Context(), Options{Config: cfg, StartGroups: true, Logger: temporaltest.Logger()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = n.Stop() })
	temporaltest.Listed(t, c, cfg)

	req, err := http.NewRequest(http.MethodGet, n.HTTP+"/api/events", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+temporaltest.Token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	events := bufio.NewReader(resp.Body)
	first, err := events.ReadString('\n')
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(first, "event: "), first)

	silent, err := net.Dial("tcp", strings.TrimPrefix(n.HTTP, "http://"))
	require.NoError(t, err)
	defer silent.Close()

	require.NoError(t, n.Stop())
	for {
		if _, err := events.ReadString('\n'); err != nil {
			break // the stream ended with the server
		}
	}
	_, err = silent.Read(make([]byte, 1))
	require.Error(t, err, "the silent connection is closed")
}
