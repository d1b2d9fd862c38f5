package agents

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// The files under testdata/claude and testdata/codex are output recorded
// from the pinned CLIs (Claude Code's stdout, Codex app-server notifications
// of one turn) against the fake model of the adapter tests.

func recorded(t testing.TB, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", path))
	require.NoError(t, err)
	return bytes.Split(bytes.TrimSpace(b), []byte("\n"))
}

func foldClaude(lines [][]byte) *ClaudeStream {
	s := &ClaudeStream{}
	for _, l := range lines {
		s.Feed(l)
	}
	return s
}

func TestClaudeStream(t *testing.T) {
	tests := []struct {
		file  string
		check func(t *testing.T, s *ClaudeStream)
	}{
		{"turn.jsonl", func(t *testing.T, s *ClaudeStream) {
			require.Equal(t, "11111111-2222-4333-8444-555555555555", s.SessionID)
			require.Equal(t, int64(5000), s.Used)
			require.Equal(t, int64(200000), s.Window)
			require.Equal(t, "first answer", s.Text)
			require.True(t, s.Result)
			require.False(t, s.IsError)
		}},
		{"compact.jsonl", func(t *testing.T, s *ClaudeStream) {
			require.Equal(t, []ClaudeCompaction{{Trigger: "manual", Pre: s.Compactions[0].Pre, Post: s.Compactions[0].Post}}, s.Compactions)
			require.Greater(t, s.Compactions[0].Pre, s.Compactions[0].Post)
			require.False(t, s.UsageSeen, "a /compact turn has no assistant message of its own")
		}},
		{"auto-compact.jsonl", func(t *testing.T, s *ClaudeStream) {
			require.Len(t, s.Compactions, 1)
			require.Equal(t, "auto", s.Compactions[0].Trigger)
			require.Equal(t, int64(190121), s.Compactions[0].Pre)
			// The meter follows the compaction: the answer after it.
			require.Equal(t, int64(2000), s.Used)
			require.Equal(t, "after compaction", s.Text)
		}},
		{"overloaded.jsonl", func(t *testing.T, s *ClaudeStream) {
			require.Equal(t, 1, s.Retries)
			require.Equal(t, 529, s.RetryStatus)
			require.Equal(t, "got through", s.Text)
			require.False(t, s.IsError)
		}},
		{"prompt-too-long.jsonl", func(t *testing.T, s *ClaudeStream) {
			require.True(t, s.IsError)
			require.Equal(t, "prompt_too_long", s.TerminalReason)
			require.Equal(t, 400, s.APIErrorStatus)
		}},
		{"tool.jsonl", func(t *testing.T, s *ClaudeStream) {
			// The tool call and the answer after it are two responses; the
			// context is the last one's, never their sum.
			require.Equal(t, int64(200), s.Used)
			require.Equal(t, "written", s.Text)
			require.Equal(t, "connected", s.MCPStatus)
			require.Equal(t, []string{`mcp__nid__handoff_write({"summary":"S"})`}, s.ToolCalls)
			require.Equal(t, int64(302), s.Billed)
			require.Greater(t, s.CostUSD, 0.0)
		}},
		{"sandbox-required.jsonl", func(t *testing.T, s *ClaudeStream) {
			// Sandbox settings with failIfUnavailable on a host without
			// bubblewrap: Claude Code refuses to start.
			require.True(t, s.IsError)
			require.Equal(t, "sandbox_required_unavailable", s.StartupFailure)
			require.Len(t, s.Errors, 1)
			require.Contains(t, s.Errors[0], "bubblewrap (bwrap) not installed")
		}},
		{"sandbox-refused.jsonl", func(t *testing.T, s *ClaudeStream) {
			// A sandbox whose bubblewrap cannot create a user namespace:
			// the command never ran.
			require.Equal(t, "bwrap: setting up uid map: Permission denied", s.SandboxFailure)
			require.False(t, s.Result)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			s := foldClaude(recorded(t, "claude/"+tt.file))
			require.Zero(t, s.Skipped)
			tt.check(t, s)
		})
	}
}

func TestClaudeStreamBadLines(t *testing.T) {
	lines := recorded(t, "claude/turn.jsonl")
	assistant, result := lines[1], lines[2]
	tests := []struct {
		name    string
		lines   [][]byte
		skipped int
		used    int64
		result  bool
	}{
		{"not JSON", [][]byte{[]byte("Warning: something"), assistant, result}, 1, 5000, true},
		{"truncated result", [][]byte{assistant, result[:len(result)/2]}, 1, 5000, false},
		{"truncated assistant", [][]byte{assistant[:40], result}, 1, 0, true},
		{"unknown type", [][]byte{[]byte(`{"type":"rate_limit_event","info":{}}`), assistant}, 0, 5000, false},
		{"no type", [][]byte{[]byte(`{"foo":1}`), []byte(`[1,2]`), []byte(`null`)}, 3, 0, false},
		{"subagent usage ignored", [][]byte{assistant, []byte(`{"type":"assistant","parent_tool_use_id":"toolu_1","message":{"usage":{"input_tokens":99999}}}`)}, 0, 5000, false},
		{"negative usage", [][]byte{[]byte(`{"type":"assistant","message":{"usage":{"input_tokens":-5,"cache_read_input_tokens":7}}}`)}, 0, 7, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := foldClaude(tt.lines)
			require.Equal(t, tt.skipped, s.Skipped)
			require.Equal(t, tt.used, s.Used)
			require.Equal(t, tt.result, s.Result)
		})
	}
}

func foldCodex(t testing.TB, lines [][]byte) *CodexTurn {
	ct := &CodexTurn{}
	for _, l := range lines {
		if m, ok := ParseCodexMessage(l); ok && !m.IsRequest() {
			ct.Feed(m.Method, m.Params)
		}
	}
	return ct
}

func TestCodexTurn(t *testing.T) {
	tests := []struct {
		file  string
		check func(t *testing.T, c *CodexTurn)
	}{
		{"turn.jsonl", func(t *testing.T, c *CodexTurn) {
			require.True(t, c.Done)
			require.Equal(t, "completed", c.Status)
			require.Equal(t, int64(150020), c.Used)
			require.Equal(t, int64(258400), c.Window)
			require.Equal(t, "worked", c.Text)
			require.False(t, c.Compacted)
		}},
		{"auto-compact.jsonl", func(t *testing.T, c *CodexTurn) {
			require.True(t, c.Compacted)
			require.Equal(t, int64(150020), c.CompactBefore)
			require.Equal(t, int64(6875), c.CompactAfter)
			require.Equal(t, int64(2010), c.Used)
			require.Equal(t, "after compaction", c.Text)
		}},
		{"compact.jsonl", func(t *testing.T, c *CodexTurn) {
			require.True(t, c.Compacted)
			require.Equal(t, "completed", c.Status)
			require.Equal(t, int64(150020), c.CompactBefore)
			require.Equal(t, int64(6869), c.CompactAfter)
			require.Equal(t, int64(6869), c.Used)
		}},
		{"context-full.jsonl", func(t *testing.T, c *CodexTurn) {
			require.Equal(t, "failed", c.Status)
			require.True(t, c.ContextFull())
		}},
		{"handoff-request.jsonl", func(t *testing.T, c *CodexTurn) {
			require.Equal(t, "handoff written", c.Text)
			require.Equal(t, int64(4205), c.Used)
			require.Len(t, c.ToolCalls, 1)
			require.Contains(t, c.ToolCalls[0], "mcp__nid__handoff_write(")
			require.Contains(t, c.ToolCalls[0], "dark mode half done")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			c := foldCodex(t, recorded(t, "codex/"+tt.file))
			require.Zero(t, c.Skipped)
			tt.check(t, c)
		})
	}
}

func TestCodexBadLines(t *testing.T) {
	lines := recorded(t, "codex/turn.jsonl")
	last := lines[len(lines)-1]
	for _, l := range [][]byte{[]byte("not json"), []byte(`{}`), []byte(`{"id":null}`), last[:len(last)/2]} {
		_, ok := ParseCodexMessage(l)
		require.False(t, ok, string(l))
	}
	c := &CodexTurn{}
	c.Feed("thread/tokenUsage/updated", []byte(`{"tokenUsage":`))
	c.Feed("thread/tokenUsage/updated", []byte(`{"threadId":"x"}`))
	c.Feed("turn/completed", []byte(`{"threadId":"x"}`))
	require.Equal(t, 3, c.Skipped)
	require.False(t, c.Done)
	require.False(t, c.UsageSeen)
	c.Feed("thread/tokenUsage/updated", []byte(`{"tokenUsage":{"last":{"totalTokens":-3},"modelContextWindow":null}}`))
	require.Zero(t, c.Used)
	require.Zero(t, c.Window)
}

func TestCodexAnswer(t *testing.T) {
	tests := []struct {
		method string
		grant  bool
		want   any
	}{
		{"item/commandExecution/requestApproval", true, map[string]any{"decision": "accept"}},
		{"item/fileChange/requestApproval", true, map[string]any{"decision": "accept"}},
		{"execCommandApproval", true, map[string]any{"decision": "approved"}},
		{"applyPatchApproval", true, map[string]any{"decision": "approved"}},
		// In a sandbox, an approval would let the command out of it.
		{"item/commandExecution/requestApproval", false, map[string]any{"decision": "decline"}},
		{"item/fileChange/requestApproval", false, map[string]any{"decision": "decline"}},
		{"execCommandApproval", false, map[string]any{"decision": "denied"}},
		{"applyPatchApproval", false, map[string]any{"decision": "denied"}},
		{"mcpServer/elicitation/request", false, map[string]any{"action": "accept", "content": map[string]any{}}},
	}
	for _, tt := range tests {
		got, rpcErr := CodexAnswer(tt.method, tt.grant)
		require.Nil(t, rpcErr)
		require.Equal(t, tt.want, got, tt.method)
	}
	_, rpcErr := CodexAnswer("something/new", true)
	require.NotNil(t, rpcErr, "an unknown request is refused, not left unanswered")
}

func TestParseExecLine(t *testing.T) {
	tests := []struct {
		line string
		want Usage
		ok   bool
	}{
		{`{"nid":"usage","used":1234,"window":200000}`, Usage{UsedTokens: 1234, WindowTokens: 200000, Source: SourceReported}, true},
		{`  {"nid":"usage","used":5}  `, Usage{UsedTokens: 5, Source: SourceReported}, true},
		{`{"nid":"usage","used":-1,"window":10}`, Usage{}, false},
		{`{"nid":"other","used":1}`, Usage{}, false},
		{`{"nid":"usage","used":"many"}`, Usage{}, false},
		{`{"nid":"usage","used":12`, Usage{}, false},
		{`I used 1234 tokens`, Usage{}, false},
		{``, Usage{}, false},
	}
	for _, tt := range tests {
		got, ok := ParseExecLine([]byte(tt.line))
		require.Equal(t, tt.ok, ok, tt.line)
		require.Equal(t, tt.want, got, tt.line)
	}
}

func FuzzClaudeStream(f *testing.F) {
	for _, name := range []string{"turn", "compact", "auto-compact", "overloaded", "prompt-too-long", "tool"} {
		for _, l := range recorded(f, "claude/"+name+".jsonl") {
			f.Add(l)
		}
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		s := &ClaudeStream{}
		s.Feed(line)
		s.Feed(line)
		if s.Used < 0 || s.Window < 0 || s.Skipped > 2 {
			t.Fatalf("bad fold of %q: %+v", line, s)
		}
		for _, c := range s.Compactions {
			if c.Pre < 0 || c.Post < 0 {
				t.Fatalf("negative compaction from %q", line)
			}
		}
	})
}

func FuzzCodexTurn(f *testing.F) {
	for _, name := range []string{"turn", "compact", "auto-compact", "context-full", "handoff-request"} {
		for _, l := range recorded(f, "codex/"+name+".jsonl") {
			f.Add(l)
		}
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		m, ok := ParseCodexMessage(line)
		if !ok {
			return
		}
		c := &CodexTurn{}
		c.Feed(m.Method, m.Params)
		if c.Used < 0 || c.Window < 0 || c.CompactBefore < 0 {
			t.Fatalf("bad fold of %q: %+v", line, c)
		}
		if m.IsRequest() {
			if res, rpcErr := CodexAnswer(m.Method, false); (res == nil) == (rpcErr == nil) {
				t.Fatalf("request %q got no single answer", m.Method)
			}
		}
	})
}

func FuzzParseExecLine(f *testing.F) {
	f.Add([]byte(`{"nid":"usage","used":1234,"window":200000}`))
	f.Add([]byte(`plain output`))
	f.Fuzz(func(t *testing.T, line []byte) {
		u, ok := ParseExecLine(line)
		if ok && (u.UsedTokens < 0 || u.WindowTokens < 0 || u.Source != SourceReported) {
			t.Fatalf("bad usage from %q: %+v", line, u)
		}
		if !ok && u != (Usage{}) {
			t.Fatalf("usage from a non-usage line %q", line)
		}
	})
}

// Only a failed tool result that is the sandbox itself failing counts; a
// command that failed, or that printed bubblewrap's words, does not.
func TestClaudeSandboxFailure(t *testing.T) {
	result := func(isError bool, content string) []byte {
		b, _ := json.Marshal(map[string]any{"type": "user", "message": map[string]any{"role": "user",
			"content": []any{map[string]any{"type": "tool_result", "content": content, "is_error": isError, "tool_use_id": "toolu_1"}}}})
		return b
	}
	tests := []struct {
		line []byte
		want string
	}{
		{result(true, "Exit code 1\nbwrap: Creating new namespace failed: Operation not permitted"), "bwrap: Creating new namespace failed: Operation not permitted"},
		{result(true, "Sandbox is required but failed to initialize: Failed to create bridge sockets after 5 attempts.\nmore"),
			"Sandbox is required but failed to initialize: Failed to create bridge sockets after 5 attempts."},
		{result(true, "Exit code 2\nmake: *** [test] Error 1"), ""},
		{result(false, "bwrap: setting up uid map: Permission denied"), ""},
		{result(true, "Exit code 1\nsome output\nbwrap: setting up uid map: Permission denied"), ""},
		{[]byte(`{"type":"user","message":{"role":"user","content":"bwrap: plain text"}}`), ""},
	}
	for _, tt := range tests {
		s := &ClaudeStream{}
		s.Feed(tt.line)
		require.Equal(t, tt.want, s.SandboxFailure, string(tt.line))
	}
}

// Codex's errors are told apart by their codexErrorInfo, the variant and
// the HTTP status it carries, never by the words of the message: a
// message can say anything, the variant is what Codex decided.
func TestCodexErrorsByTheirInfo(t *testing.T) {
	for _, tc := range []struct {
		name, info, message string
		want                string // the error type; "" is a failure Temporal retries
		rateLimited         bool   // while Codex retries it
	}{
		{"the context is full", `"contextWindowExceeded"`, "Codex ran out of room", ErrContextFull, false},
		{"a refused key", `{"httpConnectionFailed":{"httpStatusCode":401}}`, "unexpected status 401 Unauthorized", ErrAgentFailed, false},
		{"a forbidden model", `{"responseStreamConnectionFailed":{"httpStatusCode":403}}`, "forbidden", ErrAgentFailed, false},
		{"unauthorized", `"unauthorized"`, "log in again", ErrAgentFailed, false},
		{"a bad request", `"badRequest"`, "invalid request", ErrAgentFailed, false},
		{"rate limited past Codex's retries", `{"responseTooManyFailedAttempts":{"httpStatusCode":429}}`, "exceeded retry limit, last status: 429 Too Many Requests", "", true},
		{"overloaded", `{"responseStreamDisconnected":{"httpStatusCode":529}}`, "stream disconnected", "", true},
		{"the server says it is overloaded", `"serverOverloaded"`, "try again later", "", true},
		{"a usage limit", `"usageLimitExceeded"`, "you've hit your usage limit", "", true},
		{"a server error", `{"httpConnectionFailed":{"httpStatusCode":500}}`, "unexpected status 500", "", false},
		{"a status nobody knows", `{"httpConnectionFailed":{"httpStatusCode":null}}`, "connection failed", "", false},
		{"a message that only mentions a full context", `"other"`, "contextWindowExceeded", "", false},
		{"a message that only mentions 401 and 429", `null`, "401 Unauthorized, 429 Too Many Requests, 529", "", false},
		{"an info shape nid does not know", `{"a":{},"b":{}}`, "unauthorized", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			turnError := `{"message":` + strconv.Quote(tc.message) + `,"codexErrorInfo":` + tc.info + `}`
			c := &CodexTurn{}
			c.Feed("error", []byte(`{"error":`+turnError+`,"willRetry":true}`))
			require.True(t, c.Retrying)
			require.Equal(t, tc.rateLimited, c.RateLimited, "while Codex retries")
			c.Feed("turn/completed", []byte(`{"turn":{"status":"failed","error":`+turnError+`}}`))
			err := codexFailure(c)
			require.ErrorContains(t, err, tc.message)
			e, final := errors.AsType[*Error](err)
			if tc.want == "" {
				require.False(t, final, "%v is retried", err)
				return
			}
			require.True(t, final, "%v", err)
			require.Equal(t, tc.want, e.Type)
		})
	}
}
