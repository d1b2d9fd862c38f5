package cli

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/internal/temporaltest"
	"github.com/nid-dev/nid/worker"
)

// The commands run against nid's own Temporal server and real workflows:
// each test has a namespace of its own on the server the package shares.
func TestMain(m *testing.M) { temporaltest.Main(m) }

// site is nid up on a namespace of the test's own: a worker node that
// started the groups of a nid.yaml, and a client to drive its workflows
// into the state a test needs.
type site struct {
	temporaltest.Env
	t    *testing.T
	c    client.Client
	node *worker.Node
}

// newSite starts a worker node with groups (YAML under "groups:", as in
// nid.yaml) on a fresh namespace; with no groups it starts nothing.
func newSite(t *testing.T, groups string) *site {
	t.Helper()
	env := temporaltest.New(t)
	s := &site{Env: env, t: t, c: env.Client(t)}
	if groups != "" {
		s.up(groups)
	}
	return s
}

// up starts the node as nid up does: the worker, then every group.
func (s *site) up(groups string) {
	s.t.Helper()
	n, err := worker.Start(s.t.Context(), worker.Options{Config: s.Config(s.t, groups), StartGroups: true, Logger: temporaltest.Logger()})
	require.NoError(s.t, err)
	s.node = n
	s.t.Cleanup(s.down)
}

// down stops the node: its sessions stay, with no worker to run them.
func (s *site) down() {
	if s.node != nil {
		require.NoError(s.t, s.node.Stop())
		s.node = nil
	}
}

// nid runs a command line against the site, the way main does.
func (s *site) nid(args ...string) (stdout, stderr string, err error) {
	s.t.Helper()
	return runApp(s.t, Deps{Environ: s.Environ(), Dial: worker.Dial}, args...)
}

// mustNid runs a command line that must succeed and returns its output.
func (s *site) mustNid(args ...string) string {
	s.t.Helper()
	out, errOut, err := s.nid(args...)
	require.NoError(s.t, err, "nid %v\n%s", args, errOut)
	return out
}

// runApp runs the whole command line the way main does. Without a Dial in
// d, a command that dials Temporal fails the test.
func runApp(t *testing.T, d Deps, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	d.Stdout, d.Stderr = &out, &errOut
	if d.Environ == nil {
		d.Environ = []string{}
	}
	if d.Dial == nil {
		d.Dial = func(context.Context, *config.Config, *slog.Logger) (client.Client, error) {
			t.Fatal("the command dialled Temporal")
			return nil, nil
		}
	}
	if d.IsTerminal == nil {
		d.IsTerminal = func(io.Writer) bool { return false }
	}
	err = NewApp(d).RunContext(context.Background(), append([]string{"nid"}, args...))
	return out.String(), errOut.String(), err
}
