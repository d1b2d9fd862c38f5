package e2e

import (
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/internal/agenttest"
	"github.com/nid-dev/nid/internal/temporaltest"
	"github.com/nid-dev/nid/workflows"
)

// attached is a nid attach running in a pseudo-terminal, as in a person's.
type attached struct {
	cmd  *exec.Cmd
	tty  *os.File
	out  *temporaltest.SyncBuffer
	done chan error
}

// attach starts nid attach with args in a pseudo-terminal in the site and
// waits until it says the session is attached.
func (s *site) attach(args ...string) *attached {
	s.t.Helper()
	a := &attached{out: &temporaltest.SyncBuffer{}, done: make(chan error, 1)}
	a.cmd = exec.Command(temporaltest.Binary(s.t), append([]string{"attach"}, args...)...)
	a.cmd.Dir = s.dir
	a.cmd.Env = append(os.Environ(), "NO_COLOR=1")
	tty := agenttest.StartInPTY(s.t, a.cmd, 40, 160)
	a.tty = tty
	go func() { _, _ = io.Copy(a.out, tty) }() // ends when the terminal closes
	go func() { a.done <- a.cmd.Wait() }()
	s.t.Cleanup(func() {
		if a.cmd.ProcessState == nil {
			_ = a.cmd.Process.Kill()
			<-a.done
		}
		_ = tty.Close()
	})
	s.eventually("nid attach to attach", 2*time.Minute, func() bool {
		select {
		case err := <-a.done:
			s.t.Fatalf("nid attach exited (%v) before it attached:\n%s", err, a.out.String())
		default:
		}
		return strings.Contains(a.out.String(), "attached to ")
	})
	return a
}

// typeLine types line and Enter in the terminal.
func (a *attached) typeLine(t *testing.T, line string) {
	_, err := a.tty.Write([]byte(line + "\n"))
	require.NoError(t, err)
}

// wait waits for nid attach to exit and returns its exit code.
func (a *attached) wait(t *testing.T) int {
	select {
	case err := <-a.done:
		a.done <- err
		if exit, ok := err.(*exec.ExitError); ok {
			return exit.ExitCode()
		}
		require.NoError(t, err)
		return 0
	case <-time.After(2 * time.Minute):
		t.Fatalf("nid attach did not exit:\n%s", a.out.String())
		return -1
	}
}

// whoAttaches is the person nid attach names: user@machine.
func whoAttaches(t *testing.T) string {
	name := os.Getenv("USER")
	if name == "" {
		u, err := user.Current()
		require.NoError(t, err)
		name = u.Username
	}
	host, err := os.Hostname()
	require.NoError(t, err)
	return name + "@" + host
}

// A person attaches to an exec session with a shell: they work in its
// worktree with its environment while the session holds (listed as
// attached, a message queued and said so, a second attach refused naming
// them), and when they exit nid says what it found and carries on with
// the queued message. Then a nid attach killed with -9 frees the session
// within the lease.
func TestAttachToAnExecSessionAndHandItBack(t *testing.T) {
	dir := t.TempDir()
	prompts := filepath.Join(dir, "prompts")
	agent := filepath.Join(dir, "agent.sh")
	require.NoError(t, os.WriteFile(agent, []byte(`#!/bin/sh
cat >> `+prompts+`
echo >> `+prompts+`
echo '{"nid":"usage","used":82000,"window":200000}'
echo "answered"
`), 0o755))
	s := newSite(t, `  web:
    repo: `+gitRepo(t)+`
    rotate: {mode: off}
    sessions:
      - agent: exec
        name: lead
        command: `+agent+`
        permissions: full
`)
	up := s.up()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("nid up:\n%s", up.out.String())
		}
	})
	c := s.client()
	received := func() string {
		b, _ := os.ReadFile(prompts)
		return string(b)
	}
	s.mustNid("send", "web/lead", "Write the parser")
	s.eventually("the first turn", time.Minute, func() bool { return s.ls()["web/lead"].Turns == 1 })
	require.Equal(t, workflows.StatusIdle, s.ls()["web/lead"].Status)
	v := s.session(c, "web", "lead")
	require.NotEmpty(t, v.WorkDir, "the session works in its worktree")

	a := s.attach("web/lead", "--command", "sh")
	who := whoAttaches(t)
	a.typeLine(t, `echo "$NIDAGENT_SESSION by hand" > attached.txt`)
	s.eventually("the shell to write in the worktree", 30*time.Second, func() bool {
		b, _ := os.ReadFile(filepath.Join(v.WorkDir, "attached.txt"))
		return string(b) == "web/lead by hand\n"
	})

	// While attached, the session holds.
	require.Equal(t, workflows.StatusAttached, s.ls()["web/lead"].Status)
	out, errOut, code := s.nid("send", "web/lead", "Carry on after the hand-back")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out+errOut, "attached", "nid send says the message waits for the hand-back")
	out, errOut, code = s.nid("attach", "web/lead", "--command", "sh")
	require.NotEqual(t, 0, code, "a second attach is refused")
	require.Contains(t, out+errOut, "attached by "+who)
	time.Sleep(2 * time.Second) // a turn would have taken the message by now
	require.NotContains(t, received(), "Carry on after the hand-back", "no turn starts while attached")
	require.Equal(t, 1, s.ls()["web/lead"].Turns)

	// Exit hands it back; nid says what it found and delivers the message.
	a.typeLine(t, "exit")
	require.Equal(t, 0, a.wait(t), a.out.String())
	// What it printed last may reach the terminal's reader after its exit.
	s.eventually("nid attach to say what the hand-back found", 10*time.Second, func() bool {
		return strings.Contains(a.out.String(), "handed back: context 41% of 200k → 41% of 200k, 0 turns by hand")
	})
	s.eventually("the queued message delivered after the hand-back", time.Minute, func() bool {
		return strings.Contains(received(), "Carry on after the hand-back")
	})
	s.eventually("the turn after the hand-back", time.Minute, func() bool { return s.ls()["web/lead"].Turns == 2 })
	v = s.session(c, "web", "lead")
	require.NotNil(t, v.LastHandback)
	require.Equal(t, who, v.LastHandback.Who)
	require.False(t, v.LastHandback.Expired, "handed back by its exit")

	// A nid attach killed with -9 holds the session no longer than the
	// lease: the session takes the hold back and carries on.
	a = s.attach("web/lead", "--command", "sh")
	require.Equal(t, workflows.StatusAttached, s.ls()["web/lead"].Status)
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGKILL))
	a.wait(t)
	_ = a.tty.Close() // the shell it started hangs up with its terminal
	killed := time.Now()
	s.eventually("the lease to run out", workflows.AttachLease+30*time.Second, func() bool {
		return s.ls()["web/lead"].Status != workflows.StatusAttached
	})
	require.Less(t, time.Since(killed), workflows.AttachLease+30*time.Second)
	v = s.session(c, "web", "lead")
	require.NotNil(t, v.LastHandback)
	require.True(t, v.LastHandback.Expired, "taken back when the lease ran out")
	s.mustNid("send", "web/lead", "Back to work")
	s.eventually("a turn after the lease ran out", time.Minute, func() bool {
		return strings.Contains(received(), "Back to work")
	})
}
