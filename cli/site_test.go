package cli

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

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
	s.upConfig(s.Config(s.t, groups))
}

// upConfig is up with a loaded configuration.
func (s *site) upConfig(cfg *config.Config) {
	s.t.Helper()
	n, err := worker.Start(s.t.Context(), worker.Options{Config: cfg, StartGroups: true, Logger: temporaltest.Logger()})
	require.NoError(s.t, err)
	s.node = n
	s.t.Cleanup(s.down)
	temporaltest.Listed(s.t, s.c, cfg)
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

// follow runs a command that follows (nid watch) against the site, with
// environ added to the site's, until done holds of its output; then it
// stops it as Ctrl-C does and returns the output.
func (s *site) follow(environ []string, done func(out string) bool, args ...string) string {
	s.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut temporaltest.SyncBuffer
	end := make(chan error, 1)
	d := Deps{Environ: append(s.Environ(), environ...), Dial: worker.Dial}
	go func() { end <- run(ctx, d, &out, &errOut, args...) }()
	require.Eventually(s.t, func() bool { return done(out.String()) }, time.Minute, 10*time.Millisecond, "nid %v:\n%s%s", args, out.String(), errOut.String())
	cancel()
	require.NoError(s.t, <-end, "nid %v\n%s", args, errOut.String())
	return out.String()
}

// runApp runs the whole command line the way main does. Without a Dial in
// d, a command that dials Temporal fails the test.
func runApp(t *testing.T, d Deps, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	if d.Dial == nil {
		d.Dial = func(context.Context, *config.Config, *slog.Logger) (client.Client, error) {
			t.Fatal("the command dialled Temporal")
			return nil, nil
		}
	}
	var out, errOut bytes.Buffer
	err = run(context.Background(), d, &out, &errOut, args...)
	return out.String(), errOut.String(), err
}

// run runs a command line until ctx ends, as main does.
func run(ctx context.Context, d Deps, stdout, stderr io.Writer, args ...string) error {
	d.Stdout, d.Stderr = stdout, stderr
	if d.Environ == nil {
		d.Environ = []string{}
	}
	if d.IsTerminal == nil {
		d.IsTerminal = func(io.Writer) bool { return false }
	}
	d.Args = append([]string{"nid"}, args...)
	return NewApp(d).RunContext(ctx, d.Args)
}
