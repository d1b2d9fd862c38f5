package worker

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/statedir"
	"github.com/nid-dev/nid/workflows"
)

// SessionSignaler delivers an agent's tool calls to its own session and
// reads its group's board. The worker implements it with the Temporal
// client.
type SessionSignaler interface {
	// HandoffWrite signals workflows.SignalHandoffWrite to the session
	// workflow sessionWorkflowID.
	HandoffWrite(ctx context.Context, sessionWorkflowID string, summary string) error
	// HandoffAck signals workflows.SignalHandoffAck to the session
	// workflow sessionWorkflowID.
	HandoffAck(ctx context.Context, sessionWorkflowID string, ack workflows.HandoffAck) error
	// Board returns what board_read shows the session group/session.
	Board(ctx context.Context, group, session string) (string, error)
	// BoardUpdate runs a board update (workflows.UpdateTaskClaim, ...) on
	// the group as req.Session; a refusal comes back as the error.
	BoardUpdate(ctx context.Context, group, update string, req workflows.BoardRequest) (workflows.BoardResult, error)
	// Session returns the view of the session group/name
	// (workflows.QuerySession): which of its conversations may act, and
	// its context record.
	Session(ctx context.Context, group, name string) (workflows.SessionView, error)
}

// mcpKeyBytes is the size of the key that signs session tokens.
const mcpKeyBytes = 32

// MCPEndpoint serves nid's tools to agents over MCP (streamable HTTP). Each
// session has its own URL, <baseURL>/mcp/<group>/<session>, and each of its
// conversations its own token, "<generation>.<HMAC of the session id and
// the generation under the worker's key>", sent as "Authorization: Bearer
// <token>" (or, for agents that can send no header, as one more path
// segment: <baseURL>/mcp/<group>/<session>/<token>). An agent can act only
// as the session whose token it was given, and a request with a missing or
// wrong token is refused before it reaches any tool. Every tool call is
// then checked against the session itself: only its current conversation
// (workflows.SessionView.Generation), and while a rotation runs the fresh
// one it starts, may act; a conversation rotated away is refused and
// changes nothing.
//
// The endpoint is stateless (no MCP session ids): every request is
// authenticated by its URL and header alone, so MCP sessions cannot be shared across nid
// sessions, and an agent keeps working across worker restarts.
type MCPEndpoint struct {
	key      []byte
	sessions SessionSignaler
	baseURL  string
	handler  *mcp.StreamableHTTPHandler

	mu      sync.Mutex
	servers map[caller]*mcp.Server
}

// NewMCPEndpoint returns the endpoint for agents. key signs session tokens
// (see LoadOrCreateKey); baseURL is how agents reach the worker's HTTP
// server, e.g. http://127.0.0.1:7777.
func NewMCPEndpoint(key []byte, sessions SessionSignaler, baseURL string) *MCPEndpoint {
	e := &MCPEndpoint{
		key:      key,
		sessions: sessions,
		baseURL:  strings.TrimRight(baseURL, "/"),
		servers:  make(map[caller]*mcp.Server),
	}
	e.handler = mcp.NewStreamableHTTPHandler(e.server, &mcp.StreamableHTTPOptions{Stateless: true})
	return e
}

// Access is the session's own MCP endpoint and the token of its
// conversation of that generation. Give it only to that conversation's
// agent.
func (e *MCPEndpoint) Access(ref agents.SessionRef, generation int) agents.MCPAccess {
	return agents.MCPAccess{URL: e.baseURL + "/mcp/" + ref.Group + "/" + ref.Name, Token: e.token(ref.Group, ref.Name, generation)}
}

// URL is the session's own MCP endpoint with the token of its conversation
// of that generation in the path. Give it only to that conversation's
// agent.
func (e *MCPEndpoint) URL(ref agents.SessionRef, generation int) string {
	return e.Access(ref, generation).TokenURL()
}

// Handler serves the endpoint; mount it at "/mcp/".
func (e *MCPEndpoint) Handler() http.Handler { return http.HandlerFunc(e.serveHTTP) }

type callerKey struct{}

// caller is the session, and the generation of its conversation, a
// request was authenticated as.
type caller struct {
	group, name string
	generation  int
}

func (e *MCPEndpoint) serveHTTP(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/mcp/")
	parts := strings.Split(rest, "/")
	if !ok || len(parts) < 2 || len(parts) > 3 || !workflows.ValidName(parts[0]) || !workflows.ValidName(parts[1]) {
		http.Error(w, "not found: nid's MCP endpoints are /mcp/<group>/<session>, with the token as a bearer token or one more path segment", http.StatusNotFound)
		return
	}
	group, name := parts[0], parts[1]
	var token string
	if len(parts) == 3 {
		token = parts[2]
	} else if t, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		token = strings.TrimSpace(t)
	}
	if token == "" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="nid"`)
		http.Error(w, "unauthorized: send the token of session "+group+"/"+name+" as Authorization: Bearer <token>", http.StatusUnauthorized)
		return
	}
	generation, ok := tokenGeneration(token)
	if !ok || !hmac.Equal([]byte(token), []byte(e.token(group, name, generation))) {
		http.Error(w, "forbidden: this is not a token of session "+group+"/"+name, http.StatusForbidden)
		return
	}
	ctx := context.WithValue(r.Context(), callerKey{}, caller{group, name, generation})
	e.handler.ServeHTTP(w, r.WithContext(ctx))
}

// token is the generation, a dot, and the first 32 hex digits of
// HMAC-SHA256(key, session id NUL generation): each conversation of a
// session has a token of its own.
func (e *MCPEndpoint) token(group, name string, generation int) string {
	m := hmac.New(sha256.New, e.key)
	m.Write([]byte(workflows.SessionID(group, name) + "\x00" + strconv.Itoa(generation)))
	return strconv.Itoa(generation) + "." + hex.EncodeToString(m.Sum(nil))[:32]
}

// tokenGeneration is the generation a token claims to be of; the HMAC
// decides whether it is.
func tokenGeneration(token string) (int, bool) {
	prefix, _, ok := strings.Cut(token, ".")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(prefix)
	return n, err == nil && n >= 0
}

// server returns the MCP server whose tools act as the request's session
// and conversation. Only authenticated requests get here, and only a
// session's newest conversations call often, so the cache keeps, for each
// session, servers of the newest generation it saw and the one before.
func (e *MCPEndpoint) server(r *http.Request) *mcp.Server {
	c, ok := r.Context().Value(callerKey{}).(caller)
	if !ok {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if s, ok := e.servers[c]; ok {
		return s
	}
	s := e.newServer(c)
	for k := range e.servers {
		if k.group == c.group && k.name == c.name && k.generation < c.generation-1 {
			delete(e.servers, k)
		}
	}
	e.servers[c] = s
	return s
}

func (e *MCPEndpoint) newServer(c caller) *mcp.Server {
	id := workflows.SessionID(c.group, c.name)
	s := mcp.NewServer(&mcp.Implementation{Name: "nid", Version: "1"}, &mcp.ServerOptions{
		Instructions: fmt.Sprintf("nid's tools for session %s/%s. Call %s(summary) when your context is "+
			"cluttered or when nid asks for a handoff; call %s to see the group's goal and tasks, "+
			"%s to see how full your context is and when nid rotates it.",
			c.group, c.name, agents.ToolHandoffWrite, agents.ToolBoardRead, agents.ToolContextStatus),
	})
	s.AddReceivingMiddleware(e.currentOnly(c))
	mcp.AddTool(s, &mcp.Tool{
		Name: agents.ToolHandoffWrite,
		Description: "Write your handoff: a self-contained summary a fresh conversation can continue from " +
			"(tasks held, what is done, next steps, decisions, gotchas). Called outside a rotation it means " +
			"\"my context is cluttered\": nid starts this session fresh from the summary when the current turn ends.",
	}, e.handoffWrite(c, id))
	mcp.AddTool(s, &mcp.Tool{
		Name: agents.ToolHandoffAck,
		Description: "After a handoff, say which tasks you resume: the ids of the tasks you hold (an empty list when " +
			"you hold none). nid checks them against the board and records whether you picked up where you left off.",
	}, e.handoffAck(c, id))
	mcp.AddTool(s, &mcp.Tool{
		Name:        agents.ToolBoardRead,
		Description: "Read the group's board: its goal, its tasks, who claimed each, and the locks sessions hold.",
	}, e.boardRead(c))
	mcp.AddTool(s, &mcp.Tool{
		Name: agents.ToolContextStatus,
		Description: "See how full your context window is (tokens used, the window, percent, where the numbers came from), " +
			"where nid rotates this conversation (the threshold in percent and tokens, and what set it), " +
			"turns since the last rotation and how many rotations there were.",
		OutputSchema: contextStatusSchema(),
	}, contextStatus)
	mcp.AddTool(s, &mcp.Tool{
		Name:        agents.ToolTaskClaim,
		Description: "Claim a task on the board by its id (e.g. t3). Refused, with the holder named, when another session holds it.",
	}, e.boardTool(c, workflows.UpdateTaskClaim, func(r *workflows.BoardResult) string {
		return fmt.Sprintf("task %s is yours: %s", r.Task.ID, r.Task.Title)
	}))
	mcp.AddTool(s, &mcp.Tool{
		Name:        agents.ToolTaskDone,
		Description: "Mark a task you hold as done, by its id. nid then gives you the next open task.",
	}, e.boardTool(c, workflows.UpdateTaskDone, func(r *workflows.BoardResult) string {
		return fmt.Sprintf("task %s is done", r.Task.ID)
	}))
	mcp.AddTool(s, &mcp.Tool{
		Name:        agents.ToolLockAcquire,
		Description: "Take a named lock (typically a path) before changing what other sessions might change. Refused, with the holder named, when another session holds it.",
	}, e.lockTool(c, workflows.UpdateLockAcquire, "lock %q is yours"))
	mcp.AddTool(s, &mcp.Tool{
		Name:        agents.ToolLockRelease,
		Description: "Release a named lock you hold.",
	}, e.lockTool(c, workflows.UpdateLockRelease, "lock %q released"))
	return s
}

type viewKey struct{}

// currentOnly lets a tool call through only from a conversation that may
// act for the session now: its current one, or, while a rotation runs, the
// fresh one the rotation starts. Any other (a process that outlived its
// turn, a late retry) is refused before the tool runs, so it changes
// nothing. The tool gets the session's view it was checked against.
func (e *MCPEndpoint) currentOnly(c caller) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method != "tools/call" {
				return next(ctx, method, req)
			}
			v, err := e.sessions.Session(ctx, c.group, c.name)
			if err != nil {
				return errorResult(fmt.Sprintf("refused: nid could not check that this conversation is still the current one of %s/%s (%s); "+
					"nothing was changed: try again", c.group, c.name, workflows.ErrorText(err))), nil
			}
			if why := notCurrent(c, v); why != "" {
				return errorResult(why), nil
			}
			return next(context.WithValue(ctx, viewKey{}, v), method, req)
		}
	}
}

// notCurrent says why the conversation c may not act for the session v
// now; "" when it may.
func notCurrent(c caller, v workflows.SessionView) string {
	switch {
	case c.generation == v.Generation, c.generation == v.Generation+1 && v.Rotating != nil:
		return ""
	case c.generation < v.Generation:
		return fmt.Sprintf("refused: this conversation of %s/%s was rotated away (its token is of generation %d; the session is on generation %d): "+
			"it can no longer act for the session, and nothing was changed", c.group, c.name, c.generation, v.Generation)
	default:
		return fmt.Sprintf("refused: this conversation of %s/%s is not the session's current one (its token is of generation %d, "+
			"from a rotation that did not complete; the session is on generation %d): it cannot act for the session, and nothing was changed",
			c.group, c.name, c.generation, v.Generation)
	}
}

func errorResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

type taskArgs struct {
	TaskID string `json:"task_id" jsonschema:"the task's id as the board shows it, e.g. t3"`
}

type lockArgs struct {
	Name string `json:"name" jsonschema:"the lock's name, typically a path such as src/app.go"`
}

func (e *MCPEndpoint) boardTool(c caller, update string, answer func(*workflows.BoardResult) string) mcp.ToolHandlerFor[taskArgs, any] {
	return func(ctx context.Context, _ *mcp.CallToolRequest, in taskArgs) (*mcp.CallToolResult, any, error) {
		id := strings.TrimSpace(in.TaskID)
		if id == "" {
			return nil, nil, errors.New("task_id is empty: give the task's id as the board shows it, e.g. t3")
		}
		res, err := e.sessions.BoardUpdate(ctx, c.group, update, workflows.BoardRequest{Session: c.name, TaskID: id})
		if err != nil {
			return nil, nil, err
		}
		return textResult(answer(&res)), nil, nil
	}
}

func (e *MCPEndpoint) lockTool(c caller, update, answer string) mcp.ToolHandlerFor[lockArgs, any] {
	return func(ctx context.Context, _ *mcp.CallToolRequest, in lockArgs) (*mcp.CallToolResult, any, error) {
		if _, err := e.sessions.BoardUpdate(ctx, c.group, update, workflows.BoardRequest{Session: c.name, Lock: in.Name}); err != nil {
			return nil, nil, err
		}
		return textResult(fmt.Sprintf(answer, in.Name)), nil, nil
	}
}

type handoffArgs struct {
	Summary string `json:"summary" jsonschema:"the self-contained handoff: tasks held, what is done, next steps, decisions, gotchas"`
}

// Tool failures come back as errors from the typed handlers, which the SDK
// turns into results with isError set, so the agent sees the reason and can
// correct itself.
func (e *MCPEndpoint) handoffWrite(c caller, sessionID string) mcp.ToolHandlerFor[handoffArgs, any] {
	return func(ctx context.Context, _ *mcp.CallToolRequest, in handoffArgs) (*mcp.CallToolResult, any, error) {
		summary := strings.TrimSpace(in.Summary)
		if summary == "" {
			return nil, nil, errors.New("summary is empty: write a self-contained handoff (tasks held, what is done, next steps, decisions, gotchas)")
		}
		if len(summary) > workflows.MaxSummaryBytes {
			return nil, nil, fmt.Errorf("summary is %d bytes; the limit is %d bytes: shorten it and call %s again",
				len(summary), workflows.MaxSummaryBytes, agents.ToolHandoffWrite)
		}
		if err := e.sessions.HandoffWrite(ctx, sessionID, summary); err != nil {
			return nil, nil, fmt.Errorf("handoff not recorded for %s/%s: %v", c.group, c.name, err)
		}
		return textResult("handoff recorded: nid rotates this session when the current turn ends"), nil, nil
	}
}

type ackArgs struct {
	Tasks []string `json:"tasks" jsonschema:"the ids of the tasks you resume, as the board shows them (e.g. t3); an empty list when you hold none"`
}

// maxTaskIDBytes bounds one task id in an acknowledgement: the board's ids
// are short (t1, t2, ...), and the ids travel in workflow history. The
// session's handler applies the same cap.
const maxTaskIDBytes = workflows.MaxTaskIDBytes

// handoffAck hands a fresh conversation's acknowledgement to the rotation
// that started it. Only that conversation, while its rotation runs, has
// anything to acknowledge; any other call is answered and changes nothing.
func (e *MCPEndpoint) handoffAck(c caller, sessionID string) mcp.ToolHandlerFor[ackArgs, any] {
	return func(ctx context.Context, _ *mcp.CallToolRequest, in ackArgs) (*mcp.CallToolResult, any, error) {
		tasks, err := ackTasks(in.Tasks)
		if err != nil {
			return nil, nil, err
		}
		v, _ := ctx.Value(viewKey{}).(workflows.SessionView)
		if v.Rotating == nil || c.generation != v.Generation+1 {
			return textResult("nothing to acknowledge: no handoff into this conversation is waiting for its " +
				agents.ToolHandoffAck + "; carry on"), nil, nil
		}
		if err := e.sessions.HandoffAck(ctx, sessionID, workflows.HandoffAck{Tasks: tasks, Generation: c.generation}); err != nil {
			return nil, nil, fmt.Errorf("acknowledgement not recorded for %s/%s: %v", c.group, c.name, err)
		}
		said := "no task"
		if len(tasks) > 0 {
			said = strings.Join(tasks, ", ")
		}
		return textResult("acknowledged: you resume " + said + "; nid checks this against the board and records it on the rotation's receipt"), nil, nil
	}
}

// ackTasks is the acknowledgement's task ids, trimmed and each once; an
// empty id, an overlong one or more than a board holds is refused.
func ackTasks(in []string) ([]string, error) {
	if len(in) > workflows.MaxTasks {
		return nil, fmt.Errorf("tasks names %d ids; a board holds at most %d tasks", len(in), workflows.MaxTasks)
	}
	tasks := []string{}
	for _, id := range in {
		id = strings.TrimSpace(id)
		switch {
		case id == "":
			return nil, errors.New("tasks has an empty id: give each task's id as the board shows it, e.g. t3, or an empty list when you hold none")
		case len(id) > maxTaskIDBytes:
			return nil, fmt.Errorf("task id %q is longer than %d bytes: give each task's id as the board shows it, e.g. t3", id[:maxTaskIDBytes]+"…", maxTaskIDBytes)
		case !slices.Contains(tasks, id):
			tasks = append(tasks, id)
		}
	}
	return tasks, nil
}

func (e *MCPEndpoint) boardRead(c caller) mcp.ToolHandlerFor[any, any] {
	return func(ctx context.Context, _ *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
		board, err := e.sessions.Board(ctx, c.group, c.name)
		if err != nil {
			return nil, nil, fmt.Errorf("board of %s not readable: %v", c.group, err)
		}
		return textResult(board), nil, nil
	}
}

func textResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

// LoadOrCreateKey returns the key that signs MCP session tokens, kept in
// <stateDir>/mcp.key (mode 0600) so agents' URLs stay valid across worker
// restarts. The first call creates it from 32 random bytes.
func LoadOrCreateKey(stateDir string) ([]byte, error) {
	path := keyPath(stateDir)
	key, err := readKey(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return key, err
	}
	if err := os.MkdirAll(stateDir, statedir.DirMode); err != nil {
		return nil, fmt.Errorf("mcp key: %w", err)
	}
	key = make([]byte, mcpKeyBytes)
	rand.Read(key)
	// Written under a temporary name and linked into place, so a reader never
	// sees a half-written key and two processes starting at once agree on
	// one key: the second link fails and that process reads the first's.
	f, err := os.CreateTemp(stateDir, ".mcp.key-*")
	if err != nil {
		return nil, fmt.Errorf("mcp key: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	_, err = f.Write(key)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("mcp key: %w", err)
	}
	if err := os.Link(tmp, path); errors.Is(err, fs.ErrExist) {
		return readKey(path)
	} else if err != nil {
		return nil, fmt.Errorf("mcp key: %w", err)
	}
	return key, nil
}

// keyPath is where the key of a state directory is kept.
func keyPath(stateDir string) string { return filepath.Join(stateDir, "mcp.key") }

func readKey(path string) ([]byte, error) {
	key, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, fmt.Errorf("mcp key: %w", err)
	}
	if len(key) != mcpKeyBytes {
		return nil, fmt.Errorf("mcp key %s is %d bytes, want %d: delete it and nid makes a new one (agents then need their new URLs)",
			path, len(key), mcpKeyBytes)
	}
	return key, nil
}
