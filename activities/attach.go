package activities

import (
	"context"
	"os/exec"

	"github.com/nid-dev/nid/agents"
)

// AttachCommand is the interactive command nid attach runs in a person's
// terminal for session ref: its agent's own CLI on conversation conv,
// resolved from this worker's nid.yaml exactly as a turn's is (the same
// command, directory, sandbox, environment and model), with the MCP tools
// of conversation generation. shell is what an exec agent runs instead of
// the person's $SHELL. A kind with no interactive CLI (the sim) is refused
// in a sentence saying what to do instead.
func (a *Activities) AttachCommand(ctx context.Context, ref agents.SessionRef, spec agents.AgentSpec, conv string, generation int, shell string) (*exec.Cmd, error) {
	if err := agents.CheckSession(&ref); err != nil {
		return nil, err
	}
	att, err := a.attacher(spec.Kind)
	if err != nil {
		return nil, err
	}
	p, err := a.process(ref, spec)
	if err != nil {
		return nil, err
	}
	if k := agents.KindOf(spec.Kind); k.Process {
		if err := agents.Ready(ctx, ref, k, p); err != nil {
			return nil, err
		}
	}
	return att.Interactive(ref, p, a.mcp(ref, generation), conv, shell)
}

// Handback reads, from the vendor's own records on this host, what a
// person did in the session they attached to: the session folds it into
// its context record when they hand it back.
func (a *Activities) Handback(ctx context.Context, in HandbackInput) (HandbackResult, error) {
	if err := agents.CheckSession(&in.Session); err != nil {
		return HandbackResult{}, classify(err)
	}
	att, err := a.attacher(in.Spec.Kind)
	if err != nil {
		return HandbackResult{}, classify(err)
	}
	var res HandbackResult
	err = a.call(ctx, request{op: "handback", what: "Handback", session: in.Session, spec: in.Spec, logs: []any{"conversation", in.Conversation}},
		func(ctx context.Context, _ agents.Agent, p agents.Process) ([]any, error) {
			h, err := att.Handback(ctx, in.Session, p, in.Conversation, in.Since)
			h.Usage = h.Usage.WithWindow(p.Window)
			res = HandbackResult{Handback: h}
			return []any{"found", h.Found, "handTurns", h.HandTurns}, err
		})
	return res, err
}

// attacher is kind's adapter as an Attacher, or a refusal saying that a
// person cannot take this kind over and what to do instead.
func (a *Activities) attacher(kind string) (agents.Attacher, error) {
	agent, err := a.agent(kind)
	if err != nil {
		return nil, err
	}
	att, ok := agent.(agents.Attacher)
	if !ok {
		return nil, agents.BadInput("%s", agents.KindOf(kind).NoInteractiveCLI())
	}
	return att, nil
}
