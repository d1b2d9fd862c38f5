package activities

import (
	"context"
	"os"
	"path/filepath"
	"strings"

	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/internal/clip"
	"github.com/nid-dev/nid/statedir"
)

// WorkspaceInput names the session whose worktree is prepared. The
// repository is the one this worker's nid.yaml gives its group; a "repo"
// in the input of histories from before is not read.
type WorkspaceInput struct {
	Session agents.SessionRef `json:"session"`
	// Salvage is a ref holding the uncommitted work the session left on
	// its last host (SaveWork), laid over the fresh worktree as uncommitted
	// changes again. Only the session's own salvage refs are taken.
	Salvage string `json:"salvage,omitempty"`
}

// WorkspaceResult is the session's own worktree and branch.
type WorkspaceResult struct {
	Worktree string `json:"worktree"`
	Branch   string `json:"branch"`
}

// WorkspaceBranch is the branch a session works on: nid/<group>/<session>.
func WorkspaceBranch(ref agents.SessionRef) string { return "nid/" + ref.Group + "/" + ref.Name }

// PrepareWorkspace creates the session's git worktree on its own branch
// under the state directory, once: run again (a retry, a restart) it finds
// them and changes nothing. An existing branch is checked out as it is, so
// a session's work is never reset.
func (a *Activities) PrepareWorkspace(ctx context.Context, in WorkspaceInput) (WorkspaceResult, error) {
	if err := agents.CheckSession(&in.Session); err != nil {
		return WorkspaceResult{}, classify(err)
	}
	p, err := a.placeOf(in.Session)
	switch {
	case err != nil:
		return WorkspaceResult{}, classify(err)
	case !p.listed:
		return WorkspaceResult{}, classify(agents.BadInput("this worker's nid.yaml no longer lists session %s/%s, so nid makes it no worktree", in.Session.Group, in.Session.Name))
	case p.repo == "":
		return WorkspaceResult{}, classify(agents.BadInput("session %s/%s asks for a worktree, but this worker's nid.yaml gives group %s no repo", in.Session.Group, in.Session.Name, in.Session.Group))
	case in.Salvage != "" && !isSalvageOf(in.Session, in.Salvage):
		return WorkspaceResult{}, classify(agents.BadInput("salvage %q is not one of %s/%s's salvage refs (%s)", clip.Runes(in.Salvage, 80), in.Session.Group, in.Session.Name, SalvageRef(in.Session, 1)))
	}
	repo, err := a.repoDir(ctx, in.Session, p)
	if err != nil {
		return WorkspaceResult{}, err
	}
	res, rec, err := a.prepareWorktree(ctx, in.Session, p, repo)
	if err == nil && in.Salvage != "" {
		err = a.applySalvage(ctx, repo, rec, in.Salvage)
	}
	return res, err
}

func (a *Activities) prepareWorktree(ctx context.Context, ref agents.SessionRef, p place, repo string) (WorkspaceResult, agents.GitDirsRecord, error) {
	res := WorkspaceResult{Worktree: p.worktree, Branch: p.branch(ref)}
	// Ask the repository, never git inside the worktree: the agent may
	// have rewritten what the worktree says of itself (see gitDirs).
	if branch, ok, err := worktreeBranch(ctx, repo, res.Worktree); err != nil {
		return res, agents.GitDirsRecord{}, classify(agents.AgentFailed("%s: %v", repo, err))
	} else if ok {
		if branch != res.Branch {
			return res, agents.GitDirsRecord{}, classify(agents.AgentFailed("%s is a worktree on branch %s, not %s: move it away and nid makes a new one", res.Worktree, branch, res.Branch))
		}
		return a.recordGitDirs(ctx, ref, p, repo, a.branchBase(ctx, ref, repo, res))
	}
	if _, err := os.Lstat(res.Worktree); err == nil {
		return res, agents.GitDirsRecord{}, classify(agents.AgentFailed("%s exists but is not a git worktree: move it away and nid makes a new one", res.Worktree))
	}
	if err := os.MkdirAll(filepath.Dir(res.Worktree), statedir.DirMode); err != nil {
		return res, agents.GitDirsRecord{}, classify(err)
	}
	defer a.lockRepo(repo)()
	// A worktree removed by hand stays registered until pruned.
	if _, err := agents.RepoGit(ctx, repo, "worktree", "prune"); err != nil {
		return res, agents.GitDirsRecord{}, classify(agents.AgentFailed("%s: %v", repo, err))
	}
	var args []string
	base := ""
	if _, err := agents.RepoGit(ctx, repo, "rev-parse", "--verify", "--quiet", "refs/heads/"+res.Branch); err == nil {
		args = []string{"worktree", "add", "--", res.Worktree, res.Branch}
		if _, ok := leftOnAnotherHost(ctx, repo, ref, res); ok {
			// The session's work goes on here, from what the branch
			// holds; the old worktree keeps what was not committed
			// there, for whoever brings that host back.
			args = []string{"worktree", "add", "--force", "--", res.Worktree, res.Branch}
		}
		base = a.branchBase(ctx, ref, repo, res)
	} else {
		args = []string{"worktree", "add", "-b", res.Branch, "--", res.Worktree}
		// The branch starts at the commit named here, not at whatever
		// HEAD is by the time git reads it, so that the base recorded is
		// the one it left from.
		if head, err := agents.RepoGit(ctx, repo, "rev-parse", "--verify", "--quiet", "HEAD^{commit}"); err == nil {
			base = head
			args = append(args, head)
		}
	}
	if _, err := agents.RepoGit(ctx, repo, args...); err != nil {
		return res, agents.GitDirsRecord{}, classify(agents.AgentFailed("creating the worktree of %s/%s: %v", ref.Group, ref.Name, err))
	}
	return a.recordGitDirs(ctx, ref, p, repo, base)
}

// branchBase is the commit an existing branch of the session left the
// repository's line from: what the session's record already says, else
// where the branch and the repository's HEAD last met. Empty when neither
// is known (unrelated histories, an unborn HEAD).
func (a *Activities) branchBase(ctx context.Context, ref agents.SessionRef, repo string, ws WorkspaceResult) string {
	if state, err := a.stateDir(); err == nil && state != "" {
		if rec, ok := agents.ReadGitDirs(agents.GitDirsFile(state, ref)); ok && rec.Worktree == ws.Worktree && rec.Base != "" {
			return rec.Base
		}
	}
	base, err := agents.RepoGit(ctx, repo, "merge-base", "HEAD", "refs/heads/"+ws.Branch)
	if err != nil {
		return ""
	}
	return base
}

// worktreeBranch asks repo whether worktree is one of its worktrees, and on
// which branch.
func worktreeBranch(ctx context.Context, repo, worktree string) (branch string, ok bool, err error) {
	trees, err := listWorktrees(ctx, repo)
	for _, t := range trees {
		if t.path == worktree {
			return t.branch, true, nil
		}
	}
	return "", false, err
}

// aWorktree is one of a repository's worktrees and its branch, "(detached)"
// when it has none.
type aWorktree struct{ path, branch string }

func listWorktrees(ctx context.Context, repo string) ([]aWorktree, error) {
	out, err := agents.RepoGit(ctx, repo, "worktree", "list", "--porcelain")
	if err != nil {
		return nil, err
	}
	var trees []aWorktree
	for _, entry := range strings.Split(out, "\n\n") {
		lines := strings.Split(entry, "\n")
		path, found := strings.CutPrefix(lines[0], "worktree ")
		if !found {
			continue
		}
		t := aWorktree{path: filepath.Clean(path), branch: "(detached)"}
		for _, l := range lines[1:] {
			if ref, found := strings.CutPrefix(l, "branch "); found {
				t.branch = strings.TrimPrefix(ref, "refs/heads/")
			}
		}
		trees = append(trees, t)
	}
	return trees, nil
}

// leftOnAnotherHost is the session's own worktree under another host's
// state directory, when that one has its branch checked out: a session
// moved off a host that was down could not take its worktree away, and a
// repository every host reaches by one path still lists it.
func leftOnAnotherHost(ctx context.Context, repo string, ref agents.SessionRef, res WorkspaceResult) (string, bool) {
	trees, err := listWorktrees(ctx, repo)
	if err != nil {
		return "", false
	}
	own := string(filepath.Separator) + filepath.Join(statedir.Worktrees, ref.Group, ref.Name)
	for _, t := range trees {
		if t.branch == res.Branch && t.path != res.Worktree && strings.HasSuffix(t.path, own) {
			return t.path, true
		}
	}
	return "", false
}

// recordGitDirs writes, where the agent cannot, where the session's
// worktree keeps its git directories, as the repository says, the commit
// its branch left from, and the repository it was made from: gitDirs,
// GatherFacts and SaveWork read this rather than anything in the worktree.
func (a *Activities) recordGitDirs(ctx context.Context, ref agents.SessionRef, p place, repo, base string) (WorkspaceResult, agents.GitDirsRecord, error) {
	res := WorkspaceResult{Worktree: p.worktree, Branch: p.branch(ref)}
	common, err := agents.RepoGit(ctx, repo, "rev-parse", "--path-format=absolute", "--git-common-dir")
	if err != nil {
		return res, agents.GitDirsRecord{}, classify(agents.AgentFailed("%s: %v", repo, err))
	}
	rec, ok := agents.ReadWorktreeGitDirs(p.worktree)
	if !ok || rec.Common != filepath.Clean(common) {
		return res, agents.GitDirsRecord{}, classify(agents.AgentFailed("%s does not point back into %s's git directory as a worktree of it should: move it away and nid makes a new one", p.worktree, repo))
	}
	rec.Base, rec.Repo, rec.RepoDir = base, p.repo, p.repoDir
	if alt, err := agents.ReadSmall(filepath.Join(rec.Common, "objects", "info", "alternates"), 64<<10); err == nil {
		rec.Alternates = string(alt)
	}
	state, err := a.stateDir()
	if err != nil {
		return res, rec, classify(err)
	}
	return res, rec, classify(agents.WriteGitDirs(agents.GitDirsFile(state, ref), rec))
}
