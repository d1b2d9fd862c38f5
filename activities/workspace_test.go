package activities_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/activities"
	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/internal/agenttest"
)

var webLead = agents.SessionRef{Group: "web", Name: "lead", WorkflowID: "nid/web/lead"}

// placed gives group web's sessions repo, as a worker's nid.yaml would.
func placed(repo string) func(agents.SessionRef) (string, string, bool) {
	return func(ref agents.SessionRef) (string, string, bool) { return repo, "", ref.Group == "web" }
}

// sharedDir gives group web's sessions the working directory dir.
func sharedDir(dir string) func(agents.SessionRef) (string, string, bool) {
	return func(ref agents.SessionRef) (string, string, bool) { return "", dir, ref.Group == "web" }
}

// newRepo is a repository on main with one commit, "start", of README.md.
func newRepo(t *testing.T) string {
	t.Helper()
	repo := t.TempDir()
	agenttest.GitRun(t, repo, "init", "-q", "-b", "main")
	agenttest.GitRun(t, repo, "config", "user.name", "nid test")
	agenttest.GitRun(t, repo, "config", "user.email", "nid@example.com")
	writeFile(t, repo, "README.md", "the project\n")
	agenttest.GitRun(t, repo, "add", ".")
	agenttest.GitRun(t, repo, "commit", "-q", "-m", "start")
	return repo
}

func writeFile(t *testing.T, dir, name, text string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644))
}

func commit(t *testing.T, dir, subject string) string {
	t.Helper()
	agenttest.GitRun(t, dir, "add", "-A")
	agenttest.GitRun(t, dir, "commit", "-q", "--allow-empty", "-m", subject)
	return agenttest.GitRun(t, dir, "log", "-1", "--format=%h %s")
}

// The base a session's branch left from is recorded when its worktree is
// made, and kept: a new branch's is the commit it starts at, an existing
// branch's is where it and main last met, and neither moves when main does
// (even when main takes the branch's commits, after which where the two
// meet is the branch's tip).
func TestPrepareWorkspaceRecordsTheBase(t *testing.T) {
	repo := newRepo(t)
	start := agenttest.GitRun(t, repo, "rev-parse", "HEAD")
	agenttest.GitRun(t, repo, "branch", "nid/web/other")
	acts := &activities.Activities{StateDir: t.TempDir(), Places: placed(repo)}
	base := func(name string) string {
		t.Helper()
		var rec struct{ Base string }
		b, err := os.ReadFile(filepath.Join(acts.StateDir, "gitdirs", "web", name+".json"))
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(b, &rec))
		return rec.Base
	}
	ws, err := acts.PrepareWorkspace(t.Context(), activities.WorkspaceInput{Session: webLead})
	require.NoError(t, err)
	require.Equal(t, start, base("lead"))

	commit(t, repo, "Main moves on")
	other := agents.SessionRef{Group: "web", Name: "other"}
	_, err = acts.PrepareWorkspace(t.Context(), activities.WorkspaceInput{Session: other})
	require.NoError(t, err)
	require.Equal(t, start, base("other"), "an existing branch left where it and main last met")

	commit(t, ws.Worktree, "Work of the session")
	agenttest.GitRun(t, repo, "merge", "-q", "--no-edit", "nid/web/lead")
	_, err = acts.PrepareWorkspace(t.Context(), activities.WorkspaceInput{Session: webLead})
	require.NoError(t, err)
	require.Equal(t, start, base("lead"), "a worker restarted keeps the base")
}

// The sessions of a group prepare their worktrees of one repository at
// once when nid up starts them: each must get its own, although git's
// `worktree prune` (which one runs first) removes the .git/worktrees
// directory that another's `worktree add` is filling.
func TestSessionsPrepareTheirWorktreesOfOneRepoAtOnce(t *testing.T) {
	for round := range 20 {
		repo := newRepo(t)
		acts := &activities.Activities{StateDir: t.TempDir(), Places: placed(repo)}
		errs := make(chan error, 8)
		for i := range cap(errs) {
			go func() {
				ref := agents.SessionRef{Group: "web", Name: fmt.Sprintf("s%d", i)}
				_, err := acts.PrepareWorkspace(t.Context(), activities.WorkspaceInput{Session: ref})
				errs <- err
			}()
		}
		for range cap(errs) {
			require.NoError(t, <-errs, "round %d", round)
		}
	}
}
