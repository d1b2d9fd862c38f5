// Package fakemodel is a model server on 127.0.0.1 for tests: it speaks
// enough of the Anthropic Messages and OpenAI Responses streaming APIs for
// the real Claude Code and Codex CLIs, and a plain JSON one for an exec
// agent. Replies come from a script, in order, or from a Route that reads
// the request.
package fakemodel

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// Reply is one answer of the fake model.
type Reply struct {
	Text string
	// Tool, if set, is a call of one of nid's MCP tools, e.g. handoff_write.
	Tool      string
	ToolInput map[string]any
	// Shell, if set, asks the CLI to run this shell command with its own
	// shell tool (Claude Code's Bash, Codex's exec_command).
	Shell string
	// WriteFile, if set, asks the CLI to create this file holding
	// WriteText with its own edit tool (Claude Code's Write, Codex's
	// apply_patch).
	WriteFile, WriteText string
	// ReadFile, if set, asks the CLI to read this file with its own read
	// tool (Claude Code's Read; Codex has none, and runs cat).
	ReadFile string
	// Usage the answer reports: input tokens, of which Cached were read from
	// the cache, and output tokens.
	Input, Cached, Output int64
	// Status, if set, is an HTTP error answered instead, with Body.
	Status int
	Body   string
	// ContextFull answers with the vendor's context-length error.
	ContextFull bool
	// Hang never answers: the call waits until the client goes away.
	Hang bool
}

// Request is one model call the fake received.
type Request struct {
	Path    string
	Body    string
	Headers http.Header
}

// Model is a model server on 127.0.0.1 that speaks enough of the
// Anthropic Messages and OpenAI Responses streaming APIs for the real CLIs,
// and a plain JSON one for an exec agent that asks it (POST /exec). Replies
// are the route's, else taken from the script in order; when it runs out,
// Default.
type Model struct {
	srv *httptest.Server

	mu       sync.Mutex
	script   []Reply
	Default  Reply
	requests []Request
	n        int
	// abandoned counts the hanging calls whose client went away.
	abandoned int
	// onRequest, when set, runs on every model call as it arrives, while
	// the agent that made it waits for the answer.
	onRequest func()
	// route, when set, answers the calls it takes before the script does.
	route func(Request) (Reply, bool)
}

// Start starts a fake model for the test; it stops when the test ends.
func Start(t testing.TB) *Model {
	t.Helper()
	f := &Model{Default: Reply{Text: "done", Input: 1000, Output: 10}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// URL is the server's base URL, e.g. http://127.0.0.1:41234.
func (f *Model) URL() string { return f.srv.URL }

// Route sets fn to answer the model calls it takes (ok true) before the
// script does, for a test that cannot know the order of the calls: a
// session driven by nid takes turns by itself.
func (f *Model) Route(fn func(Request) (Reply, bool)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.route = fn
}

// Script appends replies for the next model calls.
func (f *Model) Script(r ...Reply) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.script = append(f.script, r...)
}

// Requests returns the model calls received so far.
func (f *Model) Requests() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Request(nil), f.requests...)
}

// peekHang says the next scripted model call should hang.
func (f *Model) peekHang(r *http.Request) bool {
	if r.Method != http.MethodPost || !(strings.HasPrefix(r.URL.Path, "/v1/messages") || r.URL.Path == "/v1/responses" || r.URL.Path == "/exec") {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.script) > 0 && f.script[0].Hang
}

// Abandoned returns how many hanging calls the agent gave up on: its
// process, which held the connection, is gone.
func (f *Model) Abandoned() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.abandoned
}

// OnRequest sets fn to run on every model call as it arrives.
func (f *Model) OnRequest(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.onRequest = fn
}

func (f *Model) next(r *http.Request, body []byte) (Reply, int) {
	f.mu.Lock()
	hook := f.onRequest
	f.mu.Unlock()
	if hook != nil {
		hook()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	req := Request{Path: r.URL.Path, Body: string(body), Headers: r.Header.Clone()}
	f.requests = append(f.requests, req)
	f.n++
	if f.route != nil {
		if rep, ok := f.route(req); ok {
			return rep, f.n
		}
	}
	if len(f.script) == 0 {
		return f.Default, f.n
	}
	rep := f.script[0]
	f.script = f.script[1:]
	return rep, f.n
}

func (f *Model) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if f.peekHang(r) {
		f.next(r, body)
		<-r.Context().Done()
		f.mu.Lock()
		f.abandoned++
		f.mu.Unlock()
		return
	}
	switch {
	case r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/v1/messages") && !strings.Contains(r.URL.Path, "count_tokens"):
		rep, n := f.next(r, body)
		f.anthropic(w, rep, n)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/responses":
		rep, n := f.next(r, body)
		f.openai(w, rep, n)
	case r.Method == http.MethodPost && r.URL.Path == "/exec":
		rep, _ := f.next(r, body)
		f.exec(w, rep)
	default:
		http.NotFound(w, r)
	}
}

func sse(w http.ResponseWriter, event string, data any) {
	b, _ := json.Marshal(data)
	fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
}

func (f *Model) anthropic(w http.ResponseWriter, rep Reply, n int) {
	if rep.ContextFull {
		rep.Status = http.StatusBadRequest
		rep.Body = `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 250000 tokens > 200000 maximum"}}`
	}
	if rep.Status != 0 {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("retry-after-ms", "10")
		w.WriteHeader(rep.Status)
		io.WriteString(w, rep.Body)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	sse(w, "message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": fmt.Sprintf("msg_%d", n), "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": rep.Input - rep.Cached, "cache_creation_input_tokens": 0, "cache_read_input_tokens": rep.Cached, "output_tokens": 1},
	}})
	idx := 0
	if rep.Text != "" {
		sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": idx, "content_block": map[string]any{"type": "text", "text": ""}})
		sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": idx, "delta": map[string]any{"type": "text_delta", "text": rep.Text}})
		sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": idx})
		idx++
	}
	stop := "end_turn"
	if rep.Tool != "" || rep.Shell != "" || rep.WriteFile != "" || rep.ReadFile != "" {
		stop = "tool_use"
		name, in := "mcp__nid__"+rep.Tool, []byte(nil)
		switch {
		case rep.Shell != "":
			name, in = "Bash", must(json.Marshal(map[string]any{"command": rep.Shell, "description": "run a command"}))
		case rep.WriteFile != "":
			name, in = "Write", must(json.Marshal(map[string]any{"file_path": rep.WriteFile, "content": rep.WriteText}))
		case rep.ReadFile != "":
			name, in = "Read", must(json.Marshal(map[string]any{"file_path": rep.ReadFile}))
		default:
			in = must(json.Marshal(rep.ToolInput))
		}
		sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": idx, "content_block": map[string]any{
			"type": "tool_use", "id": fmt.Sprintf("toolu_%d", n), "name": name, "input": map[string]any{}}})
		sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": idx, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(in)}})
		sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": idx})
	}
	sse(w, "message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": rep.Output}})
	sse(w, "message_stop", map[string]any{"type": "message_stop"})
}

func (f *Model) openai(w http.ResponseWriter, rep Reply, n int) {
	if rep.Status != 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rep.Status)
		io.WriteString(w, rep.Body)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	id := fmt.Sprintf("resp_%d", n)
	sse(w, "response.created", map[string]any{"type": "response.created", "response": map[string]any{"id": id}})
	if rep.ContextFull {
		sse(w, "response.failed", map[string]any{"type": "response.failed", "response": map[string]any{"id": id,
			"error": map[string]any{"code": "context_length_exceeded", "message": "Your input exceeds the context window of this model."}}})
		return
	}
	out := 0
	if rep.Text != "" {
		sse(w, "response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": out, "item": map[string]any{
			"type": "message", "role": "assistant", "id": fmt.Sprintf("msg_%d", n),
			"content": []any{map[string]any{"type": "output_text", "text": rep.Text}}}})
		out++
	}
	if rep.Tool != "" || rep.Shell != "" || rep.WriteFile != "" || rep.ReadFile != "" {
		item := map[string]any{"type": "function_call", "id": fmt.Sprintf("fc_%d", n), "call_id": fmt.Sprintf("call_%d", n)}
		switch {
		case rep.Shell != "":
			item["name"], item["arguments"] = "exec_command", string(must(json.Marshal(map[string]any{"cmd": rep.Shell})))
		case rep.ReadFile != "":
			item["name"], item["arguments"] = "exec_command", string(must(json.Marshal(map[string]any{"cmd": "cat '" + rep.ReadFile + "'"})))
		case rep.WriteFile != "":
			// apply_patch is a freeform tool: its input is the patch itself.
			item["type"], item["name"] = "custom_tool_call", "apply_patch"
			item["input"] = "*** Begin Patch\n*** Add File: " + rep.WriteFile + "\n+" + rep.WriteText + "\n*** End Patch\n"
		default:
			item["namespace"], item["name"], item["arguments"] = "mcp__nid", rep.Tool, string(must(json.Marshal(rep.ToolInput)))
		}
		sse(w, "response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": out, "item": item})
	}
	sse(w, "response.completed", map[string]any{"type": "response.completed", "response": map[string]any{"id": id, "usage": map[string]any{
		"input_tokens": rep.Input, "input_tokens_details": map[string]any{"cached_tokens": rep.Cached},
		"output_tokens": rep.Output, "output_tokens_details": map[string]any{"reasoning_tokens": 0},
		"total_tokens": rep.Input + rep.Output}}})
}

// must panics on err: the fake encodes only what it built itself.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// exec answers the suite's exec agent: the reply itself as JSON, or the
// error a model would give.
func (f *Model) exec(w http.ResponseWriter, rep Reply) {
	w.Header().Set("Content-Type", "application/json")
	if rep.ContextFull {
		rep.Status, rep.Body = http.StatusBadRequest, `{"error":{"message":"prompt is too long: 250000 tokens > 200000 maximum"}}`
	}
	if rep.Status != 0 {
		w.WriteHeader(rep.Status)
		io.WriteString(w, rep.Body)
		return
	}
	json.NewEncoder(w).Encode(rep)
}

// ClaudeEnv is the environment that points Claude Code at the server for
// an offline, quiet run: its base URL, a key it accepts, and no telemetry,
// update checks or other traffic. Add a private HOME and temp directory.
func (f *Model) ClaudeEnv() map[string]string {
	return map[string]string{
		"ANTHROPIC_BASE_URL":                       f.URL(),
		"ANTHROPIC_API_KEY":                        "test-key",
		"DISABLE_TELEMETRY":                        "1",
		"DISABLE_AUTOUPDATER":                      "1",
		"DISABLE_ERROR_REPORTING":                  "1",
		"DISABLE_BUG_COMMAND":                      "1",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
	}
}

// CodexAPIKeyEnv is the variable CodexConfig's provider reads its key from.
const CodexAPIKeyEnv = "LOCAL_API_KEY"

// CodexConfig is a $CODEX_HOME/config.toml that points Codex at the server
// (CodexProvider) and lets it run anything without asking, for the
// adapter suite, where nid's own arguments set the sandbox a test checks.
func (f *Model) CodexConfig() string {
	return "approval_policy = \"never\"\nsandbox_mode = \"danger-full-access\"\n" + f.CodexProvider()
}

// CodexProvider is a $CODEX_HOME/config.toml that points Codex at the
// server as the provider "local" of model gpt-5.5, with its key in
// CodexAPIKeyEnv, no retries, and no update checks, analytics or plugins;
// approvals and the sandbox are left to whoever runs it.
func (f *Model) CodexProvider() string {
	return fmt.Sprintf(`model = "gpt-5.5"
model_provider = "local"
check_for_update_on_startup = false
[analytics]
enabled = false
[features]
plugins = false
apps = false
remote_plugin = false
tool_suggest = false
[model_providers.local]
name = "local"
base_url = "%s/v1"
env_key = "%s"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
`, f.URL(), CodexAPIKeyEnv)
}
