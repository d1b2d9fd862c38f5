package activities

import (
	"context"
	"errors"

	"go.temporal.io/sdk/temporal"

	"github.com/nid-dev/nid/agents"
)

// CheckAgent checks what a session's agent needs on this host, as its turns
// will run it: its CLI (with deep, also its version and whether nid is
// tested with it), credentials, and the sandbox its permissions ask for
// (with deep, also run once). Settings must know the session.
func (a *Activities) CheckAgent(ctx context.Context, ref agents.SessionRef, spec agents.AgentSpec, deep bool) []agents.Check {
	session := ref.Group + "/" + ref.Name
	k := agents.KindOf(spec.Kind)
	var checks []agents.Check
	if _, err := a.agent(spec.Kind); err != nil {
		text := err.Error()
		if app, ok := errors.AsType[*temporal.ApplicationError](err); ok {
			text = app.Message()
		}
		checks = []agents.Check{{Name: "agent", Status: agents.CheckFail, Text: text, ErrType: ErrUnknownAgent}}
	} else if !k.Process {
		checks = []agents.Check{{Name: "agent", Status: agents.CheckOK, Text: k.Title + " runs inside nid: nothing to install"}}
	} else if p, err := a.process(ref, spec); err != nil {
		c := agents.Check{Name: "agent", Status: agents.CheckFail, Text: err.Error(), ErrType: ErrBadInput}
		if e, ok := errors.AsType[*agents.Error](err); ok {
			c.ErrType = e.Type
			if e.Type == ErrSandboxUnavailable {
				c.Name = "sandbox"
			}
		}
		checks = []agents.Check{c}
	} else {
		checks = agents.AgentChecks(ctx, k, p, deep)
	}
	for i := range checks {
		checks[i].Session = session
	}
	return checks
}
