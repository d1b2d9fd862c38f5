package agents_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/nid-dev/nid/activities"
	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/internal/fakemodel"
	"github.com/nid-dev/nid/transcript"
	"github.com/nid-dev/nid/worker"
	"github.com/nid-dev/nid/workflows"
)

// The rigs in this file run each agent kind the way a worker does, for the
// conformance suite (conformance_test.go): the real Claude Code and Codex
// CLIs, pinned in testdata/agents/package.json, and the suite's own exec
// agent against a fake model server, and the sim as it is. .ci/run installs
// the CLIs with `npm ci`; without them these tests fail and say so.

// agentBin returns the installed CLI, or fails the test saying how to
// install it.
func agentBin(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("testdata", "agents", "node_modules", ".bin", name))
	require.NoError(t, err)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("the %s CLI is not installed: run `npm ci` in agents/testdata/agents (.ci/run does)", name)
	}
	return p
}

// fakeSessions stands in for the session workflows behind nid's MCP
// endpoint: it records handoffs, shows a fixed board, and answers the
// session's query with the view a test sets (the generation of its current
// conversation, whether a rotation runs, its context record). The tools it
// does not fake are left to the embedded interface (nil: a call would
// panic).
type fakeSessions struct {
	worker.SessionSignaler
	mu        sync.Mutex
	summaries []string
	updates   []string
	view      workflows.SessionView
}

const testBoard = "BOARD: task t1 (claimed by web/lead): add dark mode"

func (f *fakeSessions) HandoffWrite(_ context.Context, _ string, summary string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.summaries = append(f.summaries, summary)
	return nil
}

func (f *fakeSessions) Board(context.Context, string, string) (string, error) { return testBoard, nil }

// BoardUpdate records the update and grants it.
func (f *fakeSessions) BoardUpdate(_ context.Context, _, update string, req workflows.BoardRequest) (workflows.BoardResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.updates = append(f.updates, update)
	return workflows.BoardResult{Task: &workflows.Task{ID: req.TaskID, Title: "add dark mode"}, Lock: &workflows.Lock{Name: req.Lock}}, nil
}

// Updates returns the board updates that reached the group.
func (f *fakeSessions) Updates() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.updates...)
}

func (f *fakeSessions) Session(_ context.Context, group, name string) (workflows.SessionView, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v := f.view
	v.Group, v.Name = group, name
	return v, nil
}

// setView changes what the session's query answers.
func (f *fakeSessions) setView(change func(v *workflows.SessionView)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change(&f.view)
}

func (f *fakeSessions) Summaries() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.summaries...)
}

// vendor is how a kind that talks to a model shows the fake model's
// replies, and what its CLI does that others do not.
type vendor struct {
	// window is the context window the kind reports; model the model it
	// says it runs ("": it says none).
	window int64
	model  string
	// used is the context a reply leaves: what the kind counts of its
	// tokens.
	used func(fakemodel.Reply) int64
	// refusedKey is how its API answers a key it refuses, with status 401.
	refusedKey string
	// contextFull is the error type of a turn whose conversation no
	// longer fits the window.
	contextFull string
	// compacting checks that a compaction asked the model the vendor's
	// way; nil for a kind that cannot compact.
	compacting func(t *testing.T, last fakemodel.Request)
	// autoCompact makes the CLI compact by itself past 100k tokens; nil
	// for a CLI that never does.
	autoCompact func(r *agentRig)
	// autoCountsPrompt says the tokens before a compaction the CLI did by
	// itself include its estimate of the prompt that set it off.
	autoCountsPrompt bool
	// credentials are the rig's environment variables its CLI logs in with,
	// and noCredentials what a turn without them says; empty for a kind
	// that needs none (Kind.Credentials nil).
	credentials   []string
	noCredentials string
}

// agentRig is one session's world: the worker's Activities for one agent
// kind, what the worker's nid.yaml says of the session, a fake model, nid's
// MCP endpoint, and a private HOME, state and working directory.
type agentRig struct {
	t    *testing.T
	kind agents.Kind
	// vendor is nil for a kind that talks to no model: the sim.
	vendor   *vendor
	model    *fakemodel.Model
	sessions *fakeSessions
	ep       *worker.MCPEndpoint
	ref      agents.SessionRef
	// generation is the conversation generation the rig's turns and
	// compactions run with (activities.TurnInput.Generation).
	generation int
	// set is what the worker's nid.yaml says of the session's agent; the
	// worker reads it at every call, as it reads the file.
	set                  config.AgentSettings
	spec                 agents.AgentSpec
	home, state, workDir string
	// stateless runs the worker with no state directory.
	stateless bool
	// serves says the kind's process outlives a turn (Claude Code's
	// stream-json process, Codex's app-server), and perConversation that
	// such a process serves one conversation (Claude Code's), not any
	// (Codex's).
	serves, perConversation bool
	acts                    *activities.Activities
	logs                    *transcript.Log

	mu      sync.Mutex
	limited []bool
}

// newRig returns the world of one session of kind, ready to run it, or
// fails the test when the suite does not know how to run the kind.
func newRig(t *testing.T, kind agents.Kind) *agentRig {
	t.Helper()
	r := &agentRig{t: t, kind: kind, model: fakemodel.Start(t), sessions: &fakeSessions{}}
	// nid's own MCP endpoint, as the worker serves it.
	ts := httptest.NewUnstartedServer(nil)
	// A key of its own, so that no other test's agent holds this token.
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	r.ep = worker.NewMCPEndpoint(key, r.sessions, "http://"+ts.Listener.Addr().String())
	mux := http.NewServeMux()
	mux.Handle("/mcp/", r.ep.Handler())
	ts.Config.Handler = mux
	ts.Start()
	t.Cleanup(ts.Close)
	r.ref = agents.SessionRef{Group: "web", Name: "lead", WorkflowID: "nid/web/lead"}
	r.home, r.state, r.workDir = t.TempDir(), t.TempDir(), t.TempDir()
	r.logs = transcript.New(r.state)
	r.spec = agents.AgentSpec{Kind: kind.Name}
	// Claude Code keeps its sandbox's sockets in its temp directory, whose
	// path must stay short: t.TempDir() holds the test's long name.
	tmp, err := os.MkdirTemp("", "nid-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(tmp) })
	r.set = config.AgentSettings{
		Env:         map[string]string{"HOME": r.home, "TMPDIR": tmp},
		TurnTimeout: config.Duration(2 * time.Minute),
	}
	switch kind.Name {
	case agents.KindClaude:
		r.claude()
	case agents.KindCodex:
		r.codex()
	case agents.KindExec:
		r.exec()
	case agents.KindSim:
		r.spec.Sim = config.Sim{Window: 200_000, TokensPerTurn: 1000}
		r.set = config.AgentSettings{}
	default:
		t.Fatalf("the conformance suite cannot run agent kind %q: give newRig a way to run it, then make every case pass", kind.Name)
	}
	r.start()
	return r
}

func (r *agentRig) claude() {
	r.set.Command = agentBin(r.t, "claude")
	r.set.Model = "claude-sonnet-4-5"
	r.set.Env["CLAUDE_CODE_TMPDIR"] = r.set.Env["TMPDIR"]
	maps.Copy(r.set.Env, r.model.ClaudeEnv())
	r.vendor = &vendor{
		window: 200_000,
		model:  "claude-sonnet-4-5",
		// Claude Code counts the context it sent, cached or not.
		used:        func(f fakemodel.Reply) int64 { return f.Input },
		refusedKey:  `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`,
		contextFull: activities.ErrContextFull,
		compacting: func(t *testing.T, last fakemodel.Request) {
			require.Contains(t, last.Body, "summary of the conversation")
		},
		autoCompact:      func(r *agentRig) { r.set.Env["CLAUDE_CODE_AUTO_COMPACT_WINDOW"] = "100000" },
		autoCountsPrompt: true,
		// And none from the worker's own environment either.
		credentials:   []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"},
		noCredentials: "no credentials for Claude Code",
	}
	r.serves, r.perConversation = true, true
}

// codexWindow is what Codex reports for gpt-5.5: 95% of 272k.
const codexWindow = 258400

func (r *agentRig) codex() {
	r.set.Command = agentBin(r.t, "codex")
	codexHome := filepath.Join(r.home, ".codex")
	require.NoError(r.t, os.MkdirAll(codexHome, 0o755))
	cfg := r.model.CodexConfig()
	require.NoError(r.t, os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(cfg), 0o644))
	r.set.Env["CODEX_HOME"] = codexHome
	r.set.Env[fakemodel.CodexAPIKeyEnv] = "test-key"
	r.vendor = &vendor{
		window: codexWindow,
		// Codex counts the whole last response, its output included.
		used:        func(f fakemodel.Reply) int64 { return f.Input + f.Output },
		refusedKey:  `{"error":{"type":"invalid_request_error","code":"invalid_api_key","message":"Incorrect API key provided"}}`,
		contextFull: activities.ErrContextFull,
		compacting: func(t *testing.T, last fakemodel.Request) {
			require.Contains(t, last.Headers.Get("x-codex-turn-metadata"), "compaction")
		},
		autoCompact: func(r *agentRig) { r.set.Args = []string{"-c", "model_auto_compact_token_limit=100000"} },
		// The rig's config.toml sends Codex to its own provider, whose
		// env_key is this.
		credentials:   []string{"LOCAL_API_KEY"},
		noCredentials: "model provider local takes its key from LOCAL_API_KEY, which is not set",
	}
	r.serves = true
}

func (r *agentRig) exec() {
	bin, err := os.Executable()
	require.NoError(r.t, err)
	r.set.Command = bin
	r.set.Env[envExecModel] = r.model.URL()
	// nid cannot sandbox a command: an exec session must say full.
	r.set.Permissions = config.PermissionsFull
	r.vendor = &vendor{
		window:     execWindow,
		used:       func(f fakemodel.Reply) int64 { return f.Input },
		refusedKey: `{"error":{"message":"invalid api key"}}`,
		// A command has no way to say why it failed.
		contextFull: activities.ErrAgentFailed,
	}
}

// start starts a worker for the session: its Activities, with a new
// adapter of the kind.
func (r *agentRig) start() {
	state := r.state
	if r.stateless {
		state = ""
	}
	acts := &activities.Activities{
		Agents:      map[string]agents.Agent{r.kind.Name: r.kind.New()},
		StateDir:    state,
		MCP:         r.ep.Access,
		Transcripts: r.logs,
		Settings: func(ref agents.SessionRef) (string, config.AgentSettings, bool) {
			return r.kind.Name, r.set, ref == r.ref
		},
		Notify:  r,
		WorkDir: r.workDir,
	}
	r.t.Cleanup(func() { _ = acts.Close() })
	r.acts = acts
}

// restart stops the worker as a shutdown does and starts a new one.
func (r *agentRig) restart() {
	require.NoError(r.t, r.acts.Close())
	r.start()
}

// RateLimited records what the turn told the session.
func (r *agentRig) RateLimited(_ context.Context, _ agents.SessionRef, limited bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.limited = append(r.limited, limited)
	return nil
}

// rateLimits returns what turns told the session about rate limiting.
func (r *agentRig) rateLimits() []bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]bool(nil), r.limited...)
}

// access is the session's MCP endpoint and the token of its conversation
// of generation.
func (r *agentRig) access(generation int) agents.MCPAccess { return r.ep.Access(r.ref, generation) }

func (r *agentRig) turn(conv, prompt, kind string) (activities.TurnResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	return r.acts.RunTurn(ctx, activities.TurnInput{Session: r.ref, Spec: r.spec, Conversation: conv, Prompt: prompt, Kind: kind, Generation: r.generation})
}

func (r *agentRig) compact(conv string) (agents.CompactReport, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	return r.acts.Compact(ctx, activities.CompactInput{Session: r.ref, Spec: r.spec, Conversation: conv, Generation: r.generation})
}

func (r *agentRig) stop(conv string) error {
	_, err := r.acts.StopAgent(context.Background(), activities.StopInput{Session: r.ref, Spec: r.spec, Conversation: conv})
	return err
}

// toolCalls are the tool calls the session's transcript shows.
func (r *agentRig) toolCalls() []string {
	entries, err := r.logs.Read(r.ref.Group, r.ref.Name, 0)
	require.NoError(r.t, err)
	var calls []string
	for _, e := range entries {
		if e.Kind == transcript.KindTool {
			calls = append(calls, e.Text)
		}
	}
	return calls
}

// countStarts puts a script in front of the session's agent command that
// notes each start of it, and returns what lists them.
func (r *agentRig) countStarts() (starts func() []string) {
	log := filepath.Join(r.t.TempDir(), "starts")
	wrapper := filepath.Join(r.t.TempDir(), "agent")
	require.NoError(r.t, os.WriteFile(wrapper, []byte("#!/bin/sh\necho \"$$\" >> '"+log+"'\nexec '"+r.set.Command+"' \"$@\"\n"), 0o755))
	r.set.Command = wrapper
	return func() []string {
		b, err := os.ReadFile(log)
		if os.IsNotExist(err) {
			return nil
		}
		require.NoError(r.t, err)
		return strings.Fields(string(b))
	}
}

// recorded returns the pids of the agent processes the worker recorded
// for the reaper.
func (r *agentRig) recorded() []int {
	entries, err := os.ReadDir(agents.PidDir(r.state))
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(r.t, err)
	var pids []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(strings.TrimSuffix(e.Name(), ".json")); err == nil && strings.HasSuffix(e.Name(), ".json") {
			pids = append(pids, pid)
		}
	}
	return pids
}

// processes returns the pids of the session's agent processes still
// running: every process whose environment has the session's own HOME.
func (r *agentRig) processes() []string {
	// It may run on a server's goroutine, where a test must not fail:
	// the pattern is valid, so Glob cannot.
	environs, _ := filepath.Glob("/proc/[0-9]*/environ")
	var pids []string
	for _, p := range environs {
		env, err := os.ReadFile(p)
		if err == nil && bytes.Contains(append([]byte{0}, env...), []byte("\x00HOME="+r.home+"\x00")) {
			pids = append(pids, filepath.Base(filepath.Dir(p)))
		}
	}
	return pids
}

// requireNoProcesses waits for the session's agent processes to be gone.
func (r *agentRig) requireNoProcesses(msg string) {
	r.t.Helper()
	require.Eventually(r.t, func() bool { return len(r.processes()) == 0 }, 10*time.Second, 50*time.Millisecond,
		"%s: still running: %v", msg, r.processes())
}

// failure returns the type Temporal sees of an activity's error, and
// whether it retries it.
func failure(t *testing.T, err error) (string, bool) {
	t.Helper()
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app), "want an application error, got %v", err)
	return app.Type(), !app.NonRetryable()
}

func lastRequest(t *testing.T, m *fakemodel.Model) fakemodel.Request {
	t.Helper()
	reqs := m.Requests()
	require.NotEmpty(t, reqs)
	return reqs[len(reqs)-1]
}

// envExecModel is set, to the fake model's URL, in the environment of the
// suite's exec agent.
const envExecModel = "NIDTEST_EXEC_MODEL"

// execWindow is the context window the suite's exec agent reports.
const execWindow = 200_000

// TestMain runs the tests, or, started by nid as the suite's exec agent,
// is that agent.
func TestMain(m *testing.M) {
	if model := os.Getenv(envExecModel); model != "" {
		os.Exit(execAgent(model))
	}
	os.Exit(m.Run())
}

// execAgent is the agent the suite runs as kind exec: an agent CLI in
// miniature, as a user's own command might be. It reads the prompt on
// stdin, keeps each conversation's messages in a file under HOME (as a real
// CLI keeps its transcript), sends them to the fake model, runs the shell
// commands, writes the files and calls the tools of nid's the model asks
// for (the tools through NIDAGENT_MCP_URL, as a user's command might), then
// prints the answer and nid's usage line. nid gives an exec agent its MCP
// endpoint, but does not count on it calling anything.
func execAgent(model string) int {
	if len(os.Args) > 1 {
		fmt.Fprintf(os.Stderr, "exec-agent: unknown flag %s\n", os.Args[1])
		return 2
	}
	prompt, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "exec-agent:", err)
		return 1
	}
	conv := filepath.Join(os.Getenv("HOME"), ".exec-agent", os.Getenv("NIDAGENT_CONVERSATION"))
	history, _ := os.ReadFile(conv)
	msgs := string(history) + "user: " + string(prompt) + "\n"
	for {
		rep, err := askModel(model, msgs)
		if err != nil {
			fmt.Fprintln(os.Stderr, "exec-agent:", err)
			return 1
		}
		switch {
		case rep.Shell != "":
			out, _ := exec.Command("sh", "-c", rep.Shell).CombinedOutput()
			msgs += "ran: " + rep.Shell + "\n" + string(out)
			continue
		case rep.WriteFile != "":
			err := os.WriteFile(rep.WriteFile, []byte(rep.WriteText), 0o644)
			msgs += fmt.Sprintf("wrote %s: %v\n", rep.WriteFile, err)
			continue
		case rep.Tool != "":
			msgs += fmt.Sprintf("called %s: %s\n", rep.Tool, callNid(rep.Tool, rep.ToolInput))
			continue
		}
		fmt.Println(rep.Text)
		fmt.Printf("{\"nid\":\"usage\",\"used\":%d,\"window\":%d}\n", rep.Input, execWindow)
		_ = os.MkdirAll(filepath.Dir(conv), 0o700)
		_ = os.WriteFile(conv, []byte(msgs+"agent: "+rep.Text+"\n"), 0o600)
		return 0
	}
}

// callNid calls one of nid's tools at NIDAGENT_MCP_URL and returns what
// it answered, its failure included.
func callNid(tool string, args map[string]any) string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "exec-agent", Version: "1"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: os.Getenv("NIDAGENT_MCP_URL"), DisableStandaloneSSE: true}, nil)
	if err != nil {
		return "connect: " + err.Error()
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return "error: " + err.Error()
	}
	var text []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			text = append(text, t.Text)
		}
	}
	if res.IsError {
		return "error: " + strings.Join(text, "\n")
	}
	return strings.Join(text, "\n")
}

// askModel sends the conversation so far to the fake model.
func askModel(model, msgs string) (fakemodel.Reply, error) {
	req, err := http.NewRequest(http.MethodPost, model+"/exec", strings.NewReader(msgs))
	if err != nil {
		return fakemodel.Reply{}, err
	}
	req.Header.Set("X-Turn-Kind", os.Getenv("NIDAGENT_TURN_KIND"))
	req.Header.Set("X-Conversation", os.Getenv("NIDAGENT_CONVERSATION"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fakemodel.Reply{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fakemodel.Reply{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return fakemodel.Reply{}, fmt.Errorf("the model answered %d: %s", resp.StatusCode, body)
	}
	var rep fakemodel.Reply
	return rep, json.Unmarshal(body, &rep)
}
