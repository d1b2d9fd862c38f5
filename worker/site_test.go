package worker

import (
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/internal/temporaltest"
	"github.com/nid-dev/nid/transcript"
)

// The API runs against nid's own Temporal server and real workflows: each
// test has a namespace of its own on the server the package shares.
func TestMain(m *testing.M) { temporaltest.Main(m) }

const testToken = "test-token-0123456789"

// apiSite is the API over real workflows: a worker node runs the groups of
// a nid.yaml on a namespace of the test's own, as nid up does, and the API
// under test serves over a client that counts what it sends.
type apiSite struct {
	temporaltest.Env
	// c drives and inspects the workflows; calls is the API's client.
	c     client.Client
	calls *temporaltest.Counter
	api   *API
	srv   *httptest.Server
	logs  *transcript.Log
}

// newAPISite starts groups (YAML under "groups:", as in nid.yaml) and
// serves the API over them.
func newAPISite(t testing.TB, groups string) *apiSite {
	t.Helper()
	s := newAPI(t, groups, APIOptions{})
	s.srv = httptest.NewServer(s.api.Handler())
	t.Cleanup(s.srv.Close)
	return s
}

// newAPI starts groups, if any, and makes the API over them with opts,
// whose token, transcripts, Web UI and namespace it fills in; it serves
// nothing yet.
func newAPI(t testing.TB, groups string, opts APIOptions) *apiSite {
	t.Helper()
	env := temporaltest.New(t)
	s := &apiSite{Env: env, c: env.Client(t), logs: transcript.New(t.TempDir())}
	if groups != "" {
		cfg := env.Config(t, groups)
		startNode(t, cfg)
		temporaltest.Listed(t, s.c, cfg)
	}
	s.calls = &temporaltest.Counter{Client: env.Client(t)}
	opts.Token, opts.Transcripts, opts.WebUI, opts.Namespace, opts.Temporal = testToken, s.logs, "http://127.0.0.1:8233", env.Namespace, env.Address
	s.api = NewAPI(s.calls, opts)
	return s
}

// startNode starts a worker node that starts the config's groups, as nid
// up does, until the test ends.
func startNode(t testing.TB, cfg *config.Config) *Node {
	t.Helper()
	n, err := Start(t.Context(), Options{Config: cfg, StartGroups: true, Logger: temporaltest.Logger()})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, n.Stop()) })
	return n
}
