package agents

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nid-dev/nid/statedir"
)

// Agent processes run in process groups of their own, so that the end of a
// turn kills everything they started. The same separation means a worker
// killed with SIGKILL leaves them running, still working in the session's
// worktree while the next worker runs the turn again. So each one is
// recorded under PidDir while it runs, and a starting worker kills the
// groups that a worker no longer alive left there (ReapOrphans).

// PidDir is where a worker with the given state directory records the
// agent processes it runs.
func PidDir(stateDir string) string { return filepath.Join(stateDir, "pids") }

// procRecord is one running agent process group, and the worker that
// started it. Start times tell a process from a later one given the same
// pid.
type procRecord struct {
	PID        int    `json:"pid"`
	Start      string `json:"start,omitempty"`
	Owner      int    `json:"owner"`
	OwnerStart string `json:"ownerStart,omitempty"`
	Command    string `json:"command"`
}

// startRecorded starts cmd and, when dir is set, records its process group
// there. done removes the record; call it once the group is gone.
func startRecorded(cmd *exec.Cmd, dir string) (done func(), err error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	if dir == "" {
		return func() {}, nil
	}
	pid := cmd.Process.Pid
	rec := procRecord{PID: pid, Start: processStart(pid), Owner: os.Getpid(), OwnerStart: OwnStart(), Command: filepath.Base(cmd.Path)}
	file := filepath.Join(dir, strconv.Itoa(pid)+".json")
	if err := WriteRecord(dir, file, rec); err != nil {
		// Without a record a crash could leave the group running: better
		// not to run it at all.
		_ = killGroup(cmd)
		_ = cmd.Wait()
		return nil, fmt.Errorf("recording agent process %d in %s: %w", pid, dir, err)
	}
	return func() { _ = os.Remove(file) }, nil
}

// RecordFiles lists the records written to dir (none when it does not
// exist yet). A .tmp file is not one: a live worker may be writing it. One
// older than abandonedAfter was left by a worker killed between writing and
// renaming it, and is removed.
func RecordFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var files []string
	for _, e := range entries {
		switch name := e.Name(); {
		case e.IsDir():
		case strings.HasSuffix(name, ".json"):
			files = append(files, filepath.Join(dir, name))
		case strings.HasSuffix(name, ".json.tmp"):
			if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > abandonedAfter {
				_ = os.Remove(filepath.Join(dir, name))
			}
		}
	}
	return files, nil
}

// abandonedAfter is how old a record's .tmp file must be to be taken for
// abandoned: writing and renaming one takes a live worker microseconds.
const abandonedAfter = time.Minute

// WriteRecord writes rec to file in dir as JSON, through a .tmp file
// renamed into place, so a reader never sees half of it.
func WriteRecord(dir, file string, rec any) error {
	if err := os.MkdirAll(dir, statedir.DirMode); err != nil {
		return err
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	// Whole or not at all: a reader never sees half a record.
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, b, statedir.FileMode); err != nil {
		// A full disk leaves part of it behind.
		_ = os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, file)
}

// ReapOrphans kills the agent process groups recorded in dir by workers that
// are no longer running, and removes their records. It returns what it
// killed, in words, for the log. Records of a live worker (another one on
// the same state directory) are left alone.
func ReapOrphans(dir string) (killed []string, err error) {
	return reapOrphans(dir, procStat)
}

// reapOrphans is ReapOrphans reading processes with stat, so that a test
// can be a system whose /proc tells no start times.
func reapOrphans(dir string, stat func(pid int) (state, start string)) (killed []string, err error) {
	files, err := RecordFiles(dir)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var rec procRecord
		if json.Unmarshal(b, &rec) != nil || rec.PID <= 1 {
			// Half-written by a worker killed while writing it: its
			// process, if any, cannot be told apart; drop the record.
			_ = os.Remove(file)
			continue
		}
		if Alive(rec.Owner, rec.OwnerStart) {
			continue
		}
		if reapGroup(rec, stat) {
			killed = append(killed, fmt.Sprintf("%s (process group %d)", rec.Command, rec.PID))
		}
		if err := os.Remove(file); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return killed, errors.Join(errs...)
}

// reapGroup kills what is left of a recorded group and says whether
// anything was. It kills only a group it can tell is the recorded one: a
// pid alone names, after a reboot or a while, a process nid did not start,
// and killing its group would kill the user's own programs.
func reapGroup(rec procRecord, stat func(pid int) (state, start string)) bool {
	if rec.Start == "" {
		// Written where start times could not be read: nothing tells
		// the recorded process from a later one with its pid.
		return false
	}
	switch err := syscall.Kill(rec.PID, 0); {
	case errors.Is(err, syscall.ESRCH):
		// The leader is gone. Its pid is not given to another process
		// while its group has members, so a group with its id can only
		// be what is left of the recorded one (its leader's children).
		return syscall.Kill(-rec.PID, syscall.SIGKILL) == nil
	case err != nil && !errors.Is(err, syscall.EPERM):
		return false
	}
	// A process has the pid: it is the recorded one only if its start
	// time says so, and a start time that cannot be read says nothing.
	if _, start := stat(rec.PID); start == "" || start != rec.Start {
		return false
	}
	return syscall.Kill(-rec.PID, syscall.SIGKILL) == nil
}

// Alive says whether pid runs and, where start times are known, is the
// process that started at start. A zombie has ended: it only waits for its
// parent to notice.
func Alive(pid int, start string) bool {
	if pid <= 0 {
		return false
	}
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	state, now := procStat(pid)
	return state != "Z" && (start == "" || now == "" || now == start)
}

// OwnStart is when this worker started; it does not change.
var OwnStart = sync.OnceValue(func() string { return processStart(os.Getpid()) })

// processStart is when pid started, in clock ticks since boot; empty where
// there is no /proc.
func processStart(pid int) string {
	_, start := procStat(pid)
	return start
}

// procStat reads a process's state and start time from /proc/PID/stat.
func procStat(pid int) (state, start string) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", ""
	}
	// The command name in parentheses may hold spaces; fields after it are
	// plain: state first, starttime (field 22) the 20th.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return "", ""
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) < 20 {
		return "", ""
	}
	return fields[0], fields[19]
}
