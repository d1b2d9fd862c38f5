package worker

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/stats"

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

// encodings records the compression of every request a server receives.
type encodings struct {
	mu   sync.Mutex
	seen []string
}

func (e *encodings) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (e *encodings) HandleRPC(_ context.Context, s stats.RPCStats) {
	if h, ok := s.(*stats.InHeader); ok {
		e.mu.Lock()
		e.seen = append(e.seen, h.Compression)
		e.mu.Unlock()
	}
}
func (e *encodings) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (e *encodings) HandleConn(context.Context, stats.ConnStats)                       {}

// A server on this machine gets its requests uncompressed: gzip there is
// CPU on both ends for no bytes saved. One across a network keeps the SDK's
// gzip.
func TestDialCompressesOnlyAcrossANetwork(t *testing.T) {
	seen := &encodings{}
	srv := grpc.NewServer(grpc.StatsHandler(seen))
	workflowservice.RegisterWorkflowServiceServer(srv, &frontDoor{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)

	cfg, err := config.Load(config.LoadOptions{Environ: []string{"TEMPORAL_ADDRESS=" + ln.Addr().String()}})
	require.NoError(t, err)
	c, err := Dial(context.Background(), cfg, nil)
	require.NoError(t, err)
	c.Close()
	seen.mu.Lock()
	defer seen.mu.Unlock()
	require.NotEmpty(t, seen.seen)
	for _, enc := range seen.seen {
		require.Empty(t, enc, "a request to %s was compressed", ln.Addr())
	}

	for _, local := range []string{"127.0.0.1:7233", "localhost:7233", "[::1]:7233"} {
		require.IsType(t, &client.GrpcCompressionNone{}, compression(local), local)
	}
	require.Nil(t, compression("temporal.example.com:7233"), "the SDK's default, gzip")
	require.Nil(t, compression("10.0.0.5:7233"))
}

// nid's own Temporal server on this host (nid server) gets the credential
// from the state directory, and a copy of it in temporal.apiKey (another
// host's, through a tunnel) goes there too: in plaintext, as nothing
// crosses a network and the server serves no TLS.
func TestDialPresentsTheCredentialToAServerOnLoopback(t *testing.T) {
	srv := grpc.NewServer()
	door := &frontDoor{}
	workflowservice.RegisterWorkflowServiceServer(srv, door)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)

	state := t.TempDir()
	token, err := MakeTemporalToken(state)
	require.NoError(t, err)
	again, err := MakeTemporalToken(state)
	require.NoError(t, err)
	require.Equal(t, token, again, "made once, then kept")
	for _, tt := range []struct {
		name    string
		environ []string
		want    string
	}{
		{"the state directory's", nil, "Bearer " + token},
		{"temporal.apiKey", []string{"TEMPORAL_API_KEY=key-123"}, "Bearer key-123"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			door.auth = nil
			cfg, err := config.Load(config.LoadOptions{Environ: append([]string{"TEMPORAL_ADDRESS=" + ln.Addr().String(), "NID_STATE=" + state}, tt.environ...)})
			require.NoError(t, err)
			c, err := Dial(context.Background(), cfg, nil)
			require.NoError(t, err)
			c.Close()
			require.Contains(t, door.auth, tt.want)
		})
	}
}
