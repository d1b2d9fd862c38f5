package activities

import "github.com/nid-dev/nid/config"

// Kind is one agent kind nid drives: everything that differs between kinds,
// in one entry. Adding a kind is adding its adapter and an entry to Kinds,
// then passing the adapter conformance suite.
type Kind struct {
	Name string
	// Title is how people name it: "Claude Code".
	Title string
	// Process says it runs a command, configured by an agents: entry.
	Process bool
	// DefaultCommand is the program it runs when the config names none;
	// empty means the config must name one.
	DefaultCommand string
	// Compacts says it can compact its conversation when asked. A rotation
	// of a kind that cannot goes straight to a handoff.
	Compacts bool
	// Tools says it calls nid's MCP tools by itself, so a handoff request
	// can wait for its handoff_write call. Nid does not wait for a tool a
	// kind cannot call.
	Tools bool
	// New returns its adapter.
	New func() Agent
}

// Kinds lists every agent kind, in the order nid names them.
func Kinds() []Kind {
	return []Kind{
		{Name: config.AgentSim, Title: "The sim agent", Compacts: true, Tools: true, New: func() Agent { return NewSim() }},
		{Name: config.AgentClaude, Title: "Claude Code", Process: true, DefaultCommand: "claude", Compacts: true, Tools: true, New: func() Agent { return NewClaude() }},
		{Name: config.AgentCodex, Title: "Codex", Process: true, DefaultCommand: "codex", Compacts: true, Tools: true, New: func() Agent { return NewCodex() }},
		{Name: config.AgentExec, Title: "The exec command", Process: true, New: func() Agent { return NewExec() }},
	}
}

// KindOf is the entry of the kind named name. A name no entry has (a kind
// from a later nid, a test's own) is taken to compact and call tools: nid
// then tries both and falls back when they fail.
func KindOf(name string) Kind {
	for _, k := range Kinds() {
		if k.Name == name {
			return k
		}
	}
	return Kind{Name: name, Title: name, Compacts: true, Tools: true}
}
