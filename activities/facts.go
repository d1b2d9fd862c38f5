package activities

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/internal/clip"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// FactsName is GatherFacts' activity type name.
const FactsName = "nid.GatherFacts"

// Bounds of the facts, so that they fit a fresh conversation's first
// message and workflow history whatever the worktree holds.
const (
	// MaxFactsCommits is how many commits Facts lists.
	MaxFactsCommits = 30
	// MaxFactsStatus is how many lines of git status Facts lists.
	MaxFactsStatus = 50
	// MaxDiffstatBytes bounds Facts.Diffstat, marker included.
	MaxDiffstatBytes = 2 << 10
	// MaxFactsTextBytes bounds Facts.Text.
	MaxFactsTextBytes = 8 << 10
	// FactsTimeout bounds the whole of GatherFacts' git commands.
	FactsTimeout = 30 * time.Second
)

// FactsInput names the session whose work GatherFacts reads: its
// worktree, or its group's directory, as this worker's nid.yaml or nid's
// record says. The "workdir" of histories from before is not read.
type FactsInput struct {
	Session agents.SessionRef `json:"session"`
}

// Facts is what nid itself reads of a session's work in git, for a fresh
// conversation's first message and a rotation's receipt. Every text in it
// is bounded and free of control characters.
type Facts struct {
	// Repo is false when the session's directory is not a git work tree;
	// the rest is then empty.
	Repo   bool   `json:"repo"`
	Branch string `json:"branch,omitempty"`
	// Head is HEAD's short hash and subject; empty before the first commit.
	Head string `json:"head,omitempty"`
	// Base is the short hash of the commit the branch left from, when
	// known.
	Base string `json:"base,omitempty"`
	// Commits are base..HEAD as one line each, newest first, at most
	// MaxFactsCommits; CommitsMore is how many more there were.
	Commits     []string `json:"commits,omitempty"`
	CommitsMore int      `json:"commitsMore,omitempty"`
	// Status is git status --short, at most MaxFactsStatus lines;
	// StatusMore is how many more there were.
	Status     []string `json:"status,omitempty"`
	StatusMore int      `json:"statusMore,omitempty"`
	// Diffstat is git diff --stat HEAD, at most MaxDiffstatBytes with a
	// marker where it was cut.
	Diffstat string `json:"diffstat,omitempty"`
}

// GatherFacts reads the branch, HEAD, the commits since the branch left its
// base, and the uncommitted changes of a session's worktree, or of the
// plain repository its group works in. A directory that is neither is
// Facts{Repo: false}, not an error.
//
// The worktree is the agent's to write, so git runs there as WorktreeGit
// says: never under a configuration, hook or attribute the agent could
// have planted, and never longer than FactsTimeout.
func (a *Activities) GatherFacts(ctx context.Context, in FactsInput) (Facts, error) {
	if err := agents.CheckSession(&in.Session); err != nil {
		return Facts{}, classify(err)
	}
	p, err := a.placeOf(in.Session)
	if err != nil {
		return Facts{}, classify(err)
	}
	dir, err := filepath.Abs(agents.WorkDir(agents.Process{WorkDir: a.placeWorkDir(p)}))
	if err != nil {
		return Facts{}, classify(agents.BadInput("workdir of %s/%s: %v", in.Session.Group, in.Session.Name, err))
	}
	state, err := a.stateDir()
	if err != nil {
		return Facts{}, classify(err)
	}
	record := ""
	if state != "" {
		record = agents.GitDirsFile(state, in.Session)
	}
	rec, ok := agents.SessionGitDirs(dir, record)
	if !ok {
		return Facts{}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, FactsTimeout)
	defer cancel()
	f, err := readFacts(ctx, state, rec)
	switch {
	case err == nil:
		return f, nil
	case errors.Is(err, context.Canceled):
		return Facts{}, err
	default:
		// What a retry would find is what this attempt found: a
		// repository git cannot read, or one too slow to read, or one
		// whose links an agent rewrote.
		return Facts{}, classify(agents.AgentFailed("reading the git facts of %s: %v", rec.Worktree, err))
	}
}

// readFacts runs git as WorktreeGit says to read the facts of rec.
func readFacts(ctx context.Context, state string, rec agents.GitDirsRecord) (Facts, error) {
	g, err := agents.OpenWorktreeGit(ctx, state, rec, agents.IndexCopy)
	if err != nil {
		return Facts{}, err
	}
	defer g.Close()
	return worktreeFacts(ctx, g, rec)
}

// facts runs the commands that make Facts.
func worktreeFacts(ctx context.Context, g *agents.WorktreeGit, rec agents.GitDirsRecord) (Facts, error) {
	f := Facts{Repo: true}
	branch, err := g.Lines(ctx, 1, "symbolic-ref", "--quiet", "--short", "HEAD")
	switch {
	case err == nil && len(branch.Kept) == 1:
		f.Branch = branch.Kept[0]
	case agents.IsExit(err, 1):
		f.Branch = "(detached HEAD)"
	default:
		return f, err
	}
	// Before the first commit there is no HEAD to read, count from or
	// diff against; what is uncommitted is still worth saying.
	born := g.Run(ctx, io.Discard, "rev-parse", "--quiet", "--verify", "HEAD^{commit}") == nil
	if born {
		head, err := g.Lines(ctx, 1, "log", "-1", "--format=%h %s", "HEAD")
		if err != nil {
			return f, err
		}
		f.Head = strings.Join(head.Kept, "")
		if err := worktreeCommits(ctx, g, &f, rec); err != nil {
			return f, err
		}
	}
	status, err := g.Lines(ctx, MaxFactsStatus, "status", "--porcelain", "--untracked-files=normal", "--ignore-submodules=all")
	if err != nil {
		return f, err
	}
	f.Status, f.StatusMore = status.Kept, status.More
	if born {
		// --stat-count and the width keep git's own output small: one
		// line per file, long names shortened by git, then the summary.
		stat, err := g.Lines(ctx, 40, "diff", "--no-ext-diff", "--no-textconv", "--ignore-submodules=all",
			"--stat=100", "--stat-count=30", "HEAD", "--")
		if err != nil {
			return f, err
		}
		f.Diffstat = boundDiffstat(stat.Kept)
	}
	return f, nil
}

// commits fills in the base and the commits since.
func worktreeCommits(ctx context.Context, g *agents.WorktreeGit, f *Facts, rec agents.GitDirsRecord) error {
	base := rec.Base
	if base == "" && rec.GitDir != rec.Common {
		// A record from before nid kept the base: the branch left where
		// it and the repository's own HEAD last met.
		main, err := mainHead(rec)
		if err != nil {
			return nil
		}
		out, err := g.Lines(ctx, 1, "merge-base", "HEAD", main)
		if err != nil || len(out.Kept) != 1 {
			return nil
		}
		base = out.Kept[0]
	}
	if !agents.HashRE.MatchString(base) {
		return nil
	}
	short, err := g.Lines(ctx, 1, "rev-parse", "--quiet", "--verify", "--short", base+"^{commit}")
	if err != nil {
		// The base is gone (a rewritten repository): no commits to count
		// from, the rest stands.
		return nil
	}
	f.Base = strings.Join(short.Kept, "")
	count, err := g.Lines(ctx, 1, "rev-list", "--count", base+"..HEAD")
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(strings.Join(count.Kept, ""))
	if err != nil {
		return fmt.Errorf("git rev-list --count said %q", count.Kept)
	}
	log, err := g.Lines(ctx, MaxFactsCommits, "log", "-n", strconv.Itoa(MaxFactsCommits), "--format=%h %s", base+"..HEAD")
	if err != nil {
		return err
	}
	f.Commits, f.CommitsMore = log.Kept, max(n-len(log.Kept), 0)
	return nil
}

// mainHead is what the repository's own HEAD names: a branch or a commit.
func mainHead(rec agents.GitDirsRecord) (string, error) {
	b, err := agents.ReadSmall(filepath.Join(rec.Common, "HEAD"), 4<<10)
	if err != nil {
		return "", err
	}
	head := strings.TrimSpace(string(b))
	if !agents.HeadRef(head) {
		return "", fmt.Errorf("%s/HEAD names neither a ref nor a commit", rec.Common)
	}
	return strings.TrimPrefix(head, "ref: "), nil
}

// boundDiffstat joins git's --stat lines, cut to MaxDiffstatBytes: file
// lines are dropped from the end, with a marker, and the summary line
// (files changed, insertions, deletions) is kept.
func boundDiffstat(lines []string) string {
	if len(lines) == 0 {
		return ""
	}
	whole := strings.Join(lines, "\n")
	if len(whole) <= MaxDiffstatBytes {
		return whole
	}
	summary := lines[len(lines)-1]
	files := lines[:len(lines)-1]
	marker := func(n int) string { return fmt.Sprintf(" [nid: %d more lines of the diffstat left out]", n) }
	kept := 0
	size := len(summary) + len(marker(len(files))) + 2
	for kept < len(files) && size+len(files[kept])+1 <= MaxDiffstatBytes {
		size += len(files[kept]) + 1
		kept++
	}
	return strings.Join(append(append(files[:kept:kept], marker(len(files)-kept)), summary), "\n")
}

// Text is the facts as a fresh conversation's first message shows them: a
// short block of lines under the headings Branch, Commits since it left
// <base>, Uncommitted changes and Diffstat, saying plainly when there is no
// repository or nothing uncommitted, at most MaxFactsTextBytes. Workflows
// render it, so it formats with Sprintf: the workflow checker takes any
// Fprintf for I/O.
func (f Facts) Text() string {
	if !f.Repo {
		return "Git: the session's directory is not a git work tree, so nid has no branch, commits or changes to show.\n"
	}
	var b strings.Builder
	b.WriteString(fmt.Sprintf("Branch: %s, at %s\n", f.Branch, cmp.Or(f.Head, "no commit yet")))
	if f.Base != "" {
		writeList(&b, "Commits since it left "+f.Base, f.Commits, f.CommitsMore, "none", 2<<10)
	}
	writeList(&b, "Uncommitted changes", f.Status, f.StatusMore, "none: the work tree is clean", 3<<10)
	if f.Diffstat != "" {
		b.WriteString("Diffstat:\n")
		for _, l := range strings.Split(f.Diffstat, "\n") {
			b.WriteString("  " + l + "\n")
		}
	}
	return clip.Bytes(b.String(), MaxFactsTextBytes, "\n[nid: the rest of the facts is left out]\n")
}

// writeList writes a heading with its lines indented under it, as many as
// fit budget bytes, then how many more there were; empty says none.
func writeList(b *strings.Builder, heading string, lines []string, more int, empty string, budget int) {
	if len(lines) == 0 && more == 0 {
		b.WriteString(fmt.Sprintf("%s: %s\n", heading, empty))
		return
	}
	b.WriteString(fmt.Sprintf("%s (%d):\n", heading, len(lines)+more))
	used := 0
	for i, l := range lines {
		if used+len(l)+3 > budget {
			more += len(lines) - i
			break
		}
		used += len(l) + 3
		b.WriteString("  " + l + "\n")
	}
	if more > 0 {
		b.WriteString(fmt.Sprintf("  … and %d more\n", more))
	}
}
