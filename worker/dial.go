package worker

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/nid-dev/nid/config"
)

// Dial connects to the Temporal server the config names, over TLS and with
// the API key when temporal.tls or temporal.apiKey are set. Every command
// and the worker dial through it. When nothing answers, or TLS fails, it
// says so and what to set.
func Dial(ctx context.Context, cfg *config.Config, logger *slog.Logger) (client.Client, error) {
	return dial(ctx, cfg, logger, nil)
}

// dial is Dial with the SDK's metrics going to handler (nil: nowhere).
func dial(ctx context.Context, cfg *config.Config, logger *slog.Logger, handler client.MetricsHandler) (client.Client, error) {
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	}
	tlsConf, err := cfg.Temporal.ClientTLS()
	if err != nil {
		return nil, err
	}
	address, namespace := cfg.Address(), cfg.Temporal.Namespace
	opts := client.Options{
		HostPort:          address,
		Namespace:         namespace,
		Logger:            sdklog.NewStructuredLogger(slog.New(newSDKHandler(logger.Handler(), address))),
		ConnectionOptions: client.ConnectionOptions{TLS: tlsConf, GrpcCompression: compression(address)},
		MetricsHandler:    handler,
	}
	token, source := temporalCredential(cfg)
	if token != "" {
		opts.Credentials = client.NewAPIKeyStaticCredentials(token)
		// The SDK turns TLS on for any API key; to a server on loopback
		// (config.LoopbackAddress) the key crosses no network.
		opts.ConnectionOptions.TLSDisabled = tlsConf == nil
	}
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := client.DialContext(dctx, opts)
	if err == nil && ownServer(cfg) {
		// The SDK's dial asks only for the server's system information,
		// which the server answers anyone: a refused credential would
		// show only at the command's first real call, as a bare
		// "Request unauthorized".
		// Any other answer is left to the command's own calls.
		_, perr := c.WorkflowService().DescribeNamespace(dctx, &workflowservice.DescribeNamespaceRequest{Namespace: namespace})
		if refused(perr, address, source, cfg.State) != nil {
			c.Close()
			err = perr
		}
	}
	if err == nil {
		return c, nil
	}
	if rerr := refused(err, address, source, cfg.State); rerr != nil {
		return nil, rerr
	}
	var nf *serviceerror.NamespaceNotFound
	if errors.As(err, &nf) {
		return nil, fmt.Errorf("Temporal at %s has no namespace %q (temporal.namespace)", address, namespace)
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("temporal at %s: %w", address, err)
	}
	if hint := tlsProblem(address, tlsConf, cfg.Temporal); hint != "" {
		return nil, fmt.Errorf("temporal at %s: %s", address, hint)
	}
	if errors.Is(err, context.DeadlineExceeded) || isUnavailable(err) {
		return nil, fmt.Errorf("no Temporal server at %s; %s", address, startHint(cfg))
	}
	return nil, fmt.Errorf("temporal at %s: %w", address, err)
}

// compression is the SDK's gzip for a server across a network and none for
// one on this machine: there every request and poll would be compressed and
// decompressed by the same two cores for no bytes saved, a tenth of the
// embedded server's work at a turn a few milliseconds long.
func compression(address string) client.GrpcCompression {
	if config.LoopbackAddress(address) {
		return &client.GrpcCompressionNone{}
	}
	return nil
}

// startHint says how to get a Temporal server where the configuration
// looks for one.
func startHint(cfg *config.Config) string {
	switch {
	case cfg.Embedded():
		return "start one with `nid up` (or `nid server` for the server alone)"
	case config.LoopbackAddress(cfg.Temporal.Address):
		return "start it with `nid server` (or set temporal.address to a running one)"
	default:
		return "is the cluster up and temporal.address right?"
	}
}

func isUnavailable(err error) bool {
	var un *serviceerror.Unavailable
	var de *serviceerror.DeadlineExceeded
	return errors.As(err, &un) || errors.As(err, &de) ||
		strings.Contains(err.Error(), "connection refused") || strings.Contains(err.Error(), "context deadline exceeded")
}

// tlsProblem shakes hands with address as the failed dial did, and says
// which temporal key to set when TLS is what failed, or "" when it is not.
// gRPC reports such failures as flattened text, and a server refusing a
// client certificate under TLS 1.3 often only as a broken pipe; a handshake
// of its own gets the server's actual answer. Without TLS it asks whether
// the server speaks TLS at all.
func tlsProblem(address string, conf *tls.Config, t config.Temporal) string {
	probe := &tls.Config{InsecureSkipVerify: true} // only to learn whether the server speaks TLS; nothing is sent
	if conf != nil {
		probe = conf.Clone()
	}
	// As gRPC does.
	probe.NextProtos = []string{"h2"}
	if probe.ServerName == "" {
		probe.ServerName, _, _ = net.SplitHostPort(address)
	}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 3 * time.Second}, "tcp", address, probe)
	if err == nil && conf == nil {
		_ = conn.Close()
		return "it serves TLS: set temporal.tls (caFile for a private CA, serverName for a public one) or temporal.apiKey"
	}
	if err == nil {
		// Under TLS 1.3 the server judges the client certificate after
		// the handshake: a refusal is the first thing to read.
		_ = conn.SetReadDeadline(time.Now().Add(time.Second))
		_, err = conn.Read(make([]byte, 1))
		_ = conn.Close()
		if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
			return ""
		}
	}
	if conf == nil || err == nil {
		return ""
	}
	msg := err.Error()
	var unknown x509.UnknownAuthorityError
	var hostname x509.HostnameError
	switch {
	case errors.As(err, &unknown):
		return "its certificate is signed by an authority this host does not trust: set temporal.tls.caFile to the CA that signed the server's certificate"
	case errors.As(err, &hostname):
		return fmt.Sprintf("its certificate is for another name (%v): set temporal.tls.serverName to a name it carries", err)
	case strings.Contains(msg, "x509:"):
		return fmt.Sprintf("its certificate was refused: %v", err)
	case strings.Contains(msg, "certificate required") && t.TLS.CertFile == "":
		return "it asks for a client certificate: set temporal.tls.certFile and temporal.tls.keyFile"
	case strings.Contains(msg, "remote error: tls:"):
		return fmt.Sprintf("it refused nid's TLS handshake (%v): check temporal.tls.certFile and keyFile", err)
	case strings.Contains(msg, "first record does not look like a TLS handshake"):
		return "it does not serve TLS: unset temporal.tls and temporal.apiKey"
	}
	return ""
}

// refused says, when err is the Temporal server refusing nid's credential
// (PermissionDenied or Unauthenticated), that it did and where nid expects
// the credential; nil for any other error. source is where the credential
// nid presented came from (temporal.apiKey or the state directory's file),
// empty when it presented none.
func refused(err error, address, source, stateDir string) error {
	var denied *serviceerror.PermissionDenied
	if !errors.As(err, &denied) && status.Code(err) != codes.Unauthenticated {
		return nil
	}
	switch source {
	case "":
		return fmt.Errorf("the Temporal server at %s refused nid's credential: nid presented none; it expects the credential in %s (made by the nid up or nid server that serves there) or temporal.apiKey (TEMPORAL_API_KEY)",
			address, TemporalTokenPath(stateDir))
	case "temporal.apiKey":
		return fmt.Errorf("the Temporal server at %s refused nid's credential: check temporal.apiKey (TEMPORAL_API_KEY); for a nid server it is the content of temporal-token in that server's state directory", address)
	default:
		return fmt.Errorf("the Temporal server at %s refused nid's credential from %s: it is not the credential that server keeps (a nid server with another state directory? set temporal.apiKey to the content of its temporal-token)", address, source)
	}
}
