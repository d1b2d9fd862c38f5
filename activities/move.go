package activities

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/statedir"
)

// SaveWorkName is the activity that saves a session's work on the host it
// leaves.
const SaveWorkName = "nid.SaveWork"

// SaveWorkInput names the session leaving this host; Number numbers the
// move, so each salvage has a ref of its own. Where its work is comes from
// nid's record of the worktree it made here: the "repo" and "worktree" of
// histories from before are not read.
type SaveWorkInput struct {
	Session agents.SessionRef `json:"session"`
	Number  int               `json:"number"`
}

// SaveWorkResult says what was saved: the salvage ref of the uncommitted
// work (empty when there was none) and the remote both were pushed to
// (empty when the repository has none: they stay in it).
type SaveWorkResult struct {
	Salvage string `json:"salvage,omitempty"`
	Pushed  string `json:"pushed,omitempty"`
	Head    string `json:"head,omitempty"`
}

// maxMoves bounds a move's number: salvage refs are named after it.
const maxMoves = 1 << 30

// SalvageRef is where the uncommitted work of a session's n-th move is
// kept: outside its branch, so nothing is committed on the user's behalf.
func SalvageRef(ref agents.SessionRef, n int) string {
	return fmt.Sprintf("refs/nid/salvage/%s/%s/%d", ref.Group, ref.Name, n)
}

// isSalvageOf reports whether salvage is one of ref's salvage refs.
func isSalvageOf(ref agents.SessionRef, salvage string) bool {
	rest, ok := strings.CutPrefix(salvage, fmt.Sprintf("refs/nid/salvage/%s/%s/", ref.Group, ref.Name))
	n, err := strconv.Atoi(rest)
	return ok && err == nil && n >= 0 && n <= maxMoves && strconv.Itoa(n) == rest
}

// SaveWork saves a session's work before it leaves this host: the
// uncommitted changes (untracked files included, ignored ones not) as a
// commit on a salvage ref, never on the branch; the branch and the salvage
// pushed to the repository's origin, if it has one; then the worktree is
// removed, since the session works elsewhere from now on. Run again (a
// retry) after the worktree is gone, it finds nothing left to save; a
// session with no worktree here has nothing to save.
func (a *Activities) SaveWork(ctx context.Context, in SaveWorkInput) (SaveWorkResult, error) {
	var res SaveWorkResult
	if err := agents.CheckSession(&in.Session); err != nil {
		return res, classify(err)
	}
	if in.Number < 0 || in.Number > maxMoves {
		return res, classify(agents.BadInput("move number %d is not between 0 and %d", in.Number, maxMoves))
	}
	p, err := a.placeOf(in.Session)
	if err != nil {
		return res, classify(err)
	}
	if p.repo == "" {
		return res, nil
	}
	state, err := a.stateDir()
	if err != nil {
		return res, classify(err)
	}
	repo := p.repoDir
	// Only the session's own branch is pushed, whatever the worktree's
	// HEAD (the agent's to write) names now.
	if _, ok, err := worktreeBranch(ctx, repo, p.worktree); err != nil {
		return res, classify(agents.AgentFailed("%s: %v", repo, err))
	} else if !ok {
		return res, nil
	}
	branch := WorkspaceBranch(in.Session)
	rec, ok := agents.SessionGitDirs(p.worktree, agents.GitDirsFile(state, in.Session))
	if !ok {
		return res, classify(agents.AgentFailed("%s is registered in %s but says nothing nid can check of its git directory: refused, nothing run", p.worktree, repo))
	}
	g, err := agents.OpenWorktreeGit(ctx, state, rec, agents.IndexNew)
	if err != nil {
		return res, classify(agents.AgentFailed("saving the work of %s/%s: %v", in.Session.Group, in.Session.Name, err))
	}
	defer g.Close()
	if res.Head, err = g.Output(ctx, "rev-parse", "--verify", "HEAD^{commit}"); err != nil {
		return res, classify(agents.AgentFailed("%v", err))
	}
	salvage, err := salvage(ctx, g, repo, in)
	if err != nil {
		return res, classify(agents.AgentFailed("saving the uncommitted work of %s/%s: %v", in.Session.Group, in.Session.Name, err))
	}
	res.Salvage = salvage
	var extra []string
	if salvage != "" {
		extra = append(extra, salvage)
	}
	if res.Pushed, err = pushOrigin(ctx, repo, branch, extra...); err != nil {
		return res, classify(agents.AgentFailed("pushing %s's work: %v", in.Session.Group+"/"+in.Session.Name, err))
	}
	// The worktree goes without git reading it: `git worktree remove`
	// runs git status there, under the worktree's own configuration.
	if err := ownedWorktree(state, in.Session, p.worktree); err != nil {
		return res, classify(agents.AgentFailed("%v", err))
	}
	unlock := a.lockRepo(repo)
	err = os.RemoveAll(p.worktree)
	if err == nil {
		_, err = agents.RepoGit(ctx, repo, "worktree", "prune")
	}
	unlock()
	if err != nil {
		return res, classify(agents.AgentFailed("removing %s: %v", p.worktree, err))
	}
	return res, nil
}

// salvage commits the worktree as it is, through an index of its own so
// the worktree's staging stays as the agent left it, onto the salvage ref;
// "" when nothing is uncommitted.
func salvage(ctx context.Context, g *agents.WorktreeGit, repo string, in SaveWorkInput) (string, error) {
	for _, step := range [][]string{{"read-tree", "HEAD"}, {"add", "-A"}} {
		if _, err := g.Output(ctx, step...); err != nil {
			return "", err
		}
	}
	tree, err := g.Output(ctx, "write-tree")
	if err != nil {
		return "", err
	}
	head, err := g.Output(ctx, "rev-parse", "HEAD^{tree}")
	if err != nil {
		return "", err
	}
	if tree == head {
		return "", nil
	}
	commit, err := agents.RunGit(ctx, agents.GitCommand{Dir: g.Work, Env: g.Env, Config: []string{"user.name=nid", "user.email=nid@localhost"},
		Args: []string{"commit-tree", tree, "-p", "HEAD", "-m", fmt.Sprintf("nid: uncommitted work of %s/%s when it left its host", in.Session.Group, in.Session.Name)}})
	if err != nil {
		return "", err
	}
	ref := SalvageRef(in.Session, in.Number)
	if err := agents.CheckRefPath(g.Common, ref); err != nil {
		return "", err
	}
	if _, err := agents.RunGit(ctx, agents.GitCommand{Dir: repo, Config: append(agents.RepoDrivers(ctx, repo), agents.NoReflog), Args: []string{"update-ref", ref, commit}}); err != nil {
		return "", err
	}
	return ref, nil
}

// applySalvage lays the salvage over the worktree rec records as
// uncommitted changes.
func (a *Activities) applySalvage(ctx context.Context, repo string, rec agents.GitDirsRecord, salvage string) error {
	if _, err := agents.RepoGit(ctx, repo, "rev-parse", "--verify", "--quiet", salvage); err != nil {
		url, uerr := originURL(ctx, repo)
		ferr := uerr
		if ferr == nil && url == "" {
			ferr = fmt.Errorf("it has no origin")
		}
		if ferr == nil {
			_, ferr = agents.RemoteGit(ctx, repo, "fetch", "--quiet", "--", url, salvage+":"+salvage)
		}
		if ferr != nil {
			return classify(agents.AgentFailed("salvage %s is in neither %s nor its origin: %v", salvage, repo, ferr))
		}
	}
	state, err := a.stateDir()
	if err != nil {
		return classify(err)
	}
	g, err := agents.OpenWorktreeGit(ctx, state, rec, agents.IndexOwn)
	if err != nil {
		return classify(agents.AgentFailed("applying %s: %v", salvage, err))
	}
	defer g.Close()
	for _, step := range [][]string{{"read-tree", "-u", "--reset", salvage}, {"reset", "-q"}} {
		if _, err := g.Output(ctx, step...); err != nil {
			return classify(agents.AgentFailed("applying %s: %v", salvage, err))
		}
	}
	return nil
}

// repoDir is the repository a session's worktree is made from on this
// host: the path nid.yaml names, or for a URL this host's own clone of it
// under the state directory, fetched afresh, with the session's branch as
// the remote has it when this clone has none yet.
func (a *Activities) repoDir(ctx context.Context, ref agents.SessionRef, p place) (string, error) {
	dir := p.repoDir
	if !config.IsRepoURL(p.repo) {
		return dir, nil
	}
	if err := agents.CheckRepoURL(p.repo); err != nil {
		return "", classify(err)
	}
	if _, err := os.Lstat(filepath.Join(dir, ".git")); err != nil {
		if err := os.MkdirAll(filepath.Dir(dir), statedir.DirMode); err != nil {
			return "", classify(err)
		}
		if _, err := agents.RemoteGit(ctx, filepath.Dir(dir), "clone", "--quiet", "--no-checkout", "--", p.repo, dir); err != nil {
			return "", classify(agents.AgentFailed("cloning %s: %v", p.repo, err))
		}
	} else if !agents.IsRegularDir(filepath.Join(dir, ".git")) {
		return "", classify(agents.AgentFailed("%s/.git is not the directory nid's clone of %s keeps: move %s away and nid clones again", dir, p.repo, dir))
	} else if _, err := agents.RemoteGit(ctx, dir, "fetch", "--quiet", "origin"); err != nil {
		return "", classify(agents.AgentFailed("fetching %s: %v", p.repo, err))
	}
	branch := WorkspaceBranch(ref)
	if _, err := agents.RepoGit(ctx, dir, "rev-parse", "--verify", "--quiet", "refs/heads/"+branch); err != nil {
		if _, err := agents.RepoGit(ctx, dir, "rev-parse", "--verify", "--quiet", "refs/remotes/origin/"+branch); err == nil {
			if _, err := agents.RepoGit(ctx, dir, "branch", "--quiet", "--", branch, "origin/"+branch); err != nil {
				return "", classify(agents.AgentFailed("%v", err))
			}
		}
	}
	return dir, nil
}

// PushBranchName is the activity that pushes a session's branch to its
// repository's origin.
const PushBranchName = "nid.PushBranch"

// PushBranchInput names the session whose branch is pushed; the "repo" of
// histories from before is not read.
type PushBranchInput struct {
	Session agents.SessionRef `json:"session"`
}

// PushBranch pushes the session's branch, nid/<group>/<session>, to the
// origin of this host's repository (its clone, for a URL), so the work of a
// task done is on the remote whatever becomes of this host. It says which
// remote ("" when there is none).
func (a *Activities) PushBranch(ctx context.Context, in PushBranchInput) (string, error) {
	if err := agents.CheckSession(&in.Session); err != nil {
		return "", classify(err)
	}
	p, err := a.placeOf(in.Session)
	if err != nil {
		return "", classify(err)
	}
	if p.repo == "" {
		return "", classify(agents.BadInput("session %s/%s has no repository on this host to push", in.Session.Group, in.Session.Name))
	}
	repo, err := a.repoDir(ctx, in.Session, p)
	if err != nil {
		return "", err
	}
	pushed, err := pushOrigin(ctx, repo, WorkspaceBranch(in.Session))
	if err != nil {
		return "", classify(agents.AgentFailed("pushing %s: %v", WorkspaceBranch(in.Session), err))
	}
	return pushed, nil
}

// originURL is remote.origin.url of repo's configuration ("" when it has
// none), checked as a repo is. Only the configuration names it: git would
// also take a remotes/origin or branches/origin file of the git directory,
// which an agent's sandbox may let it write.
func originURL(ctx context.Context, repo string) (string, error) {
	url, err := agents.RepoGit(ctx, repo, "config", "--get", "remote.origin.url")
	if err != nil {
		return "", nil
	}
	if err := agents.CheckRepoURL(url); err != nil {
		return "", fmt.Errorf("origin of %s: %w", repo, err)
	}
	return url, nil
}

// pushOrigin pushes branch and the refs named to origin's URL, if repo has
// one, each as a ref of its own name there.
func pushOrigin(ctx context.Context, repo, branch string, refs ...string) (string, error) {
	url, err := originURL(ctx, repo)
	if err != nil || url == "" {
		return "", err
	}
	common, err := agents.RepoGit(ctx, repo, "rev-parse", "--path-format=absolute", "--git-common-dir")
	if err != nil {
		return "", err
	}
	for _, r := range append([]string{"refs/heads/" + branch}, refs...) {
		if err := agents.CheckRefPath(common, r); err != nil {
			return "", err
		}
	}
	args := []string{"push", "--quiet", "--", url, "refs/heads/" + branch + ":refs/heads/" + branch}
	for _, r := range refs {
		args = append(args, r+":"+r)
	}
	if _, err := agents.RemoteGit(ctx, repo, args...); err != nil {
		return "", err
	}
	return "origin", nil
}
