// Package serverproc runs the embedded Temporal server in a child process,
// so that the nid binary a user runs for every command need not link the
// server: Go initialises every package a binary links before main, and the
// server's eight hundred packages cost tens of milliseconds and tens of
// megabytes on each start, even for nid ls or nid version (see
// docs/performance.md).
//
// The parent (Start) runs a server executable with ChildArg and speaks to it
// over its standard streams, one JSON object a line: the options on stdin,
// the frontend's address on stdout once it answers, then a request and its
// answer at a time. The child (Serve) logs to stderr as JSON lines, which the
// parent hands to its own logger. A child whose parent is killed dies at
// once, as the server did when it ran in the killed process, so that the
// next nid up finds its port and database free: on Linux the kernel kills
// it, elsewhere it exits when its stdin ends.
//
// Nothing here imports the server either: the child is handed its start
// function, so that only cmd/nid links it.
package serverproc

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nid-dev/nid/worker"
)

// ChildArg is the one argument that makes a server executable serve as the
// child of Start rather than run nid's command line.
const ChildArg = "__nid-embedded-server"

// stopTimeout bounds how long Stop waits for the child to stop the server
// before it kills it.
const stopTimeout = 30 * time.Second

// options is worker.EmbeddedOptions without its logger, which stays with the
// parent.
type options struct {
	StateDir         string         `json:"stateDir"`
	Namespace        string         `json:"namespace"`
	Port             int            `json:"port"`
	UIPort           int            `json:"uiPort"`
	UIWriteActions   bool           `json:"uiWriteActions"`
	APIToken         string         `json:"apiToken"`
	SearchAttributes map[string]int `json:"searchAttributes"`
}

// request is what the parent asks of a running child.
type request struct {
	Op string `json:"op"`
}

const (
	opLoginLink = "loginLink"
	opStop      = "stop"
)

// reply is the child's answer: to the start (Frontend, UI), to a login link
// request (Link), or the error that kept it from doing what was asked.
type reply struct {
	Frontend string `json:"frontend,omitempty"`
	UI       string `json:"ui,omitempty"`
	Link     string `json:"link,omitempty"`
	Error    string `json:"error,omitempty"`
}

// Start returns a worker.StartEmbedded that runs exe with args (ChildArg
// among them) as the server.
func Start(exe string, args ...string) worker.StartEmbedded {
	return func(ctx context.Context, opts worker.EmbeddedOptions) (worker.EmbeddedServer, error) {
		return start(ctx, exe, args, opts)
	}
}

// startAttempts is how many children start tries: a port the server chose
// for itself can be taken by another process before it binds it, and the
// next child chooses again.
const startAttempts = 3

func start(ctx context.Context, exe string, args []string, opts worker.EmbeddedOptions) (worker.EmbeddedServer, error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	for attempt := 1; ; attempt++ {
		c, err := launch(ctx, exe, args, opts, logger)
		if err == nil {
			return c, nil
		}
		if c == nil || !c.portTaken.Load() || attempt == startAttempts || ctx.Err() != nil {
			return nil, err
		}
		logger.Warn("A port the embedded Temporal server chose for itself was taken before it listened on it; starting it again", "attempt", attempt)
	}
}

// launch starts one child and waits for its answer. When the child
// could not start, it returns the child that ended, if one ran, with the
// error.
func launch(ctx context.Context, exe string, args []string, opts worker.EmbeddedOptions, logger *slog.Logger) (*child, error) {
	cmd := exec.Command(exe, args...)
	cmd.Env = os.Environ()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, stdin: stdin, replies: bufio.NewScanner(stdout), exited: make(chan struct{})}
	c.replies.Buffer(make([]byte, 64*1024), 1<<20)
	started := make(chan error, 1)
	go func() {
		// The child dies with the thread that started it (diesWithParent),
		// so that thread stays until the child has exited.
		runtime.LockOSThread()
		diesWithParent(cmd)
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		// Wait closes the pipes, so it waits for the logs to be read first.
		relayLogs(stderr, logger, func(rec map[string]any) {
			if ownPortTaken(rec) {
				c.portTaken.Store(true)
			}
		})
		c.waitErr = cmd.Wait()
		close(c.exited)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("start the embedded Temporal server (%s): %w", exe, err)
	}

	sent := options{
		StateDir: opts.StateDir, Namespace: opts.Namespace, Port: opts.Port, UIPort: opts.UIPort,
		UIWriteActions: opts.UIWriteActions, APIToken: opts.APIToken,
		SearchAttributes: map[string]int{},
	}
	for name, typ := range opts.SearchAttributes {
		sent.SearchAttributes[name] = int(typ)
	}
	ready := make(chan error, 1)
	go func() {
		if err := json.NewEncoder(stdin).Encode(sent); err != nil {
			ready <- err
			return
		}
		r, err := c.read()
		if err == nil {
			c.frontend, c.ui = r.Frontend, r.UI
		}
		ready <- err
	}()
	select {
	case err = <-ready:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		c.kill()
		return c, err
	}
	return c, nil
}

// ownPortTaken says a log record of the child's is its server failing to
// listen on a port it chose for itself: every service's but the
// frontend's, which the user chose (temporal.port) and which another
// attempt would find taken as well.
func ownPortTaken(rec map[string]any) bool {
	service, _ := rec["service"].(string)
	failure, _ := rec["error"].(string)
	return service != "" && service != "frontend" && strings.Contains(failure, "address already in use")
}

// child is a running server process; it is a worker.EmbeddedServer.
type child struct {
	cmd      *exec.Cmd
	stdin    io.WriteCloser
	replies  *bufio.Scanner
	frontend string
	ui       string
	// mu keeps one request in flight at a time.
	mu      sync.Mutex
	exited  chan struct{}
	waitErr error
	// portTaken is set once the child's log says a port its server chose
	// for itself was taken (ownPortTaken); final once exited is closed.
	portTaken atomic.Bool
	stopOnce  sync.Once
	stopErr   error
}

// read is the child's next answer, or why there is none.
func (c *child) read() (reply, error) {
	if !c.replies.Scan() {
		<-c.exited
		// Wait closes the pipe, and a read under way then says so: the
		// child's exit is the news.
		if err := c.replies.Err(); err != nil && !errors.Is(err, os.ErrClosed) {
			return reply{}, err
		}
		return reply{}, fmt.Errorf("the embedded Temporal server exited (%v); its log says why", c.waitErr)
	}
	var r reply
	if err := json.Unmarshal(c.replies.Bytes(), &r); err != nil {
		return reply{}, fmt.Errorf("the embedded Temporal server answered %q: %w", c.replies.Text(), err)
	}
	if r.Error != "" {
		return r, errors.New(r.Error)
	}
	return r, nil
}

func (c *child) ask(op string) (reply, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := json.NewEncoder(c.stdin).Encode(request{Op: op}); err != nil {
		return reply{}, fmt.Errorf("the embedded Temporal server is gone: %w", err)
	}
	return c.read()
}

// FrontendAddress is host:port of the gRPC frontend.
func (c *child) FrontendAddress() string { return c.frontend }

// UIAddress is the Web UI's URL, empty without a Web UI.
func (c *child) UIAddress() string { return c.ui }

// UILoginLink asks the child for a new one-time login link; it is empty
// without a Web UI or when the child cannot answer.
func (c *child) UILoginLink() string {
	if c.ui == "" {
		return ""
	}
	r, err := c.ask(opLoginLink)
	if err != nil {
		return ""
	}
	return r.Link
}

// Stop asks the child to stop the server and waits for it to exit, killing
// it after stopTimeout. Calling it again does nothing.
func (c *child) Stop() error {
	c.stopOnce.Do(func() {
		answered := make(chan error, 1)
		go func() {
			_, err := c.ask(opStop)
			answered <- err
		}()
		select {
		case c.stopErr = <-answered:
			c.stdin.Close()
			<-c.exited
		case <-time.After(stopTimeout):
			c.stopErr = fmt.Errorf("the embedded Temporal server did not stop within %v; killed it", stopTimeout)
			c.kill()
		}
	})
	return c.stopErr
}

func (c *child) kill() {
	_ = c.cmd.Process.Kill()
	c.stdin.Close()
	<-c.exited
}

// relayLogs hands each JSON log line of the child to logger at its level,
// and its record to seen; a line that is not one is logged as a warning as
// it stands.
func relayLogs(r io.Reader, logger *slog.Logger, seen func(map[string]any)) {
	lines := bufio.NewScanner(r)
	lines.Buffer(make([]byte, 64*1024), 1<<20)
	for lines.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(lines.Bytes(), &rec); err != nil {
			if text := strings.TrimSpace(lines.Text()); text != "" {
				logger.Warn(text, "component", "temporal")
			}
			continue
		}
		seen(rec)
		var level slog.Level
		if s, ok := rec[slog.LevelKey].(string); ok {
			_ = level.UnmarshalText([]byte(s))
		}
		msg, _ := rec[slog.MessageKey].(string)
		delete(rec, slog.LevelKey)
		delete(rec, slog.MessageKey)
		delete(rec, slog.TimeKey)
		attrs := make([]any, 0, 2*len(rec))
		for _, k := range slices.Sorted(maps.Keys(rec)) {
			attrs = append(attrs, k, rec[k])
		}
		logger.Log(context.Background(), level, msg, attrs...)
	}
	_, _ = io.Copy(io.Discard, r)
}
