package agents

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"unicode"
	"unicode/utf8"

	"github.com/nid-dev/nid/statedir"
)

// WorktreeGit runs git on a session's worktree, whose files the agent can
// write, so that nothing the agent planted runs or is believed.
//
// The configuration git would read there is the agent's: a plain
// repository's .git/config is in its directory, a worktree's git directory
// (config.worktree, commondir) is the agent's to rewrite unless its sandbox
// keeps it, and a .git file or commondir can point anywhere. Switches on
// the command line (RunGit's) cannot close all of it: there is no switch
// for filters, and a driver may have any name. So git never reads that
// configuration at all. It runs with a git directory of nid's own, under
// the state directory, which holds a configuration nid writes (a few
// harmless core keys copied, checked, from the repository's), a copy of the
// worktree's HEAD, an index of nid's choosing (a copy of the worktree's to
// read, a new one to salvage, the worktree's own to lay a salvage over
// it), and links to the repository's refs; objects are the repository's,
// the work tree is the one recorded.
type WorktreeGit struct {
	// dir is nid's own git directory, removed by close.
	dir string
	// Env points git at dir, the work tree, the objects and the index.
	Env []string
	// Work is where git runs: the work tree.
	Work string
	// Common is the repository's git directory, as nid recorded it.
	Common string
}

// copiedConfig are the repository's settings that change what git reports
// of the work tree (file modes, symlinks, case, line endings) and run
// nothing; the object format is needed to read the objects at all.
var copiedConfig = regexp.MustCompile(`^(core\.(filemode|symlinks|ignorecase|precomposeunicode|autocrlf|eol|checkstat|trustctime)|extensions\.objectformat)$`)

// configValueRE is a value copiedConfig may carry: a word, never config
// syntax.
var configValueRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)

// Which index a WorktreeGit gives git.
type GitIndex int

const (
	// IndexCopy is a copy of the worktree's, so that whatever git writes
	// of it lands in nid's directory: to read.
	IndexCopy GitIndex = iota
	// IndexNew is an empty one of nid's own: to commit the worktree as it
	// is without touching what the agent staged.
	IndexNew
	// IndexOwn is the worktree's own: to lay a salvage over a worktree
	// nid has just made.
	IndexOwn
)

// OpenWorktreeGit checks that the worktree rec records still says of
// itself what nid recorded (checkWorktreeLinks), then makes nid's own git
// directory for it under stateDir (where the agent cannot write), or the
// system's temporary directory when there is none.
func OpenWorktreeGit(ctx context.Context, stateDir string, rec GitDirsRecord, index GitIndex) (*WorktreeGit, error) {
	if err := checkWorktreeLinks(rec); err != nil {
		return nil, err
	}
	parent := ""
	if stateDir != "" {
		parent = filepath.Join(stateDir, "tmp")
		if err := os.MkdirAll(parent, statedir.DirMode); err != nil {
			return nil, err
		}
	}
	dir, err := os.MkdirTemp(parent, "git-")
	if err != nil {
		return nil, err
	}
	g := &WorktreeGit{dir: dir, Work: rec.Worktree, Common: rec.Common}
	if err := g.prepare(ctx, rec, index); err != nil {
		g.Close()
		return nil, err
	}
	return g, nil
}

func (g *WorktreeGit) prepare(ctx context.Context, rec GitDirsRecord, index GitIndex) error {
	head, err := ReadSmall(filepath.Join(rec.GitDir, "HEAD"), 4<<10)
	if err != nil {
		return err
	}
	h := strings.TrimSpace(string(head))
	if !HeadRef(h) {
		return fmt.Errorf("%s/HEAD names neither a ref nor a commit", rec.GitDir)
	}
	if ref, ok := strings.CutPrefix(h, "ref: "); ok {
		if err := CheckRefPath(rec.Common, ref); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(g.dir, "HEAD"), []byte(h+"\n"), statedir.FileMode); err != nil {
		return err
	}
	// Refs are data: links to the repository's let git resolve branches
	// without reading anything else of its git directory.
	for _, name := range []string{"refs", "packed-refs", "shallow"} {
		if err := os.Symlink(filepath.Join(rec.Common, name), filepath.Join(g.dir, name)); err != nil {
			return err
		}
	}
	indexFile := filepath.Join(g.dir, "index")
	switch index {
	case IndexCopy:
		if err := copySmall(filepath.Join(rec.GitDir, "index"), indexFile, 1<<30); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	case IndexOwn:
		indexFile = filepath.Join(rec.GitDir, "index")
		if fi, err := os.Lstat(indexFile); err == nil && !fi.Mode().IsRegular() {
			return fmt.Errorf("%s is not a regular file", indexFile)
		}
	}
	if err := os.MkdirAll(filepath.Join(g.dir, "info"), statedir.DirMode); err != nil {
		return err
	}
	if err := copySmall(filepath.Join(rec.Common, "info", "exclude"), filepath.Join(g.dir, "info", "exclude"), 1<<20); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	g.Env = []string{
		"GIT_DIR=" + g.dir,
		"GIT_WORK_TREE=" + rec.Worktree,
		"GIT_OBJECT_DIRECTORY=" + filepath.Join(rec.Common, "objects"),
		"GIT_INDEX_FILE=" + indexFile,
	}
	if index == IndexCopy {
		g.Env = append(g.Env, "GIT_OPTIONAL_LOCKS=0")
	}
	config := "[core]\n\trepositoryformatversion = 0\n\tbare = false\n"
	if err := os.WriteFile(filepath.Join(g.dir, "config"), []byte(config), statedir.FileMode); err != nil {
		return err
	}
	// git config --file reads that one file and follows none of its
	// includes; the values are checked before they go into ours.
	var out bytes.Buffer
	err = g.Run(ctx, &limitWriter{w: &out, n: 64 << 10}, "config", "--file", filepath.Join(rec.Common, "config"), "-z", "--get-regexp", copiedConfig.String())
	if err != nil && !IsExit(err, 1) {
		return err
	}
	var core, ext strings.Builder
	for _, kv := range strings.Split(out.String(), "\x00") {
		key, value, _ := strings.Cut(kv, "\n")
		if !copiedConfig.MatchString(key) || !configValueRE.MatchString(value) {
			continue
		}
		section, name, _ := strings.Cut(key, ".")
		if section == "core" {
			fmt.Fprintf(&core, "\t%s = %s\n", name, value)
		} else {
			fmt.Fprintf(&ext, "\t%s = %s\n", name, value)
		}
	}
	if ext.Len() > 0 {
		config = "[core]\n\trepositoryformatversion = 1\n\tbare = false\n" + core.String() + "[extensions]\n" + ext.String()
	} else {
		config += core.String()
	}
	return os.WriteFile(filepath.Join(g.dir, "config"), []byte(config), statedir.FileMode)
}

// Close removes nid's own git directory.
func (g *WorktreeGit) Close() { _ = os.RemoveAll(g.dir) }

// Run runs one git command through RunGit with its output to w.
func (g *WorktreeGit) Run(ctx context.Context, w io.Writer, args ...string) error {
	_, err := RunGit(ctx, GitCommand{Dir: g.Work, Env: g.Env, Args: append([]string{"--no-optional-locks"}, args...), Out: w})
	return err
}

// Output runs one git command and returns its output, trimmed.
func (g *WorktreeGit) Output(ctx context.Context, args ...string) (string, error) {
	return RunGit(ctx, GitCommand{Dir: g.Work, Env: g.Env, Args: args})
}

// Lines runs a git command and keeps the first keep lines of its output.
func (g *WorktreeGit) Lines(ctx context.Context, keep int, args ...string) (*LineSink, error) {
	out := &LineSink{keep: keep}
	err := g.Run(ctx, out, args...)
	out.flush()
	return out, err
}

// checkWorktreeLinks refuses a worktree that no longer says of itself what
// nid recorded: its .git file names another git directory, or that one's
// commondir another repository, or a plain repository's .git is no longer
// a directory. Git, the user's included, follows them; nid never does, and
// says what it found, for an agent may have pointed them at a
// configuration of its own.
func checkWorktreeLinks(rec GitDirsRecord) error {
	// Objects an alternates file names are read as the repository's own:
	// the agent could lend nid's git another repository's commits.
	if alt, err := ReadSmall(filepath.Join(rec.Common, "objects", "info", "alternates"), 64<<10); (err == nil && string(alt) != rec.Alternates) ||
		(err != nil && !errors.Is(err, os.ErrNotExist)) || (errors.Is(err, os.ErrNotExist) && rec.Alternates != "") {
		return fmt.Errorf("%s/objects/info/alternates is not what it was when nid made the worktree: nid refused to read other repositories' objects through it and ran nothing", rec.Common)
	}
	dotGit := filepath.Join(rec.Worktree, ".git")
	if rec.GitDir == rec.Common {
		if rec.GitDir != dotGit || !IsRegularDir(dotGit) {
			return fmt.Errorf("%s is no longer the git directory %s that nid recorded: nid refused it and ran nothing", dotGit, rec.GitDir)
		}
		return nil
	}
	now, ok := ReadWorktreeGitDirs(rec.Worktree)
	switch {
	case !ok:
		return fmt.Errorf("%s's .git file, or its git directory's gitdir or commondir, no longer says what git made it say (git directory %s of repository %s); "+
			"nid refused to follow it and ran nothing, but git run there by hand would follow it: look at what changed them", rec.Worktree, rec.GitDir, rec.Common)
	case now.GitDir != rec.GitDir || now.Common != rec.Common:
		return fmt.Errorf("%s now says its git directory is %s of repository %s, not %s of %s as nid recorded; "+
			"nid refused to follow it and ran nothing, but git run there by hand would follow it: look at what changed it", rec.Worktree, now.GitDir, now.Common, rec.GitDir, rec.Common)
	}
	return nil
}

// gitError is a git command that failed, with what it said.
type gitError struct {
	args []string
	err  error
	msg  string
}

func (e *gitError) Error() string {
	return fmt.Sprintf("git %s: %s", strings.Join(e.args, " "), cmp.Or(e.msg, e.err.Error()))
}

func (e *gitError) Unwrap() error { return e.err }

// IsExit reports whether err is git exiting with code.
func IsExit(err error, code int) bool {
	exit, ok := errors.AsType[*exec.ExitError](err)
	return ok && exit.ExitCode() == code
}

// cleanEnv is the worker's environment without any GIT_ variable, which
// could name another repository, configuration or program to run.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") {
			env = append(env, kv)
		}
	}
	return env
}

// gitLineBytes bounds one line a LineSink keeps (a commit subject, a status
// line): an agent's commit message may be a megabyte on one line.
const gitLineBytes = 200

// LineSink keeps the first keep lines written to it, each cut to
// gitLineBytes and stripped of control characters, and counts the rest,
// so that git's output of a large repository is read without holding it.
type LineSink struct {
	keep int
	// Kept are the lines kept; More counts the lines after them.
	Kept []string
	More int
	cur  []byte
	// long says the current line is longer than cur holds.
	long bool
	open bool
}

// Write takes git's output, a piece at a time.
func (s *LineSink) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		s.open = true
		chunk, rest, ended := bytes.Cut(p, []byte{'\n'})
		if room := gitLineBytes - len(s.cur); room < len(chunk) {
			chunk, s.long = chunk[:max(room, 0)], true
		}
		if len(s.Kept) < s.keep {
			s.cur = append(s.cur, chunk...)
		}
		if !ended {
			break
		}
		s.flush()
		p = rest
	}
	return n, nil
}

// flush ends the current line.
func (s *LineSink) flush() {
	if !s.open {
		return
	}
	if len(s.Kept) < s.keep {
		line := s.cur
		if s.long {
			// The cut may have split the last character.
			if i := lastRuneStart(line); !utf8.FullRune(line[i:]) {
				line = line[:i]
			}
		}
		text := printable(string(line))
		if s.long {
			text += "…"
		}
		s.Kept = append(s.Kept, text)
	} else {
		s.More++
	}
	s.cur, s.long, s.open = s.cur[:0], false, false
}

// lastRuneStart is where the last character of b starts.
func lastRuneStart(b []byte) int {
	i := len(b)
	for i > 0 && i > len(b)-utf8.UTFMax {
		i--
		if utf8.RuneStart(b[i]) {
			return i
		}
	}
	return len(b)
}

// printable replaces what is not valid UTF-8, and control characters other
// than tabs, which the facts would carry into a prompt, a terminal and a
// web page.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if r == utf8.RuneError || (unicode.IsControl(r) && r != '\t') {
			return '\uFFFD'
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
}

// limitWriter passes on the first n bytes written to it and drops the rest.
type limitWriter struct {
	w io.Writer
	n int
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if l.n > 0 {
		k := min(len(p), l.n)
		if _, err := l.w.Write(p[:k]); err != nil {
			return 0, err
		}
		l.n -= k
	}
	return len(p), nil
}

// ReadSmall reads a regular file of at most limit bytes, never following a
// symlink nor blocking on a fifo the agent put in its place.
func ReadSmall(path string, limit int64) ([]byte, error) {
	f, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err == nil && int64(len(b)) > limit {
		err = fmt.Errorf("%s is larger than %d bytes", path, limit)
	}
	return b, err
}

// copySmall copies the regular file from to a new file to, as ReadSmall
// reads it.
func copySmall(from, to string, limit int64) error {
	f, err := openRegular(from)
	if err != nil {
		return err
	}
	defer f.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, statedir.FileMode)
	if err != nil {
		return err
	}
	n, err := io.Copy(out, io.LimitReader(f, limit+1))
	if err == nil && n > limit {
		err = fmt.Errorf("%s is larger than %d bytes", from, limit)
	}
	return errors.Join(err, out.Close())
}

func openRegular(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, cmp.Or(err, fmt.Errorf("%s is not a regular file", path))
	}
	return f, nil
}

// HashRE is a full commit hash, SHA-1 or SHA-256.
var HashRE = regexp.MustCompile(`^([0-9a-f]{40}|[0-9a-f]{64})$`)

// refRE is a ref a HEAD file may name: no spaces, controls or the
// characters git reserves for revision syntax.
var refRE = regexp.MustCompile(`^refs/[^\x00-\x20\x7f~^:?*\[\\]+$`)

// HeadRef reports whether head, a HEAD file's content, names a ref or a
// commit as git writes them.
func HeadRef(head string) bool {
	ref, ok := strings.CutPrefix(head, "ref: ")
	return (ok && refRE.MatchString(ref) && !strings.Contains(ref, "..")) || HashRE.MatchString(head)
}
