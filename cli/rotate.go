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

type rotateOptions struct {
	Group string
	Name  string
	// Mode is empty for the group's mode (auto when the group says off).
	Mode string
}

func newRotateCommand(a *app) *cli.Command {
	return &cli.Command{
		Name:      "rotate",
		Usage:     "Rotate a session's conversation: compact it or hand off to a fresh one",
		ArgsUsage: "GROUP/SESSION",
		Description: "Asks the session to rotate with --mode, else its group's mode (auto when the\n" +
			"group says off). An idle session rotates at once; a working or rate-limited one\n" +
			"when its current turn ends. Asking again before it runs joins the same rotation.\n\n" +
			"   nid rotate web/worker\n" +
			"   nid rotate web/worker --mode handoff",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "mode", Usage: "Rotate by `MODE`: auto (compact, else hand off), compact or handoff"},
		},
		Action: action(func(cCtx *cli.Context) error {
			args, err := commandArgs(cCtx)
			if err != nil {
				return err
			}
			opts, err := newRotateOptions(args, cCtx.String("mode"), cCtx.IsSet("mode"))
			if err != nil {
				return err
			}
			return a.withClient(cCtx, func(ctx context.Context, c client.Client) error {
				return runRotate(ctx, c, opts, a.Stdout)
			})
		}),
	}
}

func newRotateOptions(args []string, mode string, modeSet bool) (rotateOptions, error) {
	if len(args) != 1 {
		return rotateOptions{}, fmt.Errorf("nid rotate takes one GROUP/SESSION, e.g. nid rotate web/lead (got %d arguments)", len(args))
	}
	group, name, err := workflows.ParseSessionRef(args[0])
	if err != nil {
		return rotateOptions{}, err
	}
	if modeSet && (mode == "" || !workflows.ValidRotateMode(mode)) {
		return rotateOptions{}, fmt.Errorf("--mode %q is not a rotation mode: use auto, compact or handoff", mode)
	}
	return rotateOptions{Group: group, Name: name, Mode: mode}, nil
}

func runRotate(ctx context.Context, c client.Client, opts rotateOptions, stdout io.Writer) error {
	answer, err := nidclient.Rotate(ctx, c, opts.Group, opts.Name, opts.Mode)
	if err != nil {
		return err
	}
	return printLine(stdout, "%s", answer.Text)
}
