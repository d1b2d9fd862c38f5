package temporaltest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nid-dev/nid/internal/freeport"
	"github.com/nid-dev/nid/statedir"
)

// Main runs the package's tests and stops the shared server if a test
// started it. It does not return.
func Main(m *testing.M) {
	code := m.Run()
	if shared.proc != nil {
		if err := shared.proc.stop(); err != nil {
			fmt.Fprintln(os.Stderr, "temporaltest: stopping nid server:", err)
			code = max(code, 1)
		}
	}
	os.Exit(code)
}

// built is the nid binary, built when a test first needs it.
var built struct {
	once sync.Once
	path string
	err  error
}

// Binary is the nid binary, for tests that run nid itself; the first call
// builds it.
func Binary(t testing.TB) string {
	t.Helper()
	path, err := binary()
	if err != nil {
		t.Fatalf("temporaltest: %v", err)
	}
	return path
}

func binary() (string, error) {
	built.once.Do(func() { built.path, built.err = build() })
	return built.path, built.err
}

// build builds ./cmd/nid into a directory kept between runs, one per
// checkout, so that go build finds the binary up to date and skips the link
// of a few hundred megabytes. A file lock keeps the test binaries go test
// starts together from building it at once.
func build() (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	// go test caches a package's result by the files its tests read;
	// reading every source the binary is built from keeps a cached pass
	// from hiding a change to them.
	if err := readSources(root); err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(root))
	dir := filepath.Join(os.TempDir(), "nid-test-bin-"+hex.EncodeToString(sum[:6]))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("lock %s: %w", lock.Name(), err)
	}
	// Built as make build builds it: the plain build, which links the
	// server, carried by the one that runs it as a child.
	bin := filepath.Join(dir, "nid")
	for _, args := range [][]string{
		{"build", "-o", filepath.Join("cmd", "nid", "nid-server.bin"), "./cmd/nid"},
		{"build", "-tags", "nidlean", "-o", bin, "./cmd/nid"},
	} {
		cmd := exec.Command("go", args...)
		cmd.Dir = root
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("building nid (go %s): %v\n%s", strings.Join(args, " "), err, out.String())
		}
	}
	return bin, nil
}

// ModuleRoot is the directory of go.mod, found upwards from the test's
// working directory (its package's directory).
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

func readSources(root string) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == ".nid" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !(strings.HasSuffix(path, ".go") || d.Name() == "go.mod" || d.Name() == "go.sum") {
			return nil
		}
		_, err = os.ReadFile(path)
		return err
	})
}

// process is a running `nid server`.
type process struct {
	cmd     *exec.Cmd
	out     *SyncBuffer
	done    chan error
	address string
	dir     string
	// token is the credential the server made in its state directory.
	token string
}

// startServer runs `nid server` on free ports with its state in a fresh
// directory and waits until it says where it serves. A port found free can
// be taken before nid binds it, so a start that lost one tries others.
func startServer(bin string) (*process, error) {
	var err error
	for range 3 {
		var p *process
		if p, err = startServerOnce(bin); err == nil {
			return p, nil
		}
		if !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	return nil, err
}

func startServerOnce(bin string) (*process, error) {
	dir, err := os.MkdirTemp("", "nid-test-server-")
	if err != nil {
		return nil, err
	}
	// The Web UI cannot be turned off; nobody looks at this one.
	port, uiPort := FreePort(), FreePort()
	p := &process{out: &SyncBuffer{}, done: make(chan error, 1), dir: dir,
		address: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
	p.cmd = exec.Command(bin, "server")
	// Where no nid.yaml is, and with only these settings: the developer's
	// own NID_* and TEMPORAL_* variables must not reach it.
	p.cmd.Dir = dir
	p.cmd.Env = append(environWithout("NID_", "TEMPORAL_"),
		"NID_STATE="+filepath.Join(dir, "state"),
		"NID_TEMPORAL_PORT="+strconv.Itoa(port),
		"NID_TEMPORAL_UI_PORT="+strconv.Itoa(uiPort),
	)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.SysProcAttr = dieWithParent()
	if err := p.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start nid server: %w", err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	deadline := time.After(readyTimeout)
	for !strings.Contains(p.out.String(), p.address) {
		select {
		case err := <-p.done:
			os.RemoveAll(dir)
			return nil, fmt.Errorf("nid server exited (%v):\n%s", err, p.out.String())
		case <-deadline:
			return nil, errors.Join(fmt.Errorf("nid server did not serve within %s:\n%s", readyTimeout, p.out.String()), p.stop())
		case <-time.After(20 * time.Millisecond):
		}
	}
	// The server has made it before it says where it serves.
	b, err := os.ReadFile(filepath.Join(dir, "state", statedir.TemporalToken))
	if err != nil {
		return nil, errors.Join(fmt.Errorf("nid server's credential: %w", err), p.stop())
	}
	p.token = strings.TrimSpace(string(b))
	return p, nil
}

// stop interrupts the server as Ctrl-C would, kills it if it does not
// stop, and removes its state.
func (p *process) stop() error {
	defer os.RemoveAll(p.dir)
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		return err
	}
	select {
	case err := <-p.done:
		return err
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("nid server did not stop on interrupt:\n%s", p.out.String())
	}
}

func environWithout(prefixes ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !hasAnyPrefix(kv, prefixes) {
			env = append(env, kv)
		}
	}
	return env
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// FreePort is a loopback TCP port that was free a moment ago.
func FreePort() int {
	port, err := freeport.Find()
	if err != nil {
		panic(fmt.Sprintf("temporaltest: %v", err))
	}
	return port
}

// SyncBuffer collects a process's or a command's output while a test reads
// it.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String is everything written so far.
func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
