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
}

// WorkspaceResult is the session's own worktree and branch.
type WorkspaceResult struct {
	Worktree string `json:"worktree"`
	Branch   string `json:"branch"`
}

// WorkspaceBranch is the branch a session works on: nid/<group>/<session>.
func WorkspaceBranch(ref SessionRef) string { return "nid/" + ref.Group + "/" + ref.Name }

// PrepareWorkspace creates the session's git worktree on its own branch
// under the state directory, once: run again (a retry, a restart) it finds
// them and changes nothing. An existing branch is checked out as it is, so
// a session's work is never reset.
func (a *Activities) PrepareWorkspace(ctx context.Context, in WorkspaceInput) (WorkspaceResult, error) {
	if in.Repo == "" || in.Session.Group == "" || in.Session.Name == "" {
		return WorkspaceResult{}, classify(BadInput("a workspace needs a repo and a session"))
	}
	repo, err := filepath.Abs(in.Repo)
	if err != nil {
		return WorkspaceResult{}, classify(BadInput("repo %q: %v", in.Repo, err))
	}
	state, err := filepath.Abs(a.StateDir)
	if err != nil {
		return WorkspaceResult{}, classify(BadInput("state directory %q: %v", a.StateDir, err))
	}
	res := WorkspaceResult{
		Worktree: filepath.Join(state, statedir.Worktrees, in.Session.Group, in.Session.Name),
		Branch:   WorkspaceBranch(in.Session),
	}
	// Ask the repository, never git inside the worktree: the agent may
	// have rewritten what the worktree says of itself (see gitDirs).
	if branch, ok, err := worktreeBranch(ctx, repo, res.Worktree); err != nil {
		return res, classify(AgentFailed("%s: %v", repo, err))
	} else if ok {
		if branch != res.Branch {
			return res, classify(AgentFailed("%s is a worktree on branch %s, not %s: move it away and nid makes a new one", res.Worktree, branch, res.Branch))
		}
		return res, a.recordGitDirs(ctx, in.Session, repo, res.Worktree)
	}
	if _, err := os.Stat(res.Worktree); err == nil {
		return res, classify(AgentFailed("%s exists but is not a git worktree: move it away and nid makes a new one", res.Worktree))
	}
	if err := os.MkdirAll(filepath.Dir(res.Worktree), statedir.DirMode); err != nil {
		return res, classify(err)
	}
	// A worktree removed by hand stays registered until pruned.
	if _, err := git(ctx, repo, "worktree", "prune"); err != nil {
		return res, classify(AgentFailed("%s: %v", repo, err))
	}
	args := []string{"worktree", "add", "-b", res.Branch, res.Worktree}
	if _, err := git(ctx, repo, "rev-parse", "--verify", "--quiet", "refs/heads/"+res.Branch); err == nil {
		args = []string{"worktree", "add", res.Worktree, res.Branch}
	}
	if _, err := git(ctx, repo, args...); err != nil {
		return res, classify(AgentFailed("creating the worktree of %s/%s: %v", in.Session.Group, in.Session.Name, err))
	}
	return res, a.recordGitDirs(ctx, in.Session, repo, res.Worktree)
}

// worktreeBranch asks repo whether worktree is one of its worktrees, and on
// which branch.
func worktreeBranch(ctx context.Context, repo, worktree string) (branch string, ok bool, err error) {
	out, err := git(ctx, repo, "worktree", "list", "--porcelain")
	if err != nil {
		return "", false, err
	}
	for _, entry := range strings.Split(out, "\n\n") {
		lines := strings.Split(entry, "\n")
		if path, found := strings.CutPrefix(lines[0], "worktree "); !found || filepath.Clean(path) != worktree {
			continue
		}
		for _, l := range lines[1:] {
			if ref, found := strings.CutPrefix(l, "branch "); found {
				return strings.TrimPrefix(ref, "refs/heads/"), true, nil
			}
		}
		return "(detached)", true, nil
	}
	return "", false, nil
}

// recordGitDirs writes, where the agent cannot, where the session's
// worktree keeps its git directories, as the repository says: gitDirs reads
// this rather than anything in the worktree.
func (a *Activities) recordGitDirs(ctx context.Context, ref SessionRef, repo, worktree string) error {
	common, err := git(ctx, repo, "rev-parse", "--path-format=absolute", "--git-common-dir")
	if err != nil {
		return classify(AgentFailed("%s: %v", repo, err))
	}
	rec, ok := readWorktreeGitDirs(worktree)
	if !ok || rec.Common != filepath.Clean(common) {
		return classify(AgentFailed("%s does not point back into %s's git directory as a worktree of it should: move it away and nid makes a new one", worktree, repo))
	}
	state, err := filepath.Abs(a.StateDir)
	if err != nil {
		return classify(err)
	}
	return classify(writeGitDirs(gitDirsFile(state, ref), rec))
}

func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
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
