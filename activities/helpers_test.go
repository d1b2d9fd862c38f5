package activities

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nid-dev/nid/agents"
)

// handoffRecorder is a small MCP server on 127.0.0.1 with a handoff_write
// tool that records the summaries agents send it, or refuses them.
type handoffRecorder struct {
	URL    string
	server *httptest.Server

	mu        sync.Mutex
	summaries []string
	done      []string
	acks      [][]string
}

func startHandoffRecorder(t *testing.T, refuse string) *handoffRecorder {
	t.Helper()
	r := &handoffRecorder{}
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

func (r *handoffRecorder) Summaries() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.summaries...)
}

var lead = agents.SessionRef{Group: "web", Name: "lead", WorkflowID: "nid/web/lead"}

// script writes an executable shell script and returns its path.
func script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "agent.sh")
	require.NoError(t, os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755))
	return p
}

// fakeClaude is a script that stands in for Claude Code in stream-json
// mode: it takes the first message from its stdin, says that message's
// turn started, and runs body, which prints the turn's lines.
func fakeClaude(t *testing.T, body string) string {
	t.Helper()
	return script(t, `read -r msg
id=$(printf '%s' "$msg" | sed -n 's/^{"type":"user","uuid":"\([^"]*\)".*/\1/p')
echo '{"type":"command_lifecycle","command_uuid":"'"$id"'","state":"started"}'
`+body)
}

// deadPID is the pid of a process that has exited.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	require.NoError(t, cmd.Run())
	return cmd.Process.Pid
}
