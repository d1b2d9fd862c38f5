package agents

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/statedir"
)

// WorkDir is where a process agent runs: Process.WorkDir, else the worker's
// own working directory.
func WorkDir(p Process) string {
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
	if !p.Sandboxed() || p.TempDir == "" {
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
func gitDirs(p Process) (gitDir, common string) {
	rec, _ := SessionGitDirs(WorkDir(p), p.GitDirs)
	return rec.GitDir, rec.Common
}

// SessionGitDirs returns where the working directory dir keeps its git
// directories, and false outside a repository.
//
// It never runs git in dir, nor believes what the agent can write there: a
// worktree's .git file, and its git directory's commondir, are the agent's
// to rewrite, and pointed elsewhere they would make nid open other
// directories to the agent's sandbox, or read (and have git run) a config
// the agent chose. A linked worktree's directories come from the record
// PrepareWorkspace wrote at recordFile, which wins over whatever dir holds
// now (a .git directory put in place of the file included); for a worktree
// made before nid kept one, from its first, checked, reading, which is then
// recorded. A plain repository's come from its .git directory, never a
// symlink.
func SessionGitDirs(dir, recordFile string) (GitDirsRecord, bool) {
	if rec, ok := ReadGitDirs(recordFile); ok && rec.Worktree == dir {
		return rec, true
	}
	if fi, err := os.Lstat(filepath.Join(dir, ".git")); err == nil && fi.IsDir() {
		d := filepath.Join(dir, ".git")
		return GitDirsRecord{Worktree: dir, GitDir: d, Common: d}, true
	}
	if recordFile == "" {
		return GitDirsRecord{}, false
	}
	rec, ok := ReadWorktreeGitDirs(dir)
	if !ok {
		return GitDirsRecord{}, false
	}
	_ = WriteGitDirs(recordFile, rec)
	return rec, true
}

// GitDirsRecord is where a session's worktree keeps its git directories,
// kept under the state directory where the agent cannot write.
type GitDirsRecord struct {
	Worktree string `json:"worktree"`
	GitDir   string `json:"gitDir"`
	Common   string `json:"common"`
	// Base is the full hash of the commit the session's branch left the
	// repository's line from; records from before nid kept it have none.
	Base string `json:"base,omitempty"`
	// Repo is the group's repo as nid.yaml gave it when nid made the
	// worktree, and RepoDir that repository on this host: what a session
	// the file no longer lists is acted on with (see placeOf). Records
	// from before nid kept them have neither.
	Repo    string `json:"repo,omitempty"`
	RepoDir string `json:"repoDir,omitempty"`
	// Alternates is the repository's objects/info/alternates as it was
	// when nid made the worktree: empty for none, as in most.
	Alternates string `json:"alternates,omitempty"`
}

// GitDirsFile is where the record of a session's git directories lives.
func GitDirsFile(state string, ref SessionRef) string {
	return filepath.Join(state, "gitdirs", ref.Group, ref.Name+".json")
}

// ReadGitDirs reads the record at path; false when there is none.
func ReadGitDirs(path string) (GitDirsRecord, bool) {
	var rec GitDirsRecord
	if path == "" {
		return rec, false
	}
	b, err := os.ReadFile(path)
	if err != nil || json.Unmarshal(b, &rec) != nil {
		return GitDirsRecord{}, false
	}
	return rec, true
}

// WriteGitDirs writes the record rec to path.
func WriteGitDirs(path string, rec GitDirsRecord) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), statedir.DirMode); err != nil {
		return err
	}
	return os.WriteFile(path, b, statedir.FileMode)
}

// ReadWorktreeGitDirs reads a linked worktree's git directories from its
// .git file and checks them against each other as git lays them out: the
// git directory is <common>/worktrees/<name>, its commondir names common
// and its gitdir points back at the worktree, and common is a git
// directory. None of the files may be a link, a fifo or large.
func ReadWorktreeGitDirs(worktree string) (GitDirsRecord, bool) {
	b, err := ReadSmall(filepath.Join(worktree, ".git"), 4<<10)
	if err != nil {
		return GitDirsRecord{}, false
	}
	gitDir, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir: ")
	if !ok || !filepath.IsAbs(gitDir) {
		return GitDirsRecord{}, false
	}
	gitDir = filepath.Clean(gitDir)
	common := filepath.Dir(filepath.Dir(gitDir))
	back, err := ReadSmall(filepath.Join(gitDir, "gitdir"), 4<<10)
	if err != nil || filepath.Base(filepath.Dir(gitDir)) != "worktrees" ||
		filepath.Clean(strings.TrimSpace(string(back))) != filepath.Join(worktree, ".git") {
		return GitDirsRecord{}, false
	}
	named, err := ReadSmall(filepath.Join(gitDir, "commondir"), 4<<10)
	if err != nil {
		return GitDirsRecord{}, false
	}
	commonDir := strings.TrimSpace(string(named))
	if !filepath.IsAbs(commonDir) {
		commonDir = filepath.Join(gitDir, commonDir)
	}
	if filepath.Clean(commonDir) != common {
		return GitDirsRecord{}, false
	}
	for _, must := range []string{"HEAD", "objects", "refs"} {
		if _, err := os.Lstat(filepath.Join(common, must)); err != nil {
			return GitDirsRecord{}, false
		}
	}
	return GitDirsRecord{Worktree: worktree, GitDir: gitDir, Common: common}, true
}

// stateSecrets are the files in the state directory that hold nid's
// credentials and every session's history: the HTTP API token, the key
// that signs MCP tokens, the embedded Temporal server's credential and its
// database (with SQLite's companions).
var stateSecrets = []string{"http-token", "mcp.key", "temporal-token", "temporal.db", "temporal.db-wal", "temporal.db-shm", "temporal.db-journal"}

// readPolicy returns what a sandboxed agent's commands may not read, and
// what they may read again inside it: the whole state directory is denied
// (its credentials, its database, the transcripts and the other sessions'
// worktrees and temp directories), but for the session's own places there,
// its worktree, its temp directory and its git directories (a clone nid
// made of its group's repository lives there too). Outside a state
// directory there is nothing to deny.
func readPolicy(p Process) (deny, allow []string) {
	if !p.Sandboxed() || p.StateDir == "" {
		return nil, nil
	}
	state := p.StateDir
	own := []string{WorkDir(p), p.TempDir}
	gitDir, common := gitDirs(p)
	own = append(own, gitDir, common)
	for _, d := range own {
		if d != "" && d != state && config.Within(d, state) && !slices.Contains(allow, d) {
			allow = append(allow, d)
		}
	}
	return []string{state}, allow
}

// gitReadOnly returns the files that say where a linked worktree's
// repository is and how git runs there, which a commit never writes: the
// worktree's .git file, its git directory's commondir, gitdir and
// config.worktree, and the repository's config and hooks. Rewritten, they
// would make the user's next git command in the worktree (or nid's) read a
// configuration, and run a hook or fsmonitor, of the agent's choosing; so
// a sandbox that can keeps them read-only inside the directories it opens
// to commits. Outside a linked worktree there is nothing to add.
func gitReadOnly(p Process) []string {
	gitDir, common := gitDirs(p)
	if gitDir == "" || gitDir == common {
		return nil
	}
	return []string{
		filepath.Join(WorkDir(p), ".git"),
		filepath.Join(gitDir, "commondir"), filepath.Join(gitDir, "gitdir"), filepath.Join(gitDir, "config.worktree"),
		filepath.Join(common, "config"), filepath.Join(common, "hooks"),
	}
}
