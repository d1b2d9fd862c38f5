package agents_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/activities"
	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/config"
)

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
	a := &activities.Activities{StateDir: state, Places: func(ref agents.SessionRef) (string, string, bool) {
		return "file://" + origin, "", ref.Group == "web" && ref.Name == "lead"
	}}
	ref := agents.SessionRef{Group: "web", Name: "lead", WorkflowID: "nid/web/lead"}
	res, err := a.PrepareWorkspace(t.Context(), activities.WorkspaceInput{Session: ref})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(state, "http-token"), []byte("t"), 0o600))
	require.NoError(t, os.MkdirAll(filepath.Join(state, "repos", "api"), 0o700))

	temp := filepath.Join(state, "agents", "web", "lead")
	p := agents.Process{WorkDir: res.Worktree, TempDir: temp, GitDirs: agents.GitDirsFile(state, ref), StateDir: state, Permissions: config.PermissionsWorkspace}
	args := agents.CodexSandbox(p)
	i := slices.IndexFunc(args, func(a string) bool { return strings.HasPrefix(a, "permissions."+agents.CodexProfile+".filesystem=") })
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
		require.Contains(t, fs, agents.TomlString(path)+"="+agents.TomlString(access), "%s", path)
	}
	require.NotContains(t, fs, agents.TomlString(state)+"=", "the state directory itself is not hidden: Codex would not show the clone inside it")

	// Codex binds what it keeps read-only from where it is: a worktree's
	// config.worktree git has not made is made, empty, and one that is
	// there is left as it is.
	worktreeConfig := filepath.Join(gitDir, "config.worktree")
	if err := os.Remove(worktreeConfig); !errors.Is(err, os.ErrNotExist) {
		require.NoError(t, err)
	}
	require.NoError(t, agents.PlaceReadOnlyFiles(p))
	made, err := os.ReadFile(worktreeConfig)
	require.NoError(t, err)
	require.Empty(t, made)
	require.NoError(t, os.WriteFile(worktreeConfig, []byte("[core]\n"), 0o644))
	require.NoError(t, agents.PlaceReadOnlyFiles(p))
	kept, err := os.ReadFile(worktreeConfig)
	require.NoError(t, err)
	require.Equal(t, "[core]\n", string(kept))
	require.Equal(t, args, agents.CodexSandbox(p), "the same from one turn to the next")
}

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
	a := &activities.Activities{StateDir: state, Places: func(ref agents.SessionRef) (string, string, bool) {
		return repo, "", ref.Group == "web" && ref.Name == "lead"
	}}
	ref := agents.SessionRef{Group: "web", Name: "lead", WorkflowID: "nid/web/lead"}
	res, err := a.PrepareWorkspace(t.Context(), activities.WorkspaceInput{Session: ref})
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
