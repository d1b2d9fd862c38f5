package nidclient_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/nid-dev/nid/nidclient"
	"github.com/nid-dev/nid/workflows"
)

// olderQueue is where the runs an older nid started wait: no worker of
// today's nid polls it.
const olderQueue = "older-nid"

// sessionAtRung14 stands for a session an older nid started at rung 14: its
// run read the ladder with that nid's newest rung, as versionOf did then,
// so its history holds the marker of rung 14 and its memo no rung.
func sessionAtRung14(ctx workflow.Context) error {
	workflow.GetVersion(ctx, "team", workflow.DefaultVersion, workflow.Version(workflows.VersionHosts))
	workflow.GetSignalChannel(ctx, "end").Receive(ctx, nil)
	return nil
}

// groupOfFirstRelease stands for a group the first release started, before
// the ladder: its first command is a timer, no marker.
func groupOfFirstRelease(ctx workflow.Context) error {
	return workflow.Sleep(ctx, time.Hour)
}

// A running workflow's rung is read from its memo when it publishes one,
// and from its history's version marker when an older nid started it; the
// report counts each rung and names the oldest.
func TestReadRungs(t *testing.T) {
	t.Parallel()
	env, c := startIn(t, `  web:
    sessions:
      - {agent: sim, name: lead, sim: {turnDelay: 0s}}
`)
	ctx := context.Background()
	older := sdkworker.New(c, olderQueue, sdkworker.Options{})
	older.RegisterWorkflowWithOptions(sessionAtRung14, workflow.RegisterOptions{Name: workflows.SessionWorkflowName})
	older.RegisterWorkflowWithOptions(groupOfFirstRelease, workflow.RegisterOptions{Name: workflows.GroupWorkflowName})
	require.NoError(t, older.Start())
	t.Cleanup(older.Stop)
	oldSession := workflows.SessionID("old", "lead")
	for id, name := range map[string]string{oldSession: workflows.SessionWorkflowName, workflows.GroupID("old"): workflows.GroupWorkflowName} {
		_, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: olderQueue}, name)
		require.NoError(t, err)
	}
	// A run whose first task no worker has taken yet.
	_, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: workflows.SessionID("new", "lead"), TaskQueue: "no-worker"}, workflows.SessionWorkflowName)
	require.NoError(t, err)

	latest := workflows.Latest
	rung14, initial := workflows.VersionHosts, workflows.VersionInitial
	want := []nidclient.RunningRung{
		{ID: workflows.GroupID("old"), Type: workflows.GroupWorkflowName, Rung: &initial, From: "history"},
		{ID: oldSession, Type: workflows.SessionWorkflowName, Rung: &rung14, From: "history"},
		{ID: workflows.HostsID, Type: workflows.HostsWorkflowName, Rung: &latest, From: "memo"},
		{ID: workflows.GroupID("web"), Type: workflows.GroupWorkflowName, Rung: &latest, From: "memo"},
		{ID: workflows.SessionID("web", "lead"), Type: workflows.SessionWorkflowName, Rung: &latest, From: "memo"},
		{ID: workflows.SessionID("new", "lead"), Type: workflows.SessionWorkflowName},
	}
	var got nidclient.Rungs
	require.Eventually(t, func() bool {
		got, err = nidclient.ReadRungs(ctx, c, env.Namespace)
		require.NoError(t, err)
		// Before a run's first task, and until visibility shows its
		// memo, its rung is not yet where the test expects it.
		unknown, memo := 0, 0
		for _, r := range got.Workflows {
			if r.Rung == nil {
				unknown++
			}
			if r.From == "memo" {
				memo++
			}
		}
		return len(got.Workflows) == len(want) && unknown == 1 && memo == 3
	}, 30*time.Second, 100*time.Millisecond, "the running workflows listed with their rungs: %+v", &got)
	require.Equal(t, want, got.Workflows)
	require.Equal(t, &initial, got.Oldest)
	require.Equal(t, []nidclient.RungCount{{Rung: initial, Workflows: 1}, {Rung: rung14, Workflows: 1}, {Rung: latest, Workflows: 3}}, got.Counts)
	require.Equal(t, latest, got.Latest)
}
