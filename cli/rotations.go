package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"go.temporal.io/sdk/client"

	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/nidclient"
	"github.com/nid-dev/nid/workflows"
)

type rotationsOptions struct {
	// Group is required; Name is empty for every session of Group.
	Group string
	Name  string
	JSON  bool
	// Now decides whether a receipt's date is worth printing.
	Now time.Time
}

func newRotationsCommand(a *app) *cli.Command {
	return &cli.Command{
		Name:      "rotations",
		Usage:     "Show the receipts of a group's or a session's rotations",
		ArgsUsage: "GROUP[/SESSION]",
		Description: "Lists each session's recent rotations, oldest first, one receipt a line: when,\n" +
			"method, reason, tokens before → after, what the rotation itself cost, where\n" +
			"the handoff came from (agent: its handoff_write; nid: built from the transcript;\n" +
			"last-output) and its size, the git facts nid put in the first message, and\n" +
			"whether the fresh conversation's handoff_ack matched the board (true, false,\n" +
			"none; not asked for an agent that calls no tools), with what differed or why it\n" +
			"failed. A rotation nid stop cancelled keeps its number and says so. Then a line\n" +
			"per session: rotations by method, failed and cancelled ones, how many of the\n" +
			"handoffs asked were verified, tokens reclaimed per rotation.",
		Flags: []cli.Flag{jsonFlag()},
		Action: action(func(cCtx *cli.Context) error {
			args, err := commandArgs(cCtx)
			if err != nil {
				return err
			}
			opts, err := newRotationsOptions(args, cCtx.Bool("json"), time.Now())
			if err != nil {
				return err
			}
			return a.withClient(cCtx, func(ctx context.Context, c client.Client) error {
				return runRotations(ctx, c, opts, a.Stdout)
			})
		}),
	}
}

func newRotationsOptions(args []string, asJSON bool, now time.Time) (rotationsOptions, error) {
	opts := rotationsOptions{JSON: asJSON, Now: now}
	if len(args) != 1 {
		return opts, fmt.Errorf("nid rotations takes one GROUP or GROUP/SESSION, e.g. web or web/lead")
	}
	var err error
	opts.Group, opts.Name, err = groupOrSession(args[0])
	return opts, err
}

func runRotations(ctx context.Context, c client.Client, opts rotationsOptions, stdout io.Writer) error {
	sessions, err := nidclient.Rotations(ctx, c, opts.Group, opts.Name)
	if err != nil {
		return err
	}
	if opts.JSON {
		return writeJSON(stdout, sessions)
	}
	rows := [][]string{{"SESSION", "#", "TIME", "METHOD", "REASON", "TOKENS", "COST", "SUMMARY", "FACTS", "VERIFIED", "NOTE"}}
	for _, s := range sessions {
		for _, r := range s.Receipts {
			rows = append(rows, receiptRow(s.Session, r, opts.Now))
		}
	}
	if len(rows) > 1 {
		if err := writeTable(stdout, rows); err != nil {
			return err
		}
	}
	for _, s := range sessions {
		if err := printLine(stdout, "%s: %s", s.Session, statsText(s.Stats)); err != nil {
			return err
		}
	}
	if len(sessions) == 0 {
		return printLine(stdout, "group %s has no running sessions", opts.Group)
	}
	return nil
}

// receiptRow is one receipt as nid rotations prints it.
func receiptRow(session string, r workflows.RotationEvent, now time.Time) []string {
	method := r.Method
	if r.Cancelled {
		method += " cancelled"
	} else if !r.OK {
		method += " ✗"
	}
	reason := r.Reason
	if r.FellBack {
		reason += ", compact failed"
	}
	at := "—"
	if !r.At.IsZero() {
		at = inboxTime(r.At, now)
	}
	note := r.Error
	if note == "" {
		note = r.VerifyNote
	}
	return []string{session, fmt.Sprint(r.Number), at, method, reason,
		formatTokens(r.BeforeTokens) + " → " + formatTokens(r.AfterTokens),
		costText(r), summaryText(r), factsText(r), verifiedText(r.Verified), printable(oneLine(note, 200), true)}
}

// costText is what the rotation's own model calls cost: tokens, and USD
// where the agent reports it.
func costText(r workflows.RotationEvent) string {
	if r.CostTokens == 0 && r.CostUSD == 0 {
		return "—"
	}
	s := formatTokens(r.CostTokens) + " tok"
	if r.CostUSD > 0 {
		s += fmt.Sprintf(" $%.2f", r.CostUSD)
	}
	return s
}

// summaryText is where a handoff's summary came from and its size.
func summaryText(r workflows.RotationEvent) string {
	if r.SummarySource == "" {
		return "—"
	}
	return r.SummarySource + " " + formatTokens(int64(r.SummaryBytes)) + "B"
}

// factsText is what the receipt keeps of the git facts nid read: "—" when
// it read none (a compaction, or git failed).
func factsText(r workflows.RotationEvent) string {
	switch f := r.Facts; {
	case f == nil:
		return "—"
	case !f.Repo:
		return "no repo"
	default:
		return fmt.Sprintf("%s, %s changed", plural(f.Commits, "commit"), fmt.Sprint(f.Changed))
	}
}

// verifiedText is a receipt's verified column: true, false, none (asked,
// and it did not say), not asked (its agent calls no tools), or "—".
func verifiedText(v string) string {
	if v == workflows.VerifiedNotAsked {
		return "not asked"
	}
	return dash(v)
}

func dash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// statsText sums up a session's receipts: "3 rotations (1 compact, 1
// handoff, 1 vendor compact), 1 failed; 1 of 1 handoff verified; 54.2k
// tokens reclaimed per rotation".
func statsText(s nidclient.RotationStats) string {
	n := s.Rotations()
	if n == 0 && s.Failed == 0 && s.Cancelled == 0 {
		return "no rotations yet"
	}
	var by []string
	for _, m := range []struct {
		n    int
		name string
	}{{s.Compact, config.ModeCompact}, {s.Handoff, config.ModeHandoff}, {s.Vendor, "vendor compact"}} {
		if m.n > 0 {
			by = append(by, fmt.Sprintf("%d %s", m.n, m.name))
		}
	}
	text := plural(n, "rotation")
	if len(by) > 0 {
		text += " (" + strings.Join(by, ", ") + ")"
	}
	if s.Failed > 0 {
		text += fmt.Sprintf(", %d failed", s.Failed)
	}
	if s.Cancelled > 0 {
		text += fmt.Sprintf(", %d cancelled by nid stop", s.Cancelled)
	}
	if s.Checked > 0 {
		text += fmt.Sprintf("; %d of %s verified", s.Verified, plural(s.Checked, "handoff"))
	}
	if s.NotAsked > 0 {
		text += fmt.Sprintf("; %s not asked to acknowledge (the agent calls no tools)", plural(s.NotAsked, "handoff"))
	}
	if n > 0 {
		text += "; " + formatTokens(s.ReclaimedPerRotation) + " tokens reclaimed per rotation"
	}
	return text
}
