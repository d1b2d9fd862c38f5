// Package agenttest holds the helpers the agents, activities and e2e tests
// share; only tests use it. It imports none of nid's packages, so that
// package agents' own tests can use it without an import cycle.
package agenttest

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
)

// HandoffRecorder is a small MCP server on 127.0.0.1 with the handoff_write,
// task_done and handoff_ack tools, which records what agents send it or,
// for handoff_write, refuses it.
type HandoffRecorder struct {
	// URL is the server's MCP endpoint.
	URL string

	server *httptest.Server

	mu        sync.Mutex
	summaries []string
	done      []string
	acks      [][]string
}

// StartHandoffRecorder starts a HandoffRecorder that the test's end stops;
// when refuse is not empty, handoff_write fails with it as its error.
func StartHandoffRecorder(t *testing.T, refuse string) *HandoffRecorder {
	t.Helper()
	r := &HandoffRecorder{}
	srv := mcp.NewServer(&mcp.Implementation{Name: "recorder", Version: "1"}, nil)
	type args struct {
		Summary string `json:"summary"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "handoff_write"}, func(_ context.Context, _ *mcp.CallToolRequest, in args) (*mcp.CallToolResult, any, error) {
		if refuse != "" {
			return nil, nil, errors.New(refuse)
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		r.summaries = append(r.summaries, in.Summary)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "handoff recorded"}}}, nil, nil
	})
	type taskArgs struct {
		TaskID string `json:"task_id"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "task_done"}, func(_ context.Context, _ *mcp.CallToolRequest, in taskArgs) (*mcp.CallToolResult, any, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.done = append(r.done, in.TaskID)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
	})
	type ackArgs struct {
		Tasks []string `json:"tasks"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "handoff_ack"}, func(_ context.Context, _ *mcp.CallToolRequest, in ackArgs) (*mcp.CallToolResult, any, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.acks = append(r.acks, in.Tasks)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "acknowledged"}}}, nil, nil
	})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	r.URL, r.server = ts.URL, ts
	return r
}

// Close stops the server before the test ends, for a test of an agent
// whose endpoint went away.
func (r *HandoffRecorder) Close() { r.server.Close() }

// Summaries returns the handoff summaries recorded, oldest first.
func (r *HandoffRecorder) Summaries() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.summaries...)
}

// Done returns the tasks task_done was called for, oldest first.
func (r *HandoffRecorder) Done() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.done...)
}

// Acks returns the task lists of each handoff_ack call, oldest first.
func (r *HandoffRecorder) Acks() [][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]string(nil), r.acks...)
}

// Script writes an executable shell script and returns its path.
func Script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "agent.sh")
	require.NoError(t, os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755))
	return p
}

// FakeClaude is a script that stands in for Claude Code in stream-json
// mode: it takes the first message from its stdin, says that message's
// turn started, and runs body, which prints the turn's lines.
func FakeClaude(t *testing.T, body string) string {
	t.Helper()
	return Script(t, `read -r msg
id=$(printf '%s' "$msg" | sed -n 's/^{"type":"user","uuid":"\([^"]*\)".*/\1/p')
echo '{"type":"command_lifecycle","command_uuid":"'"$id"'","state":"started"}'
`+body)
}

// DeadPID is the pid of a process that has ended.
func DeadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	require.NoError(t, cmd.Run())
	return cmd.Process.Pid
}

// GitRun runs git in dir and returns its output, trimmed; a failing git
// fails the test with what git said.
func GitRun(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	require.NoError(t, err, "git %s: %s", strings.Join(args, " "), out)
	return strings.TrimSpace(string(out))
}

// RequireFinal checks that err is a failure of type typ that Temporal does
// not retry, and that its message says each of says.
func RequireFinal(t *testing.T, err error, typ string, says ...string) {
	t.Helper()
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app), "want an application error, got %v", err)
	require.Equal(t, typ, app.Type(), "%v", err)
	require.True(t, app.NonRetryable(), "%v", err)
	for _, s := range says {
		require.Contains(t, err.Error(), s)
	}
}
