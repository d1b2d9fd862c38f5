package statedir

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func mode(t *testing.T, path string) fs.FileMode {
	t.Helper()
	fi, err := os.Lstat(path)
	require.NoError(t, err)
	return fi.Mode().Perm()
}

// write creates path (and its directories) with the given modes, as an
// older nid or a loose umask left them.
func write(t *testing.T, path string, dirMode, fileMode fs.FileMode) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), dirMode))
	require.NoError(t, os.WriteFile(path, []byte("x"), fileMode))
	require.NoError(t, os.Chmod(path, fileMode))
	require.NoError(t, os.Chmod(filepath.Dir(path), dirMode))
}

func TestPrepareCreatesAPrivateDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), ".nid")
	require.NoError(t, Prepare(dir))
	require.Equal(t, DirMode, mode(t, dir))
	b, err := os.ReadFile(filepath.Join(dir, ".gitignore"))
	require.NoError(t, err)
	require.Equal(t, "*\n", string(b))
	require.Equal(t, FileMode, mode(t, filepath.Join(dir, ".gitignore")))
}

func TestPrepareTightensWhatIsThere(t *testing.T) {
	dir := filepath.Join(t.TempDir(), ".nid")
	write(t, filepath.Join(dir, "http-token"), 0o755, 0o644)
	write(t, filepath.Join(dir, "temporal.db-wal"), 0o755, 0o644)
	write(t, filepath.Join(dir, "transcripts", "web", "lead.jsonl"), 0o755, 0o644)
	write(t, filepath.Join(dir, "pids", "123.json"), 0o775, 0o664)
	// The user's code in a worktree keeps its modes.
	script := filepath.Join(dir, Worktrees, "web", "lead", "build.sh")
	write(t, script, 0o755, 0o755)
	// A link leads out of the directory: what it points at is not touched.
	outside := filepath.Join(t.TempDir(), "notes.txt")
	write(t, outside, 0o755, 0o644)
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "sim")))
	require.NoError(t, os.Chmod(dir, 0o755))

	require.NoError(t, Prepare(dir))

	for _, d := range []string{dir, filepath.Join(dir, "transcripts"), filepath.Join(dir, "transcripts", "web"), filepath.Join(dir, "pids"), filepath.Join(dir, Worktrees)} {
		require.Equal(t, DirMode, mode(t, d), d)
	}
	for _, f := range []string{"http-token", "temporal.db-wal", "transcripts/web/lead.jsonl", "pids/123.json", ".gitignore"} {
		require.Equal(t, FileMode, mode(t, filepath.Join(dir, f)), f)
	}
	require.Equal(t, fs.FileMode(0o755), mode(t, script))
	require.Equal(t, fs.FileMode(0o755), mode(t, filepath.Dir(script)))
	require.Equal(t, fs.FileMode(0o644), mode(t, outside))
}

func TestPrepareRefusesADirectoryThatIsNotNids(t *testing.T) {
	repo := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(repo, ".git"), 0o755))
	require.ErrorContains(t, Prepare(repo), "is a git working tree")

	src := t.TempDir()
	write(t, filepath.Join(src, "main.go"), 0o755, 0o644)
	write(t, filepath.Join(src, ".gitignore"), 0o755, 0o644)
	require.ErrorContains(t, Prepare(src), "already holds files that are not nid's")
	require.NoFileExists(t, filepath.Join(src, "http-token"))
	b, err := os.ReadFile(filepath.Join(src, ".gitignore"))
	require.NoError(t, err)
	require.Equal(t, "x", string(b), "their .gitignore is left alone")
	require.Equal(t, fs.FileMode(0o644), mode(t, filepath.Join(src, "main.go")))
}

// An agent's `git add -A` in a repository that holds the state directory
// stages nothing from it: not the token, the database or a transcript.
func TestGitAddStagesNothingFromTheStateDirectory(t *testing.T) {
	repo := t.TempDir()
	git := func(args ...string) string {
		cmd := exec.Command("git", append([]string{"-C", repo, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %s: %s", strings.Join(args, " "), out)
		return string(out)
	}
	git("init", "-q")
	dir := filepath.Join(repo, ".nid")
	require.NoError(t, Prepare(dir))
	for _, f := range []string{"http-token", "mcp.key", "temporal.db", "temporal.db-wal", "transcripts/web/lead.jsonl", "pids/42.json"} {
		write(t, filepath.Join(dir, f), DirMode, FileMode)
	}
	write(t, filepath.Join(repo, "main.go"), 0o755, 0o644)
	git("add", "-A")
	require.Equal(t, "main.go\n", git("diff", "--cached", "--name-only"))
}
