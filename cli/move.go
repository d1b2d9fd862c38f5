package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/urfave/cli/v2"
	"go.temporal.io/sdk/client"

	"github.com/nid-dev/nid/nidclient"
	"github.com/nid-dev/nid/workflows"
)

type moveOptions struct {
	Group, Name, Host string
}

func newMoveCommand(a *app) *cli.Command {
	return &cli.Command{
		Name:      "move",
		Usage:     "Move a session to another host",
		ArgsUsage: "GROUP/SESSION HOST",
		Description: "When its current turn ends, the session hands off: the agent writes its\n" +
			"handoff, its branch is pushed with a salvage ref of any uncommitted change\n" +
			"(refs/nid/salvage/...; nothing is committed on the branch), and the fresh\n" +
			"conversation starts on HOST in a fresh worktree of the same branch with the\n" +
			"salvage applied, holding the same tasks and locks. A session whose host is\n" +
			"down moves at once, with what it last said: the turn it was running there is\n" +
			"lost with the host. The rotation event names both hosts.\n\n" +
			"   nid move web/lead box-b",
		Action: action(func(cCtx *cli.Context) error {
			args, err := commandArgs(cCtx)
			if err != nil {
				return err
			}
			opts, err := newMoveOptions(args)
			if err != nil {
				return err
			}
			return a.withClient(cCtx, func(ctx context.Context, c client.Client) error {
				return runMove(ctx, c, opts, a.Stdout)
			})
		}),
	}
}

func newMoveOptions(args []string) (moveOptions, error) {
	if len(args) != 2 {
		return moveOptions{}, fmt.Errorf("nid move takes GROUP/SESSION HOST, e.g. nid move web/lead box-b (got %d arguments)", len(args))
	}
	group, name, err := workflows.ParseSessionRef(args[0])
	if err != nil {
		return moveOptions{}, err
	}
	return moveOptions{Group: group, Name: name, Host: args[1]}, nil
}

func runMove(ctx context.Context, c client.Client, opts moveOptions, stdout io.Writer) error {
	text, err := nidclient.Move(ctx, c, opts.Group, opts.Name, opts.Host)
	if err != nil {
		return err
	}
	return printLine(stdout, "%s", text)
}
