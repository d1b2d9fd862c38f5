package nidclient

import (
	"context"
	"fmt"
	"sync"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/nid-dev/nid/workflows"
)

// Listing keeps the running sessions as visibility lists them, for a
// process that is asked for them often (nid up's API, and through it nid
// ls). Visibility answers only with whole executions, and a thousand of them
// cost the server tens of milliseconds a list; so a Listing lists every
// session once, then asks only for the sessions whose listing changed
// since: each change of a session's listing carries its time
// (workflows.SearchListedAt, since workflows.VersionListedAt), a new run its
// start time and an ended one its close time, and a count of the running
// runs tells when one left unseen (deleted). Each answer asks first, so it
// is what a visibility list made then would say, as long as visibility
// writes a change within listingMargin of the time it carries; a whole list
// every listingFullEvery bounds the harm if it ever does not. A session
// whose run does not stamp its changes (one that has not continued as new
// since an older nid) makes every answer a whole list until it does.
type Listing struct {
	c client.Client
	// now is the local clock, for when to list everything again.
	now func() time.Time

	mu sync.Mutex
	// runs are the running session runs, by run id.
	runs map[string]listedRun
	// newest is the newest change time visibility has shown (the server's
	// clock, never compared with the local one).
	newest time.Time
	// wholeAt is when the last whole list was made (the local clock).
	wholeAt time.Time
	// shown are the newest change times visibility showed, each with when
	// (the local clock) its answer came, oldest first.
	shown []shownAt
	// settled is a change time every change stamped before which has been
	// seen: it was shown at least listingMargin before an ask that has
	// answered since began, so each change stamped before it had reached
	// visibility by then, and that ask found what the ones before had not.
	// An idle fleet's asks then start from its last change rather than a
	// margin before it.
	settled time.Time
}

type shownAt struct{ newest, at time.Time }

const (
	// listingMargin is how long after the time it carries a change may
	// reach visibility and still be found: each ask reaches back this far
	// before the newest change seen. Visibility writes a change as soon
	// as the workflow task that made it completes, in milliseconds.
	listingMargin = 10 * time.Second
	// listingFullEvery is how often a Listing lists every session again.
	listingFullEvery = 30 * time.Second
)

// NewListing returns a Listing over Temporal client c; it lists nothing
// until asked.
func NewListing(c client.Client) *Listing {
	return &Listing{c: c, now: time.Now}
}

// Sessions returns the running sessions of group (every group when empty)
// as Sessions does.
func (l *Listing) Sessions(ctx context.Context, group string) ([]Session, error) {
	return sessionsOrGroups(ctx, l.c, group, l.list)
}

func (l *Listing) list(ctx context.Context, group string) ([]Session, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.refresh(ctx); err != nil {
		return nil, err
	}
	runs := make([]sessionRun, 0, len(l.runs))
	for _, r := range l.runs {
		if group == "" || r.Group == group {
			runs = append(runs, r.sessionRun)
		}
	}
	return newestRuns(runs), nil
}

// listedRun is a running session run as a Listing holds it.
type listedRun struct {
	sessionRun
	// listedAt is when the run last stamped a change of its listing.
	listedAt time.Time
}

// refresh brings the runs up to date with visibility.
func (l *Listing) refresh(ctx context.Context) error {
	now := l.now()
	if l.runs == nil || now.Sub(l.wholeAt) >= listingFullEvery || l.unstamped() {
		execs, err := listExecutions(ctx, l.c, SessionsQuery(""))
		if err != nil {
			return err
		}
		l.runs = make(map[string]listedRun, len(execs))
		l.newest = time.Time{}
		l.wholeAt = now
		l.fold(execs)
		l.answered(now)
		return nil
	}
	// A run deleted (in the Web UI, or by retention) leaves visibility
	// without a trace to ask for: a count of the running runs, asked
	// beside, tells that something left unseen.
	counted := make(chan int64, 1)
	go func() {
		resp, err := l.c.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Query: SessionsQuery("")})
		if err != nil {
			counted <- -1
			return
		}
		counted <- resp.GetCount()
	}()
	since := l.newest.Add(-listingMargin)
	if l.settled.After(since) {
		since = l.settled
	}
	execs, err := listExecutions(ctx, l.c, ChangedSessionsQuery(since))
	count := <-counted
	if err != nil {
		return err
	}
	l.fold(execs)
	if count != int64(len(l.runs)) {
		l.runs = nil
		return l.refresh(ctx)
	}
	l.answered(now)
	return nil
}

// answered notes that an ask begun at start has answered: the change times
// shown listingMargin before start are settled, and the newest is shown
// now.
func (l *Listing) answered(start time.Time) {
	for len(l.shown) > 0 && !l.shown[0].at.Add(listingMargin).After(start) {
		if l.shown[0].newest.After(l.settled) {
			l.settled = l.shown[0].newest
		}
		l.shown = l.shown[1:]
	}
	if n := len(l.shown); n == 0 || l.shown[n-1].newest.Before(l.newest) {
		l.shown = append(l.shown, shownAt{newest: l.newest, at: l.now()})
	}
}

// fold takes in what a list returned: running runs replace what was known
// of them, ended ones leave.
func (l *Listing) fold(execs []*workflowpb.WorkflowExecutionInfo) {
	for _, e := range execs {
		run := runOf(e)
		listed := listedAt(e.GetSearchAttributes())
		if e.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			l.runs[run.id] = listedRun{sessionRun: run, listedAt: listed}
		} else {
			delete(l.runs, run.id)
		}
		for _, at := range []time.Time{listed, e.GetStartTime().AsTime(), e.GetCloseTime().AsTime()} {
			if at.After(l.newest) {
				l.newest = at
			}
		}
	}
}

// unstamped says a running run's listing may change without saying when:
// one that carries no change time though it started longer than
// listingMargin before the newest change seen (a session of an older rung;
// a new one stamps its first listing at once).
func (l *Listing) unstamped() bool {
	for _, r := range l.runs {
		if r.listedAt.IsZero() && r.start.Before(l.newest.Add(-listingMargin)) {
			return true
		}
	}
	return false
}

// ChangedSessionsQuery selects the session runs whose listing changed at
// or after since: a change stamped then, a run started or ended then.
func ChangedSessionsQuery(since time.Time) string {
	at := since.UTC().Format(time.RFC3339Nano)
	return fmt.Sprintf("WorkflowType = '%s' AND (%s >= '%s' OR StartTime >= '%s' OR CloseTime >= '%s')",
		workflows.SessionWorkflowName, workflows.SearchListedAt, at, at, at)
}

// listedAt is when a session last stamped a change of its listing, zero
// when it has not.
func listedAt(sa *commonpb.SearchAttributes) time.Time {
	p := searchPayload(sa, workflows.SearchListedAt)
	if p == nil {
		return time.Time{}
	}
	var at time.Time
	if err := converter.GetDefaultDataConverter().FromPayload(p, &at); err != nil {
		return time.Time{}
	}
	return at
}
