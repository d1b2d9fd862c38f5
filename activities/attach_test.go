package activities_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/activities"
	"github.com/nid-dev/nid/agents"
)

// The sim has no terminal to take over: attaching to it is refused with
// what to do instead, and its hand-back too.
func TestAttachCommandRefusesTheSim(t *testing.T) {
	a := &activities.Activities{Agents: map[string]agents.Agent{agents.KindSim: agents.KindOf(agents.KindSim).New()}, StateDir: t.TempDir()}
	ref := agents.SessionRef{Group: "web", Name: "lead", WorkflowID: "nid/web/lead"}
	spec := agents.AgentSpec{Kind: agents.KindSim}
	_, err := a.AttachCommand(context.Background(), ref, spec, "", 0, "")
	require.ErrorContains(t, err, "has no interactive CLI to attach to: nid send gives it a message for its next turn")
	_, err = a.Handback(context.Background(), activities.HandbackInput{Session: ref, Spec: spec})
	require.ErrorContains(t, err, "has no interactive CLI")
}
