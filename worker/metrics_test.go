package worker

import (
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/internal/temporaltest"
	"github.com/nid-dev/nid/workflows"
)

const testMetricsToken = "metrics-token-0123456789"

// scrape GETs /metrics with token as the bearer token ("" for none) and
// returns the status and, for a 200, the metric families.
func scrape(t *testing.T, base, token string) (int, map[string]*dto.MetricFamily) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+"/metrics", nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, nil
	}
	var p expfmt.TextParser
	families, err := p.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, families
}

// sample is the value of the family's metric whose labels include labels,
// and whether there is one.
func sample(families map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	f := families[name]
	if f == nil {
		return 0, false
	}
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		match := true
		for k, v := range labels {
			match = match && have[k] == v
		}
		if !match {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

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
		status, _ := scrape(t, n.HTTP, token)
		require.Equal(t, http.StatusUnauthorized, status, "token %q", token)
	}
	status, _ := scrape(t, n.HTTP, temporaltest.Token)
	require.Equal(t, http.StatusOK, status, "the API token reads the metrics too")
	status, got := scrape(t, n.HTTP, testMetricsToken)
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
		v, ok := sample(got, want.name, want.labels)
		require.True(t, ok, "%s%v is missing", want.name, want.labels)
		require.Equal(t, want.value, v, "%s%v", want.name, want.labels)
	}
	spent, ok := sample(got, "nid_group_budget_spent_turns", map[string]string{"group": "web"})
	require.True(t, ok, "the group's budget spent is missing")
	require.GreaterOrEqual(t, spent, 3.0)
	polls, ok := sample(got, "temporal_workflow_task_execution_latency_seconds", nil)
	require.True(t, ok, "the Temporal SDK's own worker metrics are missing: %v", slices.Sorted(maps.Keys(got)))
	require.Positive(t, polls)
}
