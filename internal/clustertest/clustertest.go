// Package clustertest runs a real Temporal cluster for tests: Debian's
// PostgreSQL, the schemas set up by Temporal's own SQL tool, and the
// Temporal server, all on 127.0.0.1 in temporary directories.
//
// The server and the tool are built with go build from the
// go.temporal.io/server module at the version go.mod pins (its cmd/server
// and cmd/tools/sql), never linked into a test binary: only worker/embedded
// and cmd/nid may import the server.
//
//	c := clustertest.Start(t) // skips without PostgreSQL, unless CI=true
//	c.Address                 // the frontend, host:port
package clustertest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"google.golang.org/protobuf/types/known/durationpb"

	"go.yaml.in/yaml/v3"

	"github.com/nid-dev/nid/internal/temporaltest"
)

// Namespace is the namespace the cluster is started with.
const Namespace = "default"

// readyTimeout bounds the start of PostgreSQL and of the server: on a busy
// machine the server's first start takes a while.
const readyTimeout = 3 * time.Minute

// Cluster is a running Temporal server on PostgreSQL.
type Cluster struct {
	// Address is the frontend, host:port on 127.0.0.1.
	Address string
	// Log is the server's output, for a failing test to show.
	Log *temporaltest.SyncBuffer
}

// Start brings up PostgreSQL and a Temporal server on it for the test, and
// stops both when the test ends. Without PostgreSQL installed it skips the
// test, except under CI=true, where a missing database is a failure: CI
// installs it (make deps).
func Start(t testing.TB) *Cluster {
	t.Helper()
	return StartWith(t, Options{})
}

// Options change the cluster Start runs.
type Options struct {
	// DynamicConfig is added to deploy/dynamicconfig.yaml (YAML, as that
	// file has it), e.g. a slower namespace cache refresh.
	DynamicConfig string
}

// StartWith is Start with opts.
func StartWith(t testing.TB, opts Options) *Cluster {
	t.Helper()
	pgBin, err := postgresBin()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("clustertest: %v (make deps installs it)", err)
		}
		t.Skipf("clustertest: %v: apt-get install postgresql to run this test", err)
	}
	bins, err := buildServer()
	if err != nil {
		t.Fatalf("clustertest: %v", err)
	}
	dir, err := os.MkdirTemp("", "nid-cluster-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })

	pgPort := temporaltest.FreePort()
	stopPG, err := startPostgres(pgBin, dir, pgPort)
	if err != nil {
		t.Fatalf("clustertest: %v", err)
	}
	t.Cleanup(stopPG)
	if err := setupSchemas(bins, pgPort); err != nil {
		t.Fatalf("clustertest: %v", err)
	}
	c, stop, err := startServer(bins, dir, pgPort, opts.DynamicConfig)
	if err != nil {
		t.Fatalf("clustertest: %v", err)
	}
	t.Cleanup(stop)
	return c
}

// postgresBin is the directory of Debian's PostgreSQL programs (initdb,
// pg_ctl), the newest installed.
func postgresBin() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return vb - va
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", errors.New("no PostgreSQL server installed (no /usr/lib/postgresql/*/bin/initdb)")
}

// binaries are the built Temporal server and SQL tool, the server
// module's directory (its schema files) and nid's (its docker-compose.yml
// and deploy/).
type binaries struct {
	server, sqlTool, module, root string
}

// buildServer builds the Temporal server and its SQL tool into a directory
// kept between runs, so that go build finds them up to date; a file lock
// keeps test binaries started together from building them at once.
func buildServer() (binaries, error) {
	root, err := temporaltest.ModuleRoot()
	if err != nil {
		return binaries{}, err
	}
	out, err := goCmd(root, "list", "-m", "-f", "{{.Dir}}", "go.temporal.io/server")
	if err != nil {
		return binaries{}, err
	}
	b := binaries{module: strings.TrimSpace(out), root: root}
	sum := sha256.Sum256([]byte(root))
	dir := filepath.Join(os.TempDir(), "nid-test-cluster-"+hex.EncodeToString(sum[:6]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return b, err
	}
	lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return b, err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return b, fmt.Errorf("lock %s: %w", lock.Name(), err)
	}
	b.server, b.sqlTool = filepath.Join(dir, "temporal-server"), filepath.Join(dir, "temporal-sql-tool")
	for bin, pkg := range map[string]string{b.server: "go.temporal.io/server/cmd/server", b.sqlTool: "go.temporal.io/server/cmd/tools/sql"} {
		if _, err := goCmd(root, "build", "-o", bin, pkg); err != nil {
			return b, err
		}
	}
	return b, nil
}

func goCmd(dir string, args ...string) (string, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String(), nil
}

// asPostgres runs a PostgreSQL program: as the postgres user when the test
// runs as root (initdb and the server refuse root), else as the test's own
// user.
func asPostgres(name string, args ...string) *exec.Cmd {
	if os.Geteuid() == 0 {
		return exec.Command("runuser", append([]string{"-u", "postgres", "--", name}, args...)...)
	}
	return exec.Command(name, args...)
}

// startPostgres makes a database cluster in dir and starts its server on
// 127.0.0.1:port with its socket in dir too, trusting local connections:
// nothing but this test reaches it.
func startPostgres(bin, dir string, port int) (stop func(), err error) {
	data := filepath.Join(dir, "pg")
	if err := os.Mkdir(data, 0o700); err != nil {
		return nil, err
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running as root, PostgreSQL needs its postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		for _, p := range []string{dir, data} {
			if err := os.Chown(p, uid, gid); err != nil {
				return nil, err
			}
		}
	}
	run := func(name string, args ...string) error {
		cmd := asPostgres(filepath.Join(bin, name), args...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %v\n%s", name, err, out)
		}
		return nil
	}
	if err := run("initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"); err != nil {
		return nil, err
	}
	// fsync off: a test database need not survive a power cut.
	opts := fmt.Sprintf("-h 127.0.0.1 -p %d -k %s -F -c max_connections=200", port, dir)
	if err := run("pg_ctl", "-D", data, "-l", filepath.Join(dir, "pg.log"), "-o", opts, "-w", "-t", strconv.Itoa(int(readyTimeout.Seconds())), "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "pg.log"))
		return nil, fmt.Errorf("%v\n%s", err, log)
	}
	return func() { _ = run("pg_ctl", "-D", data, "-m", "immediate", "-w", "stop") }, nil
}

// setupSchemas creates and upgrades both databases with the script
// docker-compose.yml runs in its schema service, twice: the second run is
// a restart of that service, which must leave a set-up database alone.
func setupSchemas(b binaries, pgPort int) error {
	script, env, err := composeSchemaScript(b.root)
	if err != nil {
		return err
	}
	// The compose file's own values where the test's PostgreSQL differs.
	env["SQL_HOST"], env["SQL_PORT"], env["SQL_USER"], env["SQL_PASSWORD"] = "127.0.0.1", strconv.Itoa(pgPort), "postgres", ""
	env["SCHEMA_DIR"] = filepath.Join(b.module, "schema", "postgresql", "v12")
	env["PATH"] = filepath.Dir(b.sqlTool) + string(os.PathListSeparator) + os.Getenv("PATH")
	for run := 1; run <= 2; run++ {
		cmd := exec.Command("/bin/sh", "-euc", script)
		for k, v := range env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("docker-compose.yml's schema script, run %d: %v\n%s", run, err, out)
		}
	}
	return nil
}

// composeSchemaScript is the schema service's script in docker-compose.yml,
// with compose's $$ escapes undone, and its environment.
func composeSchemaScript(root string) (string, map[string]string, error) {
	data, err := os.ReadFile(filepath.Join(root, "docker-compose.yml"))
	if err != nil {
		return "", nil, err
	}
	var compose struct {
		Services map[string]struct {
			Environment map[string]string `yaml:"environment"`
			Command     []string          `yaml:"command"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(data, &compose); err != nil {
		return "", nil, fmt.Errorf("docker-compose.yml: %w", err)
	}
	schema := compose.Services["schema"]
	if len(schema.Command) != 1 || schema.Environment == nil {
		return "", nil, errors.New("docker-compose.yml: the schema service has no one-script command with an environment")
	}
	return strings.ReplaceAll(schema.Command[0], "$$", "$"), schema.Environment, nil
}

// serverConfig is the server's configuration: every service on its own
// loopback ports, both stores on the PostgreSQL at pgPort.
const serverConfig = `log:
  stdout: true
  level: warn
persistence:
  defaultStore: default
  visibilityStore: visibility
  numHistoryShards: 2
  datastores:
    default:
      sql: {pluginName: postgres12, databaseName: temporal, connectAddr: "127.0.0.1:%[1]d", connectProtocol: tcp, user: postgres, maxConns: 20, maxIdleConns: 20}
    visibility:
      sql: {pluginName: postgres12, databaseName: temporal_visibility, connectAddr: "127.0.0.1:%[1]d", connectProtocol: tcp, user: postgres, maxConns: 10, maxIdleConns: 10}
global:
  membership:
    maxJoinDuration: 30s
    broadcastAddress: 127.0.0.1
services:
  frontend:
    rpc: {grpcPort: %[2]d, membershipPort: %[3]d, httpPort: %[4]d, bindOnIP: 127.0.0.1}
  history:
    rpc: {grpcPort: %[5]d, membershipPort: %[6]d, bindOnIP: 127.0.0.1}
  matching:
    rpc: {grpcPort: %[7]d, membershipPort: %[8]d, bindOnIP: 127.0.0.1}
  worker:
    rpc: {grpcPort: %[9]d, membershipPort: %[10]d, bindOnIP: 127.0.0.1}
clusterMetadata:
  enableGlobalNamespace: false
  failoverVersionIncrement: 10
  masterClusterName: active
  currentClusterName: active
  clusterInformation:
    active:
      enabled: true
      initialFailoverVersion: 1
      rpcName: frontend
      rpcAddress: "127.0.0.1:%[2]d"
dcRedirectionPolicy:
  policy: noop
dynamicConfigClient:
  filepath: %[11]s
  pollInterval: 10s
`

func startServer(b binaries, dir string, pgPort int, extraDynamicConfig string) (*Cluster, func(), error) {
	ports := make([]any, 0, 10)
	ports = append(ports, pgPort)
	for range 9 {
		ports = append(ports, temporaltest.FreePort())
	}
	// The dynamic configuration docker-compose.yml gives its server.
	deployed, err := os.ReadFile(filepath.Join(b.root, "deploy", "dynamicconfig.yaml"))
	if err != nil {
		return nil, nil, err
	}
	dyn := filepath.Join(dir, "dynamicconfig.yaml")
	if err := os.WriteFile(dyn, append(deployed, "\n"+extraDynamicConfig...), 0o644); err != nil {
		return nil, nil, err
	}
	file := filepath.Join(dir, "temporal.yaml")
	if err := os.WriteFile(file, []byte(fmt.Sprintf(serverConfig, append(ports, dyn)...)), 0o644); err != nil {
		return nil, nil, err
	}
	c := &Cluster{Address: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1].(int))), Log: &temporaltest.SyncBuffer{}}
	cmd := exec.Command(b.server, "--config-file", file, "--allow-no-auth", "start")
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = c.Log, c.Log
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("start temporal-server: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	stop := func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	if err := c.ready(done); err != nil {
		stop()
		return nil, nil, err
	}
	return c, stop, nil
}

// ready waits until the frontend answers, registers the namespace (30
// days' retention, as nid up's) and waits until it takes calls.
func (c *Cluster) ready(exited <-chan error) error {
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	try := func(what string, fn func() error) error {
		for {
			err := fn()
			if err == nil {
				return nil
			}
			select {
			case e := <-exited:
				return fmt.Errorf("temporal-server exited (%v) while %s:\n%s", e, what, c.Log.String())
			case <-ctx.Done():
				return fmt.Errorf("temporal-server: %s: %v\n%s", what, err, c.Log.String())
			case <-time.After(250 * time.Millisecond):
			}
		}
	}
	var nc client.NamespaceClient
	if err := try("dialing", func() (err error) {
		nc, err = client.NewNamespaceClient(client.Options{HostPort: c.Address, Logger: quiet()})
		return err
	}); err != nil {
		return err
	}
	defer nc.Close()
	if err := try("registering the namespace", func() error {
		err := nc.Register(ctx, &workflowservice.RegisterNamespaceRequest{
			Namespace: Namespace, WorkflowExecutionRetentionPeriod: durationpb.New(30 * 24 * time.Hour),
		})
		if err != nil && strings.Contains(err.Error(), "already") {
			return nil
		}
		return err
	}); err != nil {
		return err
	}
	cl, err := client.Dial(client.Options{HostPort: c.Address, Namespace: Namespace, Logger: quiet()})
	if err != nil {
		return err
	}
	defer cl.Close()
	return try("waiting for the namespace", func() error {
		_, err := cl.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: Namespace})
		return err
	})
}

func quiet() sdklog.Logger {
	return sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
}
