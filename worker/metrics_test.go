package worker

import (
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/internal/temporaltest"
	"github.com/nid-dev/nid/workflows"
)

const testMetricsToken = "metrics-token-0123456789"

func TestMetricsCountRotationsByMethodAndNeedAToken(t *testing.T) {
	t.Parallel()
	env := temporaltest.New(t)
	c := env.Client(t)
	cfg := env.Config(t, webGroups)
	cfg.HTTP.MetricsToken = testMetricsToken
	n := startNode(t, cfg)
	temporaltest.Listed(t, c, cfg)
	temporaltest.TakeTurns(t, c, "web", "lead", "l1")
	temporaltest.TakeTurns(t, c, "web", "worker", "w1")
	temporaltest.Rotate(t, c, "web", "lead", config.ModeHandoff)
	// web/worker's compactions fail: a failed rotation, by its method.
	temporaltest.Signal(t, c, "web", "worker", workflows.SignalRotate, workflows.RotateRequest{Mode: config.ModeCompact, Reason: workflows.ReasonManual})
	temporaltest.WaitGroup(t, c, "web", "to hear of the failed rotation", func(g workflows.GroupView) bool { return len(g.Inbox) == 1 })
	temporaltest.TakeTurns(t, c, "web", "worker", "w2")
	temporaltest.WaitGroup(t, c, "web", "to be charged the turns", func(g workflows.GroupView) bool { return g.Board.Spent.Turns >= 3 })
	temporaltest.Settle(t, c)
	worker := temporaltest.Session(t, c, "web", "worker").Context
	require.NotNil(t, worker.Percent)

	for _, token := range []string{"", "wrong-token-0123456789"} {
		status, _ := temporaltest.Scrape(t, n.HTTP, token)
		require.Equal(t, http.StatusUnauthorized, status, "token %q", token)
	}
	status, _ := temporaltest.Scrape(t, n.HTTP, temporaltest.Token)
	require.Equal(t, http.StatusOK, status, "the API token reads the metrics too")
	status, got := temporaltest.Scrape(t, n.HTTP, testMetricsToken)
	require.Equal(t, http.StatusOK, status)
	req, err := http.NewRequest(http.MethodPost, n.HTTP+"/api/session.list", strings.NewReader("{}"))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+testMetricsToken)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "the metrics token reads nothing but the metrics")

	for _, want := range []struct {
		name   string
		labels map[string]string
		value  float64
	}{
		{"nid_rotations_total", map[string]string{"group": "web", "agent": "sim", "method": "handoff", "reason": "manual", "outcome": "ok"}, 1},
		{"nid_rotations_total", map[string]string{"group": "web", "agent": "sim", "method": "compact", "reason": "manual", "outcome": "failed"}, 1},
		{"nid_rotation_duration_seconds", map[string]string{"agent": "sim", "method": "handoff", "outcome": "ok"}, 1},
		{"nid_session_rotations_total", map[string]string{"group": "web", "session": "lead"}, 1},
		{"nid_session_rotations_total", map[string]string{"group": "web", "session": "worker"}, 0},
		{"nid_session_turns_total", map[string]string{"group": "web", "session": "worker", "agent": "sim"}, 2},
		{"nid_session_context_tokens", map[string]string{"group": "web", "session": "worker"}, float64(worker.UsedTokens)},
		{"nid_session_context_window_tokens", map[string]string{"group": "web", "session": "worker"}, 200_000},
		{"nid_session_context_percent", map[string]string{"group": "web", "session": "worker"}, *worker.Percent},
		{"nid_session_status", map[string]string{"group": "web", "session": "worker", "status": workflows.StatusIdle}, 1},
		// Two work turns of web/worker's, one of web/lead's; the handoff's
		// turns are of other kinds.
		{"nid_turn_duration_seconds", map[string]string{"agent": "sim", "kind": "work", "outcome": "ok"}, 3},
	} {
		v, ok := temporaltest.Sample(got, want.name, want.labels)
		require.True(t, ok, "%s%v is missing", want.name, want.labels)
		require.Equal(t, want.value, v, "%s%v", want.name, want.labels)
	}
	spent, ok := temporaltest.Sample(got, "nid_group_budget_spent_turns", map[string]string{"group": "web"})
	require.True(t, ok, "the group's budget spent is missing")
	require.GreaterOrEqual(t, spent, 3.0)
	polls, ok := temporaltest.Sample(got, "temporal_workflow_task_execution_latency_seconds", nil)
	require.True(t, ok, "the Temporal SDK's own worker metrics are missing: %v", slices.Sorted(maps.Keys(got)))
	require.Positive(t, polls)
	live, ok := temporaltest.Sample(got, "go_gc_heap_live_bytes", nil)
	require.True(t, ok, "the live heap, which tells a leak from garbage, is missing")
	require.Positive(t, live)
}
