package nidclient_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/nid-dev/nid/internal/temporaltest"
	"github.com/nid-dev/nid/nidclient"
	"github.com/nid-dev/nid/workflows"
)

// A Listing kept while sessions take turns, end and are deleted answers as
// a visibility list made at the same time does.
func TestAListingAgreesWithVisibility(t *testing.T) {
	t.Parallel()
	env, c := startIn(t, groups)
	ctx := context.Background()
	l := nidclient.NewListing(c)
	// agree waits until visibility shows what want says, then holds the
	// Listing's answer to the list made just before it.
	agree := func(what string, want func([]nidclient.Session) bool) {
		t.Helper()
		require.EventuallyWithT(t, func(ct *assert.CollectT) {
			listed, err := nidclient.ListSessions(ctx, c, "")
			require.NoError(ct, err)
			require.True(ct, want(listed), "visibility does not show yet that %s", what)
			kept, err := l.Sessions(ctx, "")
			require.NoError(ct, err)
			again, err := nidclient.ListSessions(ctx, c, "")
			require.NoError(ct, err)
			require.Equal(ct, listed, again, "a session changed meanwhile: compare again")
			assert.Equal(t, listed, kept, what)
		}, time.Minute, 50*time.Millisecond)
	}
	status := func(sessions []nidclient.Session, ref string) string {
		for _, s := range sessions {
			if s.Ref() == ref {
				return s.Status
			}
		}
		return ""
	}
	agree("five sessions are listed", func(s []nidclient.Session) bool { return len(s) == 5 })

	temporaltest.TakeTurns(t, c, "web", "lead", "l1", "l2")
	agree("the lead took two turns", func(s []nidclient.Session) bool {
		for _, x := range s {
			if x.Ref() == "web/lead" {
				return x.Context.TotalTurns == 2 && x.Status == workflows.StatusIdle
			}
		}
		return false
	})
	working(t, c, "web", "worker")
	agree("the worker is working", func(s []nidclient.Session) bool { return status(s, "web/worker") == workflows.StatusWorking })

	require.NoError(t, c.TerminateWorkflow(ctx, workflows.SessionID("api", "exec"), "", "a test ends it"))
	agree("api/exec ended", func(s []nidclient.Session) bool { return len(s) == 4 })

	_, err := c.WorkflowService().DeleteWorkflowExecution(ctx, &workflowservice.DeleteWorkflowExecutionRequest{
		Namespace: env.Namespace, WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: workflows.SessionID("web", "busy")},
	})
	require.NoError(t, err)
	agree("web/busy is deleted", func(s []nidclient.Session) bool { return len(s) == 3 })
}
