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
	"github.com/nid-dev/nid/workflows"
)

func newGroupCommand(a *app) *cli.Command {
	return &cli.Command{
		Name:            "group",
		Usage:           "Change a running group",
		ArgsUsage:       "COMMAND",
		Subcommands:     []*cli.Command{newGroupSetCommand(a)},
		HideHelpCommand: true,
		Action:          unknownCommand,
	}
}

// groupSetKeys are the settings nid group set can change on a running group.
var groupSetKeys = []string{"rotate"}

type groupSetOptions struct {
	Group      string
	RotateJSON string
}

func newGroupSetCommand(a *app) *cli.Command {
	return &cli.Command{
		Name:      "set",
		Usage:     "Change a running group's settings",
		ArgsUsage: "GROUP KEY=VALUE...",
		Description: "Sets KEY to VALUE on the running group GROUP. The only key today is rotate, a\n" +
			"JSON object of the rotate policy fields to change (mode, contextPercent,\n" +
			"maxTurns), validated like nid.yaml. Sessions follow it from their next\n" +
			"decision on. Prints the resulting policy.\n\n" +
			"   nid group set web rotate='{\"mode\":\"handoff\",\"maxTurns\":40}'",
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
			return opts, fmt.Errorf(`%s needs a value, e.g. %s='{"mode":"handoff"}'`, key, key)
		}
		opts.RotateJSON = value
	}
	return opts, nil
}

func runGroupSet(ctx context.Context, c client.Client, opts groupSetOptions, stdout io.Writer) error {
	view, err := queryGroup(ctx, c, opts.Group)
	if isNotFound(err) {
		return unknownGroup(ctx, c, opts.Group)
	}
	if err != nil {
		return notAnswering("group "+opts.Group, err)
	}
	// The group validates too; checking here first gives the same clear
	// error without a round trip through its history.
	if _, err := config.ApplyRotateJSON(view.Policy, opts.RotateJSON); err != nil {
		return err
	}
	handle, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   workflows.GroupID(opts.Group),
		UpdateName:   workflows.UpdateSetPolicy,
		Args:         []any{workflows.SetPolicy{RotateJSON: opts.RotateJSON}},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		if isNotFound(err) {
			return unknownGroup(ctx, c, opts.Group)
		}
		return fmt.Errorf("setting rotate on %s: %w", opts.Group, err)
	}
	var policy config.Rotate
	if err := handle.Get(ctx, &policy); err != nil {
		return fmt.Errorf("setting rotate on %s: %w", opts.Group, err)
	}
	_, err = fmt.Fprintf(stdout, "%s rotate: %s\n", opts.Group, workflows.PolicyText(policy))
	return err
}
