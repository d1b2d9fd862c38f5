package agents

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nid-dev/nid/config"
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

// codexFailure turns a failed turn into the error workflows branch on.
func codexFailure(t *CodexTurn) error {
	msg := t.ErrorMessage
	if msg == "" {
		msg = "turn " + t.Status
	}
	switch {
	case t.ContextFull():
		return ContextFull("codex: the thread no longer fits the context window: %s", msg)
	case t.Error.Refused():
		return AgentFailed("codex: %s (%s)", msg, t.ErrorInfo)
	}
	return fmt.Errorf("codex: %s", msg)
}
