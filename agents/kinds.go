package agents

import (
	"context"

	"github.com/nid-dev/nid/config"
)

// Agent kinds nid drives, by the name a session's agent key gives them.
const (
	KindSim    = "sim"
	KindClaude = "claude"
	KindCodex  = "codex"
	KindExec   = "exec"
)

// Kind is one agent kind nid drives: everything that differs between kinds,
// in one entry. Adding a kind is adding its adapter and an entry to Kinds,
// then passing the adapter conformance suite (conformance_test.go), whose
// cases are the checklist of what a kind must do.
type Kind struct {
	// Kind holds what the configuration checks (config.Load and
	// Config.Validate are handed it through ConfigKinds): the name, whether
	// it runs a command, its default command, the permissions it can
	// enforce, whether a sim: block configures it, whether it compacts.
	config.Kind
	// Title is how people name it mid-sentence, where nid's lines put it:
	// "Claude Code", "the sim agent" ("learned: the sim agent compacted
	// itself…").
	Title string
	// Network says whether its commands may reach the network when
	// nid.yaml does not say: what its sandbox does by default.
	Network bool
	// Tools says it calls nid's MCP tools by itself, so a handoff request
	// can wait for its handoff_write call. Nid does not wait for a tool a
	// kind cannot call.
	Tools bool
	// Package is the npm package its CLI comes in, whose version nid is
	// tested with is pinned in testdata/agents/package.json (see
	// TestedVersion); empty for a kind nid installs nothing for.
	Package string
	// Env names the worker's variables its CLI reads on top of AgentEnv (a
	// trailing * takes every name with that prefix): its vendor's key,
	// base URL and settings. Another vendor's are not among them.
	Env []string
	// EnvOf names more of them for p, given the environment the agent
	// gets without them; nil: none.
	EnvOf func(env map[string]string, p Process) []string
	// Credentials finds what its CLI logs in with, in the environment the
	// agent gets, without reading a secret out; nil: it needs none.
	Credentials func(env map[string]string, p Process) Check
	// Sandbox checks that the sandbox p's permissions ask for can run on
	// this host (cli is its CLI's path, "" when missing); deep also runs
	// it. nil: the kind has none, and process refuses every permissions
	// but full for it.
	Sandbox func(ctx context.Context, cli string, p Process, env map[string]string, deep bool) Check
	// Attaches says a person can take a session of it over with nid
	// attach: its adapter is an Attacher.
	Attaches bool
	// New returns its adapter.
	New func() Agent
}

// NoInteractiveCLI is nid attach's refusal of a kind that does not attach,
// saying what to do instead.
func (k Kind) NoInteractiveCLI() string {
	return k.Title + " has no interactive CLI to attach to: nid send gives it a message for its next turn, and nid transcript shows what it did"
}

// Kinds lists every agent kind, in the order nid names them.
func Kinds() []Kind {
	return []Kind{
		{Kind: config.Kind{Name: KindSim, Sim: true, Compacts: true}, Title: "the sim agent",
			Tools: true, New: func() Agent { return NewSim() }},
		// Claude Code's and Codex's sandboxes keep commands off the network
		// unless told otherwise.
		{Kind: config.Kind{Name: KindClaude, Process: true, DefaultCommand: "claude", Permissions: config.PermissionsModes(), Compacts: true}, Title: "Claude Code",
			Network: false, Tools: true, Attaches: true, Package: "@anthropic-ai/claude-code",
			Env: []string{"ANTHROPIC_*", "CLAUDE_CODE_*", "CLAUDE_CONFIG_DIR"}, Credentials: claudeCredentials, Sandbox: claudeSandboxCheck,
			New: func() Agent { return NewClaude() }},
		{Kind: config.Kind{Name: KindCodex, Process: true, DefaultCommand: "codex", Permissions: config.PermissionsModes(), Compacts: true}, Title: "Codex",
			Network: false, Tools: true, Attaches: true, Package: "@openai/codex",
			Env: []string{"OPENAI_*", "CODEX_*"}, EnvOf: codexProviderEnv, Credentials: codexCredentials, Sandbox: codexSandboxCheck,
			New: func() Agent { return NewCodex() }},
		// An exec agent is the user's own command, which nid cannot put in
		// a sandbox: it runs only with permissions: full.
		{Kind: config.Kind{Name: KindExec, Process: true, Permissions: []string{config.PermissionsFull}}, Title: "the exec command",
			Attaches: true, New: func() Agent { return NewExec() }},
	}
}

// ConfigKinds returns what the configuration must know of every kind, for
// config.LoadOptions.Kinds and Config.Validate.
func ConfigKinds() []config.Kind {
	var ks []config.Kind
	for _, k := range Kinds() {
		ks = append(ks, k.Kind)
	}
	return ks
}

// KindOf is the entry of the kind named name. A name no entry has (a kind
// from a later nid, a test's own) is taken to compact, call tools and
// attach: nid then tries and falls back, or the worker refuses, when it
// cannot.
func KindOf(name string) Kind {
	for _, k := range Kinds() {
		if k.Name == name {
			return k
		}
	}
	return Kind{Kind: config.Kind{Name: name, Compacts: true}, Title: name, Tools: true, Attaches: true}
}
