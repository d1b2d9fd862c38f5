package workflows

import (
	"compress/gzip"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
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

// fixtureName is what a fixture's name says: the rung it was recorded at
// (rungN-, or initial- for VersionInitial), then what it holds.
var fixtureName = regexp.MustCompile(`^(?:initial|rung([0-9]+))-[a-z0-9-]+\.json(?:\.gz)?$`)

// TestFixturesNamedAfterTheirRung reads the rung each fixture's history
// recorded (its version marker) and holds it to the fixture's name, so
// that deleting the branches of a retired rung and the fixtures named
// after it deletes the right ones; and the newest rung has its fixtures.
func TestFixturesNamedAfterTheirRung(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*"))
	require.NoError(t, err)
	newest := 0
	for _, f := range files {
		name := filepath.Base(f)
		m := fixtureName.FindStringSubmatch(name)
		require.NotNil(t, m, "%s is not named rungN-what.json[.gz] (or initial-what.json[.gz])", name)
		named := VersionInitial
		if m[1] != "" {
			n, err := strconv.Atoi(m[1])
			require.NoError(t, err)
			named = Version(n)
		}
		h := readHistory(t, f)
		recorded, ok, err := RecordedRung(h.Events, true)
		require.NoError(t, err, name)
		require.True(t, ok, "%s: the history ends before its first workflow task completed", name)
		if recorded == VersionInitial && named == VersionTeam &&
			h.Events[0].GetWorkflowExecutionStartedEventAttributes().GetWorkflowType().GetName() == RotationWorkflowName {
			// A rotation recorded at rung 1 read no rung yet: it ran
			// as it did at the first release.
			continue
		}
		require.Equal(t, named, recorded, "%s records rung %d", name, recorded)
		newest = max(newest, int(named))
	}
	require.Equal(t, int(versionLatest), newest, "the newest rung has no fixture: record them (TestRecordReplayHistories)")
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
