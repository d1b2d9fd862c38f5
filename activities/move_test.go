package activities_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/activities"
	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/internal/agenttest"
)

// A session leaving a host takes its work along without a commit on its
// branch: the uncommitted changes (a new file included) go to a salvage
// ref, the old worktree goes, and the new host's fresh worktree of the same
// branch has them back as uncommitted changes.
func TestMoveCarriesCommittedAndUncommittedWork(t *testing.T) {
	for _, tt := range []struct {
		name string
		url  bool
	}{{"a repository both hosts share", false}, {"a URL each host clones", true}} {
		t.Run(tt.name, func(t *testing.T) {
			repo := newRepo(t)
			if tt.url {
				bare := filepath.Join(t.TempDir(), "origin.git")
				agenttest.GitRun(t, repo, "clone", "-q", "--bare", repo, bare)
				repo = "file://" + bare
			}
			hostA, hostB, ws, committed := twoHostsOneCommit(t, repo)
			head := agenttest.GitRun(t, ws.Worktree, "rev-parse", "HEAD")
			writeFile(t, ws.Worktree, "README.md", "the project, half rewritten\n")
			writeFile(t, ws.Worktree, "notes/todo.txt", "lexer next\n")

			saved, err := hostA.SaveWork(t.Context(), activities.SaveWorkInput{Session: webLead, Number: 1})
			require.NoError(t, err)
			require.Equal(t, "refs/nid/salvage/web/lead/1", saved.Salvage)
			require.Equal(t, head, saved.Head)
			if tt.url {
				require.Equal(t, "origin", saved.Pushed)
			} else {
				require.Empty(t, saved.Pushed, "a repository without origin keeps the refs itself")
				require.Equal(t, head, agenttest.GitRun(t, repo, "rev-parse", "refs/heads/nid/web/lead"), "nothing was committed on the branch")
			}
			_, err = os.Stat(ws.Worktree)
			require.True(t, os.IsNotExist(err), "the worktree left the host")
			again, err := hostA.SaveWork(t.Context(), activities.SaveWorkInput{Session: webLead, Number: 1})
			require.NoError(t, err)
			require.Empty(t, again.Salvage, "a retry finds nothing left to save")

			moved, err := hostB.PrepareWorkspace(t.Context(), activities.WorkspaceInput{Session: webLead, Salvage: saved.Salvage})
			require.NoError(t, err)
			require.Equal(t, "nid/web/lead", moved.Branch)
			require.Equal(t, committed, agenttest.GitRun(t, moved.Worktree, "log", "-1", "--format=%h %s"), "the branch arrived")
			require.Equal(t, "M README.md\n?? notes/", agenttest.GitRun(t, moved.Worktree, "status", "--porcelain"), "the uncommitted work arrived uncommitted (git status --porcelain, trimmed)")
			b, err := os.ReadFile(filepath.Join(moved.Worktree, "notes", "todo.txt"))
			require.NoError(t, err)
			require.Equal(t, "lexer next\n", string(b))
		})
	}
}

func TestSaveWorkWithNothingUncommittedMakesNoSalvage(t *testing.T) {
	repo := newRepo(t)
	acts := &activities.Activities{StateDir: t.TempDir(), Places: placed(repo)}
	_, err := acts.PrepareWorkspace(t.Context(), activities.WorkspaceInput{Session: webLead})
	require.NoError(t, err)
	saved, err := acts.SaveWork(t.Context(), activities.SaveWorkInput{Session: webLead, Number: 1})
	require.NoError(t, err)
	require.Empty(t, saved.Salvage)
	for _, salvage := range []string{"refs/heads/main", "refs/nid/salvage/web/other/1", "refs/nid/salvage/web/lead/-1", "refs/nid/salvage/web/lead/1/../../../../heads/main"} {
		_, err = acts.PrepareWorkspace(t.Context(), activities.WorkspaceInput{Session: webLead, Salvage: salvage})
		require.ErrorContains(t, err, "is not one of web/lead's salvage refs", salvage)
	}
}

func TestPushBranchSendsTheBranchToOrigin(t *testing.T) {
	repo := newRepo(t)
	bare := filepath.Join(t.TempDir(), "origin.git")
	agenttest.GitRun(t, repo, "clone", "-q", "--bare", repo, bare)
	url := "file://" + bare
	acts := &activities.Activities{StateDir: t.TempDir(), Places: placed(url)}
	ws, err := acts.PrepareWorkspace(t.Context(), activities.WorkspaceInput{Session: webLead})
	require.NoError(t, err)
	agenttest.GitRun(t, ws.Worktree, "-c", "user.name=agent", "-c", "user.email=agent@example.com", "commit", "-q", "--allow-empty", "-m", "Task t1 done")
	pushed, err := acts.PushBranch(t.Context(), activities.PushBranchInput{Session: webLead})
	require.NoError(t, err)
	require.Equal(t, "origin", pushed)
	require.Equal(t, "Task t1 done", agenttest.GitRun(t, bare, "log", "-1", "--format=%s", "nid/web/lead"))

	local := &activities.Activities{StateDir: t.TempDir(), Places: placed(repo)}
	_, err = local.PrepareWorkspace(t.Context(), activities.WorkspaceInput{Session: webLead})
	require.NoError(t, err)
	pushed, err = local.PushBranch(t.Context(), activities.PushBranchInput{Session: webLead})
	require.NoError(t, err)
	require.Empty(t, pushed, "a repository without origin has nowhere to push")
}

// A session moved off a host that is down leaves its worktree there; with
// a repository every host reaches by one path, that worktree still has the
// branch checked out. The new host makes its own worktree of the branch
// anyway, and the old one keeps what was not committed. A branch checked
// out anywhere else is still refused.
func TestMoveOffAHostThatIsDownWithASharedRepository(t *testing.T) {
	repo := newRepo(t)
	_, hostB, ws, committed := twoHostsOneCommit(t, repo)
	writeFile(t, ws.Worktree, "notes.txt", "not committed\n")

	moved, err := hostB.PrepareWorkspace(t.Context(), activities.WorkspaceInput{Session: webLead})
	require.NoError(t, err)
	require.NotEqual(t, ws.Worktree, moved.Worktree)
	require.Equal(t, committed, agenttest.GitRun(t, moved.Worktree, "log", "-1", "--format=%h %s"), "the branch's commits are there")
	require.Equal(t, "", agenttest.GitRun(t, moved.Worktree, "status", "--porcelain"))
	b, err := os.ReadFile(filepath.Join(ws.Worktree, "notes.txt"))
	require.NoError(t, err)
	require.Equal(t, "not committed\n", string(b), "the old worktree keeps its uncommitted work")
	again, err := hostB.PrepareWorkspace(t.Context(), activities.WorkspaceInput{Session: webLead})
	require.NoError(t, err)
	require.Equal(t, moved, again, "run again, it finds its worktree")

	// The branch of web/other checked out by hand in a directory of the
	// user's is not nid's to take.
	other := agents.SessionRef{Group: "web", Name: "other", WorkflowID: "nid/web/other"}
	agenttest.GitRun(t, repo, "branch", "nid/web/other")
	agenttest.GitRun(t, repo, "worktree", "add", filepath.Join(t.TempDir(), "mine"), "nid/web/other")
	_, err = hostB.PrepareWorkspace(t.Context(), activities.WorkspaceInput{Session: other})
	require.ErrorContains(t, err, "is already checked out at")
}

// twoHostsOneCommit is two hosts of their own state directories, and
// web/lead's worktree of repo on the first with one commit of the agent's.
func twoHostsOneCommit(t *testing.T, repo string) (hostA, hostB *activities.Activities, ws activities.WorkspaceResult, committed string) {
	t.Helper()
	hostA = &activities.Activities{StateDir: t.TempDir(), Places: placed(repo)}
	hostB = &activities.Activities{StateDir: t.TempDir(), Places: placed(repo)}
	ws, err := hostA.PrepareWorkspace(t.Context(), activities.WorkspaceInput{Session: webLead})
	require.NoError(t, err)
	agenttest.GitRun(t, ws.Worktree, "config", "user.name", "agent")
	agenttest.GitRun(t, ws.Worktree, "config", "user.email", "agent@example.com")
	writeFile(t, ws.Worktree, "parser.go", "package parser\n")
	return hostA, hostB, ws, commit(t, ws.Worktree, "Parser skeleton")
}
