package workflows

import (
	"compress/gzip"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// TestReplay replays every recorded history under testdata/ against today's
// workflow code: a change that would break a running session fails here.
// Histories are recorded with e2e's TestRecordReplayHistories; the long ones
// (a whole run up to its continue-as-new) are gzipped.
func TestReplay(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	require.NoError(t, err)
	zipped, err := filepath.Glob(filepath.Join("testdata", "*.json.gz"))
	require.NoError(t, err)
	files = append(files, zipped...)
	require.NotEmpty(t, files, "no recorded histories in testdata/")
	logger := sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			r.RegisterWorkflowWithOptions(SessionWorkflow, workflow.RegisterOptions{Name: SessionWorkflowName})
			r.RegisterWorkflowWithOptions(RotationWorkflow, workflow.RegisterOptions{Name: RotationWorkflowName})
			r.RegisterWorkflowWithOptions(GroupWorkflow, workflow.RegisterOptions{Name: GroupWorkflowName})
			r.RegisterWorkflowWithOptions(HostsWorkflow, workflow.RegisterOptions{Name: HostsWorkflowName})
			require.NoError(t, r.ReplayWorkflowHistory(logger, readHistory(t, f)))
		})
	}
}

func readHistory(t *testing.T, path string) *historypb.History {
	t.Helper()
	file, err := os.Open(path)
	require.NoError(t, err)
	defer file.Close()
	var r io.Reader = file
	if strings.HasSuffix(path, ".gz") {
		zr, err := gzip.NewReader(file)
		require.NoError(t, err)
		defer zr.Close()
		r = zr
	}
	h, err := client.HistoryFromJSON(r, client.HistoryJSONOptions{})
	require.NoError(t, err)
	return h
}
