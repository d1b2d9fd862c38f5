package activities

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/config"
)

// workedIn runs one turn of web/lead, whose workflow input names asked as
// its working directory, and returns where its agent ran, or the refusal.
func workedIn(t *testing.T, acts *Activities, kind, asked string) (string, error) {
	t.Helper()
	readyHost(t, kind)
	where := ""
	acts.Agents = map[string]agents.Agent{kind: scriptedAgent{fn: func(_ context.Context, req agents.TurnRequest) (agents.TurnReport, error) {
		where = req.Process.WorkDir
		return agents.TurnReport{Conversation: "c1", Output: "ok"}, nil
	}}}
	// As a history from before, or a client of its own, sends it.
	_, err := activityEnv(acts).ExecuteActivity(RunTurnName, map[string]any{"session": lead, "spec": agents.AgentSpec{Kind: kind}, "prompt": "go", "workdir": asked})
	return where, err
}

// prepareAsked prepares web/lead's worktree with a workflow input that
// names repo, as a history from before, or a client of its own, sends it.
func prepareAsked(t *testing.T, acts *Activities, repo string) (WorkspaceResult, error) {
	t.Helper()
	val, err := activityEnv(acts).ExecuteActivity(PrepareWorkspaceName, map[string]any{"session": lead, "repo": repo})
	if err != nil {
		return WorkspaceResult{}, err
	}
	var ws WorkspaceResult
	require.NoError(t, val.Get(&ws))
	return ws, nil
}

func settingsOf(kind string, set config.AgentSettings) func(agents.SessionRef) (string, config.AgentSettings, bool) {
	return func(ref agents.SessionRef) (string, config.AgentSettings, bool) { return kind, set, ref == lead }
}

func placedAt(repo, workDir string) func(agents.SessionRef) (string, string, bool) {
	return func(ref agents.SessionRef) (string, string, bool) { return repo, workDir, ref == lead }
}

// Where an agent works is what its sandbox lets it write, so the worker's
// own nid.yaml decides it, as it decides what runs: a working directory in
// the workflow's input (anything that reaches Temporal can start a session
// with one, $HOME say) is not where the agent works.
func TestTheWorkersConfigDecidesWhereAnAgentWorks(t *testing.T) {
	state, home, team := t.TempDir(), t.TempDir(), t.TempDir()
	for _, tc := range []struct {
		name          string
		repo, workDir string
		want          string
	}{
		{"the group's workdir", "", team, team},
		{"a worktree of the group's repo", team, "", filepath.Join(state, "worktrees", "web", "lead")},
		{"the worker's own directory", "", "", "/srv/work"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			acts := &Activities{StateDir: state, WorkDir: "/srv/work", Settings: settingsOf(agents.KindClaude, config.AgentSettings{}), Places: placedAt(tc.repo, tc.workDir)}
			where, err := workedIn(t, acts, agents.KindClaude, home)
			require.NoError(t, err)
			require.Equal(t, tc.want, where)
		})
	}
}

// A sandbox lets an agent write its working directory: one that holds the
// state directory (a group without a repo, run where nid.yaml and .nid are)
// would let it write nid's records, its database and the other sessions'
// worktrees. nid refuses to start it there, saying what to change; without
// a sandbox (full), or beside the state directory, it runs.
func TestNoSandboxHoldsTheStateDirectory(t *testing.T) {
	project := t.TempDir()
	state := filepath.Join(project, ".nid")
	require.NoError(t, os.MkdirAll(state, 0o700))
	link := filepath.Join(t.TempDir(), "project")
	require.NoError(t, os.Symlink(project, link))
	for _, tc := range []struct {
		name        string
		workDir     string
		permissions string
		refused     bool
	}{
		{"the directory holding it", project, "", true},
		{"the same through a symbolic link", link, config.PermissionsReadonly, true},
		{"the state directory itself", state, "", true},
		{"full: no sandbox", project, config.PermissionsFull, false},
		{"beside it", t.TempDir(), "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			acts := &Activities{StateDir: state, Settings: settingsOf(agents.KindCodex, config.AgentSettings{Permissions: tc.permissions}), Places: placedAt("", tc.workDir)}
			where, err := workedIn(t, acts, agents.KindCodex, "")
			if !tc.refused {
				require.NoError(t, err)
				require.Equal(t, tc.workDir, where)
				return
			}
			appErr, ok := errors.AsType[*temporal.ApplicationError](err)
			require.True(t, ok, "%v", err)
			require.Equal(t, ErrSandboxUnavailable, appErr.Type())
			require.True(t, appErr.NonRetryable())
			require.Contains(t, appErr.Error(), "which holds nid's state directory "+state)
			require.Contains(t, appErr.Error(), "give group web a repo")
			require.Contains(t, appErr.Error(), "set permissions: full")
			require.Empty(t, where, "nothing ran")
		})
	}
}

// The repository a session's worktree is made from is the one the worker's
// nid.yaml gives its group, not one the workflow's input names; a group the
// file gives no repository gets no worktree.
func TestTheWorkersConfigDecidesTheRepository(t *testing.T) {
	repo, other := t.TempDir(), t.TempDir()
	for _, dir := range []string{repo, other} {
		out, err := exec.Command("git", "-C", dir, "-c", "user.name=nid", "-c", "user.email=nid@example.com", "init", "-q").CombinedOutput()
		require.NoError(t, err, "%s", out)
		out, err = exec.Command("git", "-C", dir, "-c", "user.name=nid", "-c", "user.email=nid@example.com", "commit", "-q", "--allow-empty", "-m", "start").CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	acts := &Activities{StateDir: t.TempDir(), Places: placedAt(repo, "")}
	ws, err := prepareAsked(t, acts, other)
	require.NoError(t, err)
	for dir, want := range map[string]bool{repo: true, other: false} {
		err := exec.Command("git", "-C", dir, "rev-parse", "--verify", "--quiet", "refs/heads/"+ws.Branch).Run()
		require.Equal(t, want, err == nil, "%s has the session's branch", dir)
	}

	acts.Places = placedAt("", t.TempDir())
	_, err = prepareAsked(t, acts, other)
	require.ErrorContains(t, err, "this worker's nid.yaml gives group web no repo")
}
