package worker

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/activities"
	"github.com/nid-dev/nid/workflows"
)

// recordingSignaler records what the endpoint asks of the sessions.
type recordingSignaler struct {
	board     string
	signalErr error

	mu       sync.Mutex
	handoffs []handoffCall
	boards   []string
	updates  []boardCall
	// refuse, when set, is the refusal every board update gets.
	refuse error
}

type boardCall struct {
	group, update string
	req           workflows.BoardRequest
}

type handoffCall struct{ sessionID, summary string }

func (s *recordingSignaler) HandoffWrite(_ context.Context, sessionID, summary string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.signalErr != nil {
		return s.signalErr
	}
	s.handoffs = append(s.handoffs, handoffCall{sessionID, summary})
	return nil
}

func (s *recordingSignaler) Board(_ context.Context, group, session string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.boards = append(s.boards, group+"/"+session)
	return s.board, nil
}

func (s *recordingSignaler) BoardUpdate(_ context.Context, group, update string, req workflows.BoardRequest) (workflows.BoardResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.updates = append(s.updates, boardCall{group, update, req})
	if s.refuse != nil {
		return workflows.BoardResult{}, s.refuse
	}
	return workflows.BoardResult{
		Task: &workflows.Task{ID: req.TaskID, Title: "Dark mode toggle"},
		Lock: &workflows.Lock{Name: req.Lock, Holder: req.Session},
	}, nil
}

func (s *recordingSignaler) Handoffs() []handoffCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]handoffCall(nil), s.handoffs...)
}

var (
	webLead   = activities.SessionRef{Group: "web", Name: "lead", WorkflowID: workflows.SessionID("web", "lead")}
	webWorker = activities.SessionRef{Group: "web", Name: "worker", WorkflowID: workflows.SessionID("web", "worker")}
)

// startMCP serves an endpoint on 127.0.0.1 mounted as the worker mounts it.
func startMCP(t *testing.T, sig SessionSignaler) *MCPEndpoint {
	t.Helper()
	ts := httptest.NewUnstartedServer(nil)
	e := NewMCPEndpoint([]byte("0123456789abcdef0123456789abcdef"), sig, "http://"+ts.Listener.Addr().String())
	mux := http.NewServeMux()
	mux.Handle("/mcp/", e.Handler())
	ts.Config.Handler = mux
	ts.Start()
	t.Cleanup(ts.Close)
	return e
}

// callTool calls a tool the way an agent does: connect with the official
// client, then tools/call.
func callTool(t *testing.T, url, tool string, args map[string]any) (*mcp.CallToolResult, error) {
	t.Helper()
	return callToolAs(t, activities.MCPAccess{URL: url}, tool, args)
}

// callToolAs calls a tool sending the token, if any, as a bearer token.
func callToolAs(t *testing.T, access activities.MCPAccess, tool string, args map[string]any) (*mcp.CallToolResult, error) {
	t.Helper()
	ctx := context.Background()
	client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: access.URL, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearer{access.Token}}}, nil)
	if err != nil {
		return nil, err
	}
	defer cs.Close()
	return cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
}

// bearer sends its token, if any, as "Authorization: Bearer <token>".
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	if b.token != "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return http.DefaultTransport.RoundTrip(r)
}

func resultText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func TestMCPHandoffWrite(t *testing.T) {
	for _, tc := range []struct {
		name      string
		summary   string
		signalErr error
		isError   bool
		text      string
		recorded  []handoffCall
	}{
		{
			name:     "reaches its own session",
			summary:  "Goal: dark mode. Done: toggle. Next: tests.",
			text:     "handoff recorded: nid rotates this session when the current turn ends",
			recorded: []handoffCall{{"nid/web/lead", "Goal: dark mode. Done: toggle. Next: tests."}},
		},
		{
			name:    "empty summary",
			summary: " \n\t",
			isError: true,
			text:    "summary is empty: write a self-contained handoff (tasks held, what is done, next steps, decisions, gotchas)",
		},
		{
			name:    "oversized summary",
			summary: strings.Repeat("s", workflows.MaxSummaryBytes+1),
			isError: true,
			text:    "summary is 16385 bytes; the limit is 16384 bytes: shorten it and call handoff_write again",
		},
		{
			name:      "signal failure",
			summary:   "Goal: dark mode.",
			signalErr: errors.New("workflow execution already completed"),
			isError:   true,
			text:      "handoff not recorded for web/lead: workflow execution already completed",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sig := &recordingSignaler{signalErr: tc.signalErr}
			e := startMCP(t, sig)
			res, err := callTool(t, e.URL(webLead), "handoff_write", map[string]any{"summary": tc.summary})
			require.NoError(t, err)
			require.Equal(t, tc.isError, res.IsError)
			require.Equal(t, tc.text, resultText(res))
			require.Equal(t, tc.recorded, sig.Handoffs())
		})
	}
}

func TestMCPBoardRead(t *testing.T) {
	sig := &recordingSignaler{board: "Goal: Add dark mode to the settings page\nNo tasks yet."}
	e := startMCP(t, sig)
	res, err := callTool(t, e.URL(webWorker), "board_read", nil)
	require.NoError(t, err)
	require.False(t, res.IsError)
	require.Equal(t, "Goal: Add dark mode to the settings page\nNo tasks yet.", resultText(res))
	require.Equal(t, []string{"web/worker"}, sig.boards)
}

func TestMCPRefusesOtherTokens(t *testing.T) {
	sig := &recordingSignaler{}
	e := startMCP(t, sig)
	base, _, _ := strings.Cut(e.URL(webLead), "/mcp/")
	workerToken := e.URL(webWorker)[strings.LastIndex(e.URL(webWorker), "/")+1:]
	other := NewMCPEndpoint([]byte("another key, another worker....."), sig, base)

	lead := e.Access(webLead)
	for _, tc := range []struct {
		name   string
		access activities.MCPAccess
		status int
	}{
		{"no token", activities.MCPAccess{URL: lead.URL}, http.StatusUnauthorized},
		{"empty token", activities.MCPAccess{URL: lead.URL + "/"}, http.StatusUnauthorized},
		{"empty bearer token", activities.MCPAccess{URL: lead.URL, Token: " "}, http.StatusUnauthorized},
		{"wrong token", activities.MCPAccess{URL: lead.URL + "/00000000000000000000000000000000"}, http.StatusForbidden},
		{"wrong bearer token", activities.MCPAccess{URL: lead.URL, Token: "00000000000000000000000000000000"}, http.StatusForbidden},
		{"another session's token", activities.MCPAccess{URL: lead.URL + "/" + workerToken}, http.StatusForbidden},
		{"another session's bearer token", activities.MCPAccess{URL: lead.URL, Token: workerToken}, http.StatusForbidden},
		{"token from another key", other.Access(webLead), http.StatusForbidden},
		{"another session's URL with the lead's token", activities.MCPAccess{URL: e.Access(webWorker).URL, Token: lead.Token}, http.StatusForbidden},
		{"extra path", activities.MCPAccess{URL: e.URL(webLead) + "/x"}, http.StatusNotFound},
		{"not a session name", activities.MCPAccess{URL: base + "/mcp/web/..%2Flead/" + workerToken}, http.StatusNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A bare tools/call is enough for a stateless endpoint; the same
			// request with the right URL records a handoff (see below).
			resp := postToolsCall(t, tc.access)
			require.Equal(t, tc.status, resp)

			_, err := callToolAs(t, tc.access, "handoff_write", map[string]any{"summary": "I am lead now"})
			require.Error(t, err)
			require.Empty(t, sig.Handoffs(), "a refused request changes nothing")
		})
	}

	// The token works in the path (exec agents) and as a bearer token
	// (Claude Code, Codex).
	require.Equal(t, http.StatusOK, postToolsCall(t, activities.MCPAccess{URL: e.URL(webLead)}))
	require.Equal(t, http.StatusOK, postToolsCall(t, lead))
	require.Equal(t, []handoffCall{{"nid/web/lead", "I am lead now"}, {"nid/web/lead", "I am lead now"}}, sig.Handoffs())
}

// postToolsCall sends one raw JSON-RPC handoff_write call and returns the
// HTTP status.
func postToolsCall(t *testing.T, access activities.MCPAccess) int {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"handoff_write","arguments":{"summary":"I am lead now"}}}`
	req, err := http.NewRequest(http.MethodPost, access.URL, strings.NewReader(body))
	require.NoError(t, err)
	if access.Token != "" {
		req.Header.Set("Authorization", "Bearer "+access.Token)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

func TestMCPURL(t *testing.T) {
	e := NewMCPEndpoint([]byte("0123456789abcdef0123456789abcdef"), &recordingSignaler{}, "http://127.0.0.1:7777/")
	url := e.URL(webLead)
	require.Regexp(t, `^http://127\.0\.0\.1:7777/mcp/web/lead/[0-9a-f]{32}$`, url)
	require.Equal(t, url, e.URL(webLead), "a session's URL is stable")
	require.NotEqual(t, url[strings.LastIndex(url, "/"):], e.URL(webWorker)[strings.LastIndex(e.URL(webWorker), "/"):])
}

func TestLoadOrCreateKey(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	key, err := LoadOrCreateKey(dir)
	require.NoError(t, err)
	require.Len(t, key, 32)

	info, err := os.Stat(filepath.Join(dir, "mcp.key"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())

	again, err := LoadOrCreateKey(dir)
	require.NoError(t, err)
	require.Equal(t, key, again, "the key is created once, so agents' URLs survive a restart")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "mcp.key"), []byte("short"), 0o600))
	_, err = LoadOrCreateKey(dir)
	require.ErrorContains(t, err, "is 5 bytes, want 32")
}

func TestMCPSimAgentWritesItsHandoff(t *testing.T) {
	sig := &recordingSignaler{}
	e := startMCP(t, sig)
	sim := activities.NewSim()
	req := activities.TurnRequest{
		Session:  webLead,
		Spec:     activities.AgentSpec{Kind: activities.KindSim},
		Prompt:   "Add dark mode to the settings page",
		Kind:     activities.TurnWork,
		MCP:      e.Access(webLead),
		StateDir: t.TempDir(),
	}
	rep, err := sim.Turn(context.Background(), req)
	require.NoError(t, err)

	req.Conversation, req.Kind, req.Prompt = rep.Conversation, activities.TurnHandoffRequest, "Call handoff_write."
	_, err = sim.Turn(context.Background(), req)
	require.NoError(t, err)
	got := sig.Handoffs()
	require.Len(t, got, 1)
	require.Equal(t, "nid/web/lead", got[0].sessionID)
	require.Contains(t, got[0].summary, "Handoff from sim conversation sim-1 of web/lead after 2 turns.")
}

func TestMCPBoardToolsActAsTheCallingSession(t *testing.T) {
	sig := &recordingSignaler{}
	e := startMCP(t, sig)
	url := e.URL(webWorker)

	res, err := callTool(t, url, activities.ToolTaskClaim, map[string]any{"task_id": "t1"})
	require.NoError(t, err)
	require.False(t, res.IsError, resultText(res))
	require.Equal(t, "task t1 is yours: Dark mode toggle", resultText(res))
	res, err = callTool(t, url, activities.ToolLockAcquire, map[string]any{"name": "src/app.go"})
	require.NoError(t, err)
	require.Equal(t, `lock "src/app.go" is yours`, resultText(res))
	res, err = callTool(t, url, activities.ToolTaskDone, map[string]any{"task_id": " "})
	require.NoError(t, err)
	require.True(t, res.IsError, "an empty task id is the agent's mistake, told as such")
	require.Contains(t, resultText(res), "task_id is empty")

	require.Equal(t, []boardCall{
		{"web", workflows.UpdateTaskClaim, workflows.BoardRequest{Session: "worker", TaskID: "t1"}},
		{"web", workflows.UpdateLockAcquire, workflows.BoardRequest{Session: "worker", Lock: "src/app.go"}},
	}, sig.updates, "the group hears the token's session, whatever the agent claims to be")

	sig.refuse = errors.New("task t1 is claimed by lead")
	res, err = callTool(t, url, activities.ToolTaskClaim, map[string]any{"task_id": "t1"})
	require.NoError(t, err)
	require.True(t, res.IsError)
	require.Equal(t, "task t1 is claimed by lead", resultText(res), "a refusal names the holder")
}

// A tool nid does not have, or a known tool with arguments of the wrong
// shape, is refused by name and reaches no session.
func TestMCPRefusesUnknownToolsAndBadArguments(t *testing.T) {
	sig := &recordingSignaler{}
	e := startMCP(t, sig)
	_, err := callTool(t, e.URL(webLead), "delete_everything", map[string]any{})
	require.ErrorContains(t, err, "delete_everything")

	for _, tc := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"summary": 42}, `summary: type: 42 has type "integer", want "string"`},
		{map[string]any{}, `missing properties: ["summary"]`},
	} {
		res, err := callTool(t, e.URL(webLead), "handoff_write", tc.args)
		require.NoError(t, err)
		require.True(t, res.IsError)
		require.Contains(t, resultText(res), tc.want)
	}
	require.Empty(t, sig.Handoffs())
}
