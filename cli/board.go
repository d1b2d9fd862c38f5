package cli

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
	"go.temporal.io/sdk/client"

	"github.com/nid-dev/nid/nidclient"
	"github.com/nid-dev/nid/workflows"
)

type boardOptions struct {
	Group string
	JSON  bool
}

func newBoardCommand(a *app) *cli.Command {
	return &cli.Command{
		Name:      "board",
		Usage:     "Show a group's tasks, who holds each, and the locks",
		ArgsUsage: "[GROUP]",
		Flags:     []cli.Flag{jsonFlag()},
		Description: "Prints the board of GROUP, or of every group: each task with its status and\n" +
			"holder, then the locks and who holds them.",
		Subcommands:     []*cli.Command{newBoardAddCommand(a)},
		HideHelpCommand: true,
		Action: action(func(cCtx *cli.Context) error {
			args, err := commandArgs(cCtx)
			if err != nil {
				return err
			}
			group, err := optionalGroup("board", args)
			if err != nil {
				return err
			}
			opts := boardOptions{Group: group, JSON: cCtx.Bool("json")}
			return a.withClient(cCtx, func(ctx context.Context, c client.Client) error {
				return runBoard(ctx, c, opts, a.Stdout)
			})
		}),
	}
}

func runBoard(ctx context.Context, c client.Client, opts boardOptions, stdout io.Writer) error {
	boards, err := nidclient.Boards(ctx, c, opts.Group)
	if err != nil {
		return err
	}
	if opts.JSON {
		return writeJSON(stdout, boards)
	}
	for i, b := range boards {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		if err := writeBoard(stdout, b); err != nil {
			return err
		}
	}
	return nil
}

func writeBoard(w io.Writer, b workflows.BoardView) error {
	if err := printLine(w, "%s: %s", b.Group, cmpOr(b.Goal, "(no goal)")); err != nil {
		return err
	}
	rows := [][]string{{"TASK", "STATUS", "HOLDER", "TITLE"}}
	for _, t := range b.Tasks {
		holder := "—"
		if t.Holder != "" {
			holder = b.Group + "/" + t.Holder
		}
		rows = append(rows, []string{printable(t.ID, true), printable(t.Status, true), printable(holder, true), printable(t.Title, true)})
	}
	if len(b.Tasks) == 0 {
		fmt.Fprintln(w, "no tasks (add one with nid board add "+b.Group+" TITLE)")
	} else if err := writeTable(w, rows); err != nil {
		return err
	}
	if len(b.Locks) > 0 {
		locks := [][]string{{"LOCK", "HOLDER"}}
		for _, l := range b.Locks {
			locks = append(locks, []string{printable(l.Name, true), printable(b.Group+"/"+l.Holder, true)})
		}
		if err := writeTable(w, locks); err != nil {
			return err
		}
	}
	if b.Exhausted != "" {
		return printLine(w, "budget exhausted (%s): %s", b.Exhausted, workflows.BudgetText(b.Budget, b.Spent))
	}
	return nil
}

type boardAddOptions struct {
	Group, Title, Detail string
	JSON                 bool
}

func newBoardAddCommand(a *app) *cli.Command {
	return &cli.Command{
		Name:      "add",
		Usage:     "Add a task to a group's board",
		ArgsUsage: "GROUP TITLE",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "detail", Usage: "What the task involves, for the session that takes it"},
			jsonFlag(),
		},
		Description: "Adds a task; an idle session without a task takes it at once.",
		Action: action(func(cCtx *cli.Context) error {
			args, err := commandArgs(cCtx)
			if err != nil {
				return err
			}
			opts, err := newBoardAddOptions(args, cCtx.String("detail"), cCtx.Bool("json"))
			if err != nil {
				return err
			}
			return a.withClient(cCtx, func(ctx context.Context, c client.Client) error {
				return runBoardAdd(ctx, c, opts, a.Stdout)
			})
		}),
	}
}

func newBoardAddOptions(args []string, detail string, asJSON bool) (boardAddOptions, error) {
	if len(args) < 2 {
		return boardAddOptions{}, fmt.Errorf(`nid board add takes GROUP TITLE, e.g. nid board add web "Dark mode toggle"`)
	}
	if err := validGroup(args[0]); err != nil {
		return boardAddOptions{}, err
	}
	title := strings.TrimSpace(strings.Join(args[1:], " "))
	if title == "" {
		return boardAddOptions{}, fmt.Errorf("the task's TITLE is empty")
	}
	return boardAddOptions{Group: args[0], Title: title, Detail: detail, JSON: asJSON}, nil
}

func runBoardAdd(ctx context.Context, c client.Client, opts boardAddOptions, stdout io.Writer) error {
	task, err := nidclient.AddTask(ctx, c, opts.Group, opts.Title, opts.Detail)
	if err != nil {
		return err
	}
	if opts.JSON {
		return writeJSON(stdout, task)
	}
	return printLine(stdout, "added task %s to %s: %s", task.ID, opts.Group, task.Title)
}

type stopOptions struct {
	Group, Name string
}

func newStopCommand(a *app) *cli.Command {
	return &cli.Command{
		Name:      "stop",
		Usage:     "Stop a session, or every session of a group, and release their claims and locks",
		ArgsUsage: "GROUP/SESSION | GROUP",
		Description: "Stops the session's agent; the session takes no more turns or rotations.\n" +
			"Its claimed tasks go back to the board and its locks are released; nid says\n" +
			"which. The session stays listed as stopped, with its history. Given a GROUP,\n" +
			"stops each of its sessions (nid up and nid reload stop those of a group that\n" +
			"left nid.yaml themselves, unless nid up was given --keep-removed).",
		Action: action(func(cCtx *cli.Context) error {
			args, err := commandArgs(cCtx)
			if err != nil {
				return err
			}
			if len(args) != 1 {
				return fmt.Errorf("nid stop takes one GROUP/SESSION, or a GROUP to stop all its sessions")
			}
			var opts stopOptions
			if strings.Contains(args[0], "/") {
				opts.Group, opts.Name, err = workflows.ParseSessionRef(args[0])
			} else {
				opts.Group, err = args[0], validGroup(args[0])
			}
			if err != nil {
				return err
			}
			return a.withClient(cCtx, func(ctx context.Context, c client.Client) error {
				if opts.Name == "" {
					return runStopGroup(ctx, c, opts.Group, a.Stdout)
				}
				return runStop(ctx, c, opts, a.Stdout)
			})
		}),
	}
}

func runStopGroup(ctx context.Context, c client.Client, group string, stdout io.Writer) error {
	stopped, err := nidclient.StopGroup(ctx, c, group)
	if err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(stopped)) {
		if err := printStopped(stdout, group, name, stopped[name]); err != nil {
			return err
		}
	}
	return nil
}

func runStop(ctx context.Context, c client.Client, opts stopOptions, stdout io.Writer) error {
	res, err := nidclient.Stop(ctx, c, opts.Group, opts.Name)
	if err != nil {
		return err
	}
	return printStopped(stdout, opts.Group, opts.Name, res)
}

// printStopped says what a stopped session let go of, and when its agent
// stops.
func printStopped(stdout io.Writer, group, name string, res nidclient.Stopped) error {
	ref := group + "/" + name
	held := "it held no tasks or locks"
	if len(res.Released) > 0 {
		held = "released " + strings.Join(res.Released, ", ")
	}
	if err := printLine(stdout, "stopped %s; %s", ref, held); err != nil {
		return err
	}
	// A turn is not cut short: the session stops its agent when it ends.
	switch res.Was {
	case workflows.StatusWorking, workflows.StatusRateLimited, workflows.StatusRotating:
		return printLine(stdout, "%s is %s: its agent stops when the current step ends", ref, res.Was)
	}
	return nil
}

type startOptions struct {
	Group, Name string
	Fresh       bool
}

func newStartCommand(a *app) *cli.Command {
	return &cli.Command{
		Name:      "start",
		Usage:     "Start a stopped session, or every stopped session of a group, again where it was",
		ArgsUsage: "GROUP/SESSION | GROUP",
		Description: "Brings a session stopped with nid stop back: it claims tasks and takes turns\n" +
			"again in the same conversation, or with --fresh hands off into a fresh one\n" +
			"first. Given a GROUP, starts each of its stopped sessions.",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "fresh", Usage: "Start with a fresh conversation (by handoff) rather than the same one"},
		},
		Action: action(func(cCtx *cli.Context) error {
			args, err := commandArgs(cCtx)
			if err != nil {
				return err
			}
			if len(args) != 1 {
				return fmt.Errorf("nid start takes one GROUP/SESSION, e.g. nid start web/lead, or a GROUP to start all its stopped sessions")
			}
			opts := startOptions{Fresh: cCtx.Bool("fresh")}
			if strings.Contains(args[0], "/") {
				opts.Group, opts.Name, err = workflows.ParseSessionRef(args[0])
			} else {
				opts.Group, err = args[0], validGroup(args[0])
			}
			if err != nil {
				return err
			}
			return a.withClient(cCtx, func(ctx context.Context, c client.Client) error {
				if opts.Name == "" {
					return runStartGroup(ctx, c, opts, a.Stdout)
				}
				return runStart(ctx, c, opts, a.Stdout)
			})
		}),
	}
}

func runStart(ctx context.Context, c client.Client, opts startOptions, stdout io.Writer) error {
	if err := nidclient.Start(ctx, c, opts.Group, opts.Name, opts.Fresh); err != nil {
		return err
	}
	return printLine(stdout, "started %s/%s; it goes on %s", opts.Group, opts.Name, startedHow(opts.Fresh))
}

func runStartGroup(ctx context.Context, c client.Client, opts startOptions, stdout io.Writer) error {
	started, err := nidclient.StartGroup(ctx, c, opts.Group, opts.Fresh)
	for _, name := range started {
		if err := printLine(stdout, "started %s/%s; it goes on %s", opts.Group, name, startedHow(opts.Fresh)); err != nil {
			return err
		}
	}
	return err
}

func startedHow(fresh bool) string {
	if fresh {
		return "after a handoff into a fresh conversation"
	}
	return "in the same conversation"
}

func newForgetCommand(a *app) *cli.Command {
	return &cli.Command{
		Name:      "forget",
		Usage:     "Forget a stopped group that left nid.yaml, and its sessions",
		ArgsUsage: "GROUP",
		Description: "Ends the workflows of a group that is no longer in nid.yaml and whose\n" +
			"sessions are all stopped, so that it leaves nid ls, nid board and nid inbox.\n" +
			"Their histories stay in Temporal (closed, for as long as its namespace keeps\n" +
			"them; the Temporal Web UI shows them). Refuses a group still in nid.yaml\n" +
			"(remove it and nid reload first) or with a session that is not stopped\n" +
			"(nid stop GROUP first). Needs no worker. A group forgotten and put back in\n" +
			"nid.yaml starts afresh.",
		Action: action(func(cCtx *cli.Context) error {
			args, err := commandArgs(cCtx)
			if err != nil {
				return err
			}
			if len(args) != 1 {
				return fmt.Errorf("nid forget takes one GROUP, e.g. nid forget web")
			}
			group := args[0]
			if err := validGroup(group); err != nil {
				return err
			}
			cfg, err := a.loadConfig(cCtx)
			if err != nil {
				return err
			}
			if _, ok := cfg.Groups[group]; ok {
				return fmt.Errorf("group %s is still in nid.yaml: remove it from the file and run nid reload (which stops its sessions), then nid forget %s", group, group)
			}
			return a.withClient(cCtx, func(ctx context.Context, c client.Client) error {
				return runForget(ctx, c, group, a.Stdout)
			})
		}),
	}
}

func runForget(ctx context.Context, c client.Client, group string, stdout io.Writer) error {
	ended, err := nidclient.Forget(ctx, c, group)
	if err != nil {
		return err
	}
	what := "no sessions"
	if len(ended) > 0 {
		what = "sessions " + strings.Join(ended, ", ")
	}
	return printLine(stdout, "forgot group %s and its %s; their histories stay in Temporal", group, what)
}
