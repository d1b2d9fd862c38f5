package agents

import (
	"context"
	"os"
	"os/exec"
	"time"
)

// Attacher is an agent a person can take over in its own interactive CLI
// (nid attach) and hand back.
type Attacher interface {
	// Interactive is the agent's interactive CLI resumed on conversation
	// conv (a new one when empty), run as the session's turns run it: in
	// the same directory, sandbox and environment, with the same settings,
	// model and nid MCP tools, so that what the person does there is what
	// the agent could do. shell is what an exec agent runs instead of the
	// person's $SHELL; other kinds ignore it. The command is run in the
	// person's terminal, in nid attach's own process group.
	Interactive(ref SessionRef, p Process, mcp MCPAccess, conv, shell string) (*exec.Cmd, error)
	// Handback reads the vendor's own records of the session's
	// conversations since the person attached: the conversation they
	// ended in, its usage, the turns they took and the compactions they
	// ran.
	Handback(ctx context.Context, ref SessionRef, p Process, conv string, since time.Time) (Handback, error)
}

// Handback is what the vendor's records say after a person's work in a
// session. Found is false when the kind keeps no records nid reads, or
// none were written since: Note says which, and the session's context
// record stays as it was.
type Handback struct {
	Found        bool               `json:"found"`
	Conversation string             `json:"conversation,omitempty"`
	Usage        Usage              `json:"usage"`
	HandTurns    int                `json:"handTurns"`
	Compactions  []VendorCompaction `json:"compactions,omitempty"`
	Note         string             `json:"note,omitempty"`
}

// interactiveCommand is cmd made fit for a person's terminal: it stays in
// the caller's process group, so that it may read the terminal, and the
// caller's standard streams are its own.
func interactiveCommand(cmd *exec.Cmd) *exec.Cmd {
	cmd.SysProcAttr = nil
	cmd.Cancel = nil
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	return cmd
}

// Interactive is the person's shell, or shell when given, in the session's
// work directory with the environment its turns get: an exec agent's
// conversation is whatever its command makes of it.
func (e *Exec) Interactive(ref SessionRef, p Process, mcp MCPAccess, conv, shell string) (*exec.Cmd, error) {
	if shell == "" {
		shell = os.Getenv("SHELL")
	}
	if shell == "" {
		shell = "/bin/sh"
	}
	path, err := exec.LookPath(shell)
	if err != nil {
		return nil, BadInput("the command to attach with, %q, is not found: %v", shell, err)
	}
	cmd := newCommand(context.Background(), path, nil, p, map[string]string{
		"NIDAGENT_SESSION":      ref.Group + "/" + ref.Name,
		"NIDAGENT_CONVERSATION": conv,
		"NIDAGENT_MCP_URL":      mcp.TokenURL(),
	})
	return interactiveCommand(cmd), nil
}

// Handback finds nothing: an exec agent's command keeps no records nid
// can read, so its context stays as its last turn reported it.
func (e *Exec) Handback(context.Context, SessionRef, Process, string, time.Time) (Handback, error) {
	return Handback{Note: "an exec agent keeps no records nid can read: the context is as its last turn reported it"}, nil
}

// Interactive is Claude Code's own interactive CLI on conversation conv
// (--resume), or on a new one when conv is empty, built as the session's
// turns are (claudeCLI) but for the print mode and its stream-json.
func (c *Claude) Interactive(ref SessionRef, p Process, mcp MCPAccess, conv, _ string) (*exec.Cmd, error) {
	cmd, err := claudeCLI(p, mcp)
	if err != nil {
		return nil, err
	}
	if _, err := onClaudeConversation(cmd, conv); err != nil {
		return nil, err
	}
	return interactiveCommand(cmd), nil
}

// Interactive is Codex's own interactive CLI resumed on thread conv
// (codex resume), or on a new thread when conv is empty, built as the
// session's app-server is (codexCLI), with the settings a turn gives its
// thread: the working directory, no approvals asked, the model, and no
// sandbox at all for a session that runs without one.
func (c *Codex) Interactive(ref SessionRef, p Process, mcp MCPAccess, conv, _ string) (*exec.Cmd, error) {
	var sub []string
	if conv != "" {
		if err := CheckConversation(conv); err != nil {
			return nil, err
		}
		sub = []string{"resume", conv}
	}
	cmd, err := codexCLI(p, mcp, sub...)
	if err != nil {
		return nil, err
	}
	// What thread/start and thread/resume give a turn's thread.
	extra := []string{"-c", `approval_policy="never"`}
	if !p.Sandboxed() {
		extra = append(extra, "-c", `sandbox_mode="danger-full-access"`)
	}
	if wd := WorkDir(p); wd != "" {
		extra = append(extra, "--cd", wd)
	}
	if p.Model != "" {
		extra = append(extra, "--model", p.Model)
	}
	cmd.Args = append(cmd.Args, extra...)
	return interactiveCommand(cmd), nil
}
