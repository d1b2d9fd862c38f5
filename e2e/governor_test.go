package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/nid-dev/nid/workflows"
)

// Ten sessions cross their threshold on the same turn: at most two rotate
// at any moment (maxConcurrentRotations' default), the others wait as
// waiting-to-rotate, and all ten rotate.
func TestTenSessionsRotateTwoAtATime(t *testing.T) {
	var sessions strings.Builder
	for i := range 10 {
		fmt.Fprintf(&sessions, "      - {agent: sim, name: s%d, sim: {window: 100000, tokensPerTurn: 30000, turnDelay: 300ms}}\n", i)
	}
	s := newSite(t, `  gov:
    goal: Fill up together
    rotate: {mode: handoff, contextPercent: 50}
    sessions:
`+sessions.String())
	s.up()
	sawWaiting := false
	s.eventually("all ten rotated", 3*time.Minute, func() bool {
		rows := s.ls()
		all := len(rows) == 10
		for _, r := range rows {
			sawWaiting = sawWaiting || r.Status == workflows.StatusWaitingToRotate
			all = all && r.Context.Rotations >= 1
		}
		return all
	})
	require.True(t, sawWaiting, "sessions due beyond the limit show waiting-to-rotate")

	// The rotations' own workflows say when each ran.
	c := s.client()
	var execs []*workflowpb.WorkflowExecutionInfo
	s.eventually("the rotations listed, closed", time.Minute, func() bool {
		resp, err := c.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{
			Query: fmt.Sprintf("WorkflowType = '%s' AND %s = 'gov' AND ExecutionStatus = 'Completed'", workflows.RotationWorkflowName, workflows.SearchGroup),
		})
		require.NoError(t, err)
		execs = resp.GetExecutions()
		return len(execs) >= 10
	})
	type edge struct {
		at    time.Time
		delta int
	}
	var edges []edge
	for _, e := range execs {
		edges = append(edges, edge{e.GetStartTime().AsTime(), +1}, edge{e.GetCloseTime().AsTime(), -1})
	}
	slices.SortFunc(edges, func(a, b edge) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.delta - b.delta // a close before a start at the same instant
	})
	running, most := 0, 0
	for _, e := range edges {
		running += e.delta
		most = max(most, running)
	}
	require.LessOrEqual(t, most, 2, "at most two rotations at any moment")
	require.Equal(t, 2, most, "and the limit was used")
}
