package nidclient_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/nid-dev/nid/internal/temporaltest"
	"github.com/nid-dev/nid/worker"
	"github.com/nid-dev/nid/workflows"
)

// The operations run against nid's own Temporal server and real workflows:
// each test has a namespace of its own on the server the package shares.
func TestMain(m *testing.M) { temporaltest.Main(m) }

// start runs groups (YAML under "groups:", as in nid.yaml) on a namespace of
// the test's own, as nid up does, and returns a client of that namespace.
func start(t *testing.T, groups string) client.Client {
	t.Helper()
	_, c := startIn(t, groups)
	return c
}

// startIn is start that also says which namespace.
func startIn(t *testing.T, groups string) (temporaltest.Env, client.Client) {
	t.Helper()
	env := temporaltest.New(t)
	cfg := env.Config(t, groups)
	n, err := worker.Start(t.Context(), worker.Options{Config: cfg, StartGroups: true, Logger: temporaltest.Logger()})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, n.Stop()) })
	c := env.Client(t)
	temporaltest.Listed(t, c, cfg)
	return env, c
}

// requireError asserts err is of type E with message want, and returns it.
func requireError[E error](t *testing.T, err error, want string) E {
	t.Helper()
	var e E
	require.True(t, errors.As(err, &e), "want a %T, got %T: %v", e, err, err)
	require.Equal(t, want, e.Error())
	return e
}

// decided are the rotate decisions a session recorded in its feed.
func decided(v workflows.SessionView) []string {
	var out []string
	for _, e := range v.Events {
		if e.Kind == workflows.EventRotateQueued {
			out = append(out, e.Text)
		}
	}
	return out
}

// working has a session start a turn that lasts until the test ends.
func working(t *testing.T, c client.Client, group, name string) {
	t.Helper()
	temporaltest.Signal(t, c, group, name, workflows.SignalMessage, workflows.Message{Text: "work"})
	temporaltest.WaitSession(t, c, group, name, "to work", func(v workflows.SessionView) bool { return v.Status == workflows.StatusWorking })
}
