package activities

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"

	"github.com/nid-dev/nid/statedir"
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
			_ = os.MkdirAll(v, statedir.DirMode)
			env[k] = v
		}
	}
	return env
}

// gitWritable returns what a commit in the session's worktree writes
// outside it: the repository's objects, refs and logs and the worktree's own
// git directory. Hooks, config and the rest of the git directory are left
// out, so that nothing an agent writes runs when the user next uses git.
// Outside a linked worktree there is nothing to add.
func gitWritable(p Process) []string {
	gitDir, common := gitDirs(p)
	if gitDir == common {
		return nil
	}
	var paths []string
	for _, d := range []string{filepath.Join(common, "objects"), filepath.Join(common, "refs"), filepath.Join(common, "logs"), gitDir} {
		if _, err := os.Stat(d); err == nil {
			paths = append(paths, d)
		}
	}
	return paths
}

// gitDirs returns the git directory of the session's working directory and
// the repository's common one, both absolute; they differ in a linked
// worktree, and are empty outside a repository.
//
// It never runs git in the working directory, nor believes what the agent
// can write there: a worktree's .git file, and its git directory's
// commondir, are the agent's to rewrite, and pointed elsewhere they would
// make nid open other directories to the agent's sandbox, or run git
// (unsandboxed) under a config the agent chose. A linked worktree's
// directories come from the record PrepareWorkspace wrote (or, for a
// worktree made before nid kept one, from its first, checked, reading);
// a plain repository's from its .git directory.
func gitDirs(p Process) (gitDir, common string) {
	dir := workDir(p)
	if fi, err := os.Stat(filepath.Join(dir, ".git")); err == nil && fi.IsDir() {
		d := filepath.Join(dir, ".git")
		return d, d
	}
	if p.GitDirs == "" {
		return "", ""
	}
	var rec gitDirsRecord
	if b, err := os.ReadFile(p.GitDirs); err == nil && json.Unmarshal(b, &rec) == nil && rec.Worktree == dir {
		return rec.GitDir, rec.Common
	}
	rec, ok := readWorktreeGitDirs(dir)
	if !ok {
		return "", ""
	}
	_ = writeGitDirs(p.GitDirs, rec)
	return rec.GitDir, rec.Common
}

// gitDirsRecord is where a session's worktree keeps its git directories,
// kept under the state directory where the agent cannot write.
type gitDirsRecord struct {
	Worktree string `json:"worktree"`
	GitDir   string `json:"gitDir"`
	Common   string `json:"common"`
}

// gitDirsFile is where the record of a session's git directories lives.
func gitDirsFile(state string, ref SessionRef) string {
	return filepath.Join(state, "gitdirs", ref.Group, ref.Name+".json")
}

func writeGitDirs(path string, rec gitDirsRecord) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), statedir.DirMode); err != nil {
		return err
	}
	return os.WriteFile(path, b, statedir.FileMode)
}

// readWorktreeGitDirs reads a linked worktree's git directories from its
// .git file and checks them against each other as git lays them out: the
// git directory is <common>/worktrees/<name>, points back at the worktree,
// and common is a git directory.
func readWorktreeGitDirs(worktree string) (gitDirsRecord, bool) {
	b, err := os.ReadFile(filepath.Join(worktree, ".git"))
	if err != nil {
		return gitDirsRecord{}, false
	}
	gitDir, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir: ")
	if !ok || !filepath.IsAbs(gitDir) {
		return gitDirsRecord{}, false
	}
	gitDir = filepath.Clean(gitDir)
	common := filepath.Dir(filepath.Dir(gitDir))
	back, err := os.ReadFile(filepath.Join(gitDir, "gitdir"))
	if err != nil || filepath.Base(filepath.Dir(gitDir)) != "worktrees" ||
		filepath.Clean(strings.TrimSpace(string(back))) != filepath.Join(worktree, ".git") {
		return gitDirsRecord{}, false
	}
	for _, must := range []string{"HEAD", "objects", "refs"} {
		if _, err := os.Stat(filepath.Join(common, must)); err != nil {
			return gitDirsRecord{}, false
		}
	}
	return gitDirsRecord{Worktree: worktree, GitDir: gitDir, Common: common}, true
}
