package nidclient_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
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
	poll, err = feed.Poll(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"lead: message queued: l3", "lead: turn 3"}, texts(poll.Events), "only what is new")

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
	poll, err = feed.Poll(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"stuck: message queued: s1", "stuck: turn 1", "lead: message queued: l1", "lead: turn 1"}, texts(poll.Events),
		"new events of every session, oldest first")
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
