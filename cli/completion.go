package cli

import (
	"embed"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
)

// Shell completion: the scripts nid completion prints hand the command line
// being typed back to nid, the word under the cursor last, with urfave/cli's
// --generate-bash-completion after it, and nid prints what may come there
// (complete). One answer serves every shell; the scripts only ask and show.

//go:embed completion/nid.bash completion/nid.zsh completion/nid.fish
var completionScripts embed.FS

// completionShells are the shells nid completion writes a script for.
var completionShells = []string{"bash", "zsh", "fish"}

func newCompletionCommand(a *app) *cli.Command {
	return &cli.Command{
		Name:      "completion",
		Usage:     "Print the shell completion script for bash, zsh or fish",
		ArgsUsage: "bash|zsh|fish",
		Description: "Prints a script that completes nid's commands and flags in the shell named.\n" +
			"Install it once:\n" +
			"  bash  source <(nid completion bash) in ~/.bashrc, or\n" +
			"        nid completion bash > ~/.local/share/bash-completion/completions/nid\n" +
			"  zsh   source <(nid completion zsh) in ~/.zshrc after compinit, or\n" +
			"        nid completion zsh > \"${fpath[1]}/_nid\"\n" +
			"  fish  nid completion fish > ~/.config/fish/completions/nid.fish",
		Action: action(func(cCtx *cli.Context) error {
			args, err := commandArgs(cCtx)
			if err != nil {
				return err
			}
			if len(args) != 1 {
				return fmt.Errorf("nid completion takes one shell: %s", strings.Join(completionShells, ", "))
			}
			return runCompletion(args[0], a.Stdout)
		}),
	}
}

func runCompletion(shell string, stdout io.Writer) error {
	if !slices.Contains(completionShells, shell) {
		return fmt.Errorf("nid completion: %q is not a shell it knows; use one of %s", shell, strings.Join(completionShells, ", "))
	}
	b, err := completionScripts.ReadFile("completion/nid." + shell)
	if err != nil {
		return err
	}
	_, err = stdout.Write(b)
	return err
}

// complete prints the words that may stand where the last word of the
// command line being completed is: a flag of the command when that word
// starts with "-"; nothing after a flag that takes a value, so that the
// shell completes a file name; else the command's subcommands. The shell
// keeps those that start with what is typed.
func (a *app) complete(cCtx *cli.Context) {
	args := a.Args
	if n := len(args); n > 0 && args[n-1] == "--generate-bash-completion" {
		args = args[:n-1]
	}
	cur, prev := "", ""
	if n := len(args); n > 1 {
		cur = args[n-1]
		if n > 2 {
			prev = args[n-2]
		}
		if prev == "=" && n > 3 {
			prev = args[n-3] // bash splits --config=FILE at the =
		}
	}
	cmd := cCtx.Command
	out := a.Stdout
	if strings.HasPrefix(cur, "-") {
		for _, f := range cmd.Flags {
			if !visible(f) {
				continue
			}
			for _, name := range f.Names() {
				flag := "--" + name
				if len(name) == 1 {
					flag = "-" + name
				}
				if strings.HasPrefix(flag, cur) {
					fmt.Fprintln(out, flag)
				}
			}
		}
		return
	}
	if f := flagNamed(cmd.Flags, prev); f != nil {
		if _, isBool := f.(*cli.BoolFlag); !isBool {
			return
		}
	}
	for _, sub := range cmd.Subcommands {
		if !sub.Hidden && sub.Name != "help" {
			fmt.Fprintln(out, sub.Name)
		}
	}
}

func visible(f cli.Flag) bool {
	v, ok := f.(cli.VisibleFlag)
	return !ok || v.IsVisible()
}

// flagNamed is the flag word (--config, -n) names among flags, or nil.
func flagNamed(flags []cli.Flag, word string) cli.Flag {
	if !strings.HasPrefix(word, "-") || strings.Contains(word, "=") {
		return nil
	}
	name := strings.TrimLeft(word, "-")
	for _, f := range flags {
		if slices.Contains(f.Names(), name) {
			return f
		}
	}
	return nil
}

// notCompleting stops a command line that asks for completions but that
// urfave/cli runs anyway, because a "--" in it ends its flags: completing
// `nid send web/lead -- ` must not send the session a message.
func (a *app) notCompleting(*cli.Context) error {
	if n := len(a.Args); n > 0 && a.Args[n-1] == "--generate-bash-completion" {
		return errors.New("no completion after --")
	}
	return nil
}

// shareCompletion gives c and every subcommand of it nid's completion.
func (a *app) shareCompletion(c *cli.Command) {
	c.BashComplete = a.complete
	for _, sub := range c.Subcommands {
		a.shareCompletion(sub)
	}
}
