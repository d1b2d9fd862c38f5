package activities

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

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

	p := Process{WorkDir: res.Worktree, GitDirs: gitDirsFile(state, ref), Permissions: config.PermissionsWorkspace}
	common, err := filepath.EvalSymlinks(filepath.Join(repo, ".git"))
	require.NoError(t, err)
	gitDir, got := gitDirs(p)
	require.Equal(t, common, got)
	require.Equal(t, filepath.Join(common, "worktrees", "lead"), gitDir)

	// The agent points its worktree at the user's home, which would then
	// be opened to its sandbox.
	home := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(res.Worktree, ".git"), []byte("gitdir: "+home+"\n"), 0o644))
	gitDir, got = gitDirs(p)
	require.Equal(t, common, got, "the record wins")
	require.NotContains(t, gitWritable(p), home)
	require.Contains(t, gitWritable(p), filepath.Join(common, "objects"))

	// Without a record, a .git file that does not check out opens nothing.
	p.GitDirs = filepath.Join(t.TempDir(), "none.json")
	gitDir, got = gitDirs(p)
	require.Empty(t, gitDir)
	require.Empty(t, got)
	require.Empty(t, gitWritable(p))
}

// nid's Codex profile hides the state directory but for the session's own
// places: its worktree and temp directory to write, its group's clone to
// read, the files that say what git runs read-only. The directories of
// sessions' places are hidden whole, so that a session made after the
// app-server started is hidden too, and nid's secrets by name, there yet
// or not.
func TestCodexProfileHidesTheStateDirectory(t *testing.T) {
	origin := t.TempDir()
	out, err := exec.Command("git", "-C", origin, "-c", "init.defaultBranch=main", "init", "-q").CombinedOutput()
	require.NoError(t, err, "%s", out)
	out, err = exec.Command("git", "-C", origin, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "start").CombinedOutput()
	require.NoError(t, err, "%s", out)
	state := t.TempDir()
	a := &Activities{StateDir: state, Places: placedAt("file://"+origin, "")}
	ref := lead
	res, err := a.PrepareWorkspace(t.Context(), WorkspaceInput{Session: ref})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(state, "http-token"), []byte("t"), 0o600))
	require.NoError(t, os.MkdirAll(filepath.Join(state, "repos", "api"), 0o700))

	temp := filepath.Join(state, "agents", "web", "lead")
	p := Process{WorkDir: res.Worktree, TempDir: temp, GitDirs: gitDirsFile(state, ref), StateDir: state, Permissions: config.PermissionsWorkspace}
	args := codexSandbox(p)
	i := slices.IndexFunc(args, func(a string) bool { return strings.HasPrefix(a, "permissions."+codexProfile+".filesystem=") })
	require.NotEqual(t, -1, i, "%q", args)
	fs := args[i]
	clone := filepath.Join(state, "repos", "web", ".git")
	gitDir := filepath.Join(clone, "worktrees", "lead")
	for path, access := range map[string]string{
		"/":                                      "read",
		filepath.Join(state, "http-token"):       "none",
		filepath.Join(state, "temporal-token"):   "none",
		filepath.Join(state, "mcp.key"):          "none",
		filepath.Join(state, "temporal.db"):      "none",
		filepath.Join(state, "transcripts"):      "none",
		filepath.Join(state, "worktrees"):        "none",
		filepath.Join(state, "agents"):           "none",
		filepath.Join(state, "repos", "api"):     "none",
		res.Worktree:                             "write",
		temp:                                     "write",
		clone:                                    "read",
		filepath.Join(clone, "objects"):          "write",
		gitDir:                                   "write",
		filepath.Join(gitDir, "commondir"):       "read",
		filepath.Join(gitDir, "config.worktree"): "read",
		filepath.Join(clone, "config"):           "read",
		filepath.Join(res.Worktree, ".git"):      "read",
	} {
		require.Contains(t, fs, tomlString(path)+"="+tomlString(access), "%s", path)
	}
	require.NotContains(t, fs, tomlString(state)+"=", "the state directory itself is not hidden: Codex would not show the clone inside it")
	require.Equal(t, args, codexSandbox(p), "the same from one turn to the next")
}
