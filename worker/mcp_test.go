package worker

import (
	"context"
	"encoding/json"
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

	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/workflows"
)

// recordingSignaler records what the endpoint asks of the sessions.
type recordingSignaler struct {
	board     string
	signalErr error

	mu       sync.Mutex
	handoffs []handoffCall
	acks     []ackCall
	boards   []string
	updates  []boardCall
	// refuse, when set, is the refusal every board update gets.
	refuse error
	// view is what the session's query answers, viewErr its failure.
	view    workflows.SessionView
	viewErr error
	views   int
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

type ackCall struct {
	sessionID string
	ack       workflows.HandoffAck
}

func (s *recordingSignaler) HandoffAck(_ context.Context, sessionID string, ack workflows.HandoffAck) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.signalErr != nil {
		return s.signalErr
	}
	s.acks = append(s.acks, ackCall{sessionID, ack})
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

func (s *recordingSignaler) Session(_ context.Context, group, name string) (workflows.SessionView, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.views++
	v := s.view
	v.Group, v.Name = group, name
	return v, s.viewErr
}

func (s *recordingSignaler) Handoffs() []handoffCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]handoffCall(nil), s.handoffs...)
}

var (
	webLead   = agents.SessionRef{Group: "web", Name: "lead", WorkflowID: workflows.SessionID("web", "lead")}
	webWorker = agents.SessionRef{Group: "web", Name: "worker", WorkflowID: workflows.SessionID("web", "worker")}
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
	return callToolAs(t, agents.MCPAccess{URL: url}, tool, args)
}

// callToolAs calls a tool sending the token, if any, as a bearer token.
func callToolAs(t *testing.T, access agents.MCPAccess, tool string, args map[string]any) (*mcp.CallToolResult, error) {
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
			res, err := callTool(t, e.URL(webLead, 0), "handoff_write", map[string]any{"summary": tc.summary})
			require.NoError(t, err)
			require.Equal(t, tc.isError, res.IsError)
			require.Equal(t, tc.text, resultText(res))
			require.Equal(t, tc.recorded, sig.Handoffs())
		})
	}
}

// Only the conversation a running rotation started has anything to
// acknowledge; its acknowledgement reaches the session tagged with its
// generation, and bad ids are refused with what is allowed.
func TestMCPHandoffAck(t *testing.T) {
	rotating := workflows.SessionView{Generation: 2, Rotating: &workflows.RotateRequest{Reason: workflows.ReasonManual}}
	nothing := "nothing to acknowledge: no handoff into this conversation is waiting for its handoff_ack; carry on"
	for _, tc := range []struct {
		name       string
		view       workflows.SessionView
		generation int
		tasks      any
		signalErr  error
		isError    bool
		text       string
		recorded   []ackCall
	}{
		{
			name: "the fresh conversation", view: rotating, generation: 3, tasks: []string{" t3", "t5", "t3"},
			text:     "acknowledged: you resume t3, t5; nid checks this against the board and records it on the rotation's receipt",
			recorded: []ackCall{{"nid/web/lead", workflows.HandoffAck{Tasks: []string{"t3", "t5"}, Generation: 3}}},
		},
		{
			name: "holding nothing", view: rotating, generation: 3, tasks: []string{},
			text:     "acknowledged: you resume no task; nid checks this against the board and records it on the rotation's receipt",
			recorded: []ackCall{{"nid/web/lead", workflows.HandoffAck{Tasks: []string{}, Generation: 3}}},
		},
		{name: "the conversation being rotated away", view: rotating, generation: 2, tasks: []string{"t3"}, text: nothing},
		{name: "no rotation running", view: workflows.SessionView{Generation: 3}, generation: 3, tasks: []string{"t3"}, text: nothing},
		{
			name: "an empty id", view: rotating, generation: 3, tasks: []string{"t3", " "}, isError: true,
			text: "tasks has an empty id: give each task's id as the board shows it, e.g. t3, or an empty list when you hold none",
		},
		{
			name: "an overlong id", view: rotating, generation: 3, tasks: []string{strings.Repeat("t", 65)}, isError: true,
			text: `task id "` + strings.Repeat("t", 64) + `…" is longer than 64 bytes: give each task's id as the board shows it, e.g. t3`,
		},
		{
			name: "more ids than a board holds", view: rotating, generation: 3, tasks: make([]string, workflows.MaxTasks+1), isError: true,
			text: "tasks names 301 ids; a board holds at most 300 tasks",
		},
		{
			name: "signal failure", view: rotating, generation: 3, tasks: []string{"t3"}, isError: true,
			signalErr: errors.New("workflow execution already completed"),
			text:      "acknowledgement not recorded for web/lead: workflow execution already completed",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sig := &recordingSignaler{signalErr: tc.signalErr, view: tc.view}
			e := startMCP(t, sig)
			res, err := callTool(t, e.URL(webLead, tc.generation), agents.ToolHandoffAck, map[string]any{"tasks": tc.tasks})
			require.NoError(t, err)
			require.Equal(t, tc.isError, res.IsError, resultText(res))
			require.Equal(t, tc.text, resultText(res))
			sig.mu.Lock()
			defer sig.mu.Unlock()
			require.Equal(t, tc.recorded, sig.acks)
		})
	}
}

func TestMCPBoardRead(t *testing.T) {
	sig := &recordingSignaler{board: "Goal: Add dark mode to the settings page\nNo tasks yet."}
	e := startMCP(t, sig)
	res, err := callTool(t, e.URL(webWorker, 0), "board_read", nil)
	require.NoError(t, err)
	require.False(t, res.IsError)
	require.Equal(t, "Goal: Add dark mode to the settings page\nNo tasks yet.", resultText(res))
	require.Equal(t, []string{"web/worker"}, sig.boards)
}

func TestMCPRefusesOtherTokens(t *testing.T) {
	sig := &recordingSignaler{}
	e := startMCP(t, sig)
	base, _, _ := strings.Cut(e.URL(webLead, 0), "/mcp/")
	workerToken := e.URL(webWorker, 0)[strings.LastIndex(e.URL(webWorker, 0), "/")+1:]
	other := NewMCPEndpoint([]byte("another key, another worker....."), sig, base)

	lead := e.Access(webLead, 0)
	for _, tc := range []struct {
		name   string
		access agents.MCPAccess
		status int
	}{
		{"no token", agents.MCPAccess{URL: lead.URL}, http.StatusUnauthorized},
		{"empty token", agents.MCPAccess{URL: lead.URL + "/"}, http.StatusUnauthorized},
		{"empty bearer token", agents.MCPAccess{URL: lead.URL, Token: " "}, http.StatusUnauthorized},
		{"wrong token", agents.MCPAccess{URL: lead.URL + "/00000000000000000000000000000000"}, http.StatusForbidden},
		{"wrong bearer token", agents.MCPAccess{URL: lead.URL, Token: "00000000000000000000000000000000"}, http.StatusForbidden},
		{"another session's token", agents.MCPAccess{URL: lead.URL + "/" + workerToken}, http.StatusForbidden},
		{"another session's bearer token", agents.MCPAccess{URL: lead.URL, Token: workerToken}, http.StatusForbidden},
		{"token from another key", other.Access(webLead, 0), http.StatusForbidden},
		{"another session's URL with the lead's token", agents.MCPAccess{URL: e.Access(webWorker, 0).URL, Token: lead.Token}, http.StatusForbidden},
		{"another conversation's token relabelled", agents.MCPAccess{URL: lead.URL, Token: "0." + strings.SplitN(e.Access(webLead, 1).Token, ".", 2)[1]}, http.StatusForbidden},
		{"a token without its generation", agents.MCPAccess{URL: lead.URL, Token: strings.SplitN(lead.Token, ".", 2)[1]}, http.StatusForbidden},
		{"a negative generation", agents.MCPAccess{URL: lead.URL, Token: "-1." + strings.SplitN(lead.Token, ".", 2)[1]}, http.StatusForbidden},
		{"extra path", agents.MCPAccess{URL: e.URL(webLead, 0) + "/x"}, http.StatusNotFound},
		{"not a session name", agents.MCPAccess{URL: base + "/mcp/web/..%2Flead/" + workerToken}, http.StatusNotFound},
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
	require.Equal(t, http.StatusOK, postToolsCall(t, agents.MCPAccess{URL: e.URL(webLead, 0)}))
	require.Equal(t, http.StatusOK, postToolsCall(t, lead))
	require.Equal(t, []handoffCall{{"nid/web/lead", "I am lead now"}, {"nid/web/lead", "I am lead now"}}, sig.Handoffs())
}

// postToolsCall sends one raw JSON-RPC handoff_write call and returns the
// HTTP status.
func postToolsCall(t *testing.T, access agents.MCPAccess) int {
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
	url := e.URL(webLead, 0)
	require.Regexp(t, `^http://127\.0\.0\.1:7777/mcp/web/lead/0\.[0-9a-f]{32}$`, url)
	require.Equal(t, url, e.URL(webLead, 0), "a conversation's URL is stable")
	require.NotEqual(t, url[strings.LastIndex(url, "/"):], e.URL(webWorker, 0)[strings.LastIndex(e.URL(webWorker, 0), "/"):])
	next := e.URL(webLead, 1)
	require.Regexp(t, `^http://127\.0\.0\.1:7777/mcp/web/lead/1\.[0-9a-f]{32}$`, next)
	require.NotEqual(t, url[strings.LastIndex(url, ".")+1:], next[strings.LastIndex(next, ".")+1:], "each conversation has a token of its own")
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
	sim := agents.NewSim()
	req := agents.TurnRequest{
		Session:  webLead,
		Spec:     agents.AgentSpec{Kind: agents.KindSim},
		Prompt:   "Add dark mode to the settings page",
		Kind:     agents.TurnWork,
		MCP:      e.Access(webLead, 0),
		StateDir: t.TempDir(),
	}
	rep, err := sim.Turn(context.Background(), req)
	require.NoError(t, err)

	req.Conversation, req.Kind, req.Prompt = rep.Conversation, agents.TurnHandoffRequest, "Call handoff_write."
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
	url := e.URL(webWorker, 0)

	res, err := callTool(t, url, agents.ToolTaskClaim, map[string]any{"task_id": "t1"})
	require.NoError(t, err)
	require.False(t, res.IsError, resultText(res))
	require.Equal(t, "task t1 is yours: Dark mode toggle", resultText(res))
	res, err = callTool(t, url, agents.ToolLockAcquire, map[string]any{"name": "src/app.go"})
	require.NoError(t, err)
	require.Equal(t, `lock "src/app.go" is yours`, resultText(res))
	res, err = callTool(t, url, agents.ToolTaskDone, map[string]any{"task_id": " "})
	require.NoError(t, err)
	require.True(t, res.IsError, "an empty task id is the agent's mistake, told as such")
	require.Contains(t, resultText(res), "task_id is empty")

	require.Equal(t, []boardCall{
		{"web", workflows.UpdateTaskClaim, workflows.BoardRequest{Session: "worker", TaskID: "t1"}},
		{"web", workflows.UpdateLockAcquire, workflows.BoardRequest{Session: "worker", Lock: "src/app.go"}},
	}, sig.updates, "the group hears the token's session, whatever the agent claims to be")

	sig.refuse = errors.New("task t1 is claimed by lead")
	res, err = callTool(t, url, agents.ToolTaskClaim, map[string]any{"task_id": "t1"})
	require.NoError(t, err)
	require.True(t, res.IsError)
	require.Equal(t, "task t1 is claimed by lead", resultText(res), "a refusal names the holder")
}

// A tool nid does not have, or a known tool with arguments of the wrong
// shape, is refused by name and reaches no session.
func TestMCPRefusesUnknownToolsAndBadArguments(t *testing.T) {
	sig := &recordingSignaler{}
	e := startMCP(t, sig)
	_, err := callTool(t, e.URL(webLead, 0), "delete_everything", map[string]any{})
	require.ErrorContains(t, err, "delete_everything")

	for _, tc := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"summary": 42}, `summary: type: 42 has type "integer", want "string"`},
		{map[string]any{}, `missing properties: ["summary"]`},
	} {
		res, err := callTool(t, e.URL(webLead, 0), "handoff_write", tc.args)
		require.NoError(t, err)
		require.True(t, res.IsError)
		require.Contains(t, resultText(res), tc.want)
	}
	require.Empty(t, sig.Handoffs())
}

// Only the session's current conversation acts, and while a rotation runs
// the fresh one it starts: a call with an older conversation's token (a
// process that outlived its turn, a late retry), or with the token of a
// fresh conversation a failed rotation left behind, is refused in words
// that say so and reaches no session and no board.
func TestMCPOnlyTheCurrentConversationActs(t *testing.T) {
	rotating := &workflows.RotateRequest{Mode: "handoff", Reason: workflows.ReasonManual}
	for _, tc := range []struct {
		name       string
		view       workflows.SessionView
		generation int
		refusal    string
	}{
		{"current", workflows.SessionView{Generation: 2}, 2, ""},
		{"the old conversation while its rotation runs", workflows.SessionView{Generation: 2, Rotating: rotating}, 2, ""},
		{"the fresh conversation while its rotation runs", workflows.SessionView{Generation: 2, Rotating: rotating}, 3, ""},
		{"rotated away", workflows.SessionView{Generation: 2}, 1,
			"refused: this conversation of web/lead was rotated away (its token is of generation 1; the session is on generation 2): it can no longer act for the session, and nothing was changed"},
		{"rotated away long ago, while another rotation runs", workflows.SessionView{Generation: 2, Rotating: rotating}, 0,
			"refused: this conversation of web/lead was rotated away (its token is of generation 0; the session is on generation 2)"},
		{"left behind by a rotation that did not complete", workflows.SessionView{Generation: 2}, 3,
			"refused: this conversation of web/lead is not the session's current one (its token is of generation 3, from a rotation that did not complete; the session is on generation 2)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sig := &recordingSignaler{board: "the board", view: tc.view}
			e := startMCP(t, sig)
			access := e.Access(webLead, tc.generation)
			calls := []struct {
				tool string
				args map[string]any
			}{
				{agents.ToolHandoffWrite, map[string]any{"summary": "Goal: dark mode."}},
				{agents.ToolTaskClaim, map[string]any{"task_id": "t1"}},
				{agents.ToolLockAcquire, map[string]any{"name": "src/app.go"}},
				{agents.ToolBoardRead, nil},
				{agents.ToolContextStatus, nil},
			}
			for _, c := range calls {
				res, err := callToolAs(t, access, c.tool, c.args)
				require.NoError(t, err)
				if tc.refusal == "" {
					require.False(t, res.IsError, "%s: %s", c.tool, resultText(res))
					continue
				}
				require.True(t, res.IsError, c.tool)
				require.Contains(t, resultText(res), tc.refusal, c.tool)
			}
			require.Equal(t, len(calls), sig.views, "every call is checked against the session")
			if tc.refusal != "" {
				require.Empty(t, sig.Handoffs(), "no handoff reached the session")
				require.Empty(t, sig.updates, "the board was not changed")
				require.Empty(t, sig.boards, "nor read")
				return
			}
			require.Equal(t, []handoffCall{{"nid/web/lead", "Goal: dark mode."}}, sig.Handoffs())
			require.Len(t, sig.updates, 2)
		})
	}
}

// A tool call nid cannot check against its session (the session's worker
// is down, the session is gone) is refused, not let through.
func TestMCPRefusesWhatItCannotCheck(t *testing.T) {
	sig := &recordingSignaler{viewErr: errors.New("workflow not found for ID: nid/web/lead")}
	e := startMCP(t, sig)
	res, err := callTool(t, e.URL(webLead, 0), agents.ToolHandoffWrite, map[string]any{"summary": "Goal: dark mode."})
	require.NoError(t, err)
	require.True(t, res.IsError)
	require.Equal(t, "refused: nid could not check that this conversation is still the current one of web/lead "+
		"(workflow not found for ID: nid/web/lead); nothing was changed: try again", resultText(res))
	require.Empty(t, sig.Handoffs())
}

// context_status answers with the session's own context record, as
// structured content and a line of text.
func TestMCPContextStatus(t *testing.T) {
	pct := 62.04
	for _, tc := range []struct {
		name string
		view workflows.SessionView
		want ContextStatus
		text string
	}{
		{
			name: "reported",
			view: workflows.SessionView{
				Policy: config.Rotate{Mode: config.ModeAuto, ContextPercent: 85, MaxTurns: 40},
				Context: workflows.ContextRecord{Usage: agents.Usage{UsedTokens: 124080, WindowTokens: 200000, Source: agents.SourceReported, Model: "claude-opus-4"}, Percent: &pct,
					Turns: 7, Rotations: 2, Threshold: &workflows.Threshold{Tokens: 160000, Percent: 80, By: "learned"}},
				HandoffNext: true,
			},
			want: ContextStatus{Session: "web/lead", Usage: agents.Usage{UsedTokens: 124080, WindowTokens: 200000, Source: "reported", Model: "claude-opus-4"}, Percent: ptr(62.0),
				Threshold: ThresholdStatus{Tokens: 160000, Percent: 80, By: "learned", Text: "80% = 160k of 200k (learned)"},
				Mode:      "auto", MaxTurns: 40, TurnsSinceRotation: 7, Rotations: 2, HandoffNext: true},
			text: "web/lead: context 62% full (124.1k of 200k tokens, reported); nid rotates at 80% = 160k of 200k (learned) or after 40 turns, " +
				"by handoff next time; 7 turns since the last rotation, 2 rotations.",
		},
		{
			name: "unknown, halted",
			view: workflows.SessionView{
				Policy:       config.Rotate{Mode: config.ModeHandoff, ContextPercent: 85},
				Context:      workflows.ContextRecord{Usage: agents.Usage{Source: agents.SourceUnknown}, Turns: 3},
				PolicyHalted: "the fresh conversation started above the threshold",
			},
			want: ContextStatus{Session: "web/lead", Usage: agents.Usage{Source: "unknown"},
				Threshold: ThresholdStatus{Text: "unknown until the agent reports its window"},
				Mode:      "handoff", TurnsSinceRotation: 3, PolicyHalted: "the fresh conversation started above the threshold"},
			text: "web/lead: context size unknown (the agent reports no token numbers); nid's policy rotations are halted: " +
				"the fresh conversation started above the threshold; 3 turns since the last rotation, 0 rotations.",
		},
		{
			name: "policy off, window unknown",
			view: workflows.SessionView{
				Policy:  config.Rotate{Mode: config.ModeOff, ContextPercent: 85, ContextTokens: 150000},
				Context: workflows.ContextRecord{Usage: agents.Usage{UsedTokens: 9000, Source: agents.SourceReported}, Threshold: &workflows.Threshold{Tokens: 150000, By: "contextTokens"}},
			},
			want: ContextStatus{Session: "web/lead", Usage: agents.Usage{UsedTokens: 9000, Source: "reported"},
				Threshold: ThresholdStatus{Tokens: 150000, By: "contextTokens", Text: "150k tokens (contextTokens)"}, Mode: "off"},
			text: "web/lead: context 9k tokens of a window of unknown size (reported); nid's policy is off: it rotates only when the human asks " +
				"or you call handoff_write; 0 turns since the last rotation, 0 rotations.",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sig := &recordingSignaler{view: tc.view}
			e := startMCP(t, sig)
			res, err := callTool(t, e.URL(webLead, 0), agents.ToolContextStatus, nil)
			require.NoError(t, err)
			require.False(t, res.IsError, resultText(res))
			require.Equal(t, tc.text, resultText(res))
			tc.want.Summary = tc.text
			var got ContextStatus
			b, err := json.Marshal(res.StructuredContent)
			require.NoError(t, err)
			require.NoError(t, json.Unmarshal(b, &got))
			require.Equal(t, tc.want, got)
		})
	}
}

func ptr[T any](v T) *T { return &v }

// The briefings a session starts with tell its agent that context_status
// is there, by the name the endpoint serves it under.
func TestDefaultBriefingsNameContextStatus(t *testing.T) {
	e := startMCP(t, &recordingSignaler{})
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil).
		Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: e.URL(webLead, 0), MaxRetries: -1}, nil)
	require.NoError(t, err)
	defer cs.Close()
	tools, err := cs.ListTools(context.Background(), nil)
	require.NoError(t, err)
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	require.Contains(t, names, agents.ToolContextStatus)
	for _, tool := range tools.Tools {
		if tool.Name != agents.ToolContextStatus {
			continue
		}
		// The agent reads what each number means from the schema.
		b, err := json.Marshal(tool.OutputSchema)
		require.NoError(t, err)
		var schema struct {
			Properties map[string]struct {
				Description string `json:"description"`
			} `json:"properties"`
		}
		require.NoError(t, json.Unmarshal(b, &schema))
		for _, key := range []string{"summary", "session", "usedTokens", "windowTokens", "percent", "source", "model", "threshold", "mode", "rotations"} {
			require.NotEmpty(t, schema.Properties[key].Description, "context_status's %s is described", key)
		}
	}
	for _, briefing := range []string{config.DefaultPrompts().Task, config.DefaultPrompts().Goal} {
		require.Contains(t, briefing, agents.ToolContextStatus+" shows how full your context is")
	}
}
