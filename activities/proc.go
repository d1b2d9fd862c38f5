package activities

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nid-dev/nid/config"
)

// stderrKeep is how much of a process's stderr an error message quotes.
const stderrKeep = 2 << 10

// lookCommand finds a process agent's program, or says plainly that it is
// missing, how to install it and which setting names it.
func lookCommand(kind string, p Process) (string, error) {
	name := p.Command
	if name == "" {
		return "", AgentFailed("%s: no command configured (set agents.%s.command)", kind, kind)
	}
	path, err := exec.LookPath(name)
	if err != nil {
		where := ""
		if !strings.ContainsRune(name, os.PathSeparator) {
			where = " on PATH"
		}
		return "", AgentFailed("%s: command %q not found%s: %s, or set agents.%s.command to where it is", kind, name, where, installHint(KindOf(kind)), kind)
	}
	return path, nil
}

// newCommand builds the command for a process agent: in its own process
// group so that a timeout or cancellation kills everything it started, with
// the environment ProcessEnv gives it.
func newCommand(ctx context.Context, path string, args []string, p Process, extra map[string]string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Dir = p.WorkDir
	env := ProcessEnv(p, extra)
	for _, k := range slices.Sorted(maps.Keys(env)) {
		cmd.Env = append(cmd.Env, k+"="+env[k])
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return killGroup(cmd) }
	// Grandchildren holding the pipes must not keep Wait from returning.
	cmd.WaitDelay = 2 * time.Second
	return cmd
}

// ProcessEnv is the environment a process agent runs with: the worker's
// own, plus p.Env, plus extra (later ones win). The worker's NID_* and
// TEMPORAL_* variables are left out: they hold its secrets (the API token,
// Temporal's key), which no agent needs.
func ProcessEnv(p Process, extra map[string]string) map[string]string {
	env := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok && !config.ReservedEnv(k) {
			env[k] = v
		}
	}
	maps.Copy(env, p.Env)
	maps.Copy(env, extra)
	return env
}

func killGroup(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
}

// tail keeps the end of what a process wrote to stderr.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if len(t.buf) > stderrKeep {
		t.buf = t.buf[len(t.buf)-stderrKeep:]
	}
	return len(b), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}

// runLines runs one process to its end, handing each line of its stdout to
// onLine as it comes. The process gets at most p.Timeout (zero: no limit of
// its own); past it, or when ctx ends, its whole process group is killed.
// A process that exits non-zero is a non-retryable error quoting its stderr;
// one killed by a signal mid-turn is a plain (retryable) error.
func runLines(ctx context.Context, kind string, cmd *exec.Cmd, p Process, onLine func([]byte)) error {
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	stderr := &tail{}
	cmd.Stderr = stderr
	done, err := startRecorded(cmd, p.PidDir)
	if err != nil {
		return AgentFailed("%s: %v", kind, err)
	}
	unwatch := context.AfterFunc(ctx, func() { _ = killGroup(cmd) })
	timeout := p.Timeout
	timedOut := make(chan struct{})
	stopTimer := func() {}
	if timeout > 0 {
		timer := time.AfterFunc(timeout, func() {
			close(timedOut)
			_ = killGroup(cmd)
		})
		stopTimer = func() { timer.Stop() }
	}
	readLines(out, onLine)
	err = cmd.Wait()
	unwatch()
	stopTimer()
	// Whatever happens, nothing the process started outlives it.
	_ = killGroup(cmd)
	done()
	select {
	case <-timedOut:
		return turnTimedOut(kind, timeout)
	default:
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return exitFailure(kind, err, stderr.String())
}

// exitFailure is the failure of an agent process that ended mid-turn with
// err (nil: it exited 0), quoting its stderr. One killed by a signal may
// work when run again; a bad flag, a refused key, a broken install give the
// same answer every time.
func exitFailure(kind string, err error, stderr string) error {
	if err == nil {
		return nil
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return fmt.Errorf("%s exited mid-turn, killed by %s%s", kind, ws.Signal(), quote(stderr))
		}
		return AgentFailed("%s exited with status %d%s", kind, exit.ExitCode(), quote(stderr))
	}
	return fmt.Errorf("%s: %w%s", kind, err, quote(stderr))
}

// lingerTimeout is how long a process asked to exit (its stdin closed) has
// to do so by itself before its group is killed: Claude Code takes a tenth
// of a second to save its transcript and close its connections.
const lingerTimeout = 10 * time.Second

// MaxLineBytes bounds one line of an agent's stdout. The CLIs nid drives
// write a JSON event per line, megabytes at most; a longer line is a broken
// or hostile agent, and keeping it whole would let one endless line take the
// worker's memory.
const MaxLineBytes = 8 << 20

// readLines hands every line of r to onLine until EOF. A line longer than
// MaxLineBytes is handed over cut to its first MaxLineBytes (a JSON event so
// cut no longer parses, and is skipped like any other garbage), and the rest
// of it is read and dropped without being kept.
func readLines(r io.Reader, onLine func([]byte)) {
	br := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	cut := false
	for {
		chunk, err := br.ReadSlice('\n')
		if !cut {
			room := MaxLineBytes - len(line)
			if len(chunk) > room {
				chunk, cut = chunk[:room], true
			}
			line = append(line, chunk...)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if trimmed := bytes.TrimSpace(line); len(trimmed) > 0 {
			onLine(trimmed)
		}
		// onLine may keep what it was handed.
		line, cut = nil, false
		if err != nil {
			return
		}
	}
}

func quote(stderr string) string {
	if stderr == "" {
		return ""
	}
	return ": " + stderr
}
