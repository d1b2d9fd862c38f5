package activities

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/nid-dev/nid/config"
)

// Claude drives Claude Code: one `claude -p` process per turn, reading its
// stream-json output. The conversation id is chosen with --session-id on the
// first turn and continued with --resume after, so it survives worker
// restarts. nid's MCP server is added to the user's own as "nid" and all
// its tools are allowed. Compaction is `/compact` as its own resumed
// turn, confirmed only by a compact_boundary line.
type Claude struct {
	mu sync.Mutex
	// windows remembers each session's context window: a /compact turn
	// reports tokens but no window.
	windows map[string]int64
}

// NewClaude returns a Claude Code agent.
func NewClaude() *Claude { return &Claude{windows: map[string]int64{}} }

// Turn runs one `claude -p` process.
func (c *Claude) Turn(ctx context.Context, req TurnRequest) (TurnReport, error) {
	args := []string{}
	if req.Conversation == "" {
		args = append(args, "--session-id", newUUID())
	} else {
		args = append(args, "--resume", req.Conversation)
	}
	limited, retries, answers, calls := false, 0, 0, 0
	st, err := c.run(ctx, req.Process, req.Prompt, args, req.MCPURL, func(s *ClaudeStream) {
		for ; calls < len(s.ToolCalls); calls++ {
			req.toolCalled(s.ToolCalls[calls])
		}
		was := limited
		switch {
		case s.Retries > retries:
			limited = RateLimitStatus(s.RetryStatus)
		case s.Assistants > answers:
			// A response got through after the retries.
			limited = false
		}
		retries, answers = s.Retries, s.Assistants
		if limited != was && req.RateLimited != nil {
			req.RateLimited(limited)
		}
	})
	if err != nil {
		return TurnReport{}, err
	}
	rep := TurnReport{Conversation: st.SessionID, Output: st.Text, RateLimited: st.Retries > 0 && RateLimitStatus(st.RetryStatus),
		BilledTokens: st.Billed, CostUSD: st.CostUSD}
	if rep.Conversation == "" {
		rep.Conversation = req.Conversation
	}
	for _, cb := range st.Compactions {
		if cb.Trigger == "auto" {
			rep.Vendor = &VendorCompaction{BeforeTokens: cb.Pre, AfterTokens: cb.Post}
		}
	}
	rep.Usage = c.usage(req.Session, st)
	return rep, nil
}

// Compact runs `/compact` as its own resumed turn.
func (c *Claude) Compact(ctx context.Context, req CompactRequest) (CompactReport, error) {
	st, err := c.run(ctx, req.Process, "/compact", []string{"--resume", req.Conversation}, req.MCPURL, nil)
	if err != nil {
		return CompactReport{}, err
	}
	rep := CompactReport{Conversation: st.SessionID}
	if rep.Conversation == "" {
		rep.Conversation = req.Conversation
	}
	for _, cb := range st.Compactions {
		if cb.Trigger != "auto" {
			rep.OK = true
			rep.BeforeTokens, rep.AfterTokens = cb.Pre, cb.Post
		}
	}
	if !rep.OK {
		rep.Detail = "claude printed no compact_boundary"
		if st.Text != "" {
			rep.Detail += ": " + clipText(st.Text, 200)
		}
		return rep, nil
	}
	rep.Usage = Usage{UsedTokens: rep.AfterTokens, WindowTokens: c.window(req.Session, st.Window), Source: SourceReported}
	return rep, nil
}

// Stop has nothing to stop: each turn's process ends with the turn.
func (c *Claude) Stop(context.Context, StopRequest) error { return nil }

// run runs one claude process and folds its output. progress, if set, sees
// the stream after every line.
func (c *Claude) run(ctx context.Context, p Process, prompt string, extra []string, mcpURL string, progress func(*ClaudeStream)) (*ClaudeStream, error) {
	path, err := lookCommand(config.AgentClaude, p)
	if err != nil {
		return nil, err
	}
	args := []string{"-p", prompt, "--output-format", "stream-json", "--verbose"}
	args = append(args, extra...)
	if mcpURL != "" {
		cfg, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"nid": map[string]string{"type": "http", "url": mcpURL}}})
		// "mcp__nid" allows every tool of nid's server, so a tool nid adds
		// needs no change here.
		args = append(args, "--mcp-config", string(cfg), "--allowedTools", "mcp__nid")
	}
	if p.Model != "" {
		args = append(args, "--model", p.Model)
	}
	args = append(args, p.Args...)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := newCommand(runCtx, path, args, p, nil)
	st := &ClaudeStream{}
	refused := false
	runErr := runLines(runCtx, config.AgentClaude, cmd, p, func(line []byte) {
		st.Feed(line)
		if !refused && st.Retries > 0 && AuthStatus(st.RetryStatus) {
			refused = true
			cancel()
		}
		if progress != nil {
			progress(st)
		}
	})
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if refused {
		return nil, AgentFailed("claude: the API refused the credentials (status %d %s); check ANTHROPIC_API_KEY or the login under HOME", st.RetryStatus, st.RetryError)
	}
	// The result line says more than the exit status does.
	if st.Result && st.IsError {
		if st.TerminalReason == "prompt_too_long" {
			return nil, ContextFull("claude: the conversation no longer fits the context window (prompt_too_long)")
		}
		msg := clipText(st.Text, 300)
		if st.APIErrorStatus != 0 {
			msg = fmt.Sprintf("API status %d: %s", st.APIErrorStatus, msg)
		}
		if RateLimitStatus(st.APIErrorStatus) || st.APIErrorStatus >= 500 {
			return nil, fmt.Errorf("claude: %s", msg)
		}
		return nil, AgentFailed("claude: %s", msg)
	}
	if runErr != nil {
		return nil, runErr
	}
	if !st.Result {
		return nil, fmt.Errorf("claude ended without a result line")
	}
	if mcpURL != "" && st.MCPStatus != "connected" {
		// The turn still counts; the agent just cannot reach nid's tools.
		loggerFor(ctx).Warn("Claude Code did not connect to nid's MCP server", "status", st.MCPStatus)
	}
	return st, nil
}

// usage is the context record a turn's stream gives.
func (c *Claude) usage(ref SessionRef, st *ClaudeStream) Usage {
	if !st.UsageSeen {
		return Usage{Source: SourceUnknown}
	}
	return Usage{UsedTokens: st.Used, WindowTokens: c.window(ref, st.Window), Source: SourceReported}
}

// window records a session's window when a run reported one and returns the
// last one known.
func (c *Claude) window(ref SessionRef, w int64) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w > 0 {
		c.windows[ref.WorkflowID] = w
	}
	return c.windows[ref.WorkflowID]
}

// newUUID returns a random version 4 UUID, the form --session-id takes.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func clipText(s string, n int) string {
	s = strings.TrimSpace(s)
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
