package agents

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/internal/agenttest"
)

// startGroup starts a shell in its own process group that starts a child
// and waits; it returns the shell and the child's pid.
func startGroup(t *testing.T) (*exec.Cmd, int) {
	t.Helper()
	pidFile := filepath.Join(t.TempDir(), "child")
	cmd := exec.Command("sh", "-c", "sleep 300 & echo $! > "+pidFile+"; wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	var child int
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(pidFile)
		if err != nil {
			return false
		}
		child, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	}, 5*time.Second, 10*time.Millisecond)
	return cmd, child
}

func record(t *testing.T, dir string, rec procRecord) string {
	t.Helper()
	file := filepath.Join(dir, strconv.Itoa(rec.PID)+".json")
	require.NoError(t, WriteRecord(dir, file, rec))
	return file
}

// gone counts a killed child of this test, a zombie until it is waited
// for, as gone.
func gone(pid int) bool { return !Alive(pid, "") }

func TestReapOrphans(t *testing.T) {
	t.Run("a dead worker's group is killed, children too", func(t *testing.T) {
		dir := t.TempDir()
		cmd, child := startGroup(t)
		file := record(t, dir, procRecord{PID: cmd.Process.Pid, Start: processStart(cmd.Process.Pid), Owner: agenttest.DeadPID(t), Command: "claude"})
		killed, err := ReapOrphans(dir)
		require.NoError(t, err)
		require.Equal(t, []string{"claude (process group " + strconv.Itoa(cmd.Process.Pid) + ")"}, killed)
		require.NoFileExists(t, file)
		require.Eventually(t, func() bool { return gone(cmd.Process.Pid) && gone(child) }, 5*time.Second, 10*time.Millisecond)
	})
	t.Run("a group whose leader died is still killed", func(t *testing.T) {
		dir := t.TempDir()
		cmd, child := startGroup(t)
		rec := procRecord{PID: cmd.Process.Pid, Start: processStart(cmd.Process.Pid), Owner: agenttest.DeadPID(t), Command: "codex"}
		require.NoError(t, cmd.Process.Kill())
		_ = cmd.Wait()
		record(t, dir, rec)
		killed, err := ReapOrphans(dir)
		require.NoError(t, err)
		require.Len(t, killed, 1)
		require.Eventually(t, func() bool { return gone(child) }, 5*time.Second, 10*time.Millisecond)
	})
	t.Run("a worker that is a zombie is dead", func(t *testing.T) {
		owner := exec.Command("true")
		require.NoError(t, owner.Start())
		defer func() { _ = owner.Wait() }()
		require.Eventually(t, func() bool { return !Alive(owner.Process.Pid, "") }, 5*time.Second, 10*time.Millisecond)
		dir := t.TempDir()
		cmd, child := startGroup(t)
		record(t, dir, procRecord{PID: cmd.Process.Pid, Start: processStart(cmd.Process.Pid), Owner: owner.Process.Pid, Command: "claude"})
		killed, err := ReapOrphans(dir)
		require.NoError(t, err)
		require.Len(t, killed, 1)
		require.Eventually(t, func() bool { return gone(child) }, 5*time.Second, 10*time.Millisecond)
	})
	t.Run("a live worker's group is left alone", func(t *testing.T) {
		dir := t.TempDir()
		cmd, child := startGroup(t)
		file := record(t, dir, procRecord{PID: cmd.Process.Pid, Start: processStart(cmd.Process.Pid), Owner: os.Getpid(), OwnerStart: processStart(os.Getpid()), Command: "claude"})
		killed, err := ReapOrphans(dir)
		require.NoError(t, err)
		require.Empty(t, killed)
		require.FileExists(t, file)
		require.False(t, gone(child))
	})
	t.Run("a pid now used by another process is left alone", func(t *testing.T) {
		dir := t.TempDir()
		cmd, child := startGroup(t)
		file := record(t, dir, procRecord{PID: cmd.Process.Pid, Start: "1", Owner: agenttest.DeadPID(t), Command: "claude"})
		killed, err := ReapOrphans(dir)
		require.NoError(t, err)
		require.Empty(t, killed)
		require.NoFileExists(t, file, "the record is of no use any more")
		require.False(t, gone(child))
	})
	t.Run("a record without a start time kills nothing where /proc exists", func(t *testing.T) {
		require.NotEmpty(t, OwnStart(), "this test needs /proc")
		dir := t.TempDir()
		cmd, child := startGroup(t)
		file := record(t, dir, procRecord{PID: cmd.Process.Pid, Owner: agenttest.DeadPID(t), Command: "claude"})
		killed, err := ReapOrphans(dir)
		require.NoError(t, err)
		require.Empty(t, killed)
		require.NoFileExists(t, file, "the record is of no use")
		require.False(t, gone(cmd.Process.Pid))
		require.False(t, gone(child))
	})
	noStartTimes := func(int) (state, start string) { return "S", "" }
	t.Run("a live group is not killed where /proc cannot tell its start time", func(t *testing.T) {
		dir := t.TempDir()
		cmd, child := startGroup(t)
		file := record(t, dir, procRecord{PID: cmd.Process.Pid, Start: processStart(cmd.Process.Pid), Owner: agenttest.DeadPID(t), Command: "claude"})
		killed, err := reapOrphans(dir, noStartTimes)
		require.NoError(t, err)
		require.Empty(t, killed)
		require.NoFileExists(t, file, "the record is of no use")
		require.False(t, gone(cmd.Process.Pid))
		require.False(t, gone(child))
	})
	t.Run("a record without a start time kills nothing where there is no /proc", func(t *testing.T) {
		dir := t.TempDir()
		cmd, child := startGroup(t)
		record(t, dir, procRecord{PID: cmd.Process.Pid, Owner: agenttest.DeadPID(t), Command: "claude"})
		killed, err := reapOrphans(dir, noStartTimes)
		require.NoError(t, err)
		require.Empty(t, killed)
		require.False(t, gone(cmd.Process.Pid))
		require.False(t, gone(child))
	})
	t.Run("a record without a start time kills nothing once its leader is gone", func(t *testing.T) {
		dir := t.TempDir()
		cmd, child := startGroup(t)
		rec := procRecord{PID: cmd.Process.Pid, Owner: agenttest.DeadPID(t), Command: "codex"}
		require.NoError(t, cmd.Process.Kill())
		_ = cmd.Wait()
		record(t, dir, rec)
		killed, err := reapOrphans(dir, noStartTimes)
		require.NoError(t, err)
		require.Empty(t, killed)
		require.False(t, gone(child))
	})
	t.Run("a half-written record is dropped", func(t *testing.T) {
		dir := t.TempDir()
		file := filepath.Join(dir, "123.json")
		require.NoError(t, os.WriteFile(file, []byte(`{"pid":12`), 0o644))
		killed, err := ReapOrphans(dir)
		require.NoError(t, err)
		require.Empty(t, killed)
		require.NoFileExists(t, file)
	})
	t.Run("a record left half-way to its name is removed once it is old", func(t *testing.T) {
		dir := t.TempDir()
		abandoned, writing := filepath.Join(dir, "123.json.tmp"), filepath.Join(dir, "456.json.tmp")
		for _, f := range []string{abandoned, writing} {
			require.NoError(t, os.WriteFile(f, []byte(`{"pid":`), 0o644))
		}
		old := time.Now().Add(-abandonedAfter - time.Second)
		require.NoError(t, os.Chtimes(abandoned, old, old))
		killed, err := ReapOrphans(dir)
		require.NoError(t, err)
		require.Empty(t, killed)
		require.NoFileExists(t, abandoned)
		require.FileExists(t, writing, "a live worker may be writing it")
	})
	t.Run("no directory yet", func(t *testing.T) {
		killed, err := ReapOrphans(filepath.Join(t.TempDir(), "pids"))
		require.NoError(t, err)
		require.Empty(t, killed)
	})
}

// A turn's process is recorded while it runs, as its own pid and this
// worker, and the record goes with the turn.
func TestTurnProcessIsRecordedWhileItRuns(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pids")
	// The record is written just after the process starts.
	cmd := agenttest.Script(t, `for i in $(seq 200); do [ -e "$PIDDIR/$$.json" ] && break; sleep 0.05; done; cat "$PIDDIR/$$.json"`)
	rep, err := NewExec().Turn(context.Background(), TurnRequest{
		Session: SessionRef{Group: "web", Name: "worker"}, Prompt: "go", Kind: TurnWork, StateDir: t.TempDir(),
		Process: Process{Command: cmd, PidDir: dir, Env: map[string]string{"PIDDIR": dir}, Permissions: config.PermissionsFull},
	})
	require.NoError(t, err)
	var rec procRecord
	require.NoError(t, json.Unmarshal([]byte(rep.Output), &rec), rep.Output)
	require.Equal(t, os.Getpid(), rec.Owner)
	require.Equal(t, "agent.sh", rec.Command)
	require.NotEmpty(t, rec.Start)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "the record outlived the turn")
}
