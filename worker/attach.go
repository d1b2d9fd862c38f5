package worker

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os/exec"

	"github.com/nid-dev/nid/activities"
	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/config"
)

// AttachCommand is the command nid attach runs in a person's terminal for
// session ref: the session's agent CLI on conversation conv, resolved from
// cfg (this host's nid.yaml) by the same activity layer the host's worker
// runs turns with, so it gets the same command, directory, sandbox,
// environment and model. Its nid MCP tools are those of the session's
// conversation generation, on the MCP endpoint of the worker serving at
// httpURL (the HTTP address its host announced), signed with the key in
// the worker's state directory: nid attach runs beside that worker, not
// in it. shell is what an exec agent runs instead of the person's $SHELL.
func AttachCommand(ctx context.Context, cfg *config.Config, ref agents.SessionRef, spec agents.AgentSpec, conv string, generation int, shell, httpURL string) (*exec.Cmd, error) {
	// Read, never made: a key nid attach made would sign tokens the
	// running worker does not know, and the person's MCP tools would fail.
	key, err := readKey(keyPath(cfg.State))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no MCP key in %s: nid attach runs on the host whose nid up runs the session, with the same nid.yaml (state: %s)", cfg.State, cfg.State)
	}
	if err != nil {
		return nil, err
	}
	current := func() *config.Config { return cfg }
	acts := &activities.Activities{
		Agents:   Agents(),
		Settings: agentSettings(current),
		Places:   agentPlaces(current),
		StateDir: cfg.State,
		// The endpoint only hands out addresses here: nid attach serves
		// nothing, the worker at httpURL answers the tools.
		MCP: NewMCPEndpoint(key, nil, httpURL).Access,
	}
	return acts.AttachCommand(ctx, ref, spec, conv, generation, shell)
}
