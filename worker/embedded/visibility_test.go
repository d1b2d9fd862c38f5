package embedded

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	sdkclient "go.temporal.io/sdk/client"

	"github.com/nid-dev/nid/nidclient"
	"github.com/nid-dev/nid/workflows"
)

// indexesIn names the indexes of the visibility table in file.
func indexesIn(t *testing.T, file string) []string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+file)
	require.NoError(t, err)
	defer db.Close()
	names, err := visibilityIndexes(db)
	require.NoError(t, err)
	return names
}

func TestADatabaseFromAnOlderNidLosesTheVisibilityIndexesNoOneReads(t *testing.T) {
	file := filepath.Join(t.TempDir(), "temporal.db")
	require.NoError(t, setupSchemaOnce(sqliteConfig(file)))
	before := indexesIn(t, file)
	require.Subset(t, before, keptVisibilityIndexes)
	require.Greater(t, len(before), 50, "the server's schema as an older nid set it up")

	require.NoError(t, dropUnusedVisibilityIndexes(file))
	require.ElementsMatch(t, keptVisibilityIndexes, indexesIn(t, file))
	// Every start runs it: a database already lean stays as it is.
	require.NoError(t, dropUnusedVisibilityIndexes(file))
	require.ElementsMatch(t, keptVisibilityIndexes, indexesIn(t, file))
}

func TestTheEmbeddedServerListsOnTheIndexesItKeeps(t *testing.T) {
	dir := t.TempDir()
	srv := startTestIn(t, dir, 0, false, nil)
	require.ElementsMatch(t, keptVisibilityIndexes, indexesIn(t, filepath.Join(dir, "temporal.db")))

	c := trustedClient(t, srv, dir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// No worker runs it: the start alone is what visibility records.
	_, err := c.ExecuteWorkflow(ctx, sdkclient.StartWorkflowOptions{
		ID: workflows.SessionID("g", "s"), TaskQueue: workflows.TaskQueue,
		TypedSearchAttributes: workflows.SessionSearchAttributes("g", "s", "sim", "h1"),
	}, workflows.SessionWorkflowName, workflows.SessionInput{Group: "g", Name: "s"})
	require.NoError(t, err)
	require.EventuallyWithT(t, func(t *assert.CollectT) {
		sessions, err := nidclient.ListSessions(ctx, c, "g")
		require.NoError(t, err)
		require.Len(t, sessions, 1)
		assert.Equal(t, "h1", sessions[0].Host)
		queued, err := nidclient.RunningOnTaskQueue(ctx, c, workflows.TaskQueue)
		require.NoError(t, err)
		assert.Len(t, queued, 1)
		// A field whose index is gone is still answered, by reading the rows.
		n, err := c.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Query: workflows.SearchHost + " = 'h1'"})
		require.NoError(t, err)
		assert.EqualValues(t, 1, n.GetCount())
	}, 30*time.Second, 100*time.Millisecond)
}
