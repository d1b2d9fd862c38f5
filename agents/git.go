package agents

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/nid-dev/nid/config"
)

// Every git command nid runs goes through RunGit, which trusts no
// configuration an agent could have written and runs nothing a
// configuration names.
//
// Git executes what its configuration names: core.fsmonitor, hooks, a
// pager, an ssh command or proxy, credential helpers, external diff and
// textconv programs, the filter and merge drivers .gitattributes select, a
// remote's upload-pack and remote helpers (ext::). The system and global
// configurations are never read (a push may use the user's credential
// settings, passed one by one: see userCredentials); the worker's GIT_
// variables, which could name another repository or program, are dropped;
// each of those knobs is switched off on the command line, where it wins
// over any file; transports are limited to https, ssh and file; and every
// command is bounded in time and output.
//
// What remains is the repository's own configuration, for commands run on
// the repository a group's repo names (its main checkout, or this host's
// clone of a URL under the state directory): the user's, which a sandboxed
// agent cannot write. Commands about a session's worktree, whose files are
// the agent's, never read even that: they run in WorktreeGit, with a git
// directory of nid's own.

// gitTimeout bounds one git command; a clone, fetch or push of a large
// repository over a slow link may take minutes.
const gitTimeout = 10 * time.Minute

// gitOutputBytes bounds what nid keeps of a command's output.
const gitOutputBytes = 1 << 20

// gitSafeArgs come before every git command nid runs.
var gitSafeArgs = []string{
	"--no-pager",
	"-c", "core.fsmonitor=false",
	"-c", "core.hooksPath=/dev/null",
	"-c", "core.pager=cat",
	"-c", "core.editor=false",
	"-c", "core.askPass=",
	"-c", "core.sshCommand=ssh",
	"-c", "core.gitProxy=",
	"-c", "core.attributesFile=/dev/null",
	"-c", "core.untrackedCache=false",
	// An empty value resets the list: only what userCredentials adds
	// afterwards counts.
	"-c", "credential.helper=",
	"-c", "diff.external=",
	"-c", "sequence.editor=false",
	"-c", "gpg.program=false",
	"-c", "commit.gpgSign=false",
	"-c", "tag.gpgSign=false",
	"-c", "uploadpack.packObjectsHook=",
	"-c", "protocol.allow=never",
	"-c", "protocol.https.allow=always",
	"-c", "protocol.ssh.allow=always",
	"-c", "protocol.file.allow=always",
	"-c", "submodule.recurse=false",
	"-c", "fetch.recurseSubmodules=false",
	"-c", "push.recurseSubmodules=no",
	"-c", "gc.auto=0",
	"-c", "maintenance.auto=false",
	"-c", "log.showSignature=false",
	"-c", "color.ui=false",
}

// gitSafeEnv is set on every git command: no system or global
// configuration, no prompts, no replace refs or lazy fetches, and
// protocol.allow's "user" counts as not given by the user.
var gitSafeEnv = []string{
	"GIT_CONFIG_NOSYSTEM=1",
	"GIT_CONFIG_GLOBAL=/dev/null",
	"GIT_ATTR_NOSYSTEM=1",
	"GIT_TERMINAL_PROMPT=0",
	"GIT_ASKPASS=",
	"SSH_ASKPASS=",
	"GIT_PROTOCOL_FROM_USER=0",
	"GIT_NO_REPLACE_OBJECTS=1",
	"GIT_NO_LAZY_FETCH=1",
	"GIT_PAGER=cat",
	"LC_ALL=C",
}

// GitCommand is one git command for RunGit.
type GitCommand struct {
	// Dir is where git runs.
	Dir string
	// Env is added to the safe environment.
	Env []string
	// Config is added to the safe arguments, as -c key=value pairs.
	Config []string
	// Args are git's arguments, the subcommand first.
	Args []string
	// Out receives the output; nil keeps it for the result, trimmed.
	Out io.Writer
}

// RunGit runs one git command as the comment above says, and returns its
// output (when c.Out is nil) trimmed of surrounding space.
func RunGit(ctx context.Context, c GitCommand) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, gitTimeout)
	defer cancel()
	args := append([]string{}, gitSafeArgs...)
	for _, kv := range c.Config {
		args = append(args, "-c", kv)
	}
	cmd := exec.CommandContext(ctx, "git", append(args, c.Args...)...)
	cmd.Dir = c.Dir
	cmd.Env = append(append(cleanEnv(), gitSafeEnv...), c.Env...)
	var out bytes.Buffer
	cmd.Stdout = &limitWriter{w: &out, n: gitOutputBytes}
	if c.Out != nil {
		cmd.Stdout = c.Out
	}
	var errOut bytes.Buffer
	cmd.Stderr = &limitWriter{w: &errOut, n: 4 << 10}
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return "", fmt.Errorf("git %s: %w", firstArg(c.Args), ctx.Err())
		}
		return "", &gitError{args: c.Args, err: err, msg: strings.TrimSpace(errOut.String())}
	}
	return strings.TrimSpace(out.String()), nil
}

func firstArg(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return args[0]
}

// RepoGit runs a command on a repository nid resolved itself (see
// Activities.placeOf), with the repository's own filter, diff and merge
// drivers switched off as well: a checkout or an add would run those that
// a .gitattributes in the session's branch selects.
func RepoGit(ctx context.Context, repo string, args ...string) (string, error) {
	return RunGit(ctx, GitCommand{Dir: repo, Config: RepoDrivers(ctx, repo), Args: args})
}

// RemoteGit is RepoGit for a command that reaches a remote (clone, fetch,
// push): it may log in with the user's own credential settings. One that
// updates an existing repository's refs writes no reflog, so no link an
// agent put under logs/ leads the write out; a clone makes a repository
// of its own, with the reflogs a sandboxed commit then appends to.
func RemoteGit(ctx context.Context, repo string, args ...string) (string, error) {
	config := append(RepoDrivers(ctx, repo), userCredentials(ctx)...)
	if firstArg(args) != "clone" {
		config = append(config, NoReflog)
	}
	return RunGit(ctx, GitCommand{Dir: repo, Config: config, Args: args})
}

// NoReflog keeps git from writing a reflog of the refs a command updates.
const NoReflog = "core.logAllRefUpdates=false"

// driverKeyRE are the configuration keys that name a program for a driver
// .gitattributes selects, or for a remote.
var driverKeyRE = `^(filter\..+\.(clean|smudge|process|required)|diff\..+\.(command|textconv)|merge\..+\.driver|remote\..+\.(uploadpack|receivepack|vcs|proxy))$`

// RepoDrivers are -c settings that switch off every driver and remote
// program repo's configuration names.
func RepoDrivers(ctx context.Context, repo string) []string {
	if repo == "" {
		return nil
	}
	out, err := RunGit(ctx, GitCommand{Dir: repo, Args: []string{"config", "--includes", "-z", "--name-only", "--get-regexp", driverKeyRE}})
	if err != nil {
		return nil
	}
	var off []string
	for _, key := range strings.Split(out, "\x00") {
		key = strings.TrimSpace(key)
		if key == "" || strings.ContainsAny(key, "=\n") {
			continue
		}
		switch {
		case strings.HasSuffix(key, ".uploadpack"):
			off = append(off, key+"=git-upload-pack")
		case strings.HasSuffix(key, ".receivepack"):
			off = append(off, key+"=git-receive-pack")
		case strings.HasSuffix(key, ".required"):
			off = append(off, key+"=false")
		default:
			off = append(off, key+"=")
		}
	}
	return off
}

// credentialKeyRE are the user's own settings a push or fetch may log in
// with.
var credentialKeyRE = regexp.MustCompile(`^credential\.([^=\n]+\.)?(helper|username|usehttppath|useHttpPath)$`)

// userCredentials are the credential settings of the user's global
// configuration (never another key of it), as -c settings: the user's
// HOME is not the agent's to write. Each file is read as a file, which
// follows none of its includes.
func userCredentials(ctx context.Context) []string {
	home, _ := os.UserHomeDir()
	xdg := os.Getenv("XDG_CONFIG_HOME")
	if xdg == "" && home != "" {
		xdg = filepath.Join(home, ".config")
	}
	var kvs []string
	for _, file := range []string{filepath.Join(xdg, "git", "config"), filepath.Join(home, ".gitconfig")} {
		if xdg == "" || home == "" {
			break
		}
		out, err := RunGit(ctx, GitCommand{Args: []string{"config", "--file", file, "-z", "--get-regexp", `^credential\.`}})
		if err != nil {
			continue
		}
		for _, kv := range strings.Split(out, "\x00") {
			key, value, _ := strings.Cut(kv, "\n")
			if credentialKeyRE.MatchString(key) && !strings.Contains(value, "\n") {
				kvs = append(kvs, key+"="+value)
			}
		}
	}
	return kvs
}

// CheckRepoURL refuses a repository URL git would take as an option or
// hand to a program (ext::, another remote helper), and any transport but
// https, ssh and file.
func CheckRepoURL(repo string) error {
	if problem := config.RepoProblem(repo); problem != "" {
		return BadInput("%s", problem)
	}
	return nil
}

// CheckRefPath refuses a ref of the repository whose git directory is
// common when a component of its path there is a symbolic link: git
// follows a link under refs/ wherever it leads, to read a ref (another
// repository's branch, for the facts a prompt carries) or to write one
// (a salvage ref, outside the state directory). A component that does not
// exist yet is fine: git makes it, as a directory.
func CheckRefPath(common, ref string) error {
	if !strings.HasPrefix(ref, "refs/") || strings.Contains(ref, "..") {
		return fmt.Errorf("%q is not a ref nid reads or writes", ref)
	}
	path := common
	for _, part := range strings.Split(ref, "/") {
		path = filepath.Join(path, part)
		fi, err := os.Lstat(path)
		if err != nil {
			return nil
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			return fmt.Errorf("%s is a symbolic link, which git would follow out of the repository: nid refused it and ran nothing", path)
		}
	}
	return nil
}

// GitVersion is `git --version`, run as every git command nid runs.
func GitVersion(ctx context.Context) (string, error) {
	return RunGit(ctx, GitCommand{Args: []string{"--version"}})
}

// IsRegularDir reports whether path is a directory, not a link to one.
func IsRegularDir(path string) bool {
	fi, err := os.Lstat(path)
	return err == nil && fi.IsDir()
}
