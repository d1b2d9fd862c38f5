package e2e

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/nid-dev/nid/statedir"
	"github.com/nid-dev/nid/workflows"
)

// nid server's frontend listens on 127.0.0.1, where any local process can
// connect. A Temporal client without the credential the server made in its
// state directory can neither list nor start anything; nid's own commands
// without it say that the server refused nid's credential and where it
// expects it; with it, as another host configures it, they work.
func TestTheControlPlaneRefusesClientsWithoutTheCredential(t *testing.T) {
	host := newSite(t, "")
	host.serveNid("server")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hostile, err := client.DialContext(ctx, client.Options{HostPort: host.address()})
	require.NoError(t, err)
	defer hostile.Close()
	_, err = hostile.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: "default"})
	var denied *serviceerror.PermissionDenied
	require.True(t, errors.As(err, &denied), "list: %v", err)
	_, err = hostile.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: workflows.SessionID("web", "planted"), TaskQueue: "nid"}, "nid.Session")
	require.True(t, errors.As(err, &denied), "start: %v", err)

	stranger := newSite(t, "")
	stranger.cluster = host.address()
	stranger.writeConfig()
	_, errOut, code := stranger.nid("ls")
	require.NotZero(t, code)
	require.Contains(t, errOut, "the Temporal server at "+host.address()+" refused nid's credential: nid presented none; it expects the credential in "+
		filepath.Join(stranger.dir, ".nid", statedir.TemporalToken))

	guest := newSite(t, "")
	guest.join(host)
	require.Regexp(t, `^SESSION\s+AGENT\s+STATUS`, guest.mustNid("ls"))
}
