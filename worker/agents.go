package worker

import (
	"context"

	"go.temporal.io/sdk/client"

	"github.com/nid-dev/nid/activities"
	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/workflows"
)

// Agents returns the adapters a worker runs, by agent kind.
func Agents() map[string]activities.Agent {
	agents := map[string]activities.Agent{}
	for _, k := range activities.Kinds() {
		agents[k.Name] = k.New()
	}
	return agents
}

// AgentSpec is what a session's workflow carries about its agent: the kind
// and the settings that are not secret. Arguments and environment stay in
// the worker's config (see AgentSettings).
func AgentSpec(cfg *config.Config, group string, s config.Session) activities.AgentSpec {
	spec := activities.AgentSpec{Kind: s.Agent, Sim: s.Sim}
	if set, ok := cfg.AgentFor(group, s.Name); ok && s.Agent != config.AgentSim {
		spec.Command, spec.Model, spec.TurnTimeout = set.Command, set.Model, set.TurnTimeout
	}
	return spec
}

// AgentSettings looks a session's agent settings up in the worker's own
// config, at activity time, so API keys never enter workflow history.
func AgentSettings(cfg *config.Config) func(activities.SessionRef) (config.AgentSettings, bool) {
	return func(ref activities.SessionRef) (config.AgentSettings, bool) {
		return cfg.AgentFor(ref.Group, ref.Name)
	}
}

// sessionNotifier tells a session workflow what its running turn learns.
type sessionNotifier struct{ c client.Client }

func (n sessionNotifier) RateLimited(ctx context.Context, ref activities.SessionRef, limited bool) error {
	return n.c.SignalWorkflow(ctx, ref.WorkflowID, "", workflows.SignalRateLimit, workflows.RateLimit{Limited: limited})
}
