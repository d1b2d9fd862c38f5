package temporaltest

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"
)

// Counter is a real client that counts the calls made through it: for
// tests of how many round trips a command costs, and of requests refused
// before anything reached a workflow. It asks the server for lists in pages
// of PageSize when that is set.
type Counter struct {
	client.Client
	PageSize int32
	lists    atomic.Int64
	sent     atomic.Int64

	mu      sync.Mutex
	queried []string
}

// ListWorkflow lists through the real client.
func (c *Counter) ListWorkflow(ctx context.Context, req *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
	c.lists.Add(1)
	if c.PageSize > 0 {
		req = proto.Clone(req).(*workflowservice.ListWorkflowExecutionsRequest)
		req.PageSize = c.PageSize
	}
	return c.Client.ListWorkflow(ctx, req)
}

// QueryWorkflow queries through the real client.
func (c *Counter) QueryWorkflow(ctx context.Context, workflowID, runID, queryType string, args ...any) (converter.EncodedValue, error) {
	c.mu.Lock()
	c.queried = append(c.queried, workflowID)
	c.mu.Unlock()
	return c.Client.QueryWorkflow(ctx, workflowID, runID, queryType, args...)
}

// SignalWorkflow signals through the real client.
func (c *Counter) SignalWorkflow(ctx context.Context, workflowID, runID, signalName string, arg any) error {
	c.sent.Add(1)
	return c.Client.SignalWorkflow(ctx, workflowID, runID, signalName, arg)
}

// UpdateWorkflow updates through the real client.
func (c *Counter) UpdateWorkflow(ctx context.Context, opts client.UpdateWorkflowOptions) (client.WorkflowUpdateHandle, error) {
	c.sent.Add(1)
	return c.Client.UpdateWorkflow(ctx, opts)
}

// Sent is how many signals and updates were sent: what changes a workflow.
func (c *Counter) Sent() int { return int(c.sent.Load()) }

// Lists is how many visibility lists (pages) were asked for.
func (c *Counter) Lists() int { return int(c.lists.Load()) }

// Queries is how many workflow queries were made.
func (c *Counter) Queries() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.queried)
}

// Queried is the workflow id of each query made, in order.
func (c *Counter) Queried() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.queried)
}
