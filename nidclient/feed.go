package nidclient

import (
	"cmp"
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/nid-dev/nid/workflows"
)

// feedParallel bounds the events queries a feed has in flight at once.
const feedParallel = 8

// FeedOptions says which sessions a feed follows and how much of their past
// it shows first.
type FeedOptions struct {
	// Group is empty for every group; Name is empty for every session of
	// Group.
	Group, Name string
	// Backlog is how many past events of each session the first poll
	// shows.
	Backlog int
	// Listing, when set, lists the sessions (a process that serves many
	// feeds keeps one); otherwise each poll lists them all.
	Listing *Listing
	// BacklogSessions is how many sessions at most the first poll asks for
	// their backlog (0: DefaultBacklogSessions). Past it, a session whose
	// listing names its newest event is followed from that event on,
	// without a query: a feed over ten thousand sessions otherwise opened
	// with ten thousand queries, minutes of them, to show more events than
	// anyone reads.
	BacklogSessions int
}

// DefaultBacklogSessions is FeedOptions.BacklogSessions when it is 0.
const DefaultBacklogSessions = 200

// Feed follows the events of running sessions, as `nid watch` and the HTTP
// API's event stream show them. Temporal has no push for workflow state, so
// a feed polls: one visibility list each time it is asked, and an events
// query to each session whose listing names an event the feed has not
// seen (to every session the first time, and to those whose listing does
// not say). A thousand idle sessions then cost one list a poll, not a
// thousand queries, each of which is a workflow task on the worker.
type Feed struct {
	c    client.Client
	opts FeedOptions
	// last is the sequence number of the last event returned, by session.
	last map[string]int64
	// answered is each session's listing when it last answered.
	answered map[string]Session
	// polls counts the polls that succeeded.
	polls int
}

// NewFeed returns a feed over Temporal client c.
func NewFeed(c client.Client, opts FeedOptions) *Feed {
	return &Feed{c: c, opts: opts, last: map[string]int64{}, answered: map[string]Session{}}
}

// FeedPoll is what one poll found.
type FeedPoll struct {
	// Sessions are the sessions followed, as visibility lists them.
	Sessions []Session
	// Events are the events new since the last poll, oldest first.
	Events []workflows.Event
	// Problem says a session did not answer this time (the others are
	// still in Events); it is asked again at the next poll.
	Problem error
}

// Poll returns what is new since the last poll. It fails when the sessions
// cannot be listed, and, on its first poll, with a *NotFoundError when the
// group or session followed is not running.
func (f *Feed) Poll(ctx context.Context) (FeedPoll, error) {
	first := f.polls == 0
	sessions, err := f.sessions(ctx, first)
	if err != nil {
		return FeedPoll{}, err
	}
	targets := sessions
	if first && len(sessions) > cmp.Or(f.opts.BacklogSessions, DefaultBacklogSessions) {
		targets = slices.DeleteFunc(slices.Clone(sessions), f.followFromListing)
	}
	if !first {
		targets = slices.DeleteFunc(slices.Clone(sessions), f.seenAll)
	}
	if f.opts.Name != "" && len(sessions) == 0 {
		// Visibility may lag behind a session that just started.
		targets = []Session{{Group: f.opts.Group, Name: f.opts.Name}}
	}
	results := f.fetch(ctx, targets)
	poll := FeedPoll{Sessions: sessions}
	for i, t := range targets {
		r := results[i]
		if r.err != nil {
			switch {
			case IsNotFound(r.err) && f.opts.Name == "":
				// It ended between the list and the query.
			case IsNotFound(r.err) && first:
				return FeedPoll{}, sessionError(ctx, f.c, t.Group, t.Name, r.err)
			case IsNotFound(r.err):
				poll.Problem = cmp.Or(poll.Problem, fmt.Errorf("%s is not running", t.Ref()))
			default:
				if poll.Problem == nil {
					poll.Problem = unanswered(ctx, f.c, t.Ref(), r.err)
				}
			}
			continue
		}
		evs := r.events
		last, seen := f.last[t.Ref()]
		if !seen && first && len(evs) > f.opts.Backlog {
			// On the first poll a session shows only its recent past; one
			// that appears later is new, and all of it is news.
			evs = evs[len(evs)-f.opts.Backlog:]
		}
		for _, e := range r.events {
			last = max(last, e.Seq)
		}
		f.last[t.Ref()] = last
		f.answered[t.Ref()] = t
		poll.Events = append(poll.Events, evs...)
	}
	slices.SortStableFunc(poll.Events, func(a, b workflows.Event) int {
		return cmp.Or(a.At.Compare(b.At), strings.Compare(a.Group+"/"+a.Session, b.Group+"/"+b.Session), cmp.Compare(a.Seq, b.Seq))
	})
	f.polls++
	return poll, nil
}

// seenAll says the feed has every event the session's listing names. A
// session whose listing does not say (one that has not continued as new
// since workflows.VersionListedEvents, as an idle one never does) is asked
// when its listing changed since it last answered, and every
// unlistedEvery polls in case an event came without a change.
func (f *Feed) seenAll(s Session) bool {
	last, seen := f.last[s.Ref()]
	if !seen {
		return false
	}
	if s.LastEvent > 0 {
		return s.LastEvent <= last
	}
	return f.polls%unlistedEvery != 0 && reflect.DeepEqual(f.answered[s.Ref()], s)
}

// followFromListing starts following a session at the newest event its
// listing names, and says whether it could (a session that does not say
// is asked).
func (f *Feed) followFromListing(s Session) bool {
	if s.LastEvent <= 0 {
		return false
	}
	f.last[s.Ref()] = s.LastEvent
	f.answered[s.Ref()] = s
	return true
}

// unlistedEvery is how often, in polls, a feed asks a session whose listing
// names no event even when its listing did not change.
const unlistedEvery = 10

// sessions lists the sessions followed; on the first poll a group with none
// must be running.
func (f *Feed) sessions(ctx context.Context, first bool) ([]Session, error) {
	list := func(ctx context.Context, group string) ([]Session, error) { return ListSessions(ctx, f.c, group) }
	if f.opts.Listing != nil {
		list = f.opts.Listing.list
	}
	var sessions []Session
	var err error
	if first {
		sessions, err = sessionsOrGroups(ctx, f.c, f.opts.Group, list)
	} else {
		sessions, err = list(ctx, f.opts.Group)
	}
	if err != nil {
		return nil, err
	}
	return f.only(sessions), nil
}

func (f *Feed) only(sessions []Session) []Session {
	if f.opts.Name == "" {
		return sessions
	}
	return slices.DeleteFunc(sessions, func(s Session) bool { return s.Name != f.opts.Name })
}

type fetched struct {
	events []workflows.Event
	err    error
}

// fetch queries each target for its events after the last one returned.
func (f *Feed) fetch(ctx context.Context, targets []Session) []fetched {
	results := make([]fetched, len(targets))
	sem := make(chan struct{}, feedParallel)
	var wg sync.WaitGroup
	for i, t := range targets {
		after := f.last[t.Ref()]
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			results[i].events, results[i].err = QueryEvents(ctx, f.c, t.Group, t.Name, after)
		}()
	}
	wg.Wait()
	return results
}

// Sessions lists the running sessions of group (every group when empty), as
// ListSessions does, but a group that is not running is a *NotFoundError
// naming the groups that are, not an empty list.
func Sessions(ctx context.Context, c client.Client, group string) ([]Session, error) {
	return sessionsOrGroups(ctx, c, group, func(ctx context.Context, group string) ([]Session, error) {
		return ListSessions(ctx, c, group)
	})
}

// sessionsOrGroups lists group's sessions with list and, when there are
// none, tells a group that is not running from one that has none.
func sessionsOrGroups(ctx context.Context, c client.Client, group string, list func(context.Context, string) ([]Session, error)) ([]Session, error) {
	sessions, err := list(ctx, group)
	if err != nil {
		return nil, &UnavailableError{Who: "Temporal", Err: err}
	}
	if len(sessions) > 0 || group == "" {
		return sessions, nil
	}
	groups, err := ListGroups(ctx, c)
	if err != nil {
		return nil, &UnavailableError{Who: "Temporal", Err: err}
	}
	if !slices.Contains(groups, group) {
		return nil, &NotFoundError{Kind: "group", Ref: group, Message: GroupMissing(group, groups).Error()}
	}
	return sessions, nil
}

// QuietPolls is the most a feed's polls are spaced while nothing happens:
// each poll that finds nothing doubles the wait before the next, from the
// feed's own interval up to this, and one that finds news goes back to the
// interval. The visibility list a poll makes is the dearest thing an idle
// fleet asks of the server: a thousand sessions every half second kept a
// third of a core busy.
const QuietPolls = 2 * time.Second

// Pace spaces a feed's polls (see QuietPolls).
type Pace struct {
	Every time.Duration
	wait  time.Duration
}

// Next is how long to wait before the next poll, after one that found news
// or not.
func (p *Pace) Next(news bool) time.Duration {
	switch {
	case news || p.wait == 0:
		p.wait = p.Every
	default:
		p.wait = min(2*p.wait, max(QuietPolls, p.Every))
	}
	return p.wait
}
