package cli

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/urfave/cli/v2"
	"go.temporal.io/sdk/client"

	"github.com/nid-dev/nid/workflows"
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
			"time, session, kind and what happened.",
		Flags: []cli.Flag{jsonFlag()},
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
	groups := []string{opts.Group}
	if opts.Group == "" {
		var err error
		if groups, err = listGroups(ctx, c); err != nil {
			return err
		}
	}
	items := []workflows.InboxItem{}
	for _, g := range groups {
		view, err := queryGroup(ctx, c, g)
		if isNotFound(err) && opts.Group != "" {
			return unknownGroup(ctx, c, g)
		}
		if isNotFound(err) {
			// It ended between the list and the query.
			continue
		}
		if err != nil {
			return notAnswering("group "+g, err)
		}
		items = append(items, view.Inbox...)
	}
	slices.SortStableFunc(items, func(a, b workflows.InboxItem) int {
		return cmp.Or(a.At.Compare(b.At), cmp.Compare(a.Group, b.Group), cmp.Compare(a.Seq, b.Seq))
	})
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
		rows = append(rows, []string{inboxTime(it.At, opts.Now), printable(who, true), printable(it.Kind, true), printable(it.Text, true)})
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
