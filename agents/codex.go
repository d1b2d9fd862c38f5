package agents

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/statedir"
)

// Codex drives OpenAI's Codex CLI: one long-lived `codex app-server` per
// session, spoken to in JSON-RPC over stdio. A thread is started in the
// session's working directory with no approvals asked, in the sandbox its
// permissions name (see codexSandbox); each turn is a turn/start, a
// compaction a thread/compact/start. When the worker restarted, or a turn
// was killed, the next call starts a new app-server and resumes the thread
// with thread/resume. nid's MCP server is added to the user's Codex config
// as mcp_servers.nid by -c overrides, its token sent as a bearer token read
// from the app-server's environment. A request that would start the
// app-server differently (see commandKey) runs on a new one: nid.yaml may
// have been reloaded, and the token belongs to one of the session's
// conversations (its generation), so the old server could not act for
// another. One that sat idle for liveIdleTimeout is stopped. An
// app-server whose worker died exits when its stdin closes.
type Codex struct {
	servers *liveProcs[*codexServer]
}

// NewCodex returns a Codex agent.
func NewCodex() *Codex { return &Codex{servers: newLiveProcs[*codexServer]()} }

// codexStartTimeout bounds the app-server's initialize answer.
const codexStartTimeout = 60 * time.Second

// Turn runs one turn of the session's thread.
func (c *Codex) Turn(ctx context.Context, req TurnRequest) (TurnReport, error) {
	srv, thread, done, err := c.thread(ctx, req.Session, req.Process, req.MCP, req.Conversation)
	if err != nil {
		return TurnReport{}, err
	}
	input := []map[string]string{{"type": "text", "text": req.Prompt}}
	limited, calls := false, 0
	t, err := c.runTurn(ctx, req.Session, srv, req.Process.Timeout, "turn/start",
		map[string]any{"threadId": thread, "input": input}, func(t *CodexTurn) {
			for ; calls < len(t.ToolCalls); calls++ {
				req.toolCalled(t.ToolCalls[calls])
			}
			if t.RateLimited != limited {
				limited = t.RateLimited
				if req.RateLimited != nil {
					req.RateLimited(limited)
				}
			}
		})
	done()
	if err != nil {
		return TurnReport{}, err
	}
	if t.Status != "completed" {
		return TurnReport{}, codexFailure(t)
	}
	rep := TurnReport{Conversation: thread, Output: t.Text, Usage: Usage{Source: SourceUnknown}}
	if t.UsageSeen {
		rep.Usage = Usage{UsedTokens: t.Used, WindowTokens: srv.window(t.Window), Source: SourceReported, Model: req.Process.Model}
	}
	if t.Compacted {
		rep.Vendor = &VendorCompaction{BeforeTokens: t.CompactBefore, AfterTokens: t.CompactAfter}
	}
	return rep, nil
}

// Compact asks Codex to compact the thread; only a completed
// contextCompaction item counts.
func (c *Codex) Compact(ctx context.Context, req CompactRequest) (CompactReport, error) {
	srv, thread, done, err := c.thread(ctx, req.Session, req.Process, req.MCP, req.Conversation)
	if err != nil {
		return CompactReport{}, err
	}
	before := srv.lastUsed()
	t, err := c.runTurn(ctx, req.Session, srv, req.Process.Timeout, "thread/compact/start", map[string]any{"threadId": thread}, nil)
	done()
	if err != nil {
		return CompactReport{}, err
	}
	rep := CompactReport{Conversation: thread}
	if !t.Compacted || t.Status != "completed" {
		rep.Detail = "codex completed no contextCompaction item"
		if t.ErrorMessage != "" {
			rep.Detail += ": " + t.ErrorMessage
		}
		return rep, nil
	}
	rep.OK = true
	rep.BeforeTokens = before
	if t.CompactBefore > 0 {
		rep.BeforeTokens = t.CompactBefore
	}
	rep.AfterTokens = t.Used
	rep.Usage = Usage{UsedTokens: t.Used, WindowTokens: srv.window(t.Window), Source: SourceReported, Model: req.Process.Model}
	return rep, nil
}

// Stop ends the session's app-server and everything it started, and
// returns once it has exited, so that nothing of the old conversation still
// runs when the next one starts.
func (c *Codex) Stop(ctx context.Context, req StopRequest) error {
	return c.servers.stop(ctx, req.Session.WorkflowID)
}

// Close stops every app-server this worker runs, and returns once they
// have exited; the threads stay with Codex, to be resumed by the next
// worker.
func (c *Codex) Close() error {
	c.servers.stopAll()
	return nil
}

// thread returns the session's running app-server with the conversation's
// thread loaded, starting the server and the thread as needed; call done
// once the request is over. A server that would not be started the same
// way now is replaced first: its settings are stale, or its MCP token is
// of a conversation rotated away (whose stop failed), whose tool calls
// would be refused.
func (c *Codex) thread(ctx context.Context, ref SessionRef, p Process, mcp MCPAccess, conv string) (_ *codexServer, _ string, done func(), err error) {
	cmd, err := codexCommand(p, mcp)
	if err != nil {
		return nil, "", nil, err
	}
	srv, release, err := c.servers.use(ctx, ref.WorkflowID)
	if err != nil {
		return nil, "", nil, err
	}
	defer func() {
		if err != nil {
			release()
		}
	}()
	if srv != nil && (srv.key != commandKey(cmd) || !srv.alive()) {
		c.servers.drop(ref.WorkflowID, srv)
		srv.kill()
		if err := srv.wait(ctx); err != nil {
			return nil, "", nil, err
		}
		srv = nil
	}
	if srv == nil {
		if srv, err = startCodex(ctx, cmd, p); err != nil {
			return nil, "", nil, err
		}
		c.servers.set(ref.WorkflowID, srv)
	}
	if conv != "" && srv.threadID() == conv {
		return srv, conv, release, nil
	}
	var res struct {
		Thread struct {
			ID string `json:"id"`
		} `json:"thread"`
		Profile struct {
			ID string `json:"id"`
		} `json:"activePermissionProfile"`
	}
	// A resumed thread gets the same unattended settings as a new one:
	// nothing asks for approval, so a command the sandbox refuses fails
	// instead of waiting for a human.
	params := map[string]any{"approvalPolicy": "never"}
	if !p.Sandboxed() {
		// A sandboxed thread's sandbox is nid's permission profile
		// (codexSandbox), which a sandbox mode here would replace.
		params["sandbox"] = "danger-full-access"
	}
	if wd := WorkDir(p); wd != "" {
		params["cwd"] = wd
	}
	if p.Model != "" {
		params["model"] = p.Model
	}
	method := "thread/start"
	if conv != "" {
		method = "thread/resume"
		params["threadId"] = conv
	}
	if err := srv.call(ctx, method, params, &res); err != nil {
		return nil, "", nil, err
	}
	if p.Sandboxed() && res.Profile.ID != codexProfile {
		// Something replaced nid's profile (a sandbox mode, should a
		// Codex prefer one set elsewhere): the sandbox Codex runs instead
		// would not keep nid's state directory out of reads.
		srv.kill()
		c.servers.drop(ref.WorkflowID, srv)
		return nil, "", nil, SandboxUnavailable("codex: Codex runs %s/%s's thread with permission profile %q, not nid's own %q, so nid stopped the agent: "+
			"without nid's profile the agent could read nid's credentials; remove sandbox_mode, sandbox_workspace_write and default_permissions from the Codex "+
			"config (config.toml in CODEX_HOME) and from the args nid.yaml gives Codex, or set permissions: %s for this session to run it without a sandbox",
			ref.Group, ref.Name, cmp.Or(res.Profile.ID, "none"), codexProfile, config.PermissionsFull)
	}
	if res.Thread.ID == "" {
		return nil, "", nil, AgentFailed("codex: the app-server answered without a thread id")
	}
	srv.setThread(res.Thread.ID)
	return srv, res.Thread.ID, release, nil
}

// runTurn sends a request that starts a turn and folds its notifications
// until turn/completed. Past the timeout, or when ctx ends, the app-server's
// whole process group is killed: the next call starts a fresh one.
func (c *Codex) runTurn(ctx context.Context, ref SessionRef, srv *codexServer, timeout time.Duration, method string, params any, progress func(*CodexTurn)) (*CodexTurn, error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	fail := func(err error) (*CodexTurn, error) {
		if ctx.Err() != nil {
			c.servers.drop(ref.WorkflowID, srv)
			srv.kill()
			if errors.Is(ctx.Err(), context.DeadlineExceeded) && timeout > 0 {
				return nil, turnTimedOut(KindCodex, timeout)
			}
			return nil, ctx.Err()
		}
		return nil, err
	}
	srv.drain()
	if err := srv.call(ctx, method, params, nil); err != nil {
		return fail(err)
	}
	t := &CodexTurn{Used: srv.lastUsed()}
	for !t.Done {
		notes, err := srv.next(ctx)
		if err != nil {
			return fail(err)
		}
		for _, n := range notes {
			t.Feed(n.Method, n.Params)
			if progress != nil {
				progress(t)
			}
		}
	}
	if t.UsageSeen {
		srv.setUsed(t.Used)
	}
	return t, nil
}

// codexSandboxMode names the sandbox a sandboxed thread runs in, by the
// process's permissions, as nid doctor says it.
func codexSandboxMode(p Process) string {
	if p.readonly() {
		return "nid's permission profile, read-only"
	}
	return "nid's permission profile, workspace"
}

// codexProfile is the permission profile nid gives a sandboxed Codex:
// one of its own, defined on the command line by codexSandbox.
const codexProfile = "nid"

// codexSandbox returns the -c overrides that give a sandboxed Codex its
// sandbox, as a permission profile of nid's own (Codex's older
// workspace-write mode cannot keep a path out of reads):
//
//   - reads: everything but nid's state directory, where only the
//     session's own places stay readable (readPolicy): the HTTP token, the
//     MCP key, the Temporal credential and database and the other
//     sessions' worktrees are out of reach.
//   - writes (workspace): the working directory (Codex keeps its .git and
//     .codex read-only), the session's temp directory, and in a git
//     worktree the parts of the repository's git directory a commit writes,
//     so that `git commit` works while the files that say where the
//     repository is and what git runs there (gitReadOnly) stay read-only.
//     /tmp, every session's and every user's, is not among them; sandboxEnv
//     gives the session a temp directory of its own instead. readonly
//     writes nothing.
//   - network: none, unless Process.Network allows it; then only through
//     Codex's own proxy, which allows every domain but refuses this host's
//     loopback, where the Temporal frontend and nid's HTTP port listen.
//
// Codex prefers this profile to a sandbox_mode in the user's config or in
// the args nid.yaml gives it; should a version not, Codex.thread sees
// another profile reported and refuses to run the thread.
func codexSandbox(p Process) []string {
	if !p.Sandboxed() {
		return nil
	}
	fs := map[string]string{"/": "read"}
	if !p.readonly() {
		for _, d := range append([]string{WorkDir(p), p.TempDir}, GitWritable(p)...) {
			if d != "" {
				fs[d] = "write"
			}
		}
		for _, f := range gitReadOnly(p) {
			fs[f] = "read"
		}
	}
	deny, allow := readPolicy(p)
	for _, d := range allow {
		if _, set := fs[d]; !set {
			fs[d] = "read"
		}
	}
	for _, d := range deny {
		for _, h := range codexHidden(d, fs) {
			fs[h] = "none"
		}
	}
	network := "{enabled=false}"
	args := []string{"-c", "default_permissions=" + tomlString(codexProfile)}
	if p.network() {
		network = `{enabled=true, domains={"*"="allow"}}`
		args = append(args, "-c", "features.network_proxy=true")
	}
	return append(args,
		"-c", "permissions."+codexProfile+".filesystem="+tomlTable(fs),
		"-c", "permissions."+codexProfile+".network="+network)
}

// codexHidden returns what a Codex profile marks "none" so that its
// commands cannot read dir but for the places fs gives them there. Codex
// binds a path it may write again inside a directory it hides, but not one
// it may only read: so a directory holding only places to write is hidden
// whole (a session made in it later stays hidden too), and one holding a
// place only to read (the clone of the group's repository, whose git
// directory a worktree's commits read) is walked into, hiding everything
// else in it, as it stands when the agent's app-server starts.
func codexHidden(dir string, fs map[string]string) []string {
	var writes, reads []string
	for path, access := range fs {
		if path != dir && config.Within(path, dir) {
			if access == "write" {
				writes = append(writes, path)
			} else {
				reads = append(reads, path)
			}
		}
	}
	// A place to read inside one to write is bound again with it.
	reads = slices.DeleteFunc(reads, func(r string) bool {
		return slices.ContainsFunc(writes, func(w string) bool { return config.Within(r, w) })
	})
	var hidden []string
	var walk func(d string, names []string)
	walk = func(d string, names []string) {
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			names = append(names, e.Name())
		}
		slices.Sort(names)
		for _, name := range slices.Compact(names) {
			path := filepath.Join(d, name)
			if _, own := fs[path]; own {
				continue
			}
			if slices.ContainsFunc(reads, func(r string) bool { return config.Within(r, path) }) {
				walk(path, nil)
				continue
			}
			hidden = append(hidden, path)
		}
	}
	// What nid keeps there is hidden by name, there yet or not, so that
	// the list (and the app-server's command line, which would start it
	// again when it changes) stays the same from one turn to the next.
	walk(dir, append(slices.Clone(stateSecrets), stateDirs...))
	return hidden
}

// stateDirs are the directories nid keeps in its state directory.
var stateDirs = []string{"agents", "exec", "gitdirs", "pids", "repos", "sim", "transcripts", statedir.Worktrees}

// tomlString is s as a TOML basic string: JSON's escapes are TOML's.
func tomlString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// tomlTable is m as an inline TOML table of strings, its keys in order.
func tomlTable(m map[string]string) string {
	var pairs []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		pairs = append(pairs, tomlString(k)+"="+tomlString(m[k]))
	}
	return "{" + strings.Join(pairs, ", ") + "}"
}

// codexFailure turns a failed turn into the error workflows branch on.
func codexFailure(t *CodexTurn) error {
	msg := t.ErrorMessage
	if msg == "" {
		msg = "turn " + t.Status
	}
	switch {
	case t.ContextFull():
		return ContextFull("codex: the thread no longer fits the context window: %s", msg)
	case strings.Contains(t.ErrorInfo, "unauthorized"), strings.Contains(t.ErrorInfo, "badRequest"), strings.Contains(t.ErrorInfo, "modelNotFound"),
		strings.Contains(t.ErrorInfo, `"httpStatusCode":401`), strings.Contains(t.ErrorInfo, `"httpStatusCode":403`),
		strings.Contains(msg, "401 Unauthorized"), strings.Contains(msg, "403 Forbidden"):
		return AgentFailed("codex: %s (%s)", msg, t.ErrorInfo)
	}
	return fmt.Errorf("codex: %s", msg)
}

// codexServer is one running app-server.
type codexServer struct {
	*liveProc
	// key is what it was started with (commandKey).
	key string
	// grant says approvals are granted: the session runs unsandboxed
	// anyway. In a sandbox an approval would let a command out of it.
	grant bool

	mu      sync.Mutex
	nextID  int64
	pending map[string]chan CodexMessage
	notes   []CodexMessage
	wake    chan struct{}
	thread  string
	used    int64
	win     int64
}

// codexCommand builds the command of a session's app-server.
func codexCommand(p Process, mcp MCPAccess) (*exec.Cmd, error) {
	path, err := lookCommand(KindCodex, p)
	if err != nil {
		return nil, err
	}
	// Commands in a login shell would get the PATH and variables the
	// profile sets (on many hosts a bare system PATH), not the environment
	// nid gives the agent, with which Claude Code's and exec's commands run.
	args := []string{"app-server", "-c", "allow_login_shell=false"}
	// Codex's sandbox lets commands write $TMPDIR, which codexSandbox
	// makes the session's own.
	env := sandboxEnv(p, map[string]string{"TMPDIR": "tmp", "XDG_CACHE_HOME": "cache"})
	if mcp.URL != "" {
		// In a sandbox Codex asks before every MCP tool call; nid's own tools
		// act only on the session's board, so they are approved up front.
		args = append(args, "-c", "mcp_servers.nid.url="+strconv.Quote(mcp.URL),
			"-c", "mcp_servers.nid.bearer_token_env_var="+strconv.Quote(EnvMCPToken),
			"-c", `mcp_servers.nid.default_tools_approval_mode="approve"`)
		env[EnvMCPToken] = mcp.Token
	}
	args = append(args, codexSandbox(p)...)
	args = append(args, p.Args...)
	// The server outlives the request that starts it: it is not bound to
	// the request's context.
	return newCommand(context.Background(), path, args, p, env), nil
}

// startCodex starts cmd, a session's app-server, and initializes it.
func startCodex(ctx context.Context, cmd *exec.Cmd, p Process) (*codexServer, error) {
	s := &codexServer{liveProc: newLiveProc(cmd), key: commandKey(cmd), pending: map[string]chan CodexMessage{}, wake: make(chan struct{}, 1),
		grant: !p.Sandboxed()}
	if err := s.start(p.PidDir, s.receive); err != nil {
		return nil, AgentFailed("codex: %v", err)
	}
	ictx, cancel := context.WithTimeout(ctx, codexStartTimeout)
	defer cancel()
	init := map[string]any{
		"clientInfo":   map[string]string{"name": "nid", "version": "1"},
		"capabilities": map[string]any{"experimentalApi": true},
	}
	if err := s.call(ictx, "initialize", init, nil); err != nil {
		s.kill()
		if _, typed := errors.AsType[*Error](err); !typed && ctx.Err() == nil {
			err = AgentFailed("%v", err)
		}
		return nil, err
	}
	if err := s.send(map[string]any{"method": "initialized"}); err != nil {
		s.kill()
		return nil, err
	}
	if p.Sandboxed() {
		if err := s.probeSandbox(ictx, WorkDir(p)); err != nil {
			s.kill()
			return nil, err
		}
	}
	return s, nil
}

// probeSandbox runs `true` in Codex's sandbox, the way Codex runs the
// agent's commands. Where the sandbox cannot start (user namespaces
// refused, a broken bubblewrap), Codex does not run commands without it:
// every one fails, and the agent would work on blind. nid stops there
// instead, saying why.
func (s *codexServer) probeSandbox(ctx context.Context, dir string) error {
	var res struct {
		ExitCode int    `json:"exitCode"`
		Stdout   string `json:"stdout"`
		Stderr   string `json:"stderr"`
	}
	err := s.call(ctx, "command/exec", map[string]any{
		"command": []string{"true"}, "cwd": dir, "timeoutMs": 30000,
		"sandboxPolicy": map[string]any{"type": "readOnly"},
	}, &res)
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return SandboxUnavailable("codex: Codex's sandbox cannot run commands on this host, so nid did not start the agent: %s. "+
			"Codex runs them with bubblewrap (bwrap) in a user namespace: allow unprivileged user namespaces, or install a working bubblewrap "+
			"(on Debian or Ubuntu: apt-get install bubblewrap), or set permissions: %s for this session to run it without a sandbox",
			cmp.Or(clipText(res.Stderr+res.Stdout, 300), fmt.Sprintf("exit status %d", res.ExitCode)), config.PermissionsFull)
	}
	return nil
}

// receive routes one line from the server: responses to their callers,
// requests answered at once, notifications queued for the running turn.
func (s *codexServer) receive(line []byte) {
	m, ok := ParseCodexMessage(line)
	if !ok {
		return
	}
	switch {
	case m.IsRequest():
		result, rpcErr := CodexAnswer(m.Method, s.grant)
		reply := map[string]any{"id": m.ID}
		if rpcErr != nil {
			reply["error"] = rpcErr
		} else {
			reply["result"] = result
		}
		_ = s.send(reply)
	case len(m.ID) > 0:
		s.mu.Lock()
		ch := s.pending[string(m.ID)]
		delete(s.pending, string(m.ID))
		s.mu.Unlock()
		if ch != nil {
			ch <- m
		}
	case strings.HasSuffix(m.Method, "Delta") || strings.HasSuffix(m.Method, "/delta"):
		// Streaming fragments: the completed item carries the whole.
	default:
		s.mu.Lock()
		s.notes = append(s.notes, m)
		s.mu.Unlock()
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

func (s *codexServer) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return s.write(b)
}

// call sends a request and waits for its response, decoding the result into
// out (nil: ignore it).
func (s *codexServer) call(ctx context.Context, method string, params, out any) error {
	s.mu.Lock()
	s.nextID++
	id := strconv.FormatInt(s.nextID, 10)
	ch := make(chan CodexMessage, 1)
	s.pending[id] = ch
	s.mu.Unlock()
	if err := s.send(map[string]any{"id": json.RawMessage(id), "method": method, "params": params}); err != nil {
		return s.deadError(fmt.Sprintf("codex: %s: %v", method, err))
	}
	select {
	case m := <-ch:
		if m.Error != nil {
			return AgentFailed("codex: %s: %s (code %d)", method, m.Error.Message, m.Error.Code)
		}
		if out != nil {
			if err := json.Unmarshal(m.Result, out); err != nil {
				return AgentFailed("codex: %s: unexpected answer: %v", method, err)
			}
		}
		return nil
	case <-s.exited:
		return s.deadError("codex: the app-server exited during " + method)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// next waits for notifications and returns those queued.
func (s *codexServer) next(ctx context.Context) ([]CodexMessage, error) {
	for {
		s.mu.Lock()
		notes := s.notes
		s.notes = nil
		s.mu.Unlock()
		if len(notes) > 0 {
			return notes, nil
		}
		select {
		case <-s.wake:
		case <-s.exited:
			return nil, s.deadError("codex: the app-server exited mid-turn")
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// drain drops notifications left from between turns.
func (s *codexServer) drain() {
	s.mu.Lock()
	s.notes = nil
	s.mu.Unlock()
}

func (s *codexServer) end() { s.kill() }

func (s *codexServer) threadID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.thread
}

func (s *codexServer) setThread(id string) {
	s.mu.Lock()
	s.thread = id
	s.mu.Unlock()
}

func (s *codexServer) lastUsed() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used
}

func (s *codexServer) setUsed(n int64) {
	s.mu.Lock()
	s.used = n
	s.mu.Unlock()
}

// window records the thread's window when a turn reported one and returns
// the last one known.
func (s *codexServer) window(w int64) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w > 0 {
		s.win = w
	}
	return s.win
}

// codexKeys are the variables Codex takes an OpenAI API key from.
var codexKeys = []string{"OPENAI_API_KEY", "CODEX_API_KEY"}

// codexCredentials finds what Codex logs in with. Its model provider (a
// -c model_provider= override in the session's args, else config.toml's
// model_provider, else OpenAI) decides: OpenAI takes a key in the
// environment or a `codex login` in CODEX_HOME; a provider of the user's
// own takes the variable its env_key names, or nothing when it names none.
func codexCredentials(env map[string]string, p Process) Check {
	c := Check{Name: "credentials", Status: CheckOK}
	home, provider, key := codexProvider(env, p)
	if provider != "openai" {
		switch {
		case key == "":
			c.Text = "model provider " + provider + " names no env_key: it takes no key"
		case env[key] != "":
			c.Text = key + " is set, for model provider " + provider
		default:
			c.Status, c.ErrType = CheckFail, ErrUnknownAgent
			c.Text = fmt.Sprintf("codex: model provider %s takes its key from %s, which is not set: set it in agents.codex.env or nid's own environment", provider, key)
		}
		return c
	}
	if k := firstSet(env, codexKeys...); k != "" {
		c.Text = k + " is set"
		return c
	}
	if auth := filepath.Join(home, "auth.json"); exists(auth) {
		c.Text = "a login in " + auth
		return c
	}
	c.Status, c.ErrType = CheckFail, ErrUnknownAgent
	c.Text = fmt.Sprintf("codex: no credentials for Codex: no %s in its environment and no login in %s; "+
		"set OPENAI_API_KEY (agents.codex.env, or nid's own environment), or log in with codex login as this user with CODEX_HOME=%s",
		strings.Join(codexKeys, " or "), home, home)
	return c
}

// codexProvider is the CODEX_HOME Codex reads with env, the model provider
// it uses for p, and the variable the provider's env_key names (none for
// OpenAI's own, whose are codexKeys).
func codexProvider(env map[string]string, p Process) (home, provider, key string) {
	home = cmp.Or(env["CODEX_HOME"], filepath.Join(env["HOME"], ".codex"))
	toml := readCodexConfig(filepath.Join(home, "config.toml"))
	provider = cmp.Or(codexOverride(p.Args, "model_provider"), toml[".model_provider"], "openai")
	if provider != "openai" {
		key = cmp.Or(codexOverride(p.Args, "model_providers."+provider+".env_key"), toml["model_providers."+provider+".env_key"])
	}
	return home, provider, key
}

// codexProviderEnv names the variable Codex's model provider takes its key
// from, so that the worker's passes to the agent as OpenAI's does.
func codexProviderEnv(env map[string]string, p Process) []string {
	if _, _, key := codexProvider(env, p); key != "" {
		return []string{key}
	}
	return nil
}

// codexOverride is the value a -c (--config) key=value override in args
// gives key, unquoted; empty when none does.
func codexOverride(args []string, key string) string {
	v := ""
	for i := 0; i+1 < len(args); i++ {
		if args[i] != "-c" && args[i] != "--config" {
			continue
		}
		if k, val, ok := strings.Cut(args[i+1], "="); ok && strings.TrimSpace(k) == key {
			v = tomlUnquote(strings.TrimSpace(val))
		}
	}
	return v
}

// readCodexConfig reads the string values of a config.toml, keyed by
// table and key ("model_providers.local.env_key"; top-level keys as
// ".model_provider"). It reads only what the credentials check needs:
// `key = "string"` lines under [table] headers; anything else is skipped.
func readCodexConfig(path string) map[string]string {
	out := map[string]string{}
	b, err := os.ReadFile(path)
	if err != nil {
		return out
	}
	table := ""
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") && !strings.HasPrefix(line, "[[") {
			var parts []string
			for _, part := range strings.Split(strings.Trim(line, "[] "), ".") {
				parts = append(parts, tomlUnquote(strings.TrimSpace(part)))
			}
			table = strings.Join(parts, ".")
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		v = strings.TrimSpace(v)
		if i := strings.Index(v, " #"); i >= 0 && (strings.HasPrefix(v, "'") || strings.Count(v[:i], `"`)%2 == 0) {
			v = strings.TrimSpace(v[:i])
		}
		if !strings.HasPrefix(v, `"`) && !strings.HasPrefix(v, "'") {
			continue
		}
		out[table+"."+tomlUnquote(strings.TrimSpace(k))] = tomlUnquote(v)
	}
	return out
}

// tomlUnquote is a TOML basic ("...") or literal ('...') string's value,
// or s itself when it is neither.
func tomlUnquote(s string) string {
	if len(s) >= 2 && s[0] == '\'' && s[len(s)-1] == '\'' {
		return s[1 : len(s)-1]
	}
	if len(s) >= 2 && s[0] == '"' {
		if u, err := strconv.Unquote(s); err == nil {
			return u
		}
	}
	return s
}

// codexSandboxCheck checks Codex's own sandbox, which it brings with it.
// With deep it starts the CLI's app-server as a turn would, which runs
// `true` in that sandbox (see probeSandbox), then stops it; a turn does
// the same before its first prompt.
func codexSandboxCheck(ctx context.Context, cli string, p Process, _ map[string]string, deep bool) Check {
	k := KindOf(KindCodex)
	if !p.Sandboxed() {
		return sandboxNotNeeded(k)
	}
	c := Check{Name: "sandbox", Status: CheckOK, Text: "Codex's own (" + codexSandboxMode(p) + "), tried before the session's first turn"}
	if !deep {
		return c
	}
	if cli == "" {
		c.Status, c.Text = CheckWarn, "Codex's own ("+codexSandboxMode(p)+"): not tried, for want of its CLI"
		return c
	}
	if p.TempDir == "" {
		// As a turn has: the session's own temp directory, which its
		// sandbox may write.
		tmp, err := os.MkdirTemp("", "nid-doctor-")
		if err != nil {
			c.Status, c.Text = CheckWarn, "Codex's own ("+codexSandboxMode(p)+"): not tried: "+err.Error()
			return c
		}
		defer os.RemoveAll(tmp)
		p.TempDir = tmp
	}
	cmd, err := codexCommand(p, MCPAccess{})
	var s *codexServer
	if err == nil {
		s, err = startCodex(ctx, cmd, p)
	}
	if err != nil {
		c.Status, c.Text = CheckFail, oneLine(err.Error(), 400)
		if e, ok := errors.AsType[*Error](err); ok && e.Type == ErrSandboxUnavailable {
			c.ErrType = ErrSandboxUnavailable
		} else {
			c.Text = "codex: could not start the app-server to try its sandbox: " + c.Text
			c.ErrType = ErrUnknownAgent
		}
		return c
	}
	s.kill()
	<-s.exited
	c.Text = "Codex's own (" + codexSandboxMode(p) + "): it ran `true` here"
	return c
}
