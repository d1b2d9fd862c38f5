package agents

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/nid-dev/nid/statedir"
)

// Exec runs any command as an agent: one process per turn, the prompt on its
// stdin, its stdout the turn's output.
//
// A line of stdout that is exactly a JSON object with "nid": "usage" is not
// output but a report of the context, the newest one winning:
//
//	{"nid":"usage","used":41200,"window":200000}
//
// A command that prints none has an unknown context and rotates only on
// maxTurns or by hand. Exec agents cannot compact: a compaction is refused
// and the auto mode falls back to a handoff, whose fresh conversation is
// simply the next turn with the handoff as its prompt.
//
// The command also sees NIDAGENT_SESSION (group/name), NIDAGENT_CONVERSATION,
// NIDAGENT_TURN_KIND (work, handoff-request, fresh) and NIDAGENT_MCP_URL
// (the session's MCP endpoint, token included), and none of the worker's
// NID_* or TEMPORAL_* variables.
//
// nid has no sandbox to put a command in, so an exec agent runs only with
// permissions: full (its entry in Kinds says so); the activities refuse
// anything else as ErrSandboxUnavailable before the command starts.
type Exec struct{}

// NewExec returns an exec agent.
func NewExec() *Exec { return &Exec{} }

// MaxExecOutputBytes bounds the output an exec turn keeps (for the
// transcript; workflow history keeps far less): a command that prints
// without end must not take the worker's memory. Usage lines are still read
// past it.
const MaxExecOutputBytes = 1 << 20

// ExecUsage is the usage line an exec agent may print.
type ExecUsage struct {
	NID    string `json:"nid"`
	Used   int64  `json:"used"`
	Window int64  `json:"window"`
}

// ParseExecLine reads one line of an exec agent's stdout: a usage report, or
// output (ok false).
func ParseExecLine(line []byte) (u Usage, ok bool) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return Usage{}, false
	}
	var x ExecUsage
	if json.Unmarshal(line, &x) != nil || x.NID != "usage" || x.Used < 0 || x.Window < 0 {
		return Usage{}, false
	}
	return Usage{UsedTokens: x.Used, WindowTokens: x.Window, Source: SourceReported}, true
}

// Turn runs the command once with the prompt on stdin.
func (e *Exec) Turn(ctx context.Context, req TurnRequest) (TurnReport, error) {
	path, err := lookCommand(KindExec, req.Process)
	if err != nil {
		return TurnReport{}, err
	}
	conv := req.Conversation
	if conv == "" {
		if conv, err = nextExecConversation(req.StateDir, req.Session); err != nil {
			return TurnReport{}, err
		}
	}
	cmd := newCommand(ctx, path, req.Process.Args, req.Process, map[string]string{
		"NIDAGENT_SESSION":      req.Session.Group + "/" + req.Session.Name,
		"NIDAGENT_CONVERSATION": conv,
		"NIDAGENT_TURN_KIND":    req.Kind,
		"NIDAGENT_MCP_URL":      req.MCP.TokenURL(),
	})
	cmd.Stdin = strings.NewReader(req.Prompt)
	rep := TurnReport{Conversation: conv, Usage: Usage{Source: SourceUnknown}}
	var out strings.Builder
	dropped := 0
	err = runLines(ctx, KindExec, cmd, req.Process, func(line []byte) {
		if u, ok := ParseExecLine(line); ok {
			rep.Usage = u
			return
		}
		if out.Len()+len(line)+1 > MaxExecOutputBytes {
			dropped += len(line) + 1
			return
		}
		out.Write(line)
		out.WriteByte('\n')
	})
	if err != nil {
		return TurnReport{}, err
	}
	rep.Output = strings.TrimSpace(out.String())
	if dropped > 0 {
		rep.Output += fmt.Sprintf("\n[nid: %d more bytes of output were not kept]", dropped)
	}
	return rep, nil
}

// Compact is refused: a command has no conversation nid could compact.
func (e *Exec) Compact(_ context.Context, req CompactRequest) (CompactReport, error) {
	return CompactReport{Conversation: req.Conversation, Detail: "exec agents cannot compact; rotate them by handoff"}, nil
}

// Stop has nothing to stop: an exec agent's process ends with its turn.
func (e *Exec) Stop(context.Context, StopRequest) error { return nil }

// nextExecConversation numbers a session's exec conversations exec-1,
// exec-2, ... in a counter file that outlives the worker.
func nextExecConversation(stateDir string, ref SessionRef) (string, error) {
	dir := filepath.Join(stateDir, "exec", ref.Group, ref.Name)
	if err := os.MkdirAll(dir, statedir.DirMode); err != nil {
		return "", err
	}
	file := filepath.Join(dir, "conversations")
	n := 0
	if b, err := os.ReadFile(file); err == nil {
		n, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	n++
	if err := os.WriteFile(file, []byte(strconv.Itoa(n)+"\n"), statedir.FileMode); err != nil {
		return "", err
	}
	return fmt.Sprintf("exec-%d", n), nil
}
