package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
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
	// watchParallel bounds the events queries in flight at once.
	watchParallel = 8
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
	if strings.Contains(args[0], "/") {
		group, name, err := workflows.ParseSessionRef(args[0])
		if err != nil {
			return opts, err
		}
		opts.Group, opts.Name = group, name
		return opts, nil
	}
	if err := validGroup(args[0]); err != nil {
		return opts, err
	}
	opts.Group = args[0]
	return opts, nil
}

// runWatch prints the feed until ctx is cancelled, which is a clean end. An
// error before the first poll succeeds (the list fails, an unknown group or
// session) ends it unless opts.Persist; later ones, and sessions that do not
// answer, are reported once and retried, so a feed outlives a worker or
// server restart.
func runWatch(ctx context.Context, c client.Client, opts watchOptions, stdout, stderr io.Writer) error {
	f := &feed{c: c, opts: opts, stdout: stdout, stderr: stderr, last: map[string]int64{}}
	started := false
	for {
		warning, err := f.poll(ctx, !started)
		if ctx.Err() != nil {
			return nil
		}
		switch {
		case err != nil && !started && !opts.Persist:
			return err
		case err != nil:
			f.warn(err)
		case warning != nil:
			started = true
			f.warn(warning)
		default:
			started = true
			f.failing = ""
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(opts.Interval):
		}
	}
}

type feed struct {
	c              client.Client
	opts           watchOptions
	stdout, stderr io.Writer
	// last is the sequence number of the last event printed, by session.
	last map[string]int64
	// failing is the error last reported, so a lasting failure is said once.
	failing string
	// width is the widest session name seen, so columns do not shift as
	// sessions appear.
	width int
}

type target struct{ group, name string }

func (t target) ref() string { return t.group + "/" + t.name }

func (f *feed) targets(ctx context.Context, first bool) ([]target, error) {
	if f.opts.Name != "" {
		return []target{{f.opts.Group, f.opts.Name}}, nil
	}
	sessions, err := listSessions(ctx, f.c, f.opts.Group)
	if err != nil {
		return nil, err
	}
	if first && len(sessions) == 0 && f.opts.Group != "" {
		groups, err := listGroups(ctx, f.c)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(groups, f.opts.Group) {
			return nil, groupMissing(f.opts.Group, groups)
		}
	}
	out := make([]target, len(sessions))
	for i, s := range sessions {
		out[i] = target{s.Group, s.Name}
	}
	return out, nil
}

type fetched struct {
	events []workflows.Event
	err    error
}

// poll prints every event that is new since the last poll. A session that
// did not answer is a warning, not an error: the others are still shown, and
// it is asked again next time.
func (f *feed) poll(ctx context.Context, first bool) (warning, err error) {
	targets, err := f.targets(ctx, first)
	if err != nil {
		return nil, err
	}
	results := f.fetch(ctx, targets)
	var events []workflows.Event
	for i, t := range targets {
		f.width = max(f.width, visibleWidth(t.ref()))
		r := results[i]
		if r.err != nil {
			switch {
			case isNotFound(r.err) && f.opts.Name == "":
				// It ended between the list and the query.
			case isNotFound(r.err) && first:
				return nil, unknownSession(ctx, f.c, t.group, t.name)
			case isNotFound(r.err):
				warning = cmp.Or(warning, fmt.Errorf("%s is not running", t.ref()))
			default:
				warning = cmp.Or(warning, notAnswering(t.ref(), r.err))
			}
			continue
		}
		evs := r.events
		last, seen := f.last[t.ref()]
		if !seen && len(evs) > f.opts.Backlog {
			// A session seen for the first time shows only its recent past.
			evs = evs[len(evs)-f.opts.Backlog:]
		}
		for _, e := range evs {
			last = max(last, e.Seq)
		}
		f.last[t.ref()] = last
		events = append(events, evs...)
	}
	slices.SortStableFunc(events, func(a, b workflows.Event) int {
		return cmp.Or(a.At.Compare(b.At), strings.Compare(a.Group+"/"+a.Session, b.Group+"/"+b.Session), cmp.Compare(a.Seq, b.Seq))
	})
	for _, e := range events {
		if err := f.print(e, f.width); err != nil {
			return nil, err
		}
	}
	return warning, nil
}

// fetch queries each target for its events after the last one printed.
func (f *feed) fetch(ctx context.Context, targets []target) []fetched {
	results := make([]fetched, len(targets))
	sem := make(chan struct{}, watchParallel)
	var wg sync.WaitGroup
	for i, t := range targets {
		after := f.last[t.ref()]
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			results[i].events, results[i].err = queryEvents(ctx, f.c, t, after)
		}()
	}
	wg.Wait()
	return results
}

func queryEvents(ctx context.Context, c client.Client, t target, after int64) ([]workflows.Event, error) {
	return nidclient.QueryEvents(ctx, c, t.group, t.name, after)
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
	if msg := err.Error(); msg != f.failing {
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

// rotationText is "↻ handoff (context) 171k → 3.2k  sim-1 → sim-2  "summary…"":
// method and reason, tokens before → after, and for a handoff the old and
// new conversations and the start of the summary.
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
		quoted := `"` + clip(r.Summary, summaryChars) + `"`
		if r.SummarySource == workflows.SummaryFromLastOutput {
			quoted = "no handoff, last output: " + quoted
		}
		s += "  " + quoted
	}
	return s
}
