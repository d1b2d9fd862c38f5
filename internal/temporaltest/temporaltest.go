// Package temporaltest runs nid's tests against a real Temporal server:
// nid's own embedded one, started as `nid server` in a child process, one
// per test binary and shared by all its tests. Each test gets a namespace of
// its own on it, so tests run side by side without seeing each other's
// workflows, and drives nid's real workflows there.
//
// A package opts in from TestMain, and a test asks for a namespace:
//
//	func TestMain(m *testing.M) { temporaltest.Main(m) }
//
//	env := temporaltest.New(t)
//	cfg := env.Config(t, groupsYAML) // nid.yaml for a worker on env
//	c := env.Client(t)
//
// The server is a process, not a library, because only cmd/nid and
// worker/embedded may link the Temporal server: the packages under test keep
// compiling in seconds. When the first test asks for it, the binary is built
// (go build finds it up to date and skips the link when nothing changed) and
// the server started. It binds 127.0.0.1 only and needs no network.
package temporaltest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/workflows"
)

// Token is the HTTP API token of every Config.
const Token = "temporaltest-token-0123456789-abcdef"

// Host is the host name a test's worker serves under, so what nid prints of
// hosts is the same on every machine.
const Host = "testhost"

// readyTimeout bounds the server's start and a namespace's readiness: a cold
// start on a busy machine takes seconds.
const readyTimeout = 2 * time.Minute

// Env is one test's namespace on the shared server.
type Env struct {
	// Address is the server's frontend, host:port.
	Address   string
	Namespace string
	// APIKey is the credential the server requires of every client, as
	// `nid server` made it in its state directory: a client that dials
	// Address without it is refused.
	APIKey string
}

// New gives the test a namespace of its own, with nid's search attributes,
// on the shared server, starting the server if no test has yet.
func New(t testing.TB) Env {
	t.Helper()
	address, err := shared.address()
	if err != nil {
		t.Fatalf("temporaltest: %v", err)
	}
	ns, err := shared.namespace()
	if err != nil {
		t.Fatalf("temporaltest: %v", err)
	}
	return Env{Address: address, Namespace: ns, APIKey: shared.proc.token}
}

// Client dials the test's namespace; the test's clean-up closes it.
func (e Env) Client(t testing.TB) client.Client {
	t.Helper()
	c, err := client.Dial(e.ClientOptions())
	if err != nil {
		t.Fatalf("temporaltest: dial %s namespace %s: %v", e.Address, e.Namespace, err)
	}
	t.Cleanup(c.Close)
	return c
}

// ClientOptions are the SDK's options for a client of the namespace, the
// credential included.
func (e Env) ClientOptions() client.Options {
	return clientOptions(e.Address, e.Namespace, e.APIKey)
}

// clientOptions dial address as nid does a server on loopback: with the
// credential, in plaintext.
func clientOptions(address, namespace, apiKey string) client.Options {
	return client.Options{HostPort: address, Namespace: namespace, Logger: quiet(),
		Credentials:       client.NewAPIKeyStaticCredentials(apiKey),
		ConnectionOptions: client.ConnectionOptions{TLSDisabled: true}}
}

// Environ is the environment that points a nid command at the namespace.
func (e Env) Environ() []string {
	return []string{"TEMPORAL_ADDRESS=" + e.Address, "TEMPORAL_NAMESPACE=" + e.Namespace, "TEMPORAL_API_KEY=" + e.APIKey}
}

// Config loads a nid.yaml for a worker on the namespace, the way nid up
// loads one: groups is the YAML under "groups:" (indented two spaces), the
// state directory is the test's own, temporal.apiKey the server's
// credential (as on another host), and the HTTP server takes a free
// loopback port and Token.
func (e Env) Config(t testing.TB, groups string) *config.Config {
	t.Helper()
	dir := t.TempDir()
	yaml := fmt.Sprintf("state: %s\ntemporal:\n  address: %s\n  namespace: %s\n  apiKey: %s\nhttp:\n  listen: 127.0.0.1:0\n  token: %s\nworker:\n  host: %s\n  maxSessions: 8\ngroups:\n%s",
		filepath.Join(dir, "state"), e.Address, e.Namespace, e.APIKey, Token, Host, groups)
	file := filepath.Join(dir, "nid.yaml")
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(config.LoadOptions{File: file, Environ: []string{}, Kinds: agents.ConfigKinds()})
	if err != nil {
		t.Fatalf("temporaltest: %v", err)
	}
	return cfg
}

// poolSize is how many namespaces are made ready ahead of the tests that
// will ask for them: a new namespace's search attributes take a second or
// two to resolve, and many resolve in the same time as one.
const poolSize = 4

// server is the shared `nid server` and its pool of fresh namespaces.
type server struct {
	start sync.Once
	proc  *process
	err   error

	fill  sync.Once
	ready chan result
}

type result struct {
	namespace string
	err       error
}

// shared is the test binary's server: one per process is the point, so it
// is the package's one piece of state (with the binary Main built).
var shared = &server{ready: make(chan result)}

func (s *server) address() (string, error) {
	s.start.Do(func() {
		bin, err := binary()
		if err != nil {
			s.err = err
			return
		}
		s.proc, s.err = startServer(bin)
	})
	if s.err != nil {
		return "", s.err
	}
	return s.proc.address, nil
}

// namespace takes a ready namespace from the pool, which fills from the
// first call on.
func (s *server) namespace() (string, error) {
	s.fill.Do(func() {
		for range poolSize {
			go s.filler()
		}
	})
	select {
	case r := <-s.ready:
		return r.namespace, r.err
	case <-time.After(readyTimeout):
		return "", fmt.Errorf("no namespace ready in %s", readyTimeout)
	}
}

// filler makes namespaces until the test binary ends; after a failure it
// hands the failure on and stops.
func (s *server) filler() {
	for {
		ns, err := newNamespace(s.proc.address, s.proc.token)
		s.ready <- result{ns, err}
		if err != nil {
			return
		}
	}
}

// newNamespace registers a namespace with nid's search attributes and waits
// until a visibility query naming them resolves.
func newNamespace(address, apiKey string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	c, err := client.DialContext(ctx, clientOptions(address, "", apiKey))
	if err != nil {
		return "", fmt.Errorf("dial %s: %w", address, err)
	}
	defer c.Close()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	ns := "test-" + hex.EncodeToString(b)
	if _, err := c.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace:                        ns,
		WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour),
	}); err != nil {
		return "", fmt.Errorf("register namespace %s: %w", ns, err)
	}
	if _, err := c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace: ns, SearchAttributes: workflows.SearchAttributes(),
	}); err != nil {
		return "", fmt.Errorf("namespace %s: add search attributes: %w", ns, err)
	}
	var probe []string
	for name := range workflows.SearchAttributes() {
		probe = append(probe, name+" IS NULL")
	}
	// The server sees the new attributes at its namespace cache's next
	// refresh; until then a query naming them is refused.
	for {
		_, err := c.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{
			Namespace: ns, Query: strings.Join(probe, " OR "),
		})
		if err == nil {
			return ns, nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("namespace %s not ready: %w", ns, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func quiet() sdklog.Logger { return sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)) }

// Logger is for the worker nodes tests start: their errors go to stderr,
// the rest is dropped.
func Logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
}
