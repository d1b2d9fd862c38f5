package agents

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"
)

// Claude Code and Codex each keep one process per session that outlives
// its turns (Claude Code's stream-json mode, Codex's app-server): a turn
// then costs what the model takes, not a start-up of the CLI, its sandbox
// and its MCP connections. What they share is here: starting such a
// process recorded for the reaper, the one table of them per adapter, and
// when one is ended.

// liveIdleTimeout is how long a session's long-lived agent process may sit
// with no turn before nid ends it. A worker may hold hundreds of sessions,
// most of them waiting (for a message, a task, a human); each idle process
// keeps its runtime, its sandbox's helpers and nid's MCP connection (an
// idle Claude Code and its sandbox's proxy hold about 210 MB here). Ten
// minutes keeps the process for a session that works turn after turn, the
// case the saved start-up (about a second a turn) matters for, while one
// that waits longer pays a single start-up when it is next prompted: its
// conversation is resumed from the CLI's own files.
const liveIdleTimeout = 10 * time.Minute

// liveProc is one agent process that outlives its turns: its stdin takes
// requests, its stdout is read line by line on a goroutine of its own, the
// end of its stderr is kept for error messages, and it is recorded in the
// pid records while it runs.
type liveProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *tail
	// exited is closed once the process has exited and nothing of its
	// group is left.
	exited chan struct{}

	// wmu makes each write one whole line.
	wmu     sync.Mutex
	mu      sync.Mutex
	waitErr error
}

func newLiveProc(cmd *exec.Cmd) *liveProc {
	return &liveProc{cmd: cmd, stderr: &tail{}, exited: make(chan struct{})}
}

// start starts the process, in the pid records of pidDir while it runs
// (see ReapOrphans); onLine sees every line of its stdout, in order, on a
// goroutine of its own.
//
// Its stdout is a pipe of nid's own, not exec's: exec would wait for
// every holder of the pipe to close it, and a process the agent started
// (the native binary behind an npm wrapper, a sandbox's proxy) may hold it
// after the agent died. So its exit is seen when it happens, and what is
// left of its group is killed then, which ends the pipe.
func (p *liveProc) start(pidDir string, onLine func([]byte)) error {
	cmd := p.cmd
	cmd.Stderr = p.stderr
	var err error
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return err
	}
	out, w, err := os.Pipe()
	if err != nil {
		return err
	}
	cmd.Stdout = w
	done, err := startRecorded(cmd, pidDir)
	_ = w.Close()
	if err != nil {
		_ = out.Close()
		return err
	}
	read := make(chan struct{})
	go func() {
		defer close(read)
		readLines(out, onLine)
	}()
	go func() {
		err := cmd.Wait()
		// Whatever it started goes with it.
		_ = killGroup(cmd)
		t := time.NewTimer(lingerTimeout)
		select {
		case <-read:
		case <-t.C:
			// A holder outside its group: stop reading.
		}
		t.Stop()
		_ = out.Close()
		<-read
		done()
		p.mu.Lock()
		p.waitErr = err
		p.mu.Unlock()
		close(p.exited)
	}()
	return nil
}

// write sends one line to the process's stdin.
func (p *liveProc) write(line []byte) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	_, err := p.stdin.Write(append(line, '\n'))
	return err
}

func (p *liveProc) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// kill ends the process's whole group at once.
func (p *liveProc) kill() {
	_ = killGroup(p.cmd)
	_ = p.stdin.Close()
}

// close asks the process to exit by closing its stdin, so that it can save
// what it holds (Claude Code writes the end of its transcript), and kills
// its group if it has not exited within lingerTimeout.
func (p *liveProc) close() {
	_ = p.stdin.Close()
	go func() {
		t := time.NewTimer(lingerTimeout)
		defer t.Stop()
		select {
		case <-p.exited:
		case <-t.C:
			_ = killGroup(p.cmd)
		}
	}()
}

// wait waits for the process to have exited.
func (p *liveProc) wait(ctx context.Context) error {
	select {
	case <-p.exited:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// exitError is how the process ended, as exitFailure words it for kind;
// call it once exited is closed.
func (p *liveProc) exitError(kind string) error {
	p.mu.Lock()
	err := p.waitErr
	p.mu.Unlock()
	return exitFailure(kind, err, p.stderr.String())
}

// deadError describes a process that went away, with its stderr.
func (p *liveProc) deadError(msg string) error {
	select {
	case <-p.exited:
		p.mu.Lock()
		if p.waitErr != nil {
			msg += " (" + p.waitErr.Error() + ")"
		}
		p.mu.Unlock()
	case <-time.After(100 * time.Millisecond):
	}
	return errors.New(msg + quote(p.stderr.String()))
}

// commandKey is everything a process is started with: the program, its
// arguments, its environment and its working directory. A session's
// long-lived process serves a turn only if the turn would start the same
// one: nid.yaml may have changed since (a reload, new permissions, a new
// MCP token after a handoff), and the worker's settings, not the ones a
// process happened to start with, decide what runs.
func commandKey(cmd *exec.Cmd) string {
	parts := append([]string{cmd.Path, cmd.Dir}, cmd.Args...)
	parts = append(parts, slices.Sorted(slices.Values(cmd.Env))...)
	return strings.Join(parts, "\x00")
}

// liveEnder is a long-lived process as liveProcs keeps it.
type liveEnder interface {
	comparable
	// end asks the process to exit and returns at once.
	end()
	// wait waits for it to have exited.
	wait(ctx context.Context) error
}

// liveProcs is an adapter's long-lived processes, one per session, keyed
// by the session workflow's id. One request at a time uses a session's
// process (use), so that two turns never write to one process at once;
// one that no request used for idle is ended.
type liveProcs[P liveEnder] struct {
	idle  time.Duration
	mu    sync.Mutex
	slots map[string]*liveSlot[P]
}

type liveSlot[P liveEnder] struct {
	// busy holds a token while a request uses the slot.
	busy  chan struct{}
	proc  P
	timer *time.Timer
}

func newLiveProcs[P liveEnder]() *liveProcs[P] {
	return &liveProcs[P]{idle: liveIdleTimeout, slots: map[string]*liveSlot[P]{}}
}

// setIdle sets how long a process may sit idle before it is ended.
func (t *liveProcs[P]) setIdle(d time.Duration) {
	t.mu.Lock()
	t.idle = d
	t.mu.Unlock()
}

func (t *liveProcs[P]) slot(id string) *liveSlot[P] {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.slots[id]
	if s == nil {
		s = &liveSlot[P]{busy: make(chan struct{}, 1)}
		t.slots[id] = s
	}
	return s
}

// use waits until no other request uses the session's process and returns
// it, or the zero P when there is none. Call done once finished with it:
// its idle time starts then.
func (t *liveProcs[P]) use(ctx context.Context, id string) (proc P, done func(), err error) {
	s := t.slot(id)
	select {
	case s.busy <- struct{}{}:
	case <-ctx.Done():
		return proc, nil, ctx.Err()
	}
	t.mu.Lock()
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	proc = s.proc
	t.mu.Unlock()
	return proc, func() {
		t.mu.Lock()
		var zero P
		if s.proc != zero && t.idle > 0 {
			p := s.proc
			s.timer = time.AfterFunc(t.idle, func() { t.expire(id, p) })
		}
		t.mu.Unlock()
		<-s.busy
	}, nil
}

// set makes p the session's process; call it between use and done.
func (t *liveProcs[P]) set(id string, p P) {
	s := t.slot(id)
	t.mu.Lock()
	s.proc = p
	t.mu.Unlock()
}

// drop forgets the session's process if it is p.
func (t *liveProcs[P]) drop(id string, p P) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var zero P
	if s := t.slots[id]; s != nil && s.proc == p {
		s.proc = zero
	}
}

// take removes the session's process and returns it (the zero P: none),
// whether a request uses it or not.
func (t *liveProcs[P]) take(id string) P {
	t.mu.Lock()
	defer t.mu.Unlock()
	var zero P
	s := t.slots[id]
	if s == nil {
		return zero
	}
	p := s.proc
	s.proc = zero
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	return p
}

// stop ends the session's process and returns once it has exited, so that
// nothing of it still runs when the session's next process starts.
func (t *liveProcs[P]) stop(ctx context.Context, id string) error {
	var zero P
	p := t.take(id)
	if p == zero {
		return nil
	}
	p.end()
	return p.wait(ctx)
}

// stopAll ends every session's process and returns once they have exited.
func (t *liveProcs[P]) stopAll() {
	all := t.takeAll()
	for _, p := range all {
		p.end()
	}
	for _, p := range all {
		_ = p.wait(context.Background())
	}
}

// takeAll removes every session's process and returns them.
func (t *liveProcs[P]) takeAll() []P {
	t.mu.Lock()
	ids := make([]string, 0, len(t.slots))
	for id := range t.slots {
		ids = append(ids, id)
	}
	t.mu.Unlock()
	var all []P
	var zero P
	for _, id := range ids {
		if p := t.take(id); p != zero {
			all = append(all, p)
		}
	}
	return all
}

// expire ends p, the session's process, if it is still the session's and
// no request uses it; one that does arms a new timer when it is done.
func (t *liveProcs[P]) expire(id string, p P) {
	t.mu.Lock()
	s := t.slots[id]
	if s == nil || s.proc != p {
		t.mu.Unlock()
		return
	}
	select {
	case s.busy <- struct{}{}:
	default:
		t.mu.Unlock()
		return
	}
	var zero P
	s.proc, s.timer = zero, nil
	<-s.busy
	t.mu.Unlock()
	p.end()
}

// turnTimedOut is the failure of a turn that ran past its timeout.
func turnTimedOut(kind string, timeout time.Duration) error {
	return AgentFailed("%s: turn exceeded its timeout of %s; its process group was killed", kind, timeout)
}
