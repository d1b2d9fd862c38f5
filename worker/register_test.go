package worker

import (
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/nid-dev/nid/activities"
	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/transcript"
	"github.com/nid-dev/nid/worker/metrics"
	"github.com/nid-dev/nid/workflows"
)

// activityOnly registers activities in the SDK's activity test
// environment, which runs no workflows.
type activityOnly struct {
	*testsuite.TestActivityEnvironment
}

func (activityOnly) RegisterWorkflowWithOptions(interface{}, workflow.RegisterOptions) {}

// The handoff activities the rotation calls by name run under those names.
func TestHandoffActivitiesAreRegistered(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	state := t.TempDir()
	logs := transcript.New(state)
	dir := t.TempDir()
	RegisterActivities(activityOnly{env}, &activities.Activities{StateDir: state, Transcripts: logs,
		Places: func(agents.SessionRef) (string, string, bool) { return "", dir, true }})
	ref := agents.SessionRef{Group: "web", Name: "lead", WorkflowID: "nid/web/lead"}

	val, err := env.ExecuteActivity(activities.FactsName, activities.FactsInput{Session: ref})
	require.NoError(t, err)
	var facts activities.Facts
	require.NoError(t, val.Get(&facts))
	require.False(t, facts.Repo)

	require.NoError(t, logs.Append(ref.Group, ref.Name, transcript.Entry{Kind: transcript.KindOutput, Conversation: "c1", Text: "halfway"}))
	val, err = env.ExecuteActivity(activities.RescueName, activities.RescueInput{Session: ref, Conversation: "c1"})
	require.NoError(t, err)
	var rescued activities.RescueResult
	require.NoError(t, val.Get(&rescued))
	require.Equal(t, 1, rescued.Entries)
	require.Contains(t, rescued.Summary, "< halfway")
}

// A rescued handoff fits where the agent's own goes.
func TestRescuedHandoffFitsASummary(t *testing.T) {
	require.Equal(t, workflows.MaxSummaryBytes, activities.MaxRescueBytes)
}

// The workflow worker polls the shared queue with pollers of its own (see
// workflowWorkerOptions): the SDK's other behaviour shares its pollers with
// the sticky queue and lets a busy sticky queue starve the shared one.
func TestWorkflowWorkerPollsTheSharedQueueApartFromItsStickyQueue(t *testing.T) {
	m, err := metrics.New(slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	got := workflowWorkerOptions(m).WorkflowTaskPollerBehavior
	require.NotNil(t, got)
	require.IsType(t, sdkworker.NewPollerBehaviorAutoscaling(sdkworker.PollerBehaviorAutoscalingOptions{}), got)
}

// A host keeps a poll open on each of its queue's four partitions (see
// activityPollers), and more: a turn's task never waits to be forwarded.
func TestActivityWorkerPollsEveryPartition(t *testing.T) {
	m, err := metrics.New(slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	require.GreaterOrEqual(t, hostWorkerOptions(m, &attemptRecorder{}).MaxConcurrentActivityTaskPollers, 4)
}
