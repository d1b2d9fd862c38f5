package activities

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/nid-dev/nid/statedir"
)

// WorkspaceInput names the session and its group's repository.
type WorkspaceInput struct {
	Session SessionRef `json:"session"`
	Repo    string     `json:"repo"`
	// Salvage is a ref holding the uncommitted work the session left on
	// its last host (SaveWork), laid over the fresh worktree as uncommitted
	// changes again.
	Salvage string `json:"salvage,omitempty"`
}

// WorkspaceResult is the session's own worktree and branch.
type WorkspaceResult struct {
	Worktree string `json:"worktree"`
	Branch   string `json:"branch"`
}

// WorkspaceBranch is the branch a session works on: nid/<group>/<session>.
func WorkspaceBranch(ref SessionRef) string { return "nid/" + ref.Group + "/" + ref.Name }

// worktreeDir is where the session's worktree is, under the absolute state
// directory state.
func worktreeDir(state string, ref SessionRef) string {
	return filepath.Join(state, statedir.Worktrees, ref.Group, ref.Name)
}

// PrepareWorkspace creates the session's git worktree on its own branch
// under the state directory, once: run again (a retry, a restart) it finds
// them and changes nothing. An existing branch is checked out as it is, so
// a session's work is never reset.
func (a *Activities) PrepareWorkspace(ctx context.Context, in WorkspaceInput) (WorkspaceResult, error) {
	if a.Places != nil {
		// The worker's own nid.yaml names the repository, not the input.
		if repo, _, ok := a.Places(in.Session); ok {
			if repo == "" {
				return WorkspaceResult{}, classify(BadInput("session %s/%s asks for a worktree of %s, but this worker's nid.yaml gives group %s no repo",
					in.Session.Group, in.Session.Name, in.Repo, in.Session.Group))
			}
			in.Repo = repo
		}
	}
	if in.Repo == "" || in.Session.Group == "" || in.Session.Name == "" {
		return WorkspaceResult{}, classify(BadInput("a workspace needs a repo and a session"))
	}
	repo, err := a.repoDir(ctx, in.Session, in.Repo)
	if err != nil {
		return WorkspaceResult{}, err
	}
	res, err := a.prepareWorktree(ctx, in, repo)
	if err == nil && in.Salvage != "" {
		err = a.applySalvage(ctx, repo, res.Worktree, in.Salvage)
	}
	return res, err
}

func (a *Activities) prepareWorktree(ctx context.Context, in WorkspaceInput, repo string) (WorkspaceResult, error) {
	state, err := filepath.Abs(a.StateDir)
	if err != nil {
		return WorkspaceResult{}, classify(BadInput("state directory %q: %v", a.StateDir, err))
	}
	res := WorkspaceResult{Worktree: worktreeDir(state, in.Session), Branch: WorkspaceBranch(in.Session)}
	// Ask the repository, never git inside the worktree: the agent may
	// have rewritten what the worktree says of itself (see gitDirs).
	if branch, ok, err := worktreeBranch(ctx, repo, res.Worktree); err != nil {
		return res, classify(AgentFailed("%s: %v", repo, err))
	} else if ok {
		if branch != res.Branch {
			return res, classify(AgentFailed("%s is a worktree on branch %s, not %s: move it away and nid makes a new one", res.Worktree, branch, res.Branch))
		}
		return res, a.recordGitDirs(ctx, in.Session, repo, res.Worktree, a.branchBase(ctx, in.Session, repo, res))
	}
	if _, err := os.Stat(res.Worktree); err == nil {
		return res, classify(AgentFailed("%s exists but is not a git worktree: move it away and nid makes a new one", res.Worktree))
	}
	if err := os.MkdirAll(filepath.Dir(res.Worktree), statedir.DirMode); err != nil {
		return res, classify(err)
	}
	defer a.lockRepo(repo)()
	// A worktree removed by hand stays registered until pruned.
	if _, err := git(ctx, repo, "worktree", "prune"); err != nil {
		return res, classify(AgentFailed("%s: %v", repo, err))
	}
	var args []string
	base := ""
	if _, err := git(ctx, repo, "rev-parse", "--verify", "--quiet", "refs/heads/"+res.Branch); err == nil {
		args = []string{"worktree", "add", res.Worktree, res.Branch}
		if _, ok := leftOnAnotherHost(ctx, repo, in.Session, res); ok {
			// The session's work goes on here, from what the branch
			// holds; the old worktree keeps what was not committed
			// there, for whoever brings that host back.
			args = []string{"worktree", "add", "--force", res.Worktree, res.Branch}
		}
		base = a.branchBase(ctx, in.Session, repo, res)
	} else {
		args = []string{"worktree", "add", "-b", res.Branch, res.Worktree}
		// The branch starts at the commit named here, not at whatever
		// HEAD is by the time git reads it, so that the base recorded is
		// the one it left from.
		if head, err := git(ctx, repo, "rev-parse", "--verify", "--quiet", "HEAD^{commit}"); err == nil {
			base = head
			args = append(args, head)
		}
	}
	if _, err := git(ctx, repo, args...); err != nil {
		return res, classify(AgentFailed("creating the worktree of %s/%s: %v", in.Session.Group, in.Session.Name, err))
	}
	return res, a.recordGitDirs(ctx, in.Session, repo, res.Worktree, base)
}

// branchBase is the commit an existing branch of the session left the
// repository's line from: what the session's record already says, else
// where the branch and the repository's HEAD last met. Empty when neither
// is known (unrelated histories, an unborn HEAD).
func (a *Activities) branchBase(ctx context.Context, ref SessionRef, repo string, ws WorkspaceResult) string {
	if state, err := filepath.Abs(a.StateDir); err == nil {
		if rec, ok := readGitDirs(gitDirsFile(state, ref)); ok && rec.Worktree == ws.Worktree && rec.Base != "" {
			return rec.Base
		}
	}
	base, err := git(ctx, repo, "merge-base", "HEAD", "refs/heads/"+ws.Branch)
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
	out, err := git(ctx, repo, "worktree", "list", "--porcelain")
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
func leftOnAnotherHost(ctx context.Context, repo string, ref SessionRef, res WorkspaceResult) (string, bool) {
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
// worktree keeps its git directories, as the repository says, and the
// commit its branch left from: gitDirs and GatherFacts read this rather
// than anything in the worktree.
func (a *Activities) recordGitDirs(ctx context.Context, ref SessionRef, repo, worktree, base string) error {
	common, err := git(ctx, repo, "rev-parse", "--path-format=absolute", "--git-common-dir")
	if err != nil {
		return classify(AgentFailed("%s: %v", repo, err))
	}
	rec, ok := readWorktreeGitDirs(worktree)
	if !ok || rec.Common != filepath.Clean(common) {
		return classify(AgentFailed("%s does not point back into %s's git directory as a worktree of it should: move it away and nid makes a new one", worktree, repo))
	}
	rec.Base = base
	state, err := filepath.Abs(a.StateDir)
	if err != nil {
		return classify(err)
	}
	return classify(writeGitDirs(gitDirsFile(state, ref), rec))
}

func git(ctx context.Context, dir string, args ...string) (string, error) {
	return gitEnv(ctx, dir, nil, args...)
}

// gitEnv is git with extra environment variables.
func gitEnv(ctx context.Context, dir string, env []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(errOut.String())
		if msg == "" {
			msg = err.Error()
		}
		return "", fmt.Errorf("git %s: %s", strings.Join(args, " "), msg)
	}
	return strings.TrimSpace(out.String()), nil
}
