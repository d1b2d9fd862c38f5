package worker

import (
	"context"

	"go.temporal.io/sdk/client"

	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/workflows"
)

// Agents returns the adapters a worker runs, by agent kind.
func Agents() map[string]agents.Agent {
	adapters := map[string]agents.Agent{}
	for _, k := range agents.Kinds() {
		adapters[k.Name] = k.New()
	}
	return adapters
}

// AgentSpec is what a session's workflow carries about its agent: the kind,
// the sim's settings and the turn timeout that sizes the workflow's activity
// timeout. What runs (command, arguments, environment, model) stays in the
// worker's config (see AgentSettings).
func AgentSpec(cfg *config.Config, group string, s config.Session) agents.AgentSpec {
	spec := agents.AgentSpec{Kind: s.Agent, Sim: s.Sim}
	if set, ok := cfg.AgentFor(group, s.Name); ok && agents.KindOf(s.Agent).Process {
		spec.TurnTimeout = set.TurnTimeout
	}
	return spec
}

// AgentSettings looks a session's agent up in the worker's own config at
// activity time: its kind, and how to run it, so API keys never enter
// workflow history and no signal can choose what runs.
func AgentSettings(cfg *config.Config) func(agents.SessionRef) (string, config.AgentSettings, bool) {
	return agentSettings(func() *config.Config { return cfg })
}

// agentSettings is AgentSettings of whatever configuration current returns
// at each call: a reload changes what the next turn runs.
func agentSettings(current func() *config.Config) func(agents.SessionRef) (string, config.AgentSettings, bool) {
	return func(ref agents.SessionRef) (string, config.AgentSettings, bool) {
		cfg := current()
		s, ok := cfg.Session(ref.Group, ref.Name)
		if !ok {
			return "", config.AgentSettings{}, false
		}
		set, _ := cfg.AgentFor(ref.Group, ref.Name)
		return s.Agent, set, true
	}
}

// agentPlaces says where the configuration current returns at each call
// puts a session (see activities.Activities.Places).
func agentPlaces(current func() *config.Config) func(agents.SessionRef) (string, string, bool) {
	return func(ref agents.SessionRef) (string, string, bool) {
		cfg := current()
		if _, ok := cfg.Session(ref.Group, ref.Name); !ok {
			return "", "", false
		}
		g := cfg.Groups[ref.Group]
		return g.Repo, g.WorkDir, true
	}
}

// sessionNotifier tells a session workflow what its running turn learns.
type sessionNotifier struct{ c client.Client }

func (n sessionNotifier) RateLimited(ctx context.Context, ref agents.SessionRef, limited bool) error {
	return n.c.SignalWorkflow(ctx, ref.WorkflowID, "", workflows.SignalRateLimit, workflows.RateLimit{Limited: limited})
}
