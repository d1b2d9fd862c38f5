package nidclient_test

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/nid-dev/nid/internal/temporaltest"
	"github.com/nid-dev/nid/nidclient"
	"github.com/nid-dev/nid/workflows"
)

func texts(evs []workflows.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Session+": "+e.Text)
	}
	return out
}

func TestFeed(t *testing.T) {
	t.Parallel()
	env, c := startIn(t, groups)
	ctx := context.Background()
	temporaltest.TakeTurns(t, c, "web", "lead", "l1", "l2")
	temporaltest.Settle(t, c)

	feed := nidclient.NewFeed(c, nidclient.FeedOptions{Group: "web", Name: "lead", Backlog: 2})
	poll, err := feed.Poll(ctx)
	require.NoError(t, err)
	require.NoError(t, poll.Problem)
	require.Equal(t, []string{"lead: message queued: l2", "lead: turn 2"}, texts(poll.Events), "the first poll shows the backlog")
	require.Len(t, poll.Sessions, 1)
	require.Equal(t, "web/lead", poll.Sessions[0].Ref())

	poll, err = feed.Poll(ctx)
	require.NoError(t, err)
	require.Empty(t, poll.Events, "nothing happened since")

	temporaltest.TakeTurns(t, c, "web", "lead", "l3")
	require.Equal(t, []string{"lead: message queued: l3", "lead: turn 3"}, texts(pollFor(t, feed, 2)), "only what is new")

	// A session that ends and is gone (deleted in the Web UI, or past the
	// namespace's retention) is a problem of the poll: the feed goes on.
	_, err = c.WorkflowService().DeleteWorkflowExecution(ctx, &workflowservice.DeleteWorkflowExecutionRequest{
		Namespace: env.Namespace, WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: workflows.SessionID("web", "lead")},
	})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := nidclient.QuerySession(ctx, c, "web", "lead")
		return nidclient.IsNotFound(err)
	}, time.Minute, 20*time.Millisecond)
	poll, err = feed.Poll(ctx)
	require.NoError(t, err)
	require.EqualError(t, poll.Problem, "web/lead is not running")
	require.Empty(t, poll.Events)
}

func TestFeedOfAGroup(t *testing.T) {
	t.Parallel()
	c := start(t, groups)
	ctx := context.Background()
	temporaltest.TakeTurns(t, c, "api", "exec", "e1")
	temporaltest.Settle(t, c)
	feed := nidclient.NewFeed(c, nidclient.FeedOptions{Group: "web", Backlog: 1})
	poll, err := feed.Poll(ctx)
	require.NoError(t, err)
	require.Len(t, poll.Sessions, 4)
	require.Equal(t, []string{"busy: session started (sim)", "lead: session started (sim)", "stuck: session started (sim)", "worker: session started (sim)"},
		sortedTexts(poll.Events), "the last event of each of the group's sessions, none of another group's")

	temporaltest.TakeTurns(t, c, "web", "stuck", "s1")
	temporaltest.TakeTurns(t, c, "web", "lead", "l1")
	temporaltest.Settle(t, c)
	poll, err = feed.Poll(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"stuck: message queued: s1", "stuck: turn 1", "lead: message queued: l1", "lead: turn 1"}, texts(poll.Events),
		"new events of every session, oldest first")
}

// pollFor polls feed until n events came, and returns them.
func pollFor(t *testing.T, feed *nidclient.Feed, n int) []workflows.Event {
	t.Helper()
	var got []workflows.Event
	require.Eventually(t, func() bool {
		poll, err := feed.Poll(context.Background())
		require.NoError(t, err)
		got = append(got, poll.Events...)
		return len(got) >= n
	}, time.Minute, 20*time.Millisecond, "%d events of %d: %v", len(got), n, texts(got))
	require.Len(t, got, n, texts(got))
	return got
}

// A feed over more sessions than it asks backlogs of starts from their
// listings: its first poll makes no query, and it shows what happens next.
func TestAFeedOverManySessionsStartsFromTheirListing(t *testing.T) {
	t.Parallel()
	_, c := startIn(t, groups)
	temporaltest.Settle(t, c)
	counted := &temporaltest.Counter{Client: c}
	feed := nidclient.NewFeed(counted, nidclient.FeedOptions{Backlog: 1, BacklogSessions: 2})
	poll, err := feed.Poll(context.Background())
	require.NoError(t, err)
	require.Len(t, poll.Sessions, 5)
	require.Zero(t, counted.Queries(), "no backlog asked of five sessions past two")
	require.Empty(t, poll.Events)

	temporaltest.TakeTurns(t, c, "web", "lead", "l1")
	require.Equal(t, []string{"lead: message queued: l1", "lead: turn 1"}, texts(pollFor(t, feed, 2)), "what happens next")
}

// After its first poll a feed asks a session for its events only when its
// listing names one the feed has not seen: idle sessions cost no query.
func TestAFeedAsksOnlySessionsWithNews(t *testing.T) {
	t.Parallel()
	_, c := startIn(t, groups)
	temporaltest.Settle(t, c)
	counted := &temporaltest.Counter{Client: c}
	feed := nidclient.NewFeed(counted, nidclient.FeedOptions{Backlog: 1})
	poll, err := feed.Poll(context.Background())
	require.NoError(t, err)
	require.Len(t, poll.Sessions, 5)
	require.Equal(t, 5, counted.Queries(), "the first poll asks every session")

	for range 3 {
		poll, err = feed.Poll(context.Background())
		require.NoError(t, err)
		require.Empty(t, poll.Events)
	}
	require.Equal(t, 5, counted.Queries(), "nothing new: no session was asked")

	temporaltest.TakeTurns(t, c, "web", "lead", "l1")
	require.Equal(t, []string{"lead: message queued: l1", "lead: turn 1"}, texts(pollFor(t, feed, 2)))
	asked := counted.Queried()[5:]
	require.NotEmpty(t, asked)
	// Once when its listing named the message, and once more if that was
	// before it named the turn.
	require.LessOrEqual(t, len(asked), 2)
	for _, id := range asked {
		require.Equal(t, workflows.SessionID("web", "lead"), id, "only the session with news was asked")
	}
}

func sortedTexts(evs []workflows.Event) []string {
	out := texts(evs)
	slices.Sort(out)
	return out
}

func TestFeedUnknownOnTheFirstPoll(t *testing.T) {
	t.Parallel()
	c := start(t, groups)
	ctx := context.Background()
	tests := []struct {
		name string
		opts nidclient.FeedOptions
		kind string
		want string
	}{
		{"session", nidclient.FeedOptions{Group: "web", Name: "nobody"}, "session", `no session "web/nobody"; sessions in web: busy, lead, stuck, worker`},
		{"group", nidclient.FeedOptions{Group: "mobile"}, "group", `no group "mobile"; running groups: api, web`},
		{"session of an unknown group", nidclient.FeedOptions{Group: "mobile", Name: "lead"}, "group", `no group "mobile"; running groups: api, web`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := nidclient.NewFeed(c, tt.opts).Poll(ctx)
			nf := requireError[*nidclient.NotFoundError](t, err, tt.want)
			require.Equal(t, tt.kind, nf.Kind)
		})
	}
}

// A session that just started, or whose memo visibility has not caught up
// with, is listed from its search attributes and workflow id.
func TestSessionFromAVisibilityRecordWithoutMemo(t *testing.T) {
	attrs := map[string]any{
		workflows.SearchGroup:          "web",
		workflows.SearchAgent:          "sim",
		workflows.SearchStatus:         workflows.StatusWorking,
		workflows.SearchContextPercent: 80.4,
		workflows.SearchRotations:      int64(2),
	}
	fields := map[string]*commonpb.Payload{}
	for k, v := range attrs {
		p, err := converter.GetDefaultDataConverter().ToPayload(v)
		require.NoError(t, err)
		fields[k] = p
	}
	s := nidclient.SessionFrom(&workflowpb.WorkflowExecutionInfo{
		Execution:        &commonpb.WorkflowExecution{WorkflowId: workflows.SessionID("web", "worker")},
		SearchAttributes: &commonpb.SearchAttributes{IndexedFields: fields},
	})
	pct := 80.4
	require.Equal(t, nidclient.Session{Group: "web", Name: "worker", Agent: "sim", Status: workflows.StatusWorking,
		Context: workflows.ContextRecord{Percent: &pct, Rotations: 2}}, s)
}

// oldSessions lists sessions whose listings name no event, as those of
// before workflows.VersionListedEvents do, and answers their events
// queries with nothing, noting who was asked.
type oldSessions struct {
	client.Client
	status map[string]string
	mu     sync.Mutex
	asked  []string
}

func (o *oldSessions) ListWorkflow(_ context.Context, req *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
	resp := &workflowservice.ListWorkflowExecutionsResponse{}
	if !strings.Contains(req.GetQuery(), workflows.SessionWorkflowName) {
		return resp, nil
	}
	for _, name := range slices.Sorted(maps.Keys(o.status)) {
		status, err := converter.GetDefaultDataConverter().ToPayload(o.status[name])
		if err != nil {
			return nil, err
		}
		resp.Executions = append(resp.Executions, &workflowpb.WorkflowExecutionInfo{
			Execution:        &commonpb.WorkflowExecution{WorkflowId: workflows.SessionID("web", name)},
			SearchAttributes: &commonpb.SearchAttributes{IndexedFields: map[string]*commonpb.Payload{workflows.SearchStatus: status}},
		})
	}
	return resp, nil
}

func (o *oldSessions) QueryWorkflow(_ context.Context, id, _, _ string, _ ...any) (converter.EncodedValue, error) {
	o.mu.Lock()
	o.asked = append(o.asked, strings.TrimPrefix(id, "nid/web/"))
	o.mu.Unlock()
	p, err := converter.GetDefaultDataConverter().ToPayloads([]workflows.Event{})
	return client.NewValue(p), err
}

// A session whose listing names no event is asked when its listing changed
// and every tenth poll, not at every poll.
func TestAFeedAsksSessionsOfBeforeListedEventsLessOften(t *testing.T) {
	old := &oldSessions{status: map[string]string{"lead": workflows.StatusIdle, "worker": workflows.StatusIdle}}
	feed := nidclient.NewFeed(old, nidclient.FeedOptions{Group: "web"})
	// poll polls n times and says who was asked, in name order.
	poll := func(n int) []string {
		t.Helper()
		for range n {
			p, err := feed.Poll(context.Background())
			require.NoError(t, err)
			require.NoError(t, p.Problem)
		}
		old.mu.Lock()
		defer old.mu.Unlock()
		asked := slices.Sorted(slices.Values(old.asked))
		old.asked = nil
		return asked
	}
	require.Equal(t, []string{"lead", "worker"}, poll(1), "the first poll asks every session")
	require.Empty(t, poll(4), "no listing changed")
	old.status["worker"] = workflows.StatusWorking
	require.Equal(t, []string{"worker"}, poll(1), "the session whose listing changed")
	require.Empty(t, poll(4))
	require.Equal(t, []string{"lead", "worker"}, poll(1), "ten polls after the first, every session is asked")
}

func TestPaceSpacesQuietPolls(t *testing.T) {
	p := nidclient.Pace{Every: 500 * time.Millisecond}
	var got []time.Duration
	for _, news := range []bool{false, false, false, false, false, true, false} {
		got = append(got, p.Next(news))
	}
	ms := time.Millisecond
	require.Equal(t, []time.Duration{500 * ms, time.Second, 2 * time.Second, 2 * time.Second, 2 * time.Second, 500 * ms, time.Second}, got)

	slow := nidclient.Pace{Every: 5 * time.Second}
	require.Equal(t, 5*time.Second, slow.Next(false))
	require.Equal(t, 5*time.Second, slow.Next(false), "a feed slower than QuietPolls keeps its own interval")
}
