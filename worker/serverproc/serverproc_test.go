package serverproc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/nid-dev/nid/internal/temporaltest"
	"github.com/nid-dev/nid/worker"
)

// The test binary is its own child: with childEnv set it serves fakeStart.
const childEnv = "NID_SERVERPROC_TEST_CHILD"

// With parentEnv set it starts a child, prints the child's pid and waits to
// be killed.
const parentEnv = "NID_SERVERPROC_TEST_PARENT"

func TestMain(m *testing.M) {
	if os.Getenv(parentEnv) != "" {
		os.Unsetenv(parentEnv)
		os.Setenv(childEnv, "1")
		exe, _ := os.Executable()
		srv, err := Start(exe)(context.Background(), worker.EmbeddedOptions{StateDir: os.TempDir(), Namespace: "slow"})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println(srv.(*child).cmd.Process.Pid)
		select {}
	}
	if os.Getenv(childEnv) != "" {
		if err := Serve(fakeStart, os.Stdin, os.Stdout, os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type fakeServer struct {
	opts  worker.EmbeddedOptions
	links int
}

func (f *fakeServer) FrontendAddress() string { return fmt.Sprintf("127.0.0.1:%d", f.opts.Port) }
func (f *fakeServer) UIAddress() string       { return fmt.Sprintf("http://127.0.0.1:%d", f.opts.UIPort) }
func (f *fakeServer) UILoginLink() string {
	f.links++
	return fmt.Sprintf("%s/login/%d", f.UIAddress(), f.links)
}
func (f *fakeServer) Stop() error {
	if f.opts.Namespace == "slow" {
		// As a real server's stop does, it takes a while.
		time.Sleep(5 * time.Second)
	}
	f.opts.Logger.Info("stopped", "namespace", f.opts.Namespace)
	return nil
}

func fakeStart(_ context.Context, opts worker.EmbeddedOptions) (worker.EmbeddedServer, error) {
	if opts.Namespace == "refused" {
		return nil, errors.New("temporal.port 7233 is taken")
	}
	// A port taken before the server bound it: the real server logs this
	// and exits. The first child of the namespace "<service>-taken-once"
	// meets it; every child of "<service>-taken" does.
	if service, once, ok := takenPort(opts.Namespace); ok {
		marker := filepath.Join(opts.StateDir, "started-"+strconv.Itoa(os.Getpid()))
		if err := os.WriteFile(marker, nil, 0o600); err != nil {
			return nil, err
		}
		if n, _ := os.ReadDir(opts.StateDir); !once || len(n) == 1 {
			opts.Logger.Error("Failed to start gRPC listener", "address", "127.0.0.1:25038",
				"error", "listen tcp 127.0.0.1:25038: bind: address already in use", "service", service)
			os.Exit(1)
		}
	}
	opts.Logger.Warn("started", "token", opts.APIToken, "attributes", len(opts.SearchAttributes))
	return &fakeServer{opts: opts}, nil
}

func startChild(t *testing.T, namespace string, logs *temporaltest.SyncBuffer) (worker.EmbeddedServer, error) {
	t.Setenv(childEnv, "1")
	exe, err := os.Executable()
	require.NoError(t, err)
	return Start(exe)(context.Background(), worker.EmbeddedOptions{
		StateDir: t.TempDir(), Namespace: namespace, Port: 7301, UIPort: 7302, APIToken: "nid-token",
		SearchAttributes: map[string]enumspb.IndexedValueType{"NidGroup": enumspb.INDEXED_VALUE_TYPE_KEYWORD},
		Logger:           slog.New(slog.NewTextHandler(logs, nil)),
	})
}

func TestChildServesTheServerItWasAskedFor(t *testing.T) {
	var logs temporaltest.SyncBuffer
	srv, err := startChild(t, "default", &logs)
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:7301", srv.FrontendAddress())
	require.Equal(t, "http://127.0.0.1:7302", srv.UIAddress())
	// Each login link is good once, so each request gets a new one.
	require.Equal(t, "http://127.0.0.1:7302/login/1", srv.UILoginLink())
	require.Equal(t, "http://127.0.0.1:7302/login/2", srv.UILoginLink())
	require.NoError(t, srv.Stop())
	require.NoError(t, srv.Stop(), "a second Stop does nothing")
	out := logs.String()
	require.Contains(t, out, "level=WARN msg=started")
	require.Contains(t, out, "attributes=1 token=nid-token")
	require.Contains(t, out, "level=INFO msg=stopped namespace=default")
}

func TestChildThatCannotStartSaysWhy(t *testing.T) {
	var logs temporaltest.SyncBuffer
	_, err := startChild(t, "refused", &logs)
	require.EqualError(t, err, "temporal.port 7233 is taken")
}

// takenPort reads a namespace that asks the fake child to fail on a taken
// port: the service's, and whether only its first child fails.
func takenPort(namespace string) (service string, once, ok bool) {
	if service, ok := strings.CutSuffix(namespace, "-taken-once"); ok {
		return service, true, true
	}
	service, ok = strings.CutSuffix(namespace, "-taken")
	return service, false, ok
}

// startTaken starts a child of namespace in its own state directory and
// says how many children ran.
func startTaken(t *testing.T, namespace string) (worker.EmbeddedServer, int, error) {
	t.Setenv(childEnv, "1")
	exe, err := os.Executable()
	require.NoError(t, err)
	state := t.TempDir()
	var logs temporaltest.SyncBuffer
	srv, err := Start(exe)(context.Background(), worker.EmbeddedOptions{
		StateDir: state, Namespace: namespace, Port: 7301, UIPort: 7302,
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	if srv != nil {
		t.Cleanup(func() { _ = srv.Stop() })
	}
	children, rerr := os.ReadDir(state)
	require.NoError(t, rerr)
	return srv, len(children), err
}

// A port the server chose for itself (an internal service's) taken by
// another process between the check and the bind: a second child chooses
// again and serves. The frontend's port is the user's: taken, it is not
// tried again; nor is one that stays taken tried for ever.
func TestAChildWhosePortWasTakenIsStartedAgain(t *testing.T) {
	srv, children, err := startTaken(t, "internal-frontend-taken-once")
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:7301", srv.FrontendAddress())
	require.Equal(t, 2, children)

	_, children, err = startTaken(t, "frontend-taken")
	require.ErrorContains(t, err, "the embedded Temporal server exited")
	require.Equal(t, 1, children, "the user's port: not tried again")

	_, children, err = startTaken(t, "history-taken")
	require.ErrorContains(t, err, "the embedded Temporal server exited")
	require.Equal(t, startAttempts, children)
}

func TestChildStopsWhenItsParentGoesAway(t *testing.T) {
	var logs temporaltest.SyncBuffer
	srv, err := startChild(t, "default", &logs)
	require.NoError(t, err)
	c := srv.(*child)
	// The parent's end of the pipe closes when it exits, however it exits.
	require.NoError(t, c.stdin.Close())
	select {
	case <-c.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the child did not exit when its input ended")
	}
	require.NoError(t, c.waitErr)
	require.NotContains(t, logs.String(), "msg=stopped", "the server goes at once, as it would have in the killed parent")
}

func TestExtractWritesEachVersionOnceAndRunsIt(t *testing.T) {
	dir := t.TempDir()
	script := []byte("#!/bin/sh\necho serving\n")
	path, err := extractTo(dir, script)
	require.NoError(t, err)
	out, err := exec.Command(path).Output()
	require.NoError(t, err)
	require.Equal(t, "serving\n", string(out))

	info, err := os.Stat(path)
	require.NoError(t, err)
	again, err := extractTo(dir, script)
	require.NoError(t, err)
	require.Equal(t, path, again)
	info2, err := os.Stat(again)
	require.NoError(t, err)
	require.Equal(t, info.ModTime(), info2.ModTime(), "the same version is not written twice")

	other, err := extractTo(dir, []byte("#!/bin/sh\necho newer\n"))
	require.NoError(t, err)
	require.NotEqual(t, path, other, "another version gets its own file")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "the older version is removed and no half-written file is left behind")
	require.Equal(t, filepath.Base(other), entries[0].Name())

	_, err = extractTo(dir, nil)
	require.ErrorContains(t, err, "carries no Temporal server")
}

func TestVersionKeyReadsOnlyTheBuildID(t *testing.T) {
	exe, err := os.Executable()
	require.NoError(t, err)
	data, err := os.ReadFile(exe)
	require.NoError(t, err)
	require.NotNil(t, goBuildID(data), "a Go executable's build ID is found")
	key := versionKey(data)
	// The code and data between the headers and the ID are not read.
	changed := slices.Clone(data)
	changed[len(changed)/2] ^= 0xff
	require.Equal(t, key, versionKey(changed))
	// Without one, the whole content names it.
	require.NotEqual(t, versionKey([]byte("#!/bin/sh\necho a\n")), versionKey([]byte("#!/bin/sh\necho b\n")))
}

func TestChildDiesWithAKilledParent(t *testing.T) {
	exe, err := os.Executable()
	require.NoError(t, err)
	parent := exec.Command(exe)
	parent.Env = append(os.Environ(), parentEnv+"=1")
	out, err := parent.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, parent.Start())
	var pid int
	_, err = fmt.Fscan(out, &pid)
	require.NoError(t, err, "the parent prints its child's pid")

	require.NoError(t, parent.Process.Kill())
	_ = parent.Wait()
	// The next nid up must find the port and database free: the child goes
	// with its parent, not after stopping the server.
	deadline := time.Now().Add(2 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("the child %d outlived its killed parent by 2 s", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// alive says whether pid is a process that has not ended; a zombie has.
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	return !bytes.Contains(stat[bytes.LastIndexByte(stat, ')'):], []byte(") Z"))
}

// Extracting the carried executable leaves none of it counted in nid's
// resident memory, though writing it out read every page.
func TestExtractLeavesTheCarriedExecutableOutOfResidentMemory(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("nid releases the pages on Linux only")
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	// Mapped as nid's own executable data is: private and read-only.
	f, err := os.Open(exe)
	require.NoError(t, err)
	defer f.Close()
	info, err := f.Stat()
	require.NoError(t, err)
	carried, err := syscall.Mmap(int(f.Fd()), 0, int(info.Size()), syscall.PROT_READ, syscall.MAP_PRIVATE)
	require.NoError(t, err)
	defer func() { _ = syscall.Munmap(carried) }()
	before := residentFileKiB(t)
	_, err = extractTo(t.TempDir(), carried)
	require.NoError(t, err)
	after := residentFileKiB(t)
	size := int64(len(carried)) >> 10
	require.Less(t, after, before+size/10, "the %d KiB written out are not resident (file-backed resident memory %d KiB before, %d after)", size, before, after)
}

// residentFileKiB is this process's file-backed resident memory.
func residentFileKiB(t *testing.T) int64 {
	t.Helper()
	status, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	for line := range strings.SplitSeq(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "RssFile:"); ok {
			kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			require.NoError(t, err)
			return kib
		}
	}
	t.Fatal("no RssFile in /proc/self/status")
	return 0
}
