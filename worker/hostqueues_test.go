package worker

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/internal/temporaltest"
	"github.com/nid-dev/nid/workflows"
)

// A session's workflow runs on its host's queue, beside its turns. While
// the registry says the host is down, another host's node polls that queue
// for workflow tasks, so the session answers and takes messages; once the
// host is back the other node stops, and the host runs what waited.
func TestASessionWhoseHostIsDownIsAnsweredByAnotherNode(t *testing.T) {
	env := temporaltest.New(t)
	c := env.Client(t)
	const groups = "  web:\n    sessions:\n      - {agent: sim, name: lead, sim: {turnDelay: 0s}}\n"
	cfg := env.Config(t, groups)
	cfg.Worker.Heartbeat = config.Duration(time.Second)
	host := startNode(t, cfg)
	temporaltest.TakeTurns(t, c, "web", "lead", "hello")
	desc, err := c.DescribeWorkflowExecution(t.Context(), workflows.SessionID("web", "lead"), "")
	require.NoError(t, err)
	require.Equal(t, workflows.HostQueue(temporaltest.Host), desc.GetExecutionConfig().GetTaskQueue().GetName(),
		"the session's workflow runs on its host's queue")

	// nid worker on another host.
	ocfg := env.Config(t, groups)
	ocfg.Worker.Host = "elsewhere"
	other, err := Start(t.Context(), Options{Config: ocfg, Logger: temporaltest.Logger()})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, other.Stop()) })
	require.Empty(t, other.hostQueues.queues(), "a live host's sessions are its own")

	// The other node looks every hostQueuesEvery; the test looks at once
	// and again, until the registry counts the host down (three missed
	// beats).
	require.NoError(t, host.Stop())
	require.Eventually(t, func() bool {
		require.NoError(t, other.hostQueues.update(t.Context()))
		return len(other.hostQueues.queues()) == 1
	}, time.Minute, 100*time.Millisecond, "the other node polls the queue of the host that is down")
	require.Equal(t, []string{workflows.HostQueue(temporaltest.Host)}, other.hostQueues.queues())
	temporaltest.WaitSession(t, c, "web", "lead", "to hear its host is down", func(v workflows.SessionView) bool {
		return v.Status == workflows.StatusHostDown
	})
	temporaltest.Signal(t, c, "web", "lead", workflows.SignalMessage, workflows.Message{Text: "while its host is away"})
	v := temporaltest.WaitSession(t, c, "web", "lead", "to take the message while its host is down", func(v workflows.SessionView) bool {
		return v.QueuedMessages == 1
	})
	require.Equal(t, 1, v.Context.TotalTurns, "the turn waits for the host")

	startNode(t, cfg)
	require.Eventually(t, func() bool {
		require.NoError(t, other.hostQueues.update(t.Context()))
		return len(other.hostQueues.queues()) == 0
	}, time.Minute, 100*time.Millisecond, "the other node stops polling the queue of a host that is back")
	v = temporaltest.WaitSession(t, c, "web", "lead", "to run the message on its host", func(v workflows.SessionView) bool {
		return v.Context.TotalTurns == 2 && v.Status == workflows.StatusIdle
	})
	require.Zero(t, v.QueuedMessages)
}

// A session nid.yaml places on a host that never served (the registry
// counts it down) answers from nid up as soon as nid up has started it,
// not at nid up's next look at the registry.
func TestASessionOnAHostThatNeverServedAnswersAtOnce(t *testing.T) {
	env := temporaltest.New(t)
	c := env.Client(t)
	n := startNode(t, env.Config(t, "  web:\n    sessions:\n      - {agent: sim, name: lead, host: nowhere}\n"))
	require.Equal(t, []string{workflows.HostQueue("nowhere")}, n.hostQueues.queues())
	v := temporaltest.Session(t, c, "web", "lead")
	require.Equal(t, "nowhere", v.Host)
}
