package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"
	"go.temporal.io/sdk/client"

	"github.com/nid-dev/nid/nidclient"
	"github.com/nid-dev/nid/workflows"
)

type sendOptions struct {
	Group string
	Name  string
	Text  string
}

func newSendCommand(a *app) *cli.Command {
	return &cli.Command{
		Name:      "send",
		Usage:     "Queue a prompt for a session's next turn",
		ArgsUsage: "GROUP/SESSION TEXT...",
		Description: "Queues TEXT as the session's next prompt, ahead of its goal. Several words\n" +
			"are joined with spaces; put -- before text that starts with -.\n\n" +
			"   nid send web/lead \"Run the tests before you commit\"",
		Action: action(func(cCtx *cli.Context) error {
			args, err := commandArgs(cCtx)
			if err != nil {
				return err
			}
			opts, err := newSendOptions(args)
			if err != nil {
				return err
			}
			return a.withClient(cCtx, func(ctx context.Context, c client.Client) error {
				return runSend(ctx, c, opts, a.Stdout)
			})
		}),
	}
}

func newSendOptions(args []string) (sendOptions, error) {
	if len(args) == 0 {
		return sendOptions{}, fmt.Errorf(`nid send takes GROUP/SESSION TEXT, e.g. nid send web/lead "Run the tests"`)
	}
	group, name, err := workflows.ParseSessionRef(args[0])
	if err != nil {
		return sendOptions{}, err
	}
	text := strings.Join(args[1:], " ")
	if strings.TrimSpace(text) == "" {
		return sendOptions{}, fmt.Errorf("nothing to send to %s/%s: give the prompt text after the session", group, name)
	}
	return sendOptions{Group: group, Name: name, Text: text}, nil
}

func runSend(ctx context.Context, c client.Client, opts sendOptions, stdout io.Writer) error {
	said, err := nidclient.Send(ctx, c, opts.Group, opts.Name, opts.Text)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(stdout, said)
	return err
}
