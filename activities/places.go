package activities

import (
	"fmt"
	"path/filepath"

	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/statedir"
)

// A workflow's input names a session and nothing the worker acts on:
// anything that reaches Temporal can start a session's workflow, or send
// it a signal, with input of its own. So every activity checks the names
// it is given, and takes where a session works (the repository, this
// host's clone of it, the worktree, the branch, the group's directory) from
// this worker's own nid.yaml (Activities.Places), or, for a session the file
// no longer lists (moved away, removed), from the record nid wrote when it
// made the session's worktree here. A session with neither gets a refusal
// and nothing is done.

// place is where this worker puts a session.
type place struct {
	// repo is the group's repo as nid.yaml gives it, a path or a URL;
	// empty when the group has none.
	repo string
	// repoDir is that repository on this host: the path, or this host's
	// clone of the URL under the state directory.
	repoDir string
	// worktree is the session's own worktree, with a repo.
	worktree string
	// workDir is the group's shared directory, without a repo; empty
	// means the worker's own.
	workDir string
	// listed says this worker's nid.yaml lists the session; otherwise the
	// place comes from nid's record.
	listed bool
}

// branch is the session's own branch.
func (p place) branch(ref agents.SessionRef) string { return WorkspaceBranch(ref) }

// placeOf is where this worker puts the session ref (already checked):
// from its own nid.yaml, else from nid's record of the worktree it made
// here, else a refusal.
func (a *Activities) placeOf(ref agents.SessionRef) (place, error) {
	state, err := a.stateDir()
	if err != nil {
		return place{}, err
	}
	if a.Places != nil {
		if repo, dir, ok := a.Places(ref); ok {
			p := place{repo: repo, workDir: dir, listed: true}
			if repo == "" {
				return p, nil
			}
			if err := agents.CheckRepoURL(repo); err != nil {
				return place{}, err
			}
			if state == "" {
				return place{}, agents.BadInput("group %s has a repo, but this worker has no state directory to keep worktrees in", ref.Group)
			}
			p.repoDir, p.worktree = repoDirOf(state, ref.Group, repo), worktreeDir(state, ref)
			return p, nil
		}
	}
	if state != "" {
		if rec, ok := agents.ReadGitDirs(agents.GitDirsFile(state, ref)); ok && rec.Repo != "" {
			p := place{repo: rec.Repo, repoDir: rec.RepoDir, worktree: rec.Worktree}
			if agents.CheckRepoURL(rec.Repo) != nil || p.repoDir != repoDirOf(state, ref.Group, rec.Repo) || p.worktree != worktreeDir(state, ref) {
				return place{}, agents.BadInput("nid's record of %s/%s on this host (%s) names places nid would not have made; nothing done",
					ref.Group, ref.Name, agents.GitDirsFile(state, ref))
			}
			return p, nil
		}
	}
	return place{}, agents.BadInput("this worker's nid.yaml has no session %s/%s, and nid made no worktree for it on this host, so it has nothing of the session's to act on",
		ref.Group, ref.Name)
}

// stateDir is the state directory, absolute; empty when there is none.
func (a *Activities) stateDir() (string, error) {
	if a.StateDir == "" {
		return "", nil
	}
	state, err := filepath.Abs(a.StateDir)
	if err != nil {
		return "", agents.BadInput("state directory %q: %v", a.StateDir, err)
	}
	return state, nil
}

// repoDirOf is the repository a group's repo names, on this host: a path
// as it is (absolute: nid.yaml's paths are made so when it is read), or
// for a URL this host's clone under the state directory.
func repoDirOf(state, group, repo string) string {
	if config.IsRepoURL(repo) {
		return filepath.Join(state, statedir.Repos, group)
	}
	dir, err := filepath.Abs(repo)
	if err != nil {
		return filepath.Clean(repo)
	}
	return dir
}

// worktreeDir is where the session's worktree is, under the absolute state
// directory state.
func worktreeDir(state string, ref agents.SessionRef) string {
	return filepath.Join(state, statedir.Worktrees, ref.Group, ref.Name)
}

// ownedWorktree refuses a worktree path that is not the session's own
// under the state directory, before nid removes or writes it.
func ownedWorktree(state string, ref agents.SessionRef, path string) error {
	if want := worktreeDir(state, ref); filepath.Clean(path) != want {
		return fmt.Errorf("%s is not %s/%s's worktree (%s)", path, ref.Group, ref.Name, want)
	}
	return nil
}
