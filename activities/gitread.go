package activities

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
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/nid-dev/nid/statedir"
)

// readOnlyGit runs git to read a repository whose files the agent can
// write, so that nothing the agent planted runs or is believed.
//
// Git executes what its configuration names (core.fsmonitor, diff drivers
// and textconv, filter drivers that .gitattributes select, hooks, pagers,
// a partial clone's fetches), and the configuration git would read here is
// the agent's: a plain repository's .git/config is in its directory, a
// worktree's git directory (config.worktree, commondir) is writable to its
// sandbox, and a .git file or commondir can point anywhere. Switches on the
// command line cannot close all of it: there is no switch for filters, and
// a driver may have any name. So git never reads that configuration at all.
// It runs with a git directory of nid's own, under the state directory,
// which holds a configuration nid writes (a few harmless core keys copied,
// checked, from the repository's), a copy of the worktree's HEAD and index,
// and links to the repository's refs; objects are read from the
// repository's object directory, the work tree is the one recorded. The
// system and global configurations are off too, the environment's GIT_
// variables dropped, and the knobs that could still run something are
// switched off on the command line as well, in case git ever reads more.
type readOnlyGit struct {
	// dir is nid's own git directory, removed by close.
	dir string
	env []string
	// work is where git runs: the work tree.
	work string
}

// readOnlyGitArgs come before every command. Our configuration sets none of
// these; they hold even if git were to read another.
var readOnlyGitArgs = []string{
	"--no-pager", "--no-optional-locks",
	"-c", "core.fsmonitor=false",
	// The index is the agent's to write: its cache of untracked files
	// is not believed.
	"-c", "core.untrackedCache=false",
	"-c", "core.hooksPath=/dev/null",
	"-c", "core.pager=cat",
	"-c", "protocol.allow=never",
	"-c", "gc.auto=0",
	"-c", "maintenance.auto=false",
	"-c", "log.showSignature=false",
	"-c", "color.ui=false",
}

// copiedConfig are the repository's settings that change what git reports
// of the work tree (file modes, symlinks, case, line endings) and run
// nothing; the object format is needed to read the objects at all.
var copiedConfig = regexp.MustCompile(`^(core\.(filemode|symlinks|ignorecase|precomposeunicode|autocrlf|eol|checkstat|trustctime)|extensions\.objectformat)$`)

// configValueRE is a value copiedConfig may carry: a word, never config
// syntax.
var configValueRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)

// openReadOnlyGit makes nid's own git directory for the repository rec
// records, under stateDir (where the agent cannot write), or the system's
// temporary directory when there is none.
func openReadOnlyGit(ctx context.Context, stateDir string, rec gitDirsRecord) (*readOnlyGit, error) {
	parent := ""
	if stateDir != "" {
		parent = filepath.Join(stateDir, "tmp")
		if err := os.MkdirAll(parent, statedir.DirMode); err != nil {
			return nil, err
		}
	}
	dir, err := os.MkdirTemp(parent, "gitfacts-")
	if err != nil {
		return nil, err
	}
	g := &readOnlyGit{dir: dir, work: rec.Worktree}
	if err := g.prepare(ctx, rec); err != nil {
		g.close()
		return nil, err
	}
	return g, nil
}

func (g *readOnlyGit) prepare(ctx context.Context, rec gitDirsRecord) error {
	head, err := readSmall(filepath.Join(rec.GitDir, "HEAD"), 4<<10)
	if err != nil {
		return err
	}
	h := strings.TrimSpace(string(head))
	if !headRef(h) {
		return fmt.Errorf("%s/HEAD names neither a ref nor a commit", rec.GitDir)
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
	// A copy, so that whatever git writes of the index lands in nid's
	// directory, never the worktree's.
	index := filepath.Join(g.dir, "index")
	if err := copySmall(filepath.Join(rec.GitDir, "index"), index, 1<<30); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := os.MkdirAll(filepath.Join(g.dir, "info"), statedir.DirMode); err != nil {
		return err
	}
	if err := copySmall(filepath.Join(rec.Common, "info", "exclude"), filepath.Join(g.dir, "info", "exclude"), 1<<20); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	g.env = append(cleanEnv(),
		"GIT_DIR="+g.dir,
		"GIT_WORK_TREE="+rec.Worktree,
		"GIT_OBJECT_DIRECTORY="+filepath.Join(rec.Common, "objects"),
		"GIT_INDEX_FILE="+index,
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_ATTR_NOSYSTEM=1",
		"GIT_OPTIONAL_LOCKS=0",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_NO_LAZY_FETCH=1",
		"GIT_NO_REPLACE_OBJECTS=1",
		"GIT_PAGER=cat",
		"LC_ALL=C",
	)
	config := "[core]\n\trepositoryformatversion = 0\n\tbare = false\n"
	if err := os.WriteFile(filepath.Join(g.dir, "config"), []byte(config), statedir.FileMode); err != nil {
		return err
	}
	// git config --file reads that one file and follows none of its
	// includes; the values are checked before they go into ours.
	var out bytes.Buffer
	err = g.run(ctx, &limitWriter{w: &out, n: 64 << 10}, "config", "--file", filepath.Join(rec.Common, "config"), "-z", "--get-regexp", copiedConfig.String())
	if err != nil && !isExit(err, 1) {
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

func (g *readOnlyGit) close() { _ = os.RemoveAll(g.dir) }

// run runs one git command with its output to w.
func (g *readOnlyGit) run(ctx context.Context, w io.Writer, args ...string) error {
	cmd := exec.CommandContext(ctx, "git", append(append([]string{}, readOnlyGitArgs...), args...)...)
	cmd.Dir, cmd.Env, cmd.Stdout = g.work, g.env, w
	var errOut bytes.Buffer
	cmd.Stderr = &limitWriter{w: &errOut, n: 4 << 10}
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("git %s: %w", args[0], ctx.Err())
		}
		return &gitError{args: args, err: err, msg: strings.TrimSpace(errOut.String())}
	}
	return nil
}

// lines runs a git command and keeps the first keep lines of its output.
func (g *readOnlyGit) lines(ctx context.Context, keep int, args ...string) (*lineSink, error) {
	out := &lineSink{keep: keep}
	err := g.run(ctx, out, args...)
	out.flush()
	return out, err
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

// isExit reports whether err is git exiting with code.
func isExit(err error, code int) bool {
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

// lineSink keeps the first keep lines written to it, each cut to
// factsLineBytes and stripped of control characters, and counts the rest,
// so that git's output of a large repository is read without holding it.
type lineSink struct {
	keep int
	kept []string
	more int
	cur  []byte
	// long says the current line is longer than cur holds.
	long bool
	open bool
}

func (s *lineSink) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		s.open = true
		chunk, rest, ended := bytes.Cut(p, []byte{'\n'})
		if room := factsLineBytes - len(s.cur); room < len(chunk) {
			chunk, s.long = chunk[:max(room, 0)], true
		}
		if len(s.kept) < s.keep {
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
func (s *lineSink) flush() {
	if !s.open {
		return
	}
	if len(s.kept) < s.keep {
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
		s.kept = append(s.kept, text)
	} else {
		s.more++
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

// readSmall reads a regular file of at most limit bytes, never following a
// symlink nor blocking on a fifo the agent put in its place.
func readSmall(path string, limit int64) ([]byte, error) {
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

// copySmall copies the regular file from to a new file to, as readSmall
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

// hashRE is a full commit hash, SHA-1 or SHA-256.
var hashRE = regexp.MustCompile(`^([0-9a-f]{40}|[0-9a-f]{64})$`)

// refRE is a ref a HEAD file may name: no spaces, controls or the
// characters git reserves for revision syntax.
var refRE = regexp.MustCompile(`^refs/[^\x00-\x20\x7f~^:?*\[\\]+$`)

// headRef reports whether head, a HEAD file's content, names a ref or a
// commit as git writes them.
func headRef(head string) bool {
	ref, ok := strings.CutPrefix(head, "ref: ")
	return (ok && refRE.MatchString(ref) && !strings.Contains(ref, "..")) || hashRE.MatchString(head)
}
