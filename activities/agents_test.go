package activities_test

import (
	"context"
	"crypto/rand"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/activities"
	"github.com/nid-dev/nid/worker"
)

// The tests in this file run the real Claude Code and Codex CLIs, pinned in
// testdata/agents/package.json, against a fake model server. .ci/run
// installs them with `npm ci`; without them these tests fail and say so.

// agentBin returns the installed CLI, or fails the test saying how to
// install it.
func agentBin(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("testdata", "agents", "node_modules", ".bin", name))
	require.NoError(t, err)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("the %s CLI is not installed: run `npm ci` in activities/testdata/agents (.ci/run does)", name)
	}
	return p
}

// fakeSessions stands in for the session workflows behind nid's MCP
// endpoint: it records handoffs and shows a fixed board. The tools it does
// not fake are left to the embedded interface (nil: a call would panic).
type fakeSessions struct {
	worker.SessionSignaler
	mu        sync.Mutex
	summaries []string
}

const testBoard = "BOARD: task t1 (claimed by web/lead): add dark mode"

func (f *fakeSessions) HandoffWrite(_ context.Context, _ string, summary string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.summaries = append(f.summaries, summary)
	return nil
}

func (f *fakeSessions) Board(context.Context, string, string) (string, error) { return testBoard, nil }

func (f *fakeSessions) Summaries() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.summaries...)
}

// agentRig is one session's world: a fake model, nid's MCP endpoint, and a
// private HOME, temp and working directory.
type agentRig struct {
	t        *testing.T
	model    *fakeModel
	sessions *fakeSessions
	mcp      activities.MCPAccess
	ref      activities.SessionRef
	proc     activities.Process
	home     string
	state    string
	// toolCalls are the tool calls the adapter reported, all turns.
	toolCalls []string
}

func newRig(t *testing.T) *agentRig {
	t.Helper()
	r := &agentRig{t: t, model: startFakeModel(t), sessions: &fakeSessions{}}
	// nid's own MCP endpoint, as the worker serves it.
	ts := httptest.NewUnstartedServer(nil)
	// A key of its own, so that no other test's agent holds this token.
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	ep := worker.NewMCPEndpoint(key, r.sessions, "http://"+ts.Listener.Addr().String())
	mux := http.NewServeMux()
	mux.Handle("/mcp/", ep.Handler())
	ts.Config.Handler = mux
	ts.Start()
	t.Cleanup(ts.Close)
	r.ref = activities.SessionRef{Group: "web", Name: "lead", WorkflowID: "nid/web/lead"}
	r.mcp = ep.Access(r.ref)
	r.home = t.TempDir()
	tmp := t.TempDir()
	r.state = t.TempDir()
	r.proc = activities.Process{
		WorkDir: t.TempDir(),
		Timeout: 2 * time.Minute,
		Env:     map[string]string{"HOME": r.home, "TMPDIR": tmp},
		TempDir: t.TempDir(),
	}
	return r
}

func (r *agentRig) turn(ag activities.Agent, conv, prompt, kind string) (activities.TurnReport, []bool, error) {
	var limited []bool
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := ag.Turn(ctx, activities.TurnRequest{
		Session: r.ref, Conversation: conv, Prompt: prompt, Kind: kind,
		MCP: r.mcp, StateDir: r.state, Process: r.proc,
		RateLimited: func(l bool) { limited = append(limited, l) },
		ToolCalled:  func(c string) { r.toolCalls = append(r.toolCalls, c) },
	})
	return rep, limited, err
}

func (r *agentRig) compact(ag activities.Agent, conv string) (activities.CompactReport, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	return ag.Compact(ctx, activities.CompactRequest{Session: r.ref, Conversation: conv, MCP: r.mcp, StateDir: r.state, Process: r.proc})
}

// errType is the activities error type of err, if it has one.
func errType(err error) string {
	var e *activities.Error
	if errors.As(err, &e) {
		return e.Type
	}
	return ""
}

func lastRequest(t *testing.T, m *fakeModel) fakeRequest {
	t.Helper()
	reqs := m.Requests()
	require.NotEmpty(t, reqs)
	return reqs[len(reqs)-1]
}

func anyRequestContains(m *fakeModel, s string) bool {
	for _, r := range m.Requests() {
		if strings.Contains(r.Body, s) {
			return true
		}
	}
	return false
}
