package nidclient

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	commonpb "go.temporal.io/api/common/v1"
	historypb "go.temporal.io/api/history/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/nid-dev/nid/workflows"
)

// RunningRung is one running workflow and the rung of the version ladder
// its run follows.
type RunningRung struct {
	// ID is the workflow id: nid/<group>/<name> for a session, nid/<group>
	// for a group, nid/hosts for the hosts registry.
	ID   string `json:"id"`
	Type string `json:"type"`
	// Rung is the rung the run follows; nil while its first workflow task
	// has not run: it takes the newest rung of the worker that runs it.
	Rung *workflows.Version `json:"rung"`
	// From says where the rung was read: "memo" (published by the run,
	// since workflows.VersionPublishesRung) or "history" (its version
	// marker).
	From string `json:"from,omitempty"`
}

// RungCount is how many running workflows follow one rung.
type RungCount struct {
	Rung      workflows.Version `json:"rung"`
	Workflows int               `json:"workflows"`
}

// Rungs is which rungs of the version ladder the running workflows of a
// namespace still need: the branches of a rung no running workflow needs
// can be deleted from the workflows' code (docs/versions.md).
type Rungs struct {
	// Latest is the newest rung this build of nid knows.
	Latest workflows.Version `json:"latest"`
	// Oldest is the oldest rung a running workflow follows; nil when none
	// runs with a known rung.
	Oldest *workflows.Version `json:"oldest"`
	// Counts are the rungs followed, oldest first.
	Counts []RungCount `json:"counts"`
	// Workflows are the running workflows, oldest rung first (those not
	// started yet last), then by id.
	Workflows []RunningRung `json:"workflows"`
}

// rungPageSize is how many events of a history are read for its version
// marker: it is among the first ten.
const rungPageSize = 20

// RungsQuery selects the running workflows that branch on the ladder.
func RungsQuery() string {
	var types []string
	for _, t := range []string{workflows.SessionWorkflowName, workflows.GroupWorkflowName, workflows.HostsWorkflowName, workflows.RotationWorkflowName} {
		types = append(types, fmt.Sprintf("WorkflowType = '%s'", t))
	}
	return "ExecutionStatus = 'Running' AND (" + strings.Join(types, " OR ") + ")"
}

// ReadRungs lists the running sessions, groups, rotations and the hosts
// registry of namespace (c's) and reads the rung each follows: from its
// memo, or, for a run started before workflows.VersionPublishesRung, from
// the version marker at the start of its history.
func ReadRungs(ctx context.Context, c client.Client, namespace string) (Rungs, error) {
	execs, err := listExecutions(ctx, c, RungsQuery())
	if err != nil {
		return Rungs{}, err
	}
	out := Rungs{Latest: workflows.Latest}
	seen := map[string]bool{}
	counts := map[workflows.Version]int{}
	for _, e := range execs {
		key := e.GetExecution().GetWorkflowId() + "/" + e.GetExecution().GetRunId()
		if seen[key] {
			continue
		}
		seen[key] = true
		r := RunningRung{ID: e.GetExecution().GetWorkflowId(), Type: e.GetType().GetName()}
		if v, ok := memoRung(e); ok {
			r.Rung, r.From = &v, "memo"
		} else {
			v, ok, err := historyRung(ctx, c, namespace, e.GetExecution())
			if err != nil {
				return Rungs{}, err
			}
			if ok {
				r.Rung, r.From = &v, "history"
			}
		}
		if r.Rung != nil {
			counts[*r.Rung]++
		}
		out.Workflows = append(out.Workflows, r)
	}
	for v, n := range counts {
		out.Counts = append(out.Counts, RungCount{Rung: v, Workflows: n})
	}
	slices.SortFunc(out.Counts, func(a, b RungCount) int { return cmp.Compare(a.Rung, b.Rung) })
	if len(out.Counts) > 0 {
		oldest := out.Counts[0].Rung
		out.Oldest = &oldest
	}
	// Not started yet: last, for it will take the newest rung.
	order := func(r RunningRung) int {
		if r.Rung == nil {
			return math.MaxInt
		}
		return int(*r.Rung)
	}
	slices.SortFunc(out.Workflows, func(a, b RunningRung) int {
		return cmp.Or(cmp.Compare(order(a), order(b)), strings.Compare(a.ID, b.ID))
	})
	return out, nil
}

// memoRung is the rung a run published in its memo.
func memoRung(e *workflowpb.WorkflowExecutionInfo) (workflows.Version, bool) {
	p, ok := e.GetMemo().GetFields()[workflows.MemoRung]
	if !ok {
		return 0, false
	}
	var v workflows.Version
	if err := converter.GetDefaultDataConverter().FromPayload(p, &v); err != nil {
		return 0, false
	}
	return v, true
}

// historyRung reads a run's rung from the start of its history, a page or
// two of rungPageSize events.
func historyRung(ctx context.Context, c client.Client, namespace string, run *commonpb.WorkflowExecution) (workflows.Version, bool, error) {
	var events []*historypb.HistoryEvent
	var token []byte
	for range 3 {
		resp, err := c.WorkflowService().GetWorkflowExecutionHistory(ctx, &workflowservice.GetWorkflowExecutionHistoryRequest{
			Namespace:       namespace,
			Execution:       run,
			MaximumPageSize: rungPageSize,
			NextPageToken:   token,
		})
		if err != nil {
			return 0, false, fmt.Errorf("reading the history of %s: %w", run.GetWorkflowId(), err)
		}
		events = append(events, resp.GetHistory().GetEvents()...)
		token = resp.GetNextPageToken()
		v, ok, err := workflows.RecordedRung(events, len(token) == 0)
		if err != nil {
			return 0, false, fmt.Errorf("the history of %s: %w", run.GetWorkflowId(), err)
		}
		if ok || len(token) == 0 {
			return v, ok, nil
		}
	}
	return 0, false, nil
}
