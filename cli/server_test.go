package cli

import (
	"bytes"
	"context"
	"errors"
	"io"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/worker"
)

// fakeServer is an embedded server that only records being stopped.
type fakeServer struct{ stopped bool }

func (s *fakeServer) FrontendAddress() string { return "127.0.0.1:17233" }
func (s *fakeServer) UIAddress() string       { return "http://127.0.0.1:18233" }
func (s *fakeServer) UILoginLink() string     { return "http://127.0.0.1:18233/nid/login/SECRET" }
func (s *fakeServer) Stop() error {
	s.stopped = true
	return nil
}

func TestServerRefusesWhatItCannotServe(t *testing.T) {
	tests := []struct {
		name    string
		environ []string
		args    []string
		want    string
	}{
		{"arguments", nil, []string{"server", "now"}, `nid server takes no arguments (got "now")`},
		{"address flag", nil, []string{"--address", "10.0.0.5:7233", "server"}, "temporal.address is 10.0.0.5:7233, so that server serves nid"},
		{"address flag after the command", nil, []string{"server", "--address", "10.0.0.5:7233"}, "temporal.address is 10.0.0.5:7233"},
		{"address in the environment", []string{"TEMPORAL_ADDRESS=10.0.0.5:7233"}, []string{"server"}, "unset temporal.address, TEMPORAL_ADDRESS and --address"},
		{"bad port", []string{"NID_TEMPORAL_PORT=0"}, []string{"server"}, "temporal.port"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := func(context.Context, worker.EmbeddedOptions) (worker.EmbeddedServer, error) {
				t.Fatal("the server started")
				return nil, nil
			}
			_, _, err := runApp(t, Deps{StartEmbedded: start, Environ: tt.environ}, tt.args...)
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func TestServerServesUntilCancelled(t *testing.T) {
	dir := t.TempDir()
	srv := &fakeServer{}
	var got worker.EmbeddedOptions
	start := func(_ context.Context, opts worker.EmbeddedOptions) (worker.EmbeddedServer, error) {
		got = opts
		return srv, nil
	}
	var out, errOut bytes.Buffer
	app := NewApp(Deps{
		StartEmbedded: start,
		Stdout:        &out,
		Stderr:        &errOut,
		Environ:       []string{"NID_STATE=" + dir, "NID_TEMPORAL_PORT=17233", "NID_TEMPORAL_UI_PORT=18233", "NID_TEMPORAL_UI_WRITEACTIONS=true"},
		IsTerminal:    func(io.Writer) bool { return false },
	})
	// Already cancelled: the server starts, says where it is, and stops as
	// on Ctrl-C.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.NoError(t, app.RunContext(ctx, []string{"nid", "server"}))

	require.Equal(t, dir, got.StateDir)
	require.Equal(t, 17233, got.Port)
	require.Equal(t, 18233, got.UIPort)
	require.True(t, got.UIWriteActions)
	require.NotEmpty(t, got.SearchAttributes, "nid's search attributes are registered as nid up registers them")
	require.Contains(t, out.String(), "Temporal frontend  127.0.0.1:17233")
	require.Contains(t, out.String(), "Temporal Web UI    http://127.0.0.1:18233\n"+
		"Web UI login       http://127.0.0.1:18233/nid/login/SECRET (a one-time login link for 10 minutes; then log in with the Temporal credential)\n")
	require.Contains(t, errOut.String(), "--address 127.0.0.1:17233")
	require.Contains(t, errOut.String(), "sets temporal.apiKey to the content of "+filepath.Join(dir, "temporal-token"))
	require.True(t, srv.stopped)
}

func TestServerStartFailure(t *testing.T) {
	start := func(context.Context, worker.EmbeddedOptions) (worker.EmbeddedServer, error) {
		return nil, errors.New("temporal.port 7233 is in use")
	}
	_, _, err := runApp(t, Deps{StartEmbedded: start, Environ: []string{"NID_STATE=" + t.TempDir()}}, "server")
	require.EqualError(t, err, "embedded Temporal server: temporal.port 7233 is in use")
}

func TestServerHelp(t *testing.T) {
	out, _, err := runApp(t, Deps{}, "server", "--help")
	require.NoError(t, err)
	require.Contains(t, out, "Run the embedded Temporal server alone")
	require.Contains(t, out, "temporal.address")

	out, _, err = runApp(t, Deps{}, "--help")
	require.NoError(t, err)
	require.Regexp(t, `server\s+Run the embedded Temporal server alone`, out, "nid --help lists it")
}
