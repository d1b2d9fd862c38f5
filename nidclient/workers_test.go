package nidclient

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nid-dev/nid/workflows"
)

// pollers answers DescribeTaskQueue for the session workflows' queue with
// workers last seen at the given times, and every query with a timeout.
type pollers struct {
	client.Client
	seen []time.Time
	err  error
}

func (pollers) QueryWorkflow(context.Context, string, string, string, ...any) (converter.EncodedValue, error) {
	return nil, context.DeadlineExceeded
}

// DescribeWorkflowExecution answers that no worker holds a workflow task
// of the workflow: the query found nobody to ask.
func (pollers) DescribeWorkflowExecution(context.Context, string, string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	return &workflowservice.DescribeWorkflowExecutionResponse{}, nil
}

func (p pollers) DescribeTaskQueue(_ context.Context, queue string, kind enumspb.TaskQueueType) (*workflowservice.DescribeTaskQueueResponse, error) {
	if queue != workflows.TaskQueue || kind != enumspb.TASK_QUEUE_TYPE_WORKFLOW {
		return nil, errors.New("asked about another queue")
	}
	resp := &workflowservice.DescribeTaskQueueResponse{}
	for _, t := range p.seen {
		resp.Pollers = append(resp.Pollers, &taskqueuepb.PollerInfo{Identity: "worker", LastAccessTime: timestamppb.New(t)})
	}
	return resp, p.err
}

func TestUnservedIsNoWorkerPollingLately(t *testing.T) {
	now := time.Date(2026, 12, 3, 7, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		seen      []time.Time
		unserved  bool
		wantSince time.Time
	}{
		{name: "an idle worker between long polls", seen: []time.Time{now.Add(-5 * time.Minute), now.Add(-55 * time.Second)}, wantSince: now.Add(-55 * time.Second)},
		{name: "every worker silent", seen: []time.Time{now.Add(-4 * time.Minute), now.Add(-ServedWithin - time.Second)}, unserved: true, wantSince: now.Add(-ServedWithin - time.Second)},
		{name: "none the server knows of", unserved: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			unserved, since, err := Unserved(context.Background(), pollers{seen: tt.seen}, now)
			require.NoError(t, err)
			require.Equal(t, tt.unserved, unserved)
			require.True(t, tt.wantSince.Equal(since), "since %v, want %v", since, tt.wantSince)
		})
	}

	_, _, err := Unserved(context.Background(), pollers{err: errors.New("permission denied")}, now)
	require.ErrorContains(t, err, "describing task queue nid: permission denied")
}

// A query no worker could answer says that no worker runs, rather than
// only that time ran out; one that timed out with a worker about says what
// it always said.
func TestUnansweredQueriesSayWhenNoWorkerRuns(t *testing.T) {
	ctx := context.Background()
	_, err := GetSession(ctx, pollers{}, "web", "lead")
	require.EqualError(t, err, "web/lead did not answer: no worker is running (Temporal knows of none asking for nid's work); start nid up or nid worker")
	var unavailable *UnavailableError
	require.ErrorAs(t, err, &unavailable)

	_, err = GetGroup(ctx, pollers{seen: []time.Time{time.Now().Add(-4 * time.Minute)}}, "web")
	require.Regexp(t, `^group web did not answer: no worker is running \(the last one asked Temporal for nid's work at \d\d:\d\d:\d\d, 4m0s ago\); start nid up or nid worker$`, err.Error())

	_, err = Hosts(ctx, pollers{})
	require.ErrorContains(t, err, "the hosts registry (nid/hosts) did not answer: no worker is running")

	// In the two minutes after the last worker stopped, a query that
	// went unanswered while none asked for work says the same, and no
	// gRPC words.
	_, err = GetSession(ctx, pollers{seen: []time.Time{time.Now().Add(-30 * time.Second)}}, "web", "lead")
	require.Regexp(t, `^web/lead did not answer: no worker is running \(the last one asked Temporal for nid's work at \d\d:\d\d:\d\d, 30s ago\); start nid up or nid worker$`, err.Error())

	// A worker that asked for work after the query was sent may still
	// run: then nid does not say that none does.
	_, err = GetSession(ctx, pollers{seen: []time.Time{time.Now().Add(2 * time.Second)}}, "web", "lead")
	require.EqualError(t, err, "web/lead did not answer within 10s, though a worker asked Temporal for nid's work 0s ago: it may still be taking its sessions back after a start, so try again (start nid up or nid worker if none runs)")

	_, err = GetSession(ctx, pollers{err: errors.New("connection refused")}, "web", "lead")
	require.EqualError(t, err, "web/lead did not answer (is nid up or nid worker running?): context deadline exceeded", "Temporal itself does not answer")
}
