package worker

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"

	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/internal/testtls"
)

// frontDoor answers the call every dial makes and remembers the
// authorization it came with, as a cluster that checks API keys sees it.
type frontDoor struct {
	workflowservice.UnimplementedWorkflowServiceServer
	auth []string
}

func (f *frontDoor) GetSystemInfo(ctx context.Context, _ *workflowservice.GetSystemInfoRequest) (*workflowservice.GetSystemInfoResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	f.auth = append(f.auth, md.Get("authorization")...)
	return &workflowservice.GetSystemInfoResponse{}, nil
}

// TEMPORAL_API_KEY reaches the cluster as a bearer token, over TLS.
func TestDialSendsTheAPIKeyOverTLS(t *testing.T) {
	pki := testtls.Write(t)
	creds, err := credentials.NewServerTLSFromFile(pki.ServerCert, pki.ServerKey)
	require.NoError(t, err)
	srv := grpc.NewServer(grpc.Creds(creds))
	door := &frontDoor{}
	workflowservice.RegisterWorkflowServiceServer(srv, door)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)

	file := filepath.Join(t.TempDir(), "nid.yaml")
	require.NoError(t, os.WriteFile(file, []byte("temporal: {tls: {caFile: "+pki.CA+"}}\n"), 0o600))
	cfg, err := config.Load(config.LoadOptions{File: file, Environ: []string{"TEMPORAL_ADDRESS=" + ln.Addr().String(), "TEMPORAL_API_KEY=key-123"}})
	require.NoError(t, err)
	c, err := Dial(context.Background(), cfg, nil)
	require.NoError(t, err)
	c.Close()
	require.Equal(t, []string{"Bearer key-123"}, door.auth)
}
