package worker

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/grpc"

	"github.com/nid-dev/nid/workflows"
)

// stickyServer lists running workflows and records which it was asked to
// take over, and how many of those requests were in flight at once.
type stickyServer struct {
	client.Client
	service *stickyService
}

type stickyService struct {
	workflowservice.WorkflowServiceClient
	// running are the running workflows' ids by their task queue.
	running  map[string][]string
	refuse   map[string]error
	mu       sync.Mutex
	reset    []string
	inFlight int
	most     int
	release  chan struct{}
}

func (s stickyServer) ListWorkflow(_ context.Context, req *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
	resp := &workflowservice.ListWorkflowExecutionsResponse{}
	queue, _, _ := strings.Cut(strings.TrimPrefix(req.GetQuery(), "TaskQueue = '"), "'")
	if queue == unlisted {
		return nil, serviceerror.NewUnavailable("visibility is busy")
	}
	for _, id := range s.service.running[queue] {
		resp.Executions = append(resp.Executions, &workflowpb.WorkflowExecutionInfo{Execution: &commonpb.WorkflowExecution{WorkflowId: id, RunId: "run-" + id}})
	}
	return resp, nil
}

// unlisted is a queue whose workflows the fake cannot list.
var unlisted = workflows.HostQueue("unlisted")

func (s stickyServer) WorkflowService() workflowservice.WorkflowServiceClient { return s.service }

func (s *stickyService) ResetStickyTaskQueue(ctx context.Context, req *workflowservice.ResetStickyTaskQueueRequest, _ ...grpc.CallOption) (*workflowservice.ResetStickyTaskQueueResponse, error) {
	s.mu.Lock()
	s.inFlight++
	s.most = max(s.most, s.inFlight)
	s.mu.Unlock()
	<-s.release
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inFlight--
	id := req.GetExecution().GetWorkflowId()
	if req.GetNamespace() != "nid-test" || req.GetExecution().GetRunId() != "run-"+id {
		return nil, fmt.Errorf("asked to reset %v in %q", req.GetExecution(), req.GetNamespace())
	}
	s.reset = append(s.reset, id)
	return &workflowservice.ResetStickyTaskQueueResponse{}, s.refuse[id]
}

// A starting worker takes every running workflow over, a few at a time; a
// workflow that has ended meanwhile is no news, a refusal is warned of.
func TestAStartingWorkerTakesEveryRunningWorkflowOver(t *testing.T) {
	s := &stickyService{refuse: map[string]error{
		"nid/web/gone":  serviceerror.NewNotFound("workflow execution already completed"),
		"nid/web/taken": serviceerror.NewPermissionDenied("not allowed", ""),
	}, release: make(chan struct{}), running: map[string][]string{}}
	// Sessions started before their workflows ran on their host's queue,
	// the groups and the registry on the shared queue; the others on
	// their hosts' queues.
	for i := range 40 {
		queue := []string{workflows.TaskQueue, workflows.HostQueue("a"), workflows.HostQueue("b")}[i%3]
		s.running[queue] = append(s.running[queue], fmt.Sprintf("nid/web/s%d", i))
	}
	s.running[workflows.TaskQueue] = append(s.running[workflows.TaskQueue], "nid/web/gone", "nid/web/taken")
	s.running[workflows.HostQueue("elsewhere")] = []string{"nid/web/not-asked"}
	var want []string
	for _, q := range []string{workflows.TaskQueue, workflows.HostQueue("a"), workflows.HostQueue("b")} {
		want = append(want, s.running[q]...)
	}
	// Hold the requests until as many as may be are in flight (or, done one
	// by one, they never would be), then let them all go.
	go func() {
		defer close(s.release)
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			s.mu.Lock()
			full := s.inFlight == stickyResets
			s.mu.Unlock()
			if full {
				return
			}
		}
	}()

	var logs bytes.Buffer
	resetStickyQueues(context.Background(), stickyServer{service: s}, "nid-test", slog.New(slog.NewTextHandler(&logs, nil)),
		workflows.TaskQueue, unlisted, workflows.HostQueue("a"), workflows.HostQueue("b"))
	require.ElementsMatch(t, want, s.reset, "each running workflow on the queues asked, once, past a queue that could not be listed")
	require.Contains(t, logs.String(), `msg="Could not list workflows to take them over" queue=nid@unlisted`)
	require.Equal(t, stickyResets, s.most, "a few at once, never more")
	require.Contains(t, logs.String(), `msg="Could not take a workflow over from the worker that ran it" workflowID=nid/web/taken`)
	require.NotContains(t, logs.String(), "nid/web/gone")
	require.NotContains(t, logs.String(), "Ran out of time")
}
