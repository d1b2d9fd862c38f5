package worker

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/nid-dev/nid/internal/temporaltest"
	"github.com/nid-dev/nid/workflows"
)

// A session's workflow runs on its host's queue, beside its turns, and
// every other node polls that queue for workflow tasks: with the session's
// host stopped, another host's worker answers for the session and takes
// its message, whose turn waits for the host.
func TestASessionOnAStoppedHostIsAnsweredByAnotherNode(t *testing.T) {
	env := temporaltest.New(t)
	c := env.Client(t)
	const groups = "  web:\n    sessions:\n      - {agent: sim, name: lead, sim: {turnDelay: 0s}}\n"
	host := startNode(t, env.Config(t, groups))
	temporaltest.TakeTurns(t, c, "web", "lead", "hello")
	desc, err := c.DescribeWorkflowExecution(t.Context(), workflows.SessionID("web", "lead"), "")
	require.NoError(t, err)
	require.Equal(t, workflows.HostQueue(temporaltest.Host), desc.GetExecutionConfig().GetTaskQueue().GetName(),
		"the session's workflow runs on its host's queue")

	// nid worker on another host.
	cfg := env.Config(t, groups)
	cfg.Worker.Host = "elsewhere"
	other, err := Start(t.Context(), Options{Config: cfg, Logger: temporaltest.Logger()})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, other.Stop()) })
	require.Equal(t, []string{workflows.HostQueue(temporaltest.Host)}, other.hostQueues.queues(),
		"it polls the other host's queue, and its own with its own worker")

	require.NoError(t, host.Stop())
	temporaltest.Signal(t, c, "web", "lead", workflows.SignalMessage, workflows.Message{Text: "while its host is away"})
	v := temporaltest.WaitSession(t, c, "web", "lead", "to take the message with its host stopped", func(v workflows.SessionView) bool {
		return v.Status == workflows.StatusWorking
	})
	require.Equal(t, 1, v.Context.TotalTurns)
	// The turn waits for its host: the other node neither polls for it
	// nor is handed it with the workflow task, which would fail it.
	time.Sleep(2 * time.Second)
	desc, err = c.DescribeWorkflowExecution(t.Context(), workflows.SessionID("web", "lead"), "")
	require.NoError(t, err)
	require.Len(t, desc.GetPendingActivities(), 1)
	turn := desc.GetPendingActivities()[0]
	require.Equal(t, enumspb.PENDING_ACTIVITY_STATE_SCHEDULED, turn.GetState(), "the turn waits for its host: %v", turn)
	require.Nil(t, turn.GetLastFailure())
	require.NotContains(t, eventKinds(temporaltest.Session(t, c, "web", "lead")), workflows.EventTurnFailed)
}

func eventKinds(v workflows.SessionView) []string {
	var kinds []string
	for _, e := range v.Events {
		kinds = append(kinds, e.Kind)
	}
	return kinds
}
