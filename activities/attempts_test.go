package activities

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/internal/agenttest"
)

// An attempt is recorded while it runs; a starting worker finds the ones a
// dead worker left, never a live worker's, and drops records that name no
// attempt.
func TestCutAttemptsAreTheDeadWorkersOnes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "attempts")
	cut, err := CutAttempts(dir)
	require.NoError(t, err)
	require.Empty(t, cut, "no directory yet: nothing was cut")

	mine := Attempt{Token: []byte("token-of-a-running-turn"), Activity: RunTurnName, Workflow: "nid/web/lead", Number: 1}
	done, err := RecordAttempt(dir, mine)
	require.NoError(t, err)
	dead := agenttest.DeadPID(t)
	left := attemptRecord{Attempt: Attempt{Token: []byte("token-of-a-cut-turn"), Activity: RunTurnName, Workflow: "nid/web/worker", Number: 2}, Owner: dead}
	require.NoError(t, agents.WriteRecord(dir, filepath.Join(dir, "left.json"), left))
	require.NoError(t, agents.WriteRecord(dir, filepath.Join(dir, "no-token.json"), attemptRecord{Attempt: Attempt{Activity: RunTurnName}, Owner: dead}))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "half.json"), []byte(`{"token":"dG9r`), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "being-written.json.tmp"), []byte(`{"token":`), 0o600))

	cut, err = CutAttempts(dir)
	require.NoError(t, err)
	require.Len(t, cut, 1, "this worker's own attempt is not cut")
	require.Equal(t, Attempt{Token: left.Token, Activity: RunTurnName, Workflow: "nid/web/worker", Number: 2}, cut[0].Attempt)
	require.Equal(t, dead, cut[0].Owner)
	require.NoFileExists(t, filepath.Join(dir, "no-token.json"))
	require.NoFileExists(t, filepath.Join(dir, "half.json"))
	require.FileExists(t, filepath.Join(dir, "being-written.json.tmp"), "a live worker may be writing it")

	require.NoError(t, cut[0].Forget())
	require.NoError(t, cut[0].Forget(), "forgetting twice is no error")
	done()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "only the .tmp file is left")
}
