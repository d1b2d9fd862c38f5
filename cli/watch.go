package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/urfave/cli/v2"
	"go.temporal.io/sdk/client"

	"github.com/nid-dev/nid/nidclient"
	"github.com/nid-dev/nid/workflows"
)

// Feed defaults. Temporal has no push for workflow state, so the feed polls:
// one visibility list and one events query per session each interval.
const (
	// watchBacklog is how many past events of each session the feed shows
	// before following, so a fresh `nid watch` has some context.
	watchBacklog  = 10
	watchInterval = 500 * time.Millisecond
)

type watchOptions struct {
	// Group is empty for every group; Name is empty for every session of
	// Group.
	Group string
	Name  string
	JSON  bool
	// Backlog is how many past events per session to show first.
	Backlog  int
	Interval time.Duration
	// Persist retries failures from the start too: nid up's feed must not
	// end while the node it reports on runs.
	Persist bool
}

func newWatchCommand(a *app) *cli.Command {
	return &cli.Command{
		Name:      "watch",
		Usage:     "Follow the event feed of every session, a group or one session",
		ArgsUsage: "[GROUP[/SESSION]]",
		Description: "Prints the last 10 events of each session, then every new one as it happens,\n" +
			"one line each: turns with how full the context is, rotations marked ↻ with\n" +
			"method, reason, tokens before → after, conversations and the handoff summary,\n" +
			"failed rotations marked ✗. --json prints one event object per line. Ctrl-C\n" +
			"stops it.",
		Flags: []cli.Flag{jsonFlag()},
		Action: action(func(cCtx *cli.Context) error {
			args, err := commandArgs(cCtx)
			if err != nil {
				return err
			}
			opts, err := newWatchOptions(args, cCtx.Bool("json"))
			if err != nil {
				return err
			}
			return a.withClient(cCtx, func(ctx context.Context, c client.Client) error {
				return runWatch(ctx, c, opts, a.Stdout, a.Stderr)
			})
		}),
	}
}

func newWatchOptions(args []string, asJSON bool) (watchOptions, error) {
	opts := watchOptions{JSON: asJSON, Backlog: watchBacklog, Interval: watchInterval}
	switch len(args) {
	case 0:
		return opts, nil
	case 1:
	default:
		return opts, fmt.Errorf("too many arguments: nid watch takes at most one GROUP or GROUP/SESSION")
	}
	var err error
	opts.Group, opts.Name, err = groupOrSession(args[0])
	return opts, err
}

// runWatch prints the feed until ctx is cancelled, which is a clean end. An
// error before the first poll succeeds (the list fails, an unknown group or
// session) ends it unless opts.Persist; later ones, and sessions that do not
// answer, are reported once and retried, so a feed outlives a worker or
// server restart.
func runWatch(ctx context.Context, c client.Client, opts watchOptions, stdout, stderr io.Writer) error {
	f := &feed{
		src:    nidclient.NewFeed(c, nidclient.FeedOptions{Group: opts.Group, Name: opts.Name, Backlog: opts.Backlog}),
		opts:   opts,
		stdout: stdout, stderr: stderr,
	}
	started := false
	pace := nidclient.Pace{Every: opts.Interval}
	for {
		poll, err := f.src.Poll(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err == nil {
			err = f.show(poll)
		}
		if err == nil && !started && len(poll.Events) > 0 && !opts.JSON {
			// What came first was the recent past; from here on it is live.
			_, err = fmt.Fprintln(stdout, liveMarker)
		}
		switch {
		case err != nil && !started && !opts.Persist:
			return err
		case err != nil:
			f.warn(err)
		case poll.Problem != nil:
			started = true
			f.warn(poll.Problem)
		default:
			started = true
			f.failing = ""
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(pace.Next(err != nil || len(poll.Events) > 0)):
		}
	}
}

// liveMarker separates the recent past a feed shows first from what happens
// while it runs.
const liveMarker = "── live ──"

type feed struct {
	src            *nidclient.Feed
	opts           watchOptions
	stdout, stderr io.Writer
	// failing is the error last reported, so a lasting failure is said once.
	failing string
	// width is the widest session name seen, so columns do not shift as
	// sessions appear.
	width int
}

// show prints a poll's events.
func (f *feed) show(poll nidclient.FeedPoll) error {
	for _, s := range poll.Sessions {
		f.width = max(f.width, visibleWidth(s.Ref()))
	}
	for _, e := range poll.Events {
		f.width = max(f.width, visibleWidth(e.Group+"/"+e.Session))
		if err := f.print(e, f.width); err != nil {
			return err
		}
	}
	return nil
}

func (f *feed) print(e workflows.Event, width int) error {
	if f.opts.JSON {
		b, err := json.Marshal(e)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(f.stdout, "%s\n", printableJSON(b))
		return err
	}
	e.At = e.At.Local()
	return printLine(f.stdout, "%s", eventLine(e, width))
}

func (f *feed) warn(err error) {
	msg := err.Error()
	if un := (*nidclient.UnavailableError)(nil); f.opts.Persist && errors.As(err, &un) {
		// nid up's or nid worker's own feed: the worker that should answer
		// is this process, still taking its sessions back after a start.
		msg = un.Who + " has not answered yet"
	}
	if msg != f.failing {
		_ = printLine(f.stderr, "nid: %s (retrying)", msg)
		f.failing = msg
	}
}

// eventLine is one line of the feed, the session padded to width:
//
//	15:04:05 web/lead  turn 12  62% of 200k
//	15:04:05 web/lead  ↻ handoff (context) 171k → 3.2k  sim-1 → sim-2  "Refactored the…"
func eventLine(e workflows.Event, width int) string {
	return e.At.Format("15:04:05") + " " + padRight(e.Group+"/"+e.Session, width) + "  " + eventText(e)
}

func eventText(e workflows.Event) string {
	switch {
	case e.Kind == workflows.EventTurn:
		s := cmp.Or(e.Text, e.Kind)
		if e.Context != nil && e.Context.Percent != nil {
			s += "  " + percentText(*e.Context, false)
		}
		return s
	case e.Kind == workflows.EventRotation && e.Rotation != nil:
		return rotationText(*e.Rotation)
	case e.Kind == workflows.EventRotationFailed && e.Rotation != nil && e.Rotation.Cancelled:
		return e.Text // not a failure: the stop cancelled it, and says so
	case e.Kind == workflows.EventRotationFailed && e.Rotation != nil:
		r := e.Rotation
		s := fmt.Sprintf("✗ rotation failed: %s (%s)", r.Method, r.Reason)
		if r.Error != "" {
			s += ": " + r.Error
		}
		return s
	default:
		return cmp.Or(e.Text, e.Kind)
	}
}

// summaryChars is how much of a handoff summary a feed line shows.
const summaryChars = 60

// rotationText is "↻ handoff (context) 171k → 3.2k  sim-1 → sim-2  "summary…"  verified: true":
// method and reason, tokens before → after, and for a handoff the old and
// new conversations, the start of the summary (said when nid built it or
// the last output stood in) and whether the fresh conversation's
// handoff_ack matched the board.
func rotationText(r workflows.RotationEvent) string {
	reason := r.Reason
	if r.FellBack {
		reason += ", compact failed"
	}
	s := fmt.Sprintf("↻ %s (%s)", r.Method, reason)
	if r.BeforeTokens > 0 || r.AfterTokens > 0 {
		s += " " + formatTokens(r.BeforeTokens) + " → " + formatTokens(r.AfterTokens)
	}
	if r.OldConversation != "" && r.NewConversation != "" && r.OldConversation != r.NewConversation {
		s += "  " + r.OldConversation + " → " + r.NewConversation
	}
	if r.Summary != "" {
		quoted := `"` + oneLine(r.Summary, summaryChars) + `"`
		switch r.SummarySource {
		case workflows.SummaryFromLastOutput:
			quoted = "no handoff, last output: " + quoted
		case workflows.SummaryFromNid:
			quoted = "handoff built by nid: " + quoted
		}
		s += "  " + quoted
	}
	if r.Verified != "" {
		s += "  verified: " + verifiedText(r.Verified)
	}
	return s
}
