// Package cli is nid's command line.
//
// NewApp builds the urfave/cli application from Deps; cmd/nid runs it with
// os.Args and turns its error into an exit code. Every command follows one
// shape: a constructor returning *cli.Command, an Action that only turns
// flags and arguments into an options struct, and a run function that does
// the work against a Temporal client and the writers it is given, so tests
// drive run functions against a test server and read what they printed.
//
// Commands other than up and worker never need a worker: they list session
// workflows through Temporal visibility, query them, and send them signals
// and updates, using the names in package workflows.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"
	"sync"

	"github.com/urfave/cli/v2"
	"go.temporal.io/sdk/client"
	"golang.org/x/term"

	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/nidclient"
	"github.com/nid-dev/nid/worker"
)

// Deps is what the command line needs from the process around it.
type Deps struct {
	// StartEmbedded starts the in-process Temporal server for nid up.
	StartEmbedded worker.StartEmbedded
	// Stdout receives results; Stderr diagnostics and logs.
	Stdout io.Writer
	Stderr io.Writer
	// Environ is the environment as os.Environ returns it; nil means the
	// process's own. Configuration (NID_*, TEMPORAL_ADDRESS,
	// TEMPORAL_NAMESPACE, TEMPORAL_API_KEY), NID_CONFIG and NO_COLOR are
	// read from it.
	Environ []string
	// Dial connects to Temporal; nil means worker.Dial. Tests see through
	// it which configuration a command dials with.
	Dial func(ctx context.Context, cfg *config.Config, logger *slog.Logger) (client.Client, error)
	// IsTerminal reports whether w is a terminal, which decides colour; nil
	// means asking the operating system about w's file descriptor.
	IsTerminal func(w io.Writer) bool
	// BuildInfo is what the binary was built from, which nid version
	// reports; nil means debug.ReadBuildInfo. A binary that carries the
	// Temporal server as a separate executable adds the server's modules.
	BuildInfo func() (*debug.BuildInfo, bool)
	// Args is the command line the app is run with; nil means os.Args.
	// Shell completion reads the word being completed from it, which
	// urfave/cli does not hand on.
	Args []string
}

// app is Deps with its defaults filled in, shared by every command.
type app struct {
	Deps
}

func (a *app) environ() []string {
	if a.Environ == nil {
		return os.Environ()
	}
	return a.Environ
}

func (a *app) getenv(name string) string {
	prefix := name + "="
	v := ""
	for _, kv := range a.environ() {
		if strings.HasPrefix(kv, prefix) {
			v = kv[len(prefix):]
		}
	}
	return v
}

// color says whether output to w may use ANSI colours: only on a terminal,
// and never when NO_COLOR is set to anything (https://no-color.org).
func (a *app) color(w io.Writer) bool {
	return a.getenv("NO_COLOR") == "" && a.IsTerminal(w)
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// NewApp builds the nid command line. It never calls os.Exit: every failure
// comes back from Run as an error for main to report.
func NewApp(d Deps) *cli.App {
	if d.Stdout == nil {
		d.Stdout = os.Stdout
	}
	if d.Stderr == nil {
		d.Stderr = os.Stderr
	}
	if d.Dial == nil {
		d.Dial = worker.Dial
	}
	if d.IsTerminal == nil {
		d.IsTerminal = isTerminal
	}
	if d.Args == nil {
		d.Args = os.Args
	}
	a := &app{Deps: d}
	cliApp := &cli.App{
		Name:  "nid",
		Usage: "Run teams of coding agents as durable sessions that rotate before their context fills",
		Description: "nid runs each agent seat of a group as a Temporal workflow that tracks how full\n" +
			"its context window is and compacts or hands off the conversation before it\n" +
			"fills, keeping the session's place in the team. Start with `nid up` beside a\n" +
			"nid.yaml, then watch it with `nid ls` and `nid watch`.",
		Writer:          d.Stdout,
		ErrWriter:       d.Stderr,
		HideVersion:     true,
		HideHelpCommand: true,
		Flags:           globalFlags(),
		Commands: []*cli.Command{
			newUpCommand(a),
			newServerCommand(a),
			newWorkerCommand(a),
			newLsCommand(a),
			newShowCommand(a),
			newHostsCommand(a),
			newRotateCommand(a),
			newMoveCommand(a),
			newGroupCommand(a),
			newWatchCommand(a),
			newSendCommand(a),
			newAttachCommand(a),
			newInboxCommand(a),
			newRotationsCommand(a),
			newBoardCommand(a),
			newStopCommand(a),
			newStartCommand(a),
			newForgetCommand(a),
			newReloadCommand(a),
			newTranscriptCommand(a),
			newDoctorCommand(a),
			newVersionCommand(a),
			newCompletionCommand(a),
		},
		// The scripts of nid completion ask with --generate-bash-completion.
		EnableBashCompletion: true,
		BashComplete:         a.complete,
		Before:               a.notCompleting,
		Action:               unknownCommand,
		// urfave/cli exits the process on errors unless this is set; main
		// owns the exit code.
		ExitErrHandler: func(*cli.Context, error) {},
		OnUsageError:   usageError,
	}
	for _, c := range cliApp.Commands {
		shareGlobals(c)
		a.shareCompletion(c)
	}
	return cliApp
}

// readsNoConfiguration are the commands that neither read nid.yaml nor
// reach Temporal nor log: the global flags would do nothing after their
// names, so their help does not list them.
var readsNoConfiguration = map[string]bool{"version": true, "completion": true}

// shareGlobals lets every command that reads the configuration take the
// global flags after its name too (nid up --config FILE), and gives every
// command nid's usage errors.
func shareGlobals(c *cli.Command) {
	c.OnUsageError = usageError
	if !readsNoConfiguration[c.Name] {
		c.Flags = append(c.Flags, globalFlags()...)
	}
	for _, sub := range c.Subcommands {
		shareGlobals(sub)
	}
}

// usageError replaces urfave/cli's "Incorrect Usage" page with one line that
// says where help is.
func usageError(cCtx *cli.Context, err error, _ bool) error {
	return fmt.Errorf("%w (see %s --help)", err, helpName(cCtx))
}

func helpName(cCtx *cli.Context) string {
	if cCtx.Command != nil && cCtx.Command.HelpName != "" {
		return cCtx.Command.HelpName
	}
	return cCtx.App.Name
}

// unknownCommand is the Action of a command that only has subcommands: with
// no argument it shows help, with one it names the mistake.
func unknownCommand(cCtx *cli.Context) error {
	if cCtx.Args().Present() {
		return fmt.Errorf("unknown command %q (see %s --help)", cCtx.Args().First(), helpName(cCtx))
	}
	if cCtx.Command != nil && cCtx.Command.HelpName != "" && cCtx.Command.HelpName != cCtx.App.Name {
		return cli.ShowSubcommandHelp(cCtx)
	}
	return cli.ShowAppHelp(cCtx)
}

// defaultLogLevel keeps the SDK's and the server's chatter off the terminal
// unless something is wrong.
const defaultLogLevel = "warn"

// globalFlags are taken before the command name and, as nid up --config FILE
// shows, after it too.
func globalFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{
			Name:  "config",
			Usage: "Read the configuration from `FILE` (default: ./nid.yaml, if any) [$NID_CONFIG]",
		},
		&cli.StringFlag{
			Name:  "address",
			Usage: "Connect to Temporal at `HOST:PORT` (default: temporal.address, else 127.0.0.1:7233) [$TEMPORAL_ADDRESS]",
		},
		&cli.StringFlag{
			Name:  "namespace",
			Usage: "Use the Temporal `NAMESPACE` (default: temporal.namespace, else default) [$TEMPORAL_NAMESPACE]",
		},
		&cli.StringFlag{
			Name:  "log-level",
			Value: defaultLogLevel,
			Usage: "Log at `LEVEL` on stderr: debug, info, warn or error",
		},
	}
}

func jsonFlag() cli.Flag {
	return &cli.BoolFlag{Name: "json", Usage: "Print JSON instead of text"}
}

// globalFlag returns a global flag's value, given before or after the
// command name, and whether it was given at all.
func globalFlag(cCtx *cli.Context, name string) (string, bool) {
	for _, c := range cCtx.Lineage() {
		if c.Command != nil && c.IsSet(name) {
			return c.String(name), true
		}
	}
	return "", false
}

// loadConfig reads the configuration once for a command that only reads,
// with the global flags laid over the file and the environment.
func (a *app) loadConfig(cCtx *cli.Context) (*config.Config, error) {
	return a.loadConfigFor(cCtx, false)
}

// loadConfigFor reads it for a command that runs sessions when worker is
// set: then each group's repo must exist on this host.
func (a *app) loadConfigFor(cCtx *cli.Context, worker bool) (*config.Config, error) {
	return config.Load(a.loadOptions(cCtx, worker))
}

// loadOptions are where the command's configuration comes from: the file,
// the environment and the global flags.
func (a *app) loadOptions(cCtx *cli.Context, worker bool) config.LoadOptions {
	file, ok := globalFlag(cCtx, "config")
	if !ok {
		file = a.getenv(config.EnvConfig)
	}
	flags := map[string]any{}
	if v, ok := globalFlag(cCtx, "address"); ok {
		flags["temporal.address"] = v
	}
	if v, ok := globalFlag(cCtx, "namespace"); ok {
		flags["temporal.namespace"] = v
	}
	if cCtx.IsSet("host") {
		flags["worker.host"] = cCtx.String("host")
	}
	if cCtx.IsSet("max-sessions") {
		flags["worker.maxSessions"] = cCtx.Int("max-sessions")
	}
	return config.LoadOptions{File: file, Environ: a.environ(), Flags: flags, Worker: worker, Kinds: agents.ConfigKinds()}
}

func (a *app) logger(cCtx *cli.Context) (*slog.Logger, error) {
	name, ok := globalFlag(cCtx, "log-level")
	if !ok {
		name = defaultLogLevel
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(name)); err != nil {
		return nil, fmt.Errorf("--log-level %q: use debug, info, warn or error", name)
	}
	return slog.New(slog.NewTextHandler(a.Stderr, &slog.HandlerOptions{Level: level})), nil
}

// withClient loads the configuration, connects to Temporal and runs fn.
func (a *app) withClient(cCtx *cli.Context, fn func(ctx context.Context, c client.Client) error) error {
	return a.withConfigClient(cCtx, func(ctx context.Context, _ *config.Config, c client.Client) error { return fn(ctx, c) })
}

// withConfigClient is withClient for a command that reads the
// configuration too.
func (a *app) withConfigClient(cCtx *cli.Context, fn func(ctx context.Context, cfg *config.Config, c client.Client) error) error {
	cfg, err := a.loadConfig(cCtx)
	if err != nil {
		return err
	}
	return a.withDialled(cCtx, cfg, fn)
}

// withDialled is withConfigClient for a configuration already read.
func (a *app) withDialled(cCtx *cli.Context, cfg *config.Config, fn func(ctx context.Context, cfg *config.Config, c client.Client) error) error {
	logger, err := a.logger(cCtx)
	if err != nil {
		return err
	}
	c, err := a.Dial(cCtx.Context, cfg, logger)
	if err != nil {
		return err
	}
	defer c.Close()
	return fn(nidclient.WithWaitNotice(cCtx.Context, a.waitNotice()), cfg, c)
}

// waitNotice tells the user, once on stderr, that a command waits for a
// workflow whose worker may have just stopped, rather than leaving them
// before a silent terminal for up to half a minute.
func (a *app) waitNotice() func(string) {
	said := map[string]bool{}
	var mu sync.Mutex
	return func(text string) {
		mu.Lock()
		defer mu.Unlock()
		if !said[text] {
			said[text] = true
			fmt.Fprintln(a.Stderr, "nid: "+text)
		}
	}
}

// errHelpShown ends a command whose arguments asked for its help.
var errHelpShown = errors.New("help shown")

// commandArgs returns the command's arguments, parsing flags that come after
// them. urfave/cli v2 stops reading flags at the first argument, but nid's
// documented usage puts them last (nid rotate web/lead --mode handoff).
// Everything after "--" is an argument.
func commandArgs(cCtx *cli.Context) ([]string, error) {
	var args []string
	rest := cCtx.Args().Slice()
	for i := 0; i < len(rest); i++ {
		arg := rest[i]
		if arg == "--" {
			return append(args, rest[i+1:]...), nil
		}
		if len(arg) < 2 || arg[0] != '-' {
			args = append(args, arg)
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(arg, "-"), "=")
		f := lookupFlag(cCtx, name)
		if f == nil {
			return nil, fmt.Errorf("flag provided but not defined: %s (see %s --help; put -- before an argument that starts with -)", arg, helpName(cCtx))
		}
		if name == "help" || name == "h" {
			if err := cli.ShowSubcommandHelp(cCtx); err != nil {
				return nil, err
			}
			return nil, errHelpShown
		}
		if _, isBool := f.(*cli.BoolFlag); isBool {
			if !hasValue {
				value = "true"
			}
		} else if !hasValue {
			if i+1 >= len(rest) {
				return nil, fmt.Errorf("flag needs an argument: %s (see %s --help)", arg, helpName(cCtx))
			}
			i++
			value = rest[i]
		}
		// Set by the flag's first name: urfave/cli reads a flag by it, and
		// an alias set on its own (-n for --lines) would go unseen.
		if err := cCtx.Set(f.Names()[0], value); err != nil {
			return nil, fmt.Errorf("invalid value %q for flag %s: %w", value, arg, err)
		}
	}
	return args, nil
}

// noArgs parses the flags of a command that takes no arguments, and
// refuses any.
func noArgs(cCtx *cli.Context) error {
	args, err := commandArgs(cCtx)
	if err == nil && len(args) > 0 {
		err = fmt.Errorf("%s takes no arguments (got %q)", helpName(cCtx), args[0])
	}
	return err
}

func lookupFlag(cCtx *cli.Context, name string) cli.Flag {
	for _, c := range cCtx.Lineage() {
		if c.Command == nil {
			continue
		}
		for _, f := range c.Command.Flags {
			for _, n := range f.Names() {
				if n == name {
					return f
				}
			}
		}
	}
	return nil
}

// action adapts a command's Action so that a help request in its arguments
// ends it cleanly.
func action(fn cli.ActionFunc) cli.ActionFunc {
	return func(cCtx *cli.Context) error {
		err := fn(cCtx)
		if err == nil || errors.Is(err, errHelpShown) {
			return nil
		}
		return printableError{err}
	}
}
