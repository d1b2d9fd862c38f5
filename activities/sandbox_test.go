package activities

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/config"
)

// What a sandboxed agent may write outside its worktree comes from a record
// the agent cannot write, never from the worktree's own .git file, which
// the agent can point anywhere.
func TestGitDirsComeFromTheRecordNotTheWorktree(t *testing.T) {
	run := func(dir string, args ...string) {
		t.Helper()
		out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	repo := t.TempDir()
	run(repo, "init", "-q")
	run(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "start")
	state := t.TempDir()
	a := &Activities{StateDir: state, Places: placedAt(repo, "")}
	ref := lead
	res, err := a.PrepareWorkspace(t.Context(), WorkspaceInput{Session: ref})
	require.NoError(t, err)

	p := agents.Process{WorkDir: res.Worktree, GitDirs: agents.GitDirsFile(state, ref), Permissions: config.PermissionsWorkspace}
	common, err := filepath.EvalSymlinks(filepath.Join(repo, ".git"))
	require.NoError(t, err)
	gitDir, got := agents.GitDirs(p)
	require.Equal(t, common, got)
	require.Equal(t, filepath.Join(common, "worktrees", "lead"), gitDir)

	// The agent points its worktree at the user's home, which would then
	// be opened to its sandbox.
	home := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(res.Worktree, ".git"), []byte("gitdir: "+home+"\n"), 0o644))
	gitDir, got = agents.GitDirs(p)
	require.Equal(t, common, got, "the record wins")
	require.NotContains(t, agents.GitWritable(p), home)
	require.Contains(t, agents.GitWritable(p), filepath.Join(common, "objects"))

	// Without a record, a .git file that does not check out opens nothing.
	p.GitDirs = filepath.Join(t.TempDir(), "none.json")
	gitDir, got = agents.GitDirs(p)
	require.Empty(t, gitDir)
	require.Empty(t, got)
	require.Empty(t, agents.GitWritable(p))
}
