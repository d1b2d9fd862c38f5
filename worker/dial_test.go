package worker

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
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

// With nothing listening, nid says how to start what this configuration
// looks for: nid up for the embedded server, nid server beside a worker on
// this host, the cluster otherwise.
func TestNoServerSaysWhatToStart(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	free := ln.Addr().String()
	require.NoError(t, ln.Close())
	_, port, err := net.SplitHostPort(free)
	require.NoError(t, err)
	tests := []struct {
		address string
		want    string
	}{
		{"", "start one with `nid up` (or `nid server` for the server alone)"},
		{free, "start it with `nid server` (or set temporal.address to a running one)"},
		{"localhost:" + port, "start it with `nid server`"},
		{"192.0.2.1:" + port, "is the cluster up and temporal.address right?"},
	}
	for _, tt := range tests {
		cfg := config.Default()
		cfg.Temporal.Address = tt.address
		if tt.address == "" {
			p, err := strconv.Atoi(port)
			require.NoError(t, err)
			cfg.Temporal.Port = p
		}
		_, err := Dial(t.Context(), cfg, slog.New(slog.DiscardHandler))
		require.ErrorContains(t, err, "no Temporal server at ", tt.address)
		require.ErrorContains(t, err, tt.want, tt.address)
	}
}
