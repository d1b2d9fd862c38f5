package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/urfave/cli/v2"
	"go.temporal.io/sdk/client"

	"github.com/nid-dev/nid/nidclient"
)

type inboxOptions struct {
	Group string
	JSON  bool
	// Now decides whether an item's date is worth printing.
	Now time.Time
}

func newInboxCommand(a *app) *cli.Command {
	return &cli.Command{
		Name:      "inbox",
		Usage:     "Show what needs a human: failed rotations, stuck sessions",
		ArgsUsage: "[GROUP]",
		Description: "Lists the inbox items of every running group, or of GROUP, oldest first:\n" +
			"time, session, kind and what happened (×N when it happened N times). nid inbox\n" +
			"clear removes the items once you have dealt with them.",
		Flags:           []cli.Flag{jsonFlag()},
		Subcommands:     []*cli.Command{newInboxClearCommand(a)},
		HideHelpCommand: true,
		Action: action(func(cCtx *cli.Context) error {
			args, err := commandArgs(cCtx)
			if err != nil {
				return err
			}
			opts, err := newInboxOptions(args, cCtx.Bool("json"), time.Now())
			if err != nil {
				return err
			}
			return a.withClient(cCtx, func(ctx context.Context, c client.Client) error {
				return runInbox(ctx, c, opts, a.Stdout)
			})
		}),
	}
}

func newInboxOptions(args []string, asJSON bool, now time.Time) (inboxOptions, error) {
	group, err := optionalGroup("inbox", args)
	return inboxOptions{JSON: asJSON, Now: now, Group: group}, err
}

func runInbox(ctx context.Context, c client.Client, opts inboxOptions, stdout io.Writer) error {
	items, err := nidclient.Inbox(ctx, c, opts.Group)
	if err != nil {
		return err
	}
	if opts.JSON {
		return writeJSON(stdout, items)
	}
	if len(items) == 0 {
		_, err := fmt.Fprintln(stdout, "inbox empty")
		return err
	}
	rows := make([][]string, 0, len(items))
	for _, it := range items {
		who := it.Group
		if it.Session != "" {
			who += "/" + it.Session
		}
		// The count goes with the kind, which is what repeated: beside
		// the text it ran into a text's own number (×3 3 rotations
		// failed in a row).
		kind := it.Kind
		if it.Count > 1 {
			kind = fmt.Sprintf("%s ×%d", kind, it.Count)
		}
		rows = append(rows, []string{inboxTime(it.At, opts.Now), printable(who, true), printable(kind, true), printable(it.Text, true)})
	}
	return writeTable(stdout, rows)
}

// inboxTime is the time of day for today's items; older ones, which an
// inbox keeps until they are dealt with, carry their date.
func inboxTime(at, now time.Time) string {
	at = at.In(now.Location())
	if y, m, d := at.Date(); y == now.Year() && m == now.Month() && d == now.Day() {
		return at.Format("15:04:05")
	}
	return at.Format("2006-01-02 15:04:05")
}

func newInboxClearCommand(a *app) *cli.Command {
	return &cli.Command{
		Name:      "clear",
		Usage:     "Remove the inbox items you have dealt with",
		ArgsUsage: "[GROUP]",
		Description: "Removes the items nid inbox shows now, of every running group or of GROUP;\n" +
			"an item that arrives meanwhile stays.",
		Action: action(func(cCtx *cli.Context) error {
			args, err := commandArgs(cCtx)
			if err != nil {
				return err
			}
			group, err := optionalGroup("inbox clear", args)
			if err != nil {
				return err
			}
			return a.withClient(cCtx, func(ctx context.Context, c client.Client) error {
				return runInboxClear(ctx, c, group, a.Stdout)
			})
		}),
	}
}

func runInboxClear(ctx context.Context, c client.Client, group string, stdout io.Writer) error {
	n, err := nidclient.ClearInbox(ctx, c, group)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "cleared %s\n", plural(n, "inbox item"))
	return err
}
