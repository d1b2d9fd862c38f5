package embedded

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	sdkclient "go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.temporal.io/server/common/authorization"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/statedir"
	"github.com/nid-dev/nid/worker"
)

// trustedClient dials srv as nid's own commands do, through worker.Dial
// with a configuration whose state directory is the server's: the
// credential comes from the file the server made there.
func trustedClient(t *testing.T, srv *Server, stateDir string) sdkclient.Client {
	t.Helper()
	c, err := worker.Dial(context.Background(), ownConfig(t, srv, stateDir), nil)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// ownConfig is nid.yaml for the embedded server srv with its state in
// stateDir.
func ownConfig(t *testing.T, srv *Server, stateDir string) *config.Config {
	t.Helper()
	cfg := config.Default()
	cfg.State = stateDir
	cfg.Temporal.Namespace = "default"
	_, port, err := splitPort(srv.FrontendAddress())
	require.NoError(t, err)
	cfg.Temporal.Port = port
	return cfg
}

// echoWorkflow answers a query and an update and waits for a signal, so
// that each call kind has something to reach.
func echoWorkflow(ctx workflow.Context) (string, error) {
	got := "none"
	if err := workflow.SetQueryHandler(ctx, "state", func() (string, error) { return got, nil }); err != nil {
		return "", err
	}
	if err := workflow.SetUpdateHandler(ctx, "set", func(_ workflow.Context, v string) (string, error) {
		got = v
		return v, nil
	}); err != nil {
		return "", err
	}
	var v string
	workflow.GetSignalChannel(ctx, "done").Receive(ctx, &v)
	return v, nil
}

// Any process on the machine can reach the frontend on 127.0.0.1. Without
// the credential in the state directory, or with another one, it can
// neither read nor steer anything: every call kind nid's sessions answer
// to is refused with PermissionDenied and leaves the workflow as it was.
// nid's own client, which reads the credential, can do all of them.
func TestTheFrontendRefusesEveryCallWithoutTheCredential(t *testing.T) {
	state := t.TempDir()
	srv := startTestIn(t, state, 0, false, nil)

	file := filepath.Join(state, statedir.TemporalToken)
	info, err := os.Stat(file)
	require.NoError(t, err, "the first start makes the credential")
	require.Equal(t, statedir.FileMode, info.Mode().Perm(), "the credential is private")

	own := trustedClient(t, srv, state)
	w := sdkworker.New(own, "echo", sdkworker.Options{})
	w.RegisterWorkflowWithOptions(echoWorkflow, workflow.RegisterOptions{Name: "Echo"})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, err := own.ExecuteWorkflow(ctx, sdkclient.StartWorkflowOptions{ID: "target", TaskQueue: "echo"}, "Echo")
	require.NoError(t, err)

	calls := []struct {
		kind string
		call func(c sdkclient.Client) error
	}{
		{"list workflows", func(c sdkclient.Client) error {
			_, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: "default"})
			return err
		}},
		{"start a workflow", func(c sdkclient.Client) error {
			_, err := c.ExecuteWorkflow(ctx, sdkclient.StartWorkflowOptions{ID: "planted", TaskQueue: "echo"}, "Echo")
			return err
		}},
		{"signal", func(c sdkclient.Client) error {
			return c.SignalWorkflow(ctx, "target", "", "done", "planted")
		}},
		{"update", func(c sdkclient.Client) error {
			h, err := c.UpdateWorkflow(ctx, sdkclient.UpdateWorkflowOptions{
				WorkflowID: "target", UpdateName: "set", Args: []any{"planted"}, WaitForStage: sdkclient.WorkflowUpdateStageCompleted,
			})
			if err != nil {
				return err
			}
			return h.Get(ctx, nil)
		}},
		{"query", func(c sdkclient.Client) error {
			_, err := c.QueryWorkflow(ctx, "target", "", "state")
			return err
		}},
		{"describe a workflow", func(c sdkclient.Client) error {
			_, err := c.DescribeWorkflowExecution(ctx, "target", "")
			return err
		}},
		{"describe the namespace", func(c sdkclient.Client) error {
			_, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: "default"})
			return err
		}},
		{"terminate", func(c sdkclient.Client) error {
			return c.TerminateWorkflow(ctx, "target", "", "planted")
		}},
	}

	for _, hostile := range []struct {
		name string
		opts sdkclient.Options
	}{
		{"no credential", sdkclient.Options{}},
		{"a wrong credential", sdkclient.Options{
			Credentials:       sdkclient.NewAPIKeyStaticCredentials("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"),
			ConnectionOptions: sdkclient.ConnectionOptions{TLSDisabled: true},
		}},
	} {
		t.Run(hostile.name, func(t *testing.T) {
			opts := hostile.opts
			opts.HostPort, opts.Namespace, opts.Logger = srv.FrontendAddress(), "default", quietLogger()
			c, err := sdkclient.DialContext(ctx, opts)
			require.NoError(t, err, "the frontend answers its health check to anyone")
			defer c.Close()
			for _, k := range calls {
				err := k.call(c)
				var denied *serviceerror.PermissionDenied
				require.True(t, errors.As(err, &denied), "%s: want PermissionDenied, got %v", k.kind, err)
			}
		})
	}

	var state2 string
	q, err := own.QueryWorkflow(ctx, "target", "", "state")
	require.NoError(t, err, "nid's own client queries")
	require.NoError(t, q.Get(&state2))
	require.Equal(t, "none", state2, "no refused update reached the workflow")
	d, err := own.DescribeWorkflowExecution(ctx, "target", "")
	require.NoError(t, err, "nid's own client describes")
	require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, d.GetWorkflowExecutionInfo().GetStatus(), "no refused signal or terminate reached the workflow")
	_, err = own.DescribeWorkflowExecution(ctx, "planted", "")
	var nf *serviceerror.NotFound
	require.True(t, errors.As(err, &nf), "no refused start made a workflow: %v", err)
	list, err := own.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: "default"})
	require.NoError(t, err, "nid's own client lists")
	require.NotEmpty(t, list.GetExecutions())

	h, err := own.UpdateWorkflow(ctx, sdkclient.UpdateWorkflowOptions{
		WorkflowID: "target", UpdateName: "set", Args: []any{"mine"}, WaitForStage: sdkclient.WorkflowUpdateStageCompleted,
	})
	require.NoError(t, err, "nid's own client updates")
	require.NoError(t, h.Get(ctx, nil))
	require.NoError(t, own.SignalWorkflow(ctx, "target", "", "done", "mine"), "nid's own client signals")
	var result string
	require.NoError(t, run.Get(ctx, &result))
	require.Equal(t, "mine", result)
}

// A restart keeps the credential, so that workers and other hosts holding
// it stay accepted; nid's commands name the file when the server refuses
// what they present.
func TestTheCredentialOutlivesARestartAndARefusalNamesIt(t *testing.T) {
	state := t.TempDir()
	srv := startTestIn(t, state, 0, false, nil)
	first, err := worker.ReadTemporalToken(state)
	require.NoError(t, err)
	require.Len(t, first, 64)
	require.NoError(t, srv.Stop())

	srv = startTestIn(t, state, 0, false, nil)
	again, err := worker.ReadTemporalToken(state)
	require.NoError(t, err)
	require.Equal(t, first, again)
	trustedClient(t, srv, state)

	other := t.TempDir()
	_, err = worker.Dial(context.Background(), ownConfig(t, srv, other), nil)
	require.ErrorContains(t, err, "the Temporal server at "+srv.FrontendAddress()+" refused nid's credential: nid presented none; it expects the credential in "+filepath.Join(other, statedir.TemporalToken))

	_, err = worker.MakeTemporalToken(other)
	require.NoError(t, err)
	_, err = worker.Dial(context.Background(), ownConfig(t, srv, other), nil)
	require.ErrorContains(t, err, "refused nid's credential from "+filepath.Join(other, statedir.TemporalToken))
}

// The claim mapper makes an admin of the bearer of the credential and of
// nobody else; a claim without a role is what the authorizer refuses.
func TestTokenClaims(t *testing.T) {
	const token = "5f2b0c3a9e8d7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a"
	admin := &authorization.Claims{Subject: tokenSubject, System: authorization.RoleAdmin, AuthType: "nid-token"}
	for _, tt := range []struct {
		name   string
		mapper tokenClaims
		info   *authorization.AuthInfo
		want   *authorization.Claims
	}{
		{"the credential", newTokenClaims(token), &authorization.AuthInfo{AuthToken: "Bearer " + token}, admin},
		{"no authorization", newTokenClaims(token), &authorization.AuthInfo{}, &authorization.Claims{}},
		{"no auth info", newTokenClaims(token), nil, &authorization.Claims{}},
		{"a wrong credential", newTokenClaims(token), &authorization.AuthInfo{AuthToken: "Bearer " + token[:63] + "b"}, &authorization.Claims{}},
		{"the credential without Bearer", newTokenClaims(token), &authorization.AuthInfo{AuthToken: token}, &authorization.Claims{}},
		{"a prefix of the credential", newTokenClaims(token), &authorization.AuthInfo{AuthToken: "Bearer " + token[:32]}, &authorization.Claims{}},
		{"an empty credential configured", newTokenClaims(""), &authorization.AuthInfo{AuthToken: "Bearer "}, &authorization.Claims{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.mapper.GetClaims(tt.info)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func splitPort(address string) (string, int, error) {
	h, p, err := net.SplitHostPort(address)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	return h, port, err
}

func quietLogger() sdklog.Logger { return sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)) }

// The server's other services (history, matching, its worker and internal
// frontend) listen on loopback too, and a call to them passes no
// authorizer: they take only the certificate made in memory at the
// server's start, so a local process can neither speak plain gRPC to them
// nor shake hands without it.
func TestTheServersOwnPortsTakeOnlyItsCertificate(t *testing.T) {
	srv := startTest(t, 0, false, nil)
	require.Len(t, srv.internal, 4, "history, matching, worker, internal frontend")
	for _, addr := range srv.internal {
		for _, conn := range []struct {
			name string
			opts sdkclient.ConnectionOptions
		}{
			{"plain", sdkclient.ConnectionOptions{}},
			{"TLS without the certificate", sdkclient.ConnectionOptions{TLS: &tls.Config{InsecureSkipVerify: true}}},
		} {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			c, err := sdkclient.DialContext(ctx, sdkclient.Options{HostPort: addr, Logger: quietLogger(), ConnectionOptions: conn.opts})
			if err == nil {
				_, err = c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: "default"})
				c.Close()
			}
			cancel()
			require.Error(t, err, "%s %s", conn.name, addr)
			require.NotEqual(t, codes.Unimplemented, status.Code(err), "%s %s answered gRPC: %v", conn.name, addr, err)
			require.NotContains(t, err.Error(), "Unimplemented", "%s %s answered gRPC", conn.name, addr)
		}
	}
}
