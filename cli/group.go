package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
	"go.temporal.io/sdk/client"

	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/nidclient"
	"github.com/nid-dev/nid/workflows"
)

func newGroupCommand(a *app) *cli.Command {
	return &cli.Command{
		Name:            "group",
		Usage:           "Show or change a running group",
		ArgsUsage:       "COMMAND",
		Subcommands:     []*cli.Command{newGroupShowCommand(a), newGroupSetCommand(a)},
		HideHelpCommand: true,
		Action:          unknownCommand,
	}
}

// groupSetKeys are the settings nid group set can change on a running group.
var groupSetKeys = []string{"rotate", "budget", "learned"}

type groupSetOptions struct {
	Group       string
	RotateJSON  string
	BudgetJSON  string
	LearnedJSON string
}

func newGroupSetCommand(a *app) *cli.Command {
	return &cli.Command{
		Name:      "set",
		Usage:     "Change a running group's settings",
		ArgsUsage: "GROUP KEY=VALUE...",
		Description: "Sets KEY to VALUE on the running group GROUP, validated like nid.yaml:\n" +
			"  rotate   a JSON object of the rotate policy fields to change (mode,\n" +
			"           contextPercent, contextTokens, maxTurns, maxConcurrentRotations);\n" +
			"           sessions follow it from their next decision\n" +
			"  budget   a JSON object of the budget limits to change (turns, tokens, usd;\n" +
			"           0 is no limit); raising a spent budget resumes the sessions\n" +
			"  learned  a JSON object from kind/model to the percent its sessions rotate at,\n" +
			"           overriding what nid learned of that vendor compacting by itself (null\n" +
			"           forgets it; nid group show lists what it learned)\n" +
			"Prints the result.\n\n" +
			"   nid group set web rotate='{\"mode\":\"handoff\",\"maxTurns\":40}'\n" +
			"   nid group set web budget='{\"turns\":500,\"usd\":20}'\n" +
			"   nid group set web learned='{\"claude/claude-sonnet-4-5\":75}'",
		Action: action(func(cCtx *cli.Context) error {
			args, err := commandArgs(cCtx)
			if err != nil {
				return err
			}
			opts, err := newGroupSetOptions(args)
			if err != nil {
				return err
			}
			return a.withClient(cCtx, func(ctx context.Context, c client.Client) error {
				return runGroupSet(ctx, c, opts, a.Stdout)
			})
		}),
	}
}

func newGroupSetOptions(args []string) (groupSetOptions, error) {
	if len(args) == 0 {
		return groupSetOptions{}, fmt.Errorf(`nid group set takes GROUP KEY=VALUE, e.g. nid group set web rotate='{"mode":"handoff"}'`)
	}
	opts := groupSetOptions{Group: args[0]}
	if err := validGroup(opts.Group); err != nil {
		return opts, err
	}
	if len(args) == 1 {
		return opts, fmt.Errorf(`nothing to set on %s: add KEY=VALUE, e.g. rotate='{"mode":"handoff"}' (keys: %s)`, opts.Group, strings.Join(groupSetKeys, ", "))
	}
	seen := map[string]bool{}
	for _, arg := range args[1:] {
		key, value, ok := strings.Cut(arg, "=")
		if !ok || key == "" {
			return opts, fmt.Errorf("%q is not KEY=VALUE (keys: %s)", arg, strings.Join(groupSetKeys, ", "))
		}
		if !slices.Contains(groupSetKeys, key) {
			return opts, fmt.Errorf("unknown key %q: allowed keys: %s", key, strings.Join(groupSetKeys, ", "))
		}
		if seen[key] {
			return opts, fmt.Errorf("%s is given twice", key)
		}
		seen[key] = true
		if strings.TrimSpace(value) == "" {
			return opts, fmt.Errorf(`%s needs a value, e.g. rotate='{"mode":"handoff"}' or budget='{"turns":500}'`, key)
		}
		switch key {
		case "rotate":
			opts.RotateJSON = value
		case "budget":
			opts.BudgetJSON = value
		default:
			opts.LearnedJSON = value
		}
	}
	return opts, nil
}

func runGroupSet(ctx context.Context, c client.Client, opts groupSetOptions, stdout io.Writer) error {
	res, err := nidclient.SetGroup(ctx, c, opts.Group, nidclient.GroupSettings{
		RotateJSON: opts.RotateJSON, BudgetJSON: opts.BudgetJSON, LearnedJSON: opts.LearnedJSON,
	})
	if err != nil {
		return err
	}
	if opts.RotateJSON != "" {
		if _, err := fmt.Fprintf(stdout, "%s rotate: %s\n", opts.Group, workflows.PolicyText(res.Rotate)); err != nil {
			return err
		}
	}
	if opts.BudgetJSON != "" {
		if _, err := fmt.Fprintf(stdout, "%s budget: %s\n", opts.Group, workflows.BudgetText(res.Budget, res.Spent)); err != nil {
			return err
		}
	}
	if opts.LearnedJSON != "" {
		return printLine(stdout, "%s learned: %s", opts.Group, workflows.LearnedListText(res.Learned))
	}
	return nil
}

type groupShowOptions struct {
	Group string
	JSON  bool
}

func newGroupShowCommand(a *app) *cli.Command {
	return &cli.Command{
		Name:        "show",
		Usage:       "Show a group's policy, budget spent and left, and sessions",
		ArgsUsage:   "GROUP",
		Flags:       []cli.Flag{jsonFlag()},
		Description: "Prints the group's goal, rotate policy, budget (spent and left) and sessions.",
		Action: action(func(cCtx *cli.Context) error {
			args, err := commandArgs(cCtx)
			if err != nil {
				return err
			}
			if len(args) != 1 {
				return fmt.Errorf("nid group show takes one GROUP")
			}
			if err := validGroup(args[0]); err != nil {
				return err
			}
			opts := groupShowOptions{Group: args[0], JSON: cCtx.Bool("json")}
			return a.withClient(cCtx, func(ctx context.Context, c client.Client) error {
				return runGroupShow(ctx, c, opts, a.Stdout)
			})
		}),
	}
}

func runGroupShow(ctx context.Context, c client.Client, opts groupShowOptions, stdout io.Writer) error {
	view, err := nidclient.GetGroup(ctx, c, opts.Group)
	if err != nil {
		return err
	}
	if opts.JSON {
		return writeJSON(stdout, view)
	}
	b := view.Board
	sessions := make([]string, 0, len(view.Sessions))
	for _, s := range view.Sessions {
		if slices.Contains(view.Stopped, s) {
			s += " (stopped)"
		}
		sessions = append(sessions, s)
	}
	budget := workflows.BudgetText(b.Budget, b.Spent)
	if b.Exhausted != "" {
		budget += " — exhausted (" + b.Exhausted + "): sessions paused"
	}

	rows := [][]string{
		{"group", view.Name},
		{"goal", cmpOr(view.Goal, "—")},
		{"rotate", workflows.PolicyText(view.Policy)},
		{"thresholds", thresholdsText(ctx, c, view)},
		{"learned", workflows.LearnedListText(view.Learned)},
		{"budget", budget},
		{"", budgetNote(b.Budget)},
		{"sessions", strings.Join(sessions, ", ")},
		{"tasks", taskCounts(b.Tasks)},
		{"inbox", plural(len(view.Inbox), "item")},
	}
	for _, row := range rows {
		row[1] = printable(row[1], true)
	}
	return writeTable(stdout, rows)
}

// thresholdsText says where each session of the group rotates now, in both
// units: the policy's percent or tokens, or what was learned of its vendor.
func thresholdsText(ctx context.Context, c client.Client, view workflows.GroupView) string {
	if view.Policy.Mode == config.ModeOff {
		return rotateOff
	}
	sessions, err := nidclient.ListSessions(ctx, c, view.Name)
	if err != nil || len(sessions) == 0 {
		return "—"
	}
	parts := make([]string, 0, len(sessions))
	for _, s := range sessions {
		t := "unknown until it reports its window"
		if th := s.Context.Threshold; th != nil {
			t = th.Text(s.Context.WindowTokens)
		}
		parts = append(parts, s.Name+" "+t)
	}
	return strings.Join(parts, "; ")
}

// budgetNote says what can spend past a budget's limits (see
// docs/reliability.md).
func budgetNote(b config.Budget) string {
	if b.Turns <= 0 && b.Tokens <= 0 && b.USD <= 0 {
		return "no limits: sessions run until stopped"
	}
	return "a manual nid rotate runs even when the budget is spent: it costs one turn, and the tokens and dollars its model calls spend; a tokens or usd limit is passed by the turns and rotations already running when it is reached"
}

func cmpOr(s, fallback string) string {
	if s == "" {
		return fallback
	}
	return s
}

func taskCounts(tasks []workflows.Task) string {
	n := map[string]int{}
	for _, t := range tasks {
		n[t.Status]++
	}
	return fmt.Sprintf("%d todo, %d claimed, %d done", n[workflows.TaskTodo], n[workflows.TaskClaimed], n[workflows.TaskDone])
}
