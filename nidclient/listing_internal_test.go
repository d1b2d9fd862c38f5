package nidclient

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nid-dev/nid/workflows"
)

// visibilityRun is a session run as a fake visibility store holds it.
type visibilityRun struct {
	group, name, run, status string
	start, closed, listed    time.Time
}

// fakeVisibility answers the two queries a Listing makes as Temporal's
// visibility would, and records them.
type fakeVisibility struct {
	client.Client
	runs    []visibilityRun
	queries []string
}

var sinceInQuery = regexp.MustCompile(`>= '([^']+)'`)

func (f *fakeVisibility) ListWorkflow(_ context.Context, req *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
	q := req.GetQuery()
	f.queries = append(f.queries, q)
	var since time.Time
	if m := sinceInQuery.FindStringSubmatch(q); m != nil {
		var err error
		if since, err = time.Parse(time.RFC3339Nano, m[1]); err != nil {
			return nil, err
		}
	}
	resp := &workflowservice.ListWorkflowExecutionsResponse{}
	for _, r := range f.runs {
		running := r.closed.IsZero()
		switch {
		case q == SessionsQuery(""):
			if !running {
				continue
			}
		case q == ChangedSessionsQuery(since):
			if r.listed.Before(since) && r.start.Before(since) && (running || r.closed.Before(since)) {
				continue
			}
		default:
			panic("unexpected query " + q)
		}
		resp.Executions = append(resp.Executions, r.info())
	}
	return resp, nil
}

func (f *fakeVisibility) CountWorkflow(_ context.Context, req *workflowservice.CountWorkflowExecutionsRequest) (*workflowservice.CountWorkflowExecutionsResponse, error) {
	if req.GetQuery() != SessionsQuery("") {
		panic("unexpected count " + req.GetQuery())
	}
	var n int64
	for _, r := range f.runs {
		if r.closed.IsZero() {
			n++
		}
	}
	return &workflowservice.CountWorkflowExecutionsResponse{Count: n}, nil
}

func (r visibilityRun) info() *workflowpb.WorkflowExecutionInfo {
	attrs := map[string]any{workflows.SearchGroup: r.group, workflows.SearchSession: r.name, workflows.SearchStatus: r.status}
	if !r.listed.IsZero() {
		attrs[workflows.SearchListedAt] = r.listed
	}
	fields := map[string]*commonpb.Payload{}
	for k, v := range attrs {
		p, err := converter.GetDefaultDataConverter().ToPayload(v)
		if err != nil {
			panic(err)
		}
		fields[k] = p
	}
	e := &workflowpb.WorkflowExecutionInfo{
		Execution:        &commonpb.WorkflowExecution{WorkflowId: workflows.SessionID(r.group, r.name), RunId: r.run},
		StartTime:        timestamppb.New(r.start),
		Status:           enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING,
		SearchAttributes: &commonpb.SearchAttributes{IndexedFields: fields},
	}
	if !r.closed.IsZero() {
		e.Status = enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW
		e.CloseTime = timestamppb.New(r.closed)
	}
	return e
}

// statuses is "group/name status" for each session listed.
func statuses(sessions []Session) []string {
	var out []string
	for _, s := range sessions {
		out = append(out, s.Ref()+" "+s.Status)
	}
	return out
}

var t0 = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)

func newTestListing(v *fakeVisibility, clock *time.Time) *Listing {
	l := NewListing(v)
	l.now = func() time.Time { return *clock }
	return l
}

// twoIdleSessions is web/lead and web/worker, idle since t0, and a
// Listing over them.
func twoIdleSessions(t *testing.T, clock *time.Time) (*fakeVisibility, *Listing) {
	t.Helper()
	v := &fakeVisibility{runs: []visibilityRun{
		{group: "web", name: "lead", run: "a1", status: "idle", start: t0, listed: t0},
		{group: "web", name: "worker", run: "b1", status: "idle", start: t0, listed: t0},
	}}
	return v, newTestListing(v, clock)
}

// After one whole list, a Listing asks only for the sessions changed since
// the newest change it saw (less the margin), and its answer is what a
// whole list would say: a changed status, a new session, a session that
// continued as new (its new run only), one that ended.
func TestAListingAsksOnlyWhatChanged(t *testing.T) {
	ctx := context.Background()
	clock := t0
	v := &fakeVisibility{runs: []visibilityRun{
		{group: "web", name: "lead", run: "a1", status: "idle", start: t0.Add(-time.Hour), listed: t0.Add(-time.Hour)},
		{group: "web", name: "worker", run: "b1", status: "idle", start: t0.Add(-time.Hour), listed: t0.Add(-time.Minute)},
		{group: "api", name: "one", run: "c1", status: "idle", start: t0.Add(-time.Hour), listed: t0.Add(-2 * time.Minute)},
	}}
	l := newTestListing(v, &clock)
	got, err := l.Sessions(ctx, "")
	require.NoError(t, err)
	require.Equal(t, []string{"api/one idle", "web/lead idle", "web/worker idle"}, statuses(got))
	require.Equal(t, []string{SessionsQuery("")}, v.queries)

	clock = clock.Add(5 * time.Second)
	v.queries = nil
	v.runs[0].status, v.runs[0].listed = "working", t0.Add(time.Second)
	v.runs[1].closed = t0.Add(2 * time.Second)
	v.runs = append(v.runs,
		visibilityRun{group: "web", name: "worker", run: "b2", status: "working", start: t0.Add(2 * time.Second), listed: t0.Add(2 * time.Second)},
		visibilityRun{group: "web", name: "new", run: "d1", status: "idle", start: t0.Add(3 * time.Second)})
	got, err = l.Sessions(ctx, "")
	require.NoError(t, err)
	require.Equal(t, []string{"api/one idle", "web/lead working", "web/new idle", "web/worker working"}, statuses(got))
	require.Equal(t, []string{ChangedSessionsQuery(t0.Add(-time.Minute - listingMargin))}, v.queries,
		"the newest change seen was the worker's, a minute before")

	v.queries = nil
	v.runs[2].closed = t0.Add(4 * time.Second)
	got, err = l.Sessions(ctx, "web")
	require.NoError(t, err)
	require.Equal(t, []string{"web/lead working", "web/new idle", "web/worker working"}, statuses(got))
	require.Equal(t, []string{ChangedSessionsQuery(t0.Add(3*time.Second - listingMargin))}, v.queries)
	got, err = l.Sessions(ctx, "")
	require.NoError(t, err)
	require.Equal(t, []string{"web/lead working", "web/new idle", "web/worker working"}, statuses(got), "api/one ended")
}

// A change that reaches visibility later than it is stamped, within the
// margin, is still found.
func TestAListingFindsALateChangeWithinTheMargin(t *testing.T) {
	ctx := context.Background()
	clock := t0
	v, l := twoIdleSessions(t, &clock)
	_, err := l.Sessions(ctx, "")
	require.NoError(t, err)
	v.runs[0].status, v.runs[0].listed = "working", t0.Add(5*time.Second)
	_, err = l.Sessions(ctx, "")
	require.NoError(t, err)
	// The worker's change was stamped before the lead's but is written
	// after it was seen.
	v.runs[1].status, v.runs[1].listed = "working", t0.Add(5*time.Second-listingMargin+time.Millisecond)
	got, err := l.Sessions(ctx, "")
	require.NoError(t, err)
	require.Equal(t, []string{"web/lead working", "web/worker working"}, statuses(got))
}

// Once the newest change was shown longer than the margin before an ask
// that has answered, every change stamped before it has been seen: an idle
// fleet's asks start from its last change, not a margin before it.
func TestAListingSettlesWhatItHasSeen(t *testing.T) {
	ctx := context.Background()
	clock := t0
	v := &fakeVisibility{runs: []visibilityRun{
		{group: "web", name: "lead", run: "a1", status: "idle", start: t0.Add(-time.Hour), listed: t0.Add(-time.Second)},
	}}
	l := newTestListing(v, &clock)
	ask := func() {
		t.Helper()
		_, err := l.Sessions(ctx, "")
		require.NoError(t, err)
	}
	ask()
	clock = clock.Add(listingMargin - time.Millisecond)
	ask()
	clock = clock.Add(time.Millisecond)
	ask()
	ask()
	require.Equal(t, []string{
		SessionsQuery(""),
		ChangedSessionsQuery(t0.Add(-time.Second - listingMargin)),
		ChangedSessionsQuery(t0.Add(-time.Second - listingMargin)),
		ChangedSessionsQuery(t0.Add(-time.Second)),
	}, v.queries, "the third ask began a margin after the change was shown; the fourth may start from it")

	v.queries = nil
	v.runs[0].status, v.runs[0].listed = "working", t0.Add(20*time.Second)
	got, err := l.Sessions(ctx, "")
	require.NoError(t, err)
	require.Equal(t, []string{"web/lead working"}, statuses(got))
	ask()
	require.Equal(t, []string{ChangedSessionsQuery(t0.Add(-time.Second)), ChangedSessionsQuery(t0.Add(20*time.Second - listingMargin))}, v.queries)
}

// A run that does not stamp its changes (an older rung) makes each answer
// a whole list until it is gone; and every listingFullEvery the Listing
// lists everything again.
func TestAListingListsEverythingWhenItCannotTell(t *testing.T) {
	ctx := context.Background()
	clock := t0
	v := &fakeVisibility{runs: []visibilityRun{
		{group: "web", name: "old", run: "a1", status: "idle", start: t0.Add(-time.Hour)},
		{group: "web", name: "new", run: "b1", status: "idle", start: t0, listed: t0},
	}}
	l := newTestListing(v, &clock)
	for range 3 {
		_, err := l.Sessions(ctx, "")
		require.NoError(t, err)
	}
	require.Equal(t, slices.Repeat([]string{SessionsQuery("")}, 3), v.queries)

	v.queries = nil
	v.runs[0].closed = t0.Add(time.Second)
	_, err := l.Sessions(ctx, "")
	require.NoError(t, err)
	_, err = l.Sessions(ctx, "")
	require.NoError(t, err)
	require.Equal(t, []string{SessionsQuery(""), ChangedSessionsQuery(t0.Add(-listingMargin))}, v.queries,
		"once the old run has ended, the newest change is the new session's")

	v.queries = nil
	clock = clock.Add(listingFullEvery)
	_, err = l.Sessions(ctx, "")
	require.NoError(t, err)
	require.Equal(t, []string{SessionsQuery("")}, v.queries)
}

// A running session deleted (in the Web UI) leaves visibility with no close
// time to find: the count of running runs, which no longer matches, sends
// the Listing back to a whole list.
func TestAListingNoticesADeletedSession(t *testing.T) {
	ctx := context.Background()
	clock := t0
	v, l := twoIdleSessions(t, &clock)
	_, err := l.Sessions(ctx, "")
	require.NoError(t, err)
	v.runs = v.runs[:1]
	v.queries = nil
	got, err := l.Sessions(ctx, "")
	require.NoError(t, err)
	require.Equal(t, []string{"web/lead idle"}, statuses(got))
	require.Equal(t, []string{ChangedSessionsQuery(t0.Add(-listingMargin)), SessionsQuery("")}, v.queries)
}

func TestChangedSessionsQuery(t *testing.T) {
	q := ChangedSessionsQuery(time.Date(2026, 12, 3, 13, 4, 5, 600, time.FixedZone("CET", 3600)))
	require.Equal(t, "WorkflowType = '"+workflows.SessionWorkflowName+"' AND (NidListedAt >= '2026-12-03T12:04:05.0000006Z' OR StartTime >= '2026-12-03T12:04:05.0000006Z' OR CloseTime >= '2026-12-03T12:04:05.0000006Z')", q)
	require.False(t, strings.Contains(q, "ExecutionStatus"), "ended runs must be found, to leave the listing")
}
