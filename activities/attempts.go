package activities

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/nid-dev/nid/agents"
)

// A worker killed mid-activity leaves the attempt started on the server,
// which notices only when a heartbeat is late (a turn's 20s) or, for an
// activity that does not heartbeat, when its whole timeout has passed. So
// each attempt a worker runs is recorded under AttemptDir while it runs,
// and a starting worker fails the attempts that a worker no longer alive
// left there (CutAttempts), so that they run again at once.

// AttemptDir is where a worker with the given state directory records the
// activity attempts it runs.
func AttemptDir(stateDir string) string { return filepath.Join(stateDir, "attempts") }

// ErrWorkerStopped is an attempt whose worker stopped before it ended. It
// is retried like any attempt that timed out.
const ErrWorkerStopped = "WorkerStopped"

// Attempt is what identifies an activity attempt.
type Attempt struct {
	// Token is the attempt's task token: it fails that attempt and no
	// later one.
	Token    []byte `json:"token"`
	Activity string `json:"activity"`
	Workflow string `json:"workflow"`
	// Number counts the activity's attempts from 1.
	Number int32 `json:"attempt"`
}

// attemptRecord is one activity attempt under way, and the worker running
// it.
type attemptRecord struct {
	Attempt
	Owner      int    `json:"owner"`
	OwnerStart string `json:"ownerStart,omitempty"`
}

// RecordAttempt records an attempt this worker runs in dir; done removes the
// record when the attempt ends.
func RecordAttempt(dir string, a Attempt) (done func(), err error) {
	var id [8]byte
	_, _ = rand.Read(id[:])
	file := filepath.Join(dir, hex.EncodeToString(id[:])+".json")
	rec := attemptRecord{Attempt: a, Owner: os.Getpid(), OwnerStart: agents.OwnStart()}
	if err := agents.WriteRecord(dir, file, rec); err != nil {
		return nil, err
	}
	return func() { _ = os.Remove(file) }, nil
}

// CutAttempt is an attempt a worker no longer running left unfinished.
type CutAttempt struct {
	Attempt
	// Owner is the pid of the worker that ran it.
	Owner int
	file  string
}

// Forget removes the attempt's record, once it has been dealt with.
func (c CutAttempt) Forget() error {
	if err := os.Remove(c.file); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// CutAttempts lists the attempts recorded in dir by workers that are no
// longer running. Records of a live worker (another one on the same state
// directory) are left alone, and so is a .tmp file, which a live worker may
// be writing; a record that names no attempt is removed.
func CutAttempts(dir string) ([]CutAttempt, error) {
	files, err := agents.RecordFiles(dir)
	if err != nil {
		return nil, err
	}
	var cut []CutAttempt
	var errs []error
	for _, file := range files {
		rec, ok := readAttempt(file)
		if !ok {
			if err := os.Remove(file); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
			continue
		}
		if !agents.Alive(rec.Owner, rec.OwnerStart) {
			cut = append(cut, CutAttempt{Attempt: rec.Attempt, Owner: rec.Owner, file: file})
		}
	}
	return cut, errors.Join(errs...)
}

func readAttempt(file string) (attemptRecord, bool) {
	var rec attemptRecord
	b, err := os.ReadFile(file)
	if err != nil || json.Unmarshal(b, &rec) != nil || len(rec.Token) == 0 || rec.Owner <= 1 {
		return attemptRecord{}, false
	}
	return rec, true
}
