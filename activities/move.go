package activities

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/statedir"
)

// SaveWorkName is the activity that saves a session's work on the host it
// leaves.
const SaveWorkName = "nid.SaveWork"

// SaveWorkInput names the worktree a session leaves; Number numbers the
// move, so each salvage has a ref of its own.
type SaveWorkInput struct {
	Session  SessionRef `json:"session"`
	Repo     string     `json:"repo"`
	Worktree string     `json:"worktree"`
	Number   int        `json:"number"`
}

// SaveWorkResult says what was saved: the salvage ref of the uncommitted
// work (empty when there was none) and the remote both were pushed to
// (empty when the repository has none: they stay in it).
type SaveWorkResult struct {
	Salvage string `json:"salvage,omitempty"`
	Pushed  string `json:"pushed,omitempty"`
	Head    string `json:"head,omitempty"`
}

// SalvageRef is where the uncommitted work of a session's n-th move is
// kept: outside its branch, so nothing is committed on the user's behalf.
func SalvageRef(ref SessionRef, n int) string {
	return fmt.Sprintf("refs/nid/salvage/%s/%s/%d", ref.Group, ref.Name, n)
}

// SaveWork saves a session's work before it leaves this host: the
// uncommitted changes (untracked files included, ignored ones not) as a
// commit on a salvage ref, never on the branch; the branch and the salvage
// pushed to the repository's origin, if it has one; then the worktree is
// removed, since the session works elsewhere from now on. Run again (a
// retry) after the worktree is gone, it finds nothing left to save.
func (a *Activities) SaveWork(ctx context.Context, in SaveWorkInput) (SaveWorkResult, error) {
	var res SaveWorkResult
	if in.Repo == "" || in.Worktree == "" {
		return res, nil
	}
	repo, err := a.repoDir(ctx, in.Session, in.Repo)
	if err != nil {
		return res, err
	}
	branch, ok, err := worktreeBranch(ctx, repo, filepath.Clean(in.Worktree))
	if err != nil {
		return res, classify(AgentFailed("%s: %v", repo, err))
	}
	if !ok {
		return res, nil
	}
	if res.Head, err = git(ctx, in.Worktree, "rev-parse", "HEAD"); err != nil {
		return res, classify(AgentFailed("%v", err))
	}
	salvage, err := a.salvage(ctx, in)
	if err != nil {
		return res, classify(AgentFailed("saving the uncommitted work of %s/%s: %v", in.Session.Group, in.Session.Name, err))
	}
	res.Salvage = salvage
	var extra []string
	if salvage != "" {
		extra = append(extra, salvage)
	}
	if res.Pushed, err = pushOrigin(ctx, repo, branch, extra...); err != nil {
		return res, classify(AgentFailed("pushing %s's work: %v", in.Session.Group+"/"+in.Session.Name, err))
	}
	unlock := a.lockRepo(repo)
	_, err = git(ctx, repo, "worktree", "remove", "--force", in.Worktree)
	unlock()
	if err != nil {
		return res, classify(AgentFailed("%v", err))
	}
	return res, nil
}

// salvage commits the worktree as it is, through an index of its own so
// the worktree's staging stays as the agent left it, onto the salvage ref;
// "" when nothing is uncommitted.
func (a *Activities) salvage(ctx context.Context, in SaveWorkInput) (string, error) {
	tmp, err := os.CreateTemp(a.StateDir, "salvage-index-")
	if err != nil {
		return "", err
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	os.Remove(tmp.Name()) // git makes the index; an empty file is not one
	env := []string{"GIT_INDEX_FILE=" + tmp.Name()}
	for _, step := range [][]string{{"read-tree", "HEAD"}, {"add", "-A"}} {
		if _, err := gitEnv(ctx, in.Worktree, env, step...); err != nil {
			return "", err
		}
	}
	tree, err := gitEnv(ctx, in.Worktree, env, "write-tree")
	if err != nil {
		return "", err
	}
	head, err := git(ctx, in.Worktree, "rev-parse", "HEAD^{tree}")
	if err != nil {
		return "", err
	}
	if tree == head {
		return "", nil
	}
	commit, err := git(ctx, in.Worktree, "commit-tree", tree, "-p", "HEAD", "-m",
		fmt.Sprintf("nid: uncommitted work of %s/%s when it left its host", in.Session.Group, in.Session.Name))
	if err != nil {
		return "", err
	}
	ref := SalvageRef(in.Session, in.Number)
	if _, err := git(ctx, in.Worktree, "update-ref", ref, commit); err != nil {
		return "", err
	}
	return ref, nil
}

// applySalvage lays the salvage over the worktree as uncommitted changes.
func (a *Activities) applySalvage(ctx context.Context, repo, worktree, salvage string) error {
	if !strings.HasPrefix(salvage, "refs/nid/salvage/") {
		return classify(BadInput("salvage %q is not a salvage ref (refs/nid/salvage/...)", salvage))
	}
	if _, err := git(ctx, repo, "rev-parse", "--verify", "--quiet", salvage); err != nil {
		if _, ferr := git(ctx, repo, "fetch", "origin", salvage+":"+salvage); ferr != nil {
			return classify(AgentFailed("salvage %s is in neither %s nor its origin: %v", salvage, repo, ferr))
		}
	}
	for _, step := range [][]string{{"read-tree", "-u", "--reset", salvage}, {"reset", "-q"}} {
		if _, err := git(ctx, worktree, step...); err != nil {
			return classify(AgentFailed("applying %s: %v", salvage, err))
		}
	}
	return nil
}

// repoDir is the repository a session's worktree is made from on this
// host: repo itself, or for a URL this host's own clone of it under the
// state directory, fetched afresh, with the session's branch as the remote
// has it when this clone has none yet.
func (a *Activities) repoDir(ctx context.Context, ref SessionRef, repo string) (string, error) {
	if !config.IsRepoURL(repo) {
		dir, err := filepath.Abs(repo)
		if err != nil {
			return "", classify(BadInput("repo %q: %v", repo, err))
		}
		return dir, nil
	}
	state, err := filepath.Abs(a.StateDir)
	if err != nil {
		return "", classify(err)
	}
	dir := filepath.Join(state, statedir.Repos, ref.Group)
	if _, err := os.Stat(filepath.Join(dir, ".git")); err != nil {
		if err := os.MkdirAll(filepath.Dir(dir), statedir.DirMode); err != nil {
			return "", classify(err)
		}
		if _, err := git(ctx, filepath.Dir(dir), "clone", "--quiet", repo, dir); err != nil {
			return "", classify(AgentFailed("cloning %s: %v", repo, err))
		}
	} else if _, err := git(ctx, dir, "fetch", "--quiet", "origin"); err != nil {
		return "", classify(AgentFailed("fetching %s: %v", repo, err))
	}
	branch := WorkspaceBranch(ref)
	if _, err := git(ctx, dir, "rev-parse", "--verify", "--quiet", "refs/heads/"+branch); err != nil {
		if _, err := git(ctx, dir, "rev-parse", "--verify", "--quiet", "refs/remotes/origin/"+branch); err == nil {
			if _, err := git(ctx, dir, "branch", "--quiet", branch, "origin/"+branch); err != nil {
				return "", classify(AgentFailed("%v", err))
			}
		}
	}
	return dir, nil
}

// PushBranchName is the activity that pushes a session's branch to its
// repository's origin.
const PushBranchName = "nid.PushBranch"

// PushBranchInput names the session whose branch is pushed.
type PushBranchInput struct {
	Session SessionRef `json:"session"`
	Repo    string     `json:"repo"`
}

// PushBranch pushes the session's branch, nid/<group>/<session>, to the
// origin of this host's repository (its clone, for a URL), so the work of a
// task done is on the remote whatever becomes of this host. It says which
// remote ("" when there is none).
func (a *Activities) PushBranch(ctx context.Context, in PushBranchInput) (string, error) {
	repo, err := a.repoDir(ctx, in.Session, in.Repo)
	if err != nil {
		return "", err
	}
	pushed, err := pushOrigin(ctx, repo, WorkspaceBranch(in.Session))
	if err != nil {
		return "", classify(AgentFailed("pushing %s: %v", WorkspaceBranch(in.Session), err))
	}
	return pushed, nil
}

// pushOrigin pushes branch and the refs named to origin, if repo has one.
func pushOrigin(ctx context.Context, repo, branch string, refs ...string) (string, error) {
	if _, err := git(ctx, repo, "remote", "get-url", "origin"); err != nil {
		return "", nil
	}
	args := []string{"push", "--quiet", "origin", "refs/heads/" + branch + ":refs/heads/" + branch}
	for _, r := range refs {
		args = append(args, r+":"+r)
	}
	if _, err := git(ctx, repo, args...); err != nil {
		return "", err
	}
	return "origin", nil
}
