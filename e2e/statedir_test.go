package e2e

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// nid up keeps its state directory to its user and out of git: the
// directory and what is in it (token, key, database with its WAL, pid
// records, transcripts, agent state) are 0700 and 0600, also what an older
// nid left readable, and a `git add -A` in a repository holding it stages
// none of it.
func TestStateDirectoryIsPrivate(t *testing.T) {
	dir := t.TempDir()
	agent := filepath.Join(dir, "agent.sh")
	require.NoError(t, os.WriteFile(agent, []byte("#!/bin/sh\nexec sleep 60\n"), 0o755))
	s := newSite(t, `  web:
    goal: Keep busy
    rotate: {mode: off}
    sessions:
      - agent: sim
        name: sim
        sim: {turnDelay: 100ms}
      - agent: exec
        name: busy
        command: `+agent+`
        permissions: full
`)
	state := filepath.Join(s.dir, ".nid")
	// What an older nid left, readable by everyone.
	old := filepath.Join(state, "transcripts", "web", "gone.jsonl")
	require.NoError(t, os.MkdirAll(filepath.Dir(old), 0o755))
	require.NoError(t, os.WriteFile(old, []byte(`{"seq":1,"kind":"prompt","text":"hello"}`+"\n"), 0o644))
	for _, p := range []string{state, filepath.Dir(old), filepath.Dir(filepath.Dir(old))} {
		require.NoError(t, os.Chmod(p, 0o755))
	}
	require.NoError(t, os.Chmod(old, 0o644))

	up := s.up()
	// While the exec agent's turn runs its process is recorded; the sim has
	// answered once its transcript has an output.
	s.eventually("a running agent recorded and a turn in a transcript", 2*time.Minute, func() bool {
		pids, _ := filepath.Glob(filepath.Join(state, "pids", "*.json"))
		b, _ := os.ReadFile(filepath.Join(state, "transcripts", "web", "sim.jsonl"))
		return len(pids) > 0 && strings.Contains(string(b), `"kind":"output"`)
	})

	seen := map[string]bool{}
	require.NoError(t, filepath.WalkDir(state, func(path string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		rel, _ := filepath.Rel(state, path)
		info, err := d.Info()
		require.NoError(t, err)
		want := fs.FileMode(0o600)
		if d.IsDir() {
			want = 0o700
		}
		require.Equal(t, want.String(), info.Mode().Perm().String(), rel)
		seen[filepath.Dir(rel)+"/"] = true
		seen[rel] = true
		return nil
	}))
	for _, f := range []string{".gitignore", "http-token", "mcp.key", "temporal.db", "temporal.db-wal", "temporal.db-shm",
		"pids/", "transcripts/web/sim.jsonl", "transcripts/web/gone.jsonl", "sim/web/sim/", "exec/web/busy/conversations"} {
		require.True(t, seen[f], "%s is in the state directory (it holds %v)", f, seen)
	}

	git := func(args ...string) string {
		cmd := exec.Command("git", append([]string{"-C", s.dir}, args...)...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %s: %s", strings.Join(args, " "), out)
		return string(out)
	}
	git("init", "-q")
	git("add", "-A")
	require.Equal(t, "nid.yaml\n", git("diff", "--cached", "--name-only"), "nothing of the state directory is staged")

	require.NoError(t, up.interrupt(t))
}
