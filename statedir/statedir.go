// Package statedir keeps nid's state directory private. The directory
// holds the API token, the embedded Temporal server's credential, the key that signs agents' MCP tokens, the embedded
// server's database, transcripts and the records of running agents: none
// of it is for other users of the machine, and none of it belongs in a
// commit.
//
// Every process that writes there calls Prepare first; every writer
// creates directories with DirMode and files with FileMode:
//
//	if err := statedir.Prepare(cfg.State); err != nil { ... }
//	os.WriteFile(filepath.Join(cfg.State, "x"), b, statedir.FileMode)
package statedir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// Modes of what nid creates in the state directory.
const (
	DirMode  fs.FileMode = 0o700
	FileMode fs.FileMode = 0o600
)

// Worktrees is the subdirectory holding the sessions' git worktrees: the
// user's code, whose modes Prepare leaves as git made them.
const Worktrees = "worktrees"

// Repos holds this host's clones of the groups whose repo is a URL, one
// per group: the user's code too, its modes left as git made them.
const Repos = "repos"

// TemporalToken is the file holding the credential the embedded Temporal
// server requires of every client: whoever can read it controls every
// session, so it lives here, private, beside the API token.
const TemporalToken = "temporal-token"

// gitignore keeps the whole directory out of git, itself included, so a
// `git add -A` in a repository that contains the state directory stages
// none of it.
const gitignore = "*\n"

// known are entries only nid's state directory has (besides its
// .gitignore). A directory that already holds files, none of them these,
// is someone else's: Prepare refuses it rather than hide it from git or
// change its modes.
var known = []string{"http-token", TemporalToken, "mcp.key", "temporal.db", "transcripts", "pids", Worktrees, Repos, "sim", "exec"}

// Prepare creates dir with DirMode, or tightens an existing one: the
// directory and everything nid keeps in it lose their group and other
// permissions (the worktrees' contents excepted), and it holds a
// .gitignore of "*". Links are not followed.
func Prepare(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("state directory %s: %w", dir, err)
	}
	if err := checkOwn(dir, entries); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, DirMode); err != nil {
		return fmt.Errorf("state directory %s: %w", dir, err)
	}
	if err := tighten(dir); err != nil {
		return fmt.Errorf("state directory %s: %w", dir, err)
	}
	path := filepath.Join(dir, ".gitignore")
	if b, err := os.ReadFile(path); err == nil && string(b) == gitignore {
		return nil
	}
	if err := os.WriteFile(path, []byte(gitignore), FileMode); err != nil {
		return fmt.Errorf("state directory %s: %w", dir, err)
	}
	return nil
}

// checkOwn refuses a directory that is not nid's to keep: a repository's
// working tree, or one holding only files nid did not write.
func checkOwn(dir string, entries []fs.DirEntry) error {
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	switch {
	case slices.Contains(names, ".git"):
		return fmt.Errorf("state directory %s is a git working tree: set state to a directory of nid's own (default .nid); it holds secrets and a .gitignore of everything", dir)
	case len(names) == 0 || slices.ContainsFunc(names, func(n string) bool { return slices.Contains(known, n) }):
		return nil
	case len(names) == 1 && names[0] == ".gitignore":
		if b, err := os.ReadFile(filepath.Join(dir, ".gitignore")); err == nil && string(b) == gitignore {
			return nil
		}
	}
	return fmt.Errorf("state directory %s already holds files that are not nid's: set state to a directory of nid's own (default .nid)", dir)
}

// tighten takes group and other permissions off dir and what lies under
// it, keeping the owner's (an executable stays executable for its owner).
func tighten(dir string) error {
	// The directory itself may be a link the user made; what is in it is
	// not followed.
	dir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return err
	}
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			// chmod would follow it out of the directory.
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if mode := info.Mode().Perm(); mode&0o077 != 0 {
			if err := os.Chmod(path, mode&0o700); err != nil {
				return err
			}
		}
		if d.IsDir() && (path == filepath.Join(dir, Worktrees) || path == filepath.Join(dir, Repos)) {
			return filepath.SkipDir
		}
		return nil
	})
}
