package worker

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/internal/temporaltest"
	"github.com/nid-dev/nid/nidclient"
	"github.com/nid-dev/nid/workflows"
)

// A session that joins a running group (nid up with a session added to
// nid.yaml) starts with the policy the group runs and what it has learned,
// as its siblings do, not with the file's policy until the group next
// pushes one.
func TestASessionThatJoinsLaterRunsTheGroupsPolicy(t *testing.T) {
	env := temporaltest.New(t)
	c := env.Client(t)
	const lead = "      - {agent: sim, name: lead, sim: {turnDelay: 0s}}\n"
	startNode(t, env.Config(t, "  web:\n    rotate: {mode: compact}\n    sessions:\n"+lead))
	_, err := nidclient.SetGroup(t.Context(), c, "web", nidclient.GroupSettings{
		RotateJSON: `{"mode":"handoff","contextPercent":70}`, LearnedJSON: `{"sim/sim": 50}`,
	})
	require.NoError(t, err)
	group := temporaltest.Group(t, c, "web")
	require.Equal(t, config.ModeHandoff, group.Policy.Mode)

	joined := env.Config(t, "  web:\n    rotate: {mode: compact}\n    sessions:\n"+lead+"      - {agent: sim, name: late, sim: {turnDelay: 0s}}\n")
	require.NoError(t, StartGroups(t.Context(), c, joined, HostQueue()))
	v := temporaltest.TakeTurns(t, c, "web", "late", "hello")
	require.Equal(t, group.Policy, v.Policy, "the group's policy, not the file's")
	require.Equal(t, &workflows.Threshold{Tokens: 100_000, Percent: 50, By: "learned"}, v.Context.Threshold,
		"what the group learned of its kind and model")
}
