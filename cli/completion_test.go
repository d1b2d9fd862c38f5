package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/internal/temporaltest"
)

// What nid answers a completion script: the words of the command line up
// to the cursor, the one being typed last, then the flag.
func TestCompleteAnswers(t *testing.T) {
	complete := func(words ...string) []string {
		t.Helper()
		out, errOut, err := runApp(t, Deps{}, append(words, "--generate-bash-completion")...)
		require.NoError(t, err, errOut)
		return strings.Fields(out)
	}
	commands := complete("")
	for _, c := range []string{"up", "ls", "rotate", "group", "doctor", "version", "completion"} {
		require.Contains(t, commands, c)
	}
	require.NotContains(t, commands, "help", "the help command is hidden")
	require.Equal(t, commands, complete("ro"), "the shell keeps what starts with the word")
	require.Equal(t, []string{"show", "set"}, complete("group", ""))
	require.Equal(t, []string{"clear"}, complete("inbox", ""))
	require.Equal(t, []string{"--dry-run"}, complete("up", "--d"))
	require.Equal(t, []string{"--mode"}, complete("rotate", "web/lead", "--mo"))
	require.Equal(t, []string{"--config"}, complete("--con"))
	require.Empty(t, complete("--config", ""), "a flag's value: the shell completes a file name")
	require.Empty(t, complete("up", "--config", ""))
	require.Empty(t, complete("up", "--config", "=", ""), "bash splits --config=FILE")
	require.Equal(t, commands, complete("--log-level", "warn", ""))
	flags := complete("up", "-")
	require.Contains(t, flags, "--keep-removed")
	require.NotContains(t, flags, "--generate-bash-completion")

	// After a "--" urfave/cli takes the flag for an argument and would run
	// the command: it must not, or completing would send this message.
	_, _, err := runApp(t, Deps{}, "send", "web/lead", "--", "", "--generate-bash-completion")
	require.EqualError(t, err, "no completion after --")
}

// nid completion prints a script for each shell it knows, and refuses
// another.
func TestCompletionScripts(t *testing.T) {
	for _, shell := range completionShells {
		out, _, err := runApp(t, Deps{}, "completion", shell)
		require.NoError(t, err)
		require.Contains(t, out, "--generate-bash-completion", shell)
	}
	_, _, err := runApp(t, Deps{}, "completion", "tcsh")
	require.EqualError(t, err, `nid completion: "tcsh" is not a shell it knows; use one of bash, zsh, fish`)
	_, _, err = runApp(t, Deps{}, "completion")
	require.EqualError(t, err, "nid completion takes one shell: bash, zsh, fish")
}

// shell returns the path of a shell the completion tests drive, or fails
// saying how to install it.
func shell(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is not installed: run `make deps` (apt-get install %s)", name, name)
	}
	return path
}

// onPath puts the nid binary on PATH under its own name, as a user has
// it, and returns the environment for a shell.
func onPath(t *testing.T) []string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.Symlink(temporaltest.Binary(t), filepath.Join(dir, "nid")))
	return append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"), "HOME="+t.TempDir())
}

// runShell runs script in the shell and returns its output lines.
func runShell(t *testing.T, env []string, sh string, args ...string) []string {
	t.Helper()
	cmd := exec.Command(sh, args...)
	cmd.Env = env
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// The bash script, sourced by bash, completes nid's commands, a group's
// subcommands and flags, and leaves a flag's FILE to bash's file names.
func TestBashCompletion(t *testing.T) {
	env := onPath(t)
	lines := runShell(t, env, shell(t, "bash"), "-c", `
source <(nid completion bash) || exit 1
complete -p nid
try() { COMP_WORDS=("$@"); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 )); COMPREPLY=(); _nid_complete; echo "$*:${COMPREPLY[*]}"; }
try nid ""
try nid r
try nid group s
try nid up --dry
try nid --config ""
`)
	require.Equal(t, "complete -o bashdefault -o default -F _nid_complete nid", lines[0])
	commands := strings.Fields(strings.TrimPrefix(lines[1], "nid :"))
	for _, c := range []string{"up", "server", "worker", "ls", "rotate", "group", "reload", "doctor", "version", "completion"} {
		require.Contains(t, commands, c)
	}
	require.Equal(t, []string{"nid --config :", "nid group s:set show", "nid r:reload rotate rotations", "nid up --dry:--dry-run"}, sorted(lines[2:]))
}

func sorted(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		before, after, _ := strings.Cut(l, ":")
		words := strings.Fields(after)
		slices.Sort(words)
		out[i] = before + ":" + strings.Join(words, " ")
	}
	slices.Sort(out)
	return out
}

// The zsh script registers itself with compinit, sourced or from $fpath,
// and completes with compadd, or with file names where nid says nothing.
func TestZshCompletion(t *testing.T) {
	env := onPath(t)
	zsh := shell(t, "zsh")
	fpath := t.TempDir()
	script := runShell(t, env, zsh, "-f", "-c", "nid completion zsh")
	require.NoError(t, os.WriteFile(filepath.Join(fpath, "_nid"), []byte(strings.Join(script, "\n")+"\n"), 0o644))
	lines := runShell(t, env, zsh, "-f", "-c", `
autoload -Uz compinit && compinit -u -d "$HOME/.zcompdump" || exit 1
source <(nid completion zsh) || exit 1
print -- "sourced:${_comps[nid]}"
unset '_comps[nid]'
fpath=(`+fpath+` $fpath)
compinit -u -d "$HOME/.zcompdump2"
print -- "fpath:${_comps[nid]}"
# Outside a completion, compadd and _files cannot run: stand-ins show
# what the script hands them.
compadd() { [[ $1 == -a ]] && print -- "compadd:${(@P)2}" }
_files() { print -- "files" }
source <(nid completion zsh)
words=(nid group ""); CURRENT=3; _nid
words=(nid up --d); CURRENT=3; _nid
words=(nid --config ""); CURRENT=3; _nid
`)
	require.Equal(t, []string{"sourced:_nid", "fpath:_nid", "compadd:show set", "compadd:--dry-run", "files"}, lines)
}

// The fish script completes through fish's own completion machinery.
func TestFishCompletion(t *testing.T) {
	env := onPath(t)
	lines := runShell(t, env, shell(t, "fish"), "--no-config", "-c", `
nid completion fish | source
complete -C "nid gr"
complete -C "nid group s"
complete -C "nid up --dr"
`)
	require.Equal(t, []string{"group", "set", "show", "--dry-run"}, lines)

	files := runShell(t, env, shell(t, "fish"), "--no-config", "-c", `
nid completion fish | source
cd `+t.TempDir()+` || exit 1
touch team.yaml
complete -C "nid --config te"
`)
	require.Equal(t, []string{"team.yaml"}, files)
}
