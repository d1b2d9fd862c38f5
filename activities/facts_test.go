package activities_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/activities"
	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/internal/agenttest"
)

// time0 is long ago: a file given it must be read again for git to know
// it unchanged.
var time0 = time.Unix(1e9, 0)

// worked is a session's worktree as an agent leaves it: two commits on its
// branch, while main moved on, a file changed and one added, uncommitted.
type worked struct {
	acts       *activities.Activities
	repo, tree string
	start      string // main's commit the branch left, short
	commits    []string
}

func newWorked(t *testing.T) worked {
	t.Helper()
	repo := newRepo(t)
	w := worked{repo: repo, acts: &activities.Activities{StateDir: t.TempDir(), Places: placed(repo)}}
	w.start = agenttest.GitRun(t, w.repo, "rev-parse", "--short", "HEAD")
	ws, err := w.acts.PrepareWorkspace(t.Context(), activities.WorkspaceInput{Session: webLead})
	require.NoError(t, err)
	w.tree = ws.Worktree
	writeFile(t, w.repo, "CHANGES.md", "main moved on\n")
	commit(t, w.repo, "Main moves on")

	writeFile(t, w.tree, "parser.go", "package parser\n")
	writeFile(t, w.tree, ".gitattributes", "*.go filter=evil diff=evil\n*.md filter=evilp diff=evil\n")
	w.commits = append(w.commits, commit(t, w.tree, "Add the parser"))
	writeFile(t, w.tree, "lexer.go", "package lexer\n")
	w.commits = append([]string{commit(t, w.tree, "Start the lexer")}, w.commits...)
	writeFile(t, w.tree, "parser.go", "package parser\n\nfunc Parse() {}\n")
	writeFile(t, w.tree, "notes.md", "next: tests\n")
	return w
}

func (w worked) facts(t *testing.T) activities.Facts {
	t.Helper()
	f, err := w.acts.GatherFacts(t.Context(), activities.FactsInput{Session: webLead})
	require.NoError(t, err)
	return f
}

// A worktree's facts: its branch and HEAD, the commits since it left main
// (main's own commit after that is not one of them), what is uncommitted,
// and the diffstat, the way the fresh conversation reads them.
func TestGatherFactsOfAWorktree(t *testing.T) {
	w := newWorked(t)
	f := w.facts(t)
	want := activities.Facts{
		Repo:     true,
		Branch:   "nid/web/lead",
		Head:     w.commits[0],
		Base:     w.start,
		Commits:  w.commits,
		Status:   []string{" M parser.go", "?? notes.md"},
		Diffstat: " parser.go | 2 ++\n 1 file changed, 2 insertions(+)",
	}
	require.Equal(t, want, f)
	require.Equal(t, fmt.Sprintf(`Branch: nid/web/lead, at %s
Commits since it left %s (2):
  %s
  %s
Uncommitted changes (2):
   M parser.go
  ?? notes.md
Diffstat:
   parser.go | 2 ++
   1 file changed, 2 insertions(+)
`, w.commits[0], w.start, w.commits[0], w.commits[1]), f.Text())

	t.Run("a record from before nid kept the base", func(t *testing.T) {
		// The branch left where it and main last met.
		path := filepath.Join(w.acts.StateDir, "gitdirs", "web", "lead.json")
		var rec map[string]any
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(b, &rec))
		require.Contains(t, rec, "base")
		delete(rec, "base")
		b, err = json.Marshal(rec)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(path, b, 0o600))
		require.Equal(t, want, w.facts(t))
	})

	t.Run("clean", func(t *testing.T) {
		agenttest.GitRun(t, w.tree, "stash", "-q", "-u")
		f := w.facts(t)
		require.Empty(t, f.Status)
		require.Empty(t, f.Diffstat)
		require.Contains(t, f.Text(), "\nUncommitted changes: none: the work tree is clean\n")
		require.NotContains(t, f.Text(), "Diffstat")
	})
}

// plant writes into config what an agent could: every way git status,
// diff or log could be made to run a command, each leaving a mark in marks
// when it runs, and a setting that would hide untracked files.
func plant(t *testing.T, config, marks string) {
	t.Helper()
	hooks := filepath.Join(marks, "..", "hooks")
	require.NoError(t, os.MkdirAll(hooks, 0o755))
	for _, hook := range []string{"post-index-change", "post-checkout", "pre-commit"} {
		require.NoError(t, os.WriteFile(filepath.Join(hooks, hook), []byte("#!/bin/sh\ntouch "+filepath.Join(marks, hook)+"\n"), 0o755))
	}
	mark := func(name string) string { return "touch " + filepath.Join(marks, name) }
	for _, kv := range [][2]string{
		{"core.fsmonitor", mark("fsmonitor") + "; true"},
		{"core.hooksPath", hooks},
		{"core.pager", mark("pager") + "; cat"},
		{"pager.status", mark("pager-status") + "; cat"},
		{"diff.external", mark("external") + "; true"},
		{"diff.evil.command", mark("diff-command") + "; true"},
		{"diff.evil.textconv", mark("textconv") + "; cat"},
		{"filter.evil.clean", mark("clean") + "; cat"},
		{"filter.evil.smudge", mark("smudge") + "; cat"},
		{"filter.evilp.process", mark("process") + "; false"},
		{"filter.evilp.required", "true"},
		{"status.showUntrackedFiles", "no"},
		{"core.bare", "false"},
	} {
		agenttest.GitRun(t, filepath.Dir(config), "config", "--file", config, kv[0], kv[1])
	}
}

// marked lists the marks left in marks.
func marked(t *testing.T, marks string) []string {
	t.Helper()
	entries, err := os.ReadDir(marks)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// plainGit is git as the user (or an unwary tool) runs it in the worktree:
// what the agent planted runs. It proves each plant would work.
func plainGit(t *testing.T, dir string) {
	t.Helper()
	for _, args := range [][]string{{"status", "--porcelain"}, {"diff", "HEAD"}} {
		_ = exec.Command("git", append([]string{"-C", dir}, args...)...).Run()
	}
}

// A worktree's .git file, its git directory's commondir and config.worktree,
// a .git directory in place of the file, and the repository's own config
// are the agent's to write; whatever it plants there (fsmonitor, diff
// drivers, textconv, filters, hooks, a pager) runs nothing when nid reads
// the facts, and does not change them. Links pointed elsewhere are refused,
// saying so, rather than followed. Plain git, run the same way the user
// would, does run them: the plants are real.
func TestGatherFactsRunsNothingTheAgentPlanted(t *testing.T) {
	for _, tc := range []struct {
		name string
		// refused: the worktree no longer says of itself what nid
		// recorded, and nid reads nothing of it but says so.
		refused bool
		// plant changes the worktree the way an agent could and returns
		// the config file git would then read.
		plant func(t *testing.T, w worked) string
	}{
		{"the .git file points at a git directory of the agent's", true, func(t *testing.T, w worked) string {
			evil := filepath.Join(t.TempDir(), "evil.git")
			agenttest.GitRun(t, w.repo, "clone", "-q", "--bare", w.repo, evil)
			require.NoError(t, os.WriteFile(filepath.Join(w.tree, ".git"), []byte("gitdir: "+evil+"\n"), 0o644))
			return filepath.Join(evil, "config")
		}},
		{"a .git directory replaces the file", true, func(t *testing.T, w worked) string {
			require.NoError(t, os.Remove(filepath.Join(w.tree, ".git")))
			agenttest.GitRun(t, w.repo, "clone", "-q", "--bare", w.repo, filepath.Join(w.tree, ".git"))
			return filepath.Join(w.tree, ".git", "config")
		}},
		{"commondir points at a common directory of the agent's", true, func(t *testing.T, w worked) string {
			evil := filepath.Join(t.TempDir(), "common")
			agenttest.GitRun(t, w.repo, "clone", "-q", "--bare", w.repo, evil)
			gitDir := filepath.Join(w.repo, ".git", "worktrees", "lead")
			require.NoError(t, os.WriteFile(filepath.Join(gitDir, "commondir"), []byte(evil+"\n"), 0o644))
			return filepath.Join(evil, "config")
		}},
		{"config.worktree in the worktree's git directory", false, func(t *testing.T, w worked) string {
			// The user turned on per-worktree config; the agent writes
			// its worktree's.
			agenttest.GitRun(t, w.repo, "config", "extensions.worktreeConfig", "true")
			return filepath.Join(w.repo, ".git", "worktrees", "lead", "config.worktree")
		}},
		{"the repository's own config, open to an agent with full permissions", false, func(t *testing.T, w worked) string {
			return filepath.Join(w.repo, ".git", "config")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorked(t)
			before := w.facts(t)
			marks := filepath.Join(t.TempDir(), "marks")
			require.NoError(t, os.MkdirAll(marks, 0o755))
			plant(t, tc.plant(t, w), marks)
			// A file git must read again to know it is unchanged, which
			// is when a clean filter runs.
			require.NoError(t, os.Chtimes(filepath.Join(w.tree, "lexer.go"), time0, time0))

			if tc.refused {
				_, err := w.acts.GatherFacts(t.Context(), activities.FactsInput{Session: webLead})
				agenttest.RequireFinal(t, err, activities.ErrAgentFailed, "nid refused")
			} else {
				require.Equal(t, before, w.facts(t))
			}
			require.Empty(t, marked(t, marks), "nothing the agent planted ran")

			plainGit(t, w.tree)
			require.Contains(t, marked(t, marks), "fsmonitor", "plain git runs the plant")
		})
	}
}

// A group's shared directory that is a plain repository is read the same
// careful way: its .git is the agent's, config, hooks and attributes. Of
// its config only what changes how the work tree reads is taken: the
// object format (SHA-256 here) and that file modes do not count.
func TestGatherFactsOfAPlainRepository(t *testing.T) {
	dir := t.TempDir()
	agenttest.GitRun(t, dir, "init", "-q", "-b", "main", "--object-format=sha256")
	agenttest.GitRun(t, dir, "config", "user.name", "nid test")
	agenttest.GitRun(t, dir, "config", "user.email", "nid@example.com")
	agenttest.GitRun(t, dir, "config", "core.filemode", "false")
	writeFile(t, dir, "README.md", "the project\n")
	writeFile(t, dir, "run.sh", "echo run\n")
	commit(t, dir, "Start")
	head := commit(t, dir, "Second")
	require.NoError(t, os.Chmod(filepath.Join(dir, "run.sh"), 0o755))
	writeFile(t, dir, "README.md", "the project, changed\n")
	writeFile(t, dir, "todo.md", "more\n")
	marks := filepath.Join(t.TempDir(), "marks")
	require.NoError(t, os.MkdirAll(marks, 0o755))
	plant(t, filepath.Join(dir, ".git", "config"), marks)
	writeFile(t, dir, filepath.Join(".git", "info", "attributes"), "* filter=evil diff=evil\n")

	acts := &activities.Activities{StateDir: t.TempDir(), Places: sharedDir(dir)}
	f, err := acts.GatherFacts(t.Context(), activities.FactsInput{Session: webLead})
	require.NoError(t, err)
	require.Equal(t, activities.Facts{
		Repo:     true,
		Branch:   "main",
		Head:     head,
		Status:   []string{" M README.md", "?? todo.md"},
		Diffstat: " README.md | 2 +-\n 1 file changed, 1 insertion(+), 1 deletion(-)",
	}, f)
	require.Empty(t, marked(t, marks))
	require.NotContains(t, f.Text(), "Commits since", "a shared directory has no branch of the session's to count from")

	plainGit(t, dir)
	require.Subset(t, marked(t, marks), []string{"fsmonitor", "clean"}, "plain git runs the plant")
}

// A directory that is no git work tree has no facts, and says so.
func TestGatherFactsWithoutARepository(t *testing.T) {
	acts := &activities.Activities{StateDir: t.TempDir(), Places: sharedDir(t.TempDir())}
	f, err := acts.GatherFacts(t.Context(), activities.FactsInput{Session: webLead})
	require.NoError(t, err)
	require.Equal(t, activities.Facts{}, f)
	require.Equal(t, "Git: the session's directory is not a git work tree, so nid has no branch, commits or changes to show.\n", f.Text())

	_, err = acts.GatherFacts(t.Context(), activities.FactsInput{Session: agents.SessionRef{Group: "..", Name: "lead"}})
	agenttest.RequireFinal(t, err, activities.ErrBadInput, `group ".." is not a name`)
}

// Many commits, many changes, long names, a megabyte subject and one with
// terminal escapes: every part is bounded, says how much more there was,
// carries no control characters, and the text the fresh conversation gets
// stays within its bound.
func TestGatherFactsAreBounded(t *testing.T) {
	w := newWorked(t)
	long := strings.Repeat("very-long-directory-name/", 6)
	for i := range 60 {
		writeFile(t, w.tree, fmt.Sprintf("%sfile-%02d.txt", long, i), "one\n")
	}
	commit(t, w.tree, "Add sixty files")
	for i := range 37 {
		commit(t, w.tree, fmt.Sprintf("Step %d", i))
	}
	commit(t, w.tree, "Colour \x1b[31mred\x1b[0m and a bell\a")
	msg := filepath.Join(t.TempDir(), "msg")
	require.NoError(t, os.WriteFile(msg, []byte(strings.Repeat("subject ", 128<<10)), 0o644))
	agenttest.GitRun(t, w.tree, "commit", "-q", "--allow-empty", "-F", msg)
	for i := range 60 {
		writeFile(t, w.tree, fmt.Sprintf("%sfile-%02d.txt", long, i), "one\ntwo\n")
	}

	f := w.facts(t)
	require.Len(t, f.Commits, activities.MaxFactsCommits)
	require.Equal(t, 2+1+37+2-activities.MaxFactsCommits, f.CommitsMore)
	require.LessOrEqual(t, len(f.Commits[0]), 210, "a subject is clipped")
	require.Regexp(t, `^[0-9a-f]+ subject subject .*…$`, f.Commits[0])
	require.Equal(t, "Colour \uFFFD[31mred\uFFFD[0m and a bell\uFFFD", strings.SplitN(f.Commits[1], " ", 2)[1], "no terminal escapes")
	require.Equal(t, "Step 36", strings.SplitN(f.Commits[2], " ", 2)[1])

	require.Len(t, f.Status, activities.MaxFactsStatus)
	require.Equal(t, 60-activities.MaxFactsStatus, f.StatusMore)

	require.LessOrEqual(t, len(f.Diffstat), activities.MaxDiffstatBytes)
	require.Regexp(t, `\[nid: \d+ more lines of the diffstat left out\]\n 60 files changed, 60 insertions\(\+\)$`, f.Diffstat)

	text := f.Text()
	require.LessOrEqual(t, len(text), activities.MaxFactsTextBytes)
	require.Contains(t, text, "Commits since it left "+w.start+" (42):")
	require.Contains(t, text, "Uncommitted changes (60):")
	require.Regexp(t, `\n  … and \d+ more\nDiffstat:\n`, text)
	require.Contains(t, text, "60 files changed, 60 insertions(+)")
}

// An index the agent replaced with a fifo is refused, not waited on
// forever, and a HEAD replaced with a symlink is not followed; a cancelled
// activity stops.
func TestGatherFactsDoesNotWait(t *testing.T) {
	w := newWorked(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := w.acts.GatherFacts(ctx, activities.FactsInput{Session: webLead})
	require.ErrorIs(t, err, context.Canceled)

	index := filepath.Join(w.repo, ".git", "worktrees", "lead", "index")
	require.NoError(t, os.Remove(index))
	require.NoError(t, syscall.Mkfifo(index, 0o600))
	_, err = w.acts.GatherFacts(t.Context(), activities.FactsInput{Session: webLead})
	agenttest.RequireFinal(t, err, activities.ErrAgentFailed, "index is not a regular file")

	w = newWorked(t)
	head := filepath.Join(w.repo, ".git", "worktrees", "lead", "HEAD")
	elsewhere := filepath.Join(t.TempDir(), "HEAD")
	require.NoError(t, os.Rename(head, elsewhere))
	require.NoError(t, os.Symlink(elsewhere, head))
	_, err = w.acts.GatherFacts(t.Context(), activities.FactsInput{Session: webLead})
	agenttest.RequireFinal(t, err, activities.ErrAgentFailed, "HEAD")
}
