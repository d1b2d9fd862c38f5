package temporaltest

import (
	"io"
	"net/http"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/require"
)

// Do sends a request to nid's HTTP server with token as the bearer token
// ("" for none); the caller closes the answer's body.
func Do(t testing.TB, method, url string, body io.Reader, token string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	return resp
}

// Scrape GETs /metrics with token as the bearer token ("" for none) and
// returns the status and, for a 200, the metric families.
func Scrape(t testing.TB, base, token string) (int, map[string]*dto.MetricFamily) {
	t.Helper()
	resp := Do(t, http.MethodGet, base+"/metrics", nil, token)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, nil
	}
	var p expfmt.TextParser
	families, err := p.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, families
}

// Sample is the value of the family's metric whose labels include labels,
// and whether there is one.
func Sample(families map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
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
