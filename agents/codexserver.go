package agents

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"

	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/internal/clip"
)

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
	return codexCLI(p, mcp, "app-server")
}

// codexCLI builds a Codex command, sub its subcommand and arguments (none:
// its interactive CLI), with everything else the session gives it: the
// sandbox's permission profile, the environment, nid's MCP server and the
// args nid.yaml adds. A turn's app-server and a person's attached CLI are
// built here both, so that they differ in nothing else.
func codexCLI(p Process, mcp MCPAccess, sub ...string) (*exec.Cmd, error) {
	path, err := lookCommand(KindCodex, p)
	if err != nil {
		return nil, err
	}
	// Commands in a login shell would get the PATH and variables the
	// profile sets (on many hosts a bare system PATH), not the environment
	// nid gives the agent, with which Claude Code's and exec's commands run.
	args := append(append([]string(nil), sub...), "-c", "allow_login_shell=false")
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
	if p.Sandboxed() && !p.readonly() {
		if err := placeReadOnlyFiles(p); err != nil {
			return nil, err
		}
	}
	args = append(args, codexSandbox(p)...)
	args = append(args, p.Args...)
	// The server outlives the request that starts it: it is not bound to
	// the request's context.
	return newCommand(context.Background(), path, args, p, env), nil
}

// codexOriginator is the name nid's app-server clients give Codex, which
// its rollouts keep as the originator of the threads they start: a
// hand-back tells nid's threads from those a person's CLI started by it.
const codexOriginator = "nid"

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
		"clientInfo":   map[string]string{"name": codexOriginator, "version": "1"},
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
			cmp.Or(clip.Runes(strings.TrimSpace(res.Stderr+res.Stdout), 300), fmt.Sprintf("exit status %d", res.ExitCode)), config.PermissionsFull)
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
