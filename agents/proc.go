package agents

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

// AgentEnv names the worker's variables every process agent gets (a
// trailing * takes every name with that prefix): where it is and who runs
// it, the locale and terminal, where temporary files and caches go, and
// how to reach its model through the host's proxy and CA bundle. Its kind
// adds its vendor's own (Kind.Env); nothing else of the worker's
// environment reaches an agent. The worker runs with the user's whole
// environment (other vendors' keys, cloud credentials, SSH_AUTH_SOCK, a
// GITHUB_TOKEN), and an agent that can read a variable can write it into
// its output and its model's context.
var AgentEnv = []string{
	"PATH", "HOME", "USER", "LOGNAME", "SHELL",
	"LANG", "LANGUAGE", "LC_*", "TERM", "TZ", "TMPDIR",
	"XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME",
	"SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS",
	"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy",
}

// ProcessEnv is the environment a process agent runs with: the worker's
// variables AgentEnv and p's kind name (Kind.Env, Kind.EnvOf), plus p.Env
// (the session's env: in nid.yaml), plus extra, what nid sets itself
// (later ones win). The worker's NID_* and TEMPORAL_* variables never pass,
// whatever names them: they hold its secrets (the API token, Temporal's
// key).
func ProcessEnv(p Process, extra map[string]string) map[string]string {
	worker := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok && !config.ReservedEnv(k) {
			worker[k] = v
		}
	}
	k := KindOf(p.Kind)
	names := append(slices.Clone(AgentEnv), k.Env...)
	env := map[string]string{}
	pass := func(names []string) {
		for name, v := range worker {
			if slices.ContainsFunc(names, func(n string) bool { return envNameMatches(n, name) }) {
				env[name] = v
			}
		}
	}
	pass(names)
	maps.Copy(env, p.Env)
	if k.EnvOf != nil {
		// What it names may depend on what the agent sees (its CLI's
		// configuration directory, say).
		pass(k.EnvOf(env, p))
		maps.Copy(env, p.Env)
	}
	maps.Copy(env, extra)
	return env
}

// envNameMatches says whether the variable name is what pattern names:
// the name itself, or with a trailing *, any name it begins.
func envNameMatches(pattern, name string) bool {
	if prefix, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(name, prefix)
	}
	return name == pattern
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
