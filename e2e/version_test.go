package e2e

import (
	"encoding/json"
	"os"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// The nid binary reports the versions of the Temporal SDK, server and Web
// UI that go.mod pins, since they are read from what it was built from.
func TestVersionIsWhatGoModPins(t *testing.T) {
	mod, err := os.ReadFile("../go.mod")
	require.NoError(t, err)
	pinned := func(path string) string {
		m := regexp.MustCompile(`(?m)^\s+` + regexp.QuoteMeta(path) + ` (v\S+)`).FindSubmatch(mod)
		require.NotNil(t, m, "go.mod requires %s", path)
		return string(m[1])
	}
	s := newSite(t, "")
	var v struct {
		Nid            string `json:"nid"`
		TemporalSDK    string `json:"temporalSDK"`
		TemporalServer string `json:"temporalServer"`
		TemporalUI     string `json:"temporalUI"`
	}
	require.NoError(t, json.Unmarshal([]byte(s.mustNid("version", "--json")), &v))
	require.NotEmpty(t, v.Nid)
	require.Equal(t, pinned("go.temporal.io/sdk"), v.TemporalSDK)
	require.Equal(t, pinned("go.temporal.io/server"), v.TemporalServer)
	require.Equal(t, pinned("github.com/temporalio/ui-server/v2"), v.TemporalUI)
}
