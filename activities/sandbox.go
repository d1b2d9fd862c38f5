package activities

import (
	"context"
	"os"
	"path/filepath"
	"strings"
)

// workDir is where a process agent runs: Process.WorkDir, else the worker's
// own working directory.
func workDir(p Process) string {
	if p.WorkDir != "" {
		return p.WorkDir
	}
	wd, _ := os.Getwd()
	return wd
}

// sandboxEnv is the environment a sandboxed agent needs on top of the
// worker's: directories of the session's own under Process.TempDir, which
// its sandbox lets it write, named by the variables given (XDG_CACHE_HOME:
// "cache", so that builds and tests have a cache while the user's own
// ~/.cache stays read-only). The user's agent env wins over these.
func sandboxEnv(p Process, dirs map[string]string) map[string]string {
	env := map[string]string{}
	if !p.sandboxed() || p.TempDir == "" {
		return env
	}
	for k, sub := range dirs {
		if _, set := p.Env[k]; !set {
			v := filepath.Join(p.TempDir, sub)
			_ = os.MkdirAll(v, 0o700)
			env[k] = v
		}
	}
	return env
}

// gitWritable returns what a commit in dir writes outside it: when dir is a
// linked git worktree (its .git a file pointing into the repository's git
// directory), the repository's objects, refs and logs and the worktree's
// own git directory. Hooks, config and the rest of the git directory are
// left out, so that nothing an agent writes runs when the user next uses
// git. Outside a linked worktree there is nothing to add.
func gitWritable(ctx context.Context, dir string) []string {
	gitDir, common := gitDirs(ctx, dir)
	if gitDir == common {
		return nil
	}
	var paths []string
	for _, p := range []string{filepath.Join(common, "objects"), filepath.Join(common, "refs"), filepath.Join(common, "logs"), gitDir} {
		if _, err := os.Stat(p); err == nil {
			paths = append(paths, p)
		}
	}
	return paths
}

// gitDirs returns the git directory of dir and the repository's common one,
// both absolute; they differ in a linked worktree, and are empty outside a
// repository.
func gitDirs(ctx context.Context, dir string) (gitDir, common string) {
	out, err := git(ctx, dir, "rev-parse", "--path-format=absolute", "--git-dir", "--git-common-dir")
	if err != nil {
		return "", ""
	}
	gitDir, common, _ = strings.Cut(out, "\n")
	return gitDir, common
}
