package activities

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nid-dev/nid/config"
)

// Claude drives Claude Code: one `claude -p` process per turn, the prompt
// on its stdin (never argv: a prompt may start with "-" or exceed what a
// command line holds), reading its stream-json output. The conversation id
// is chosen with --session-id on the first turn and continued with --resume
// after, so it survives worker restarts. nid's MCP server is added to the
// user's own as "nid", its token sent as a bearer header read from the
// process's environment, and all its tools are allowed. Compaction is
// `/compact` as its own resumed turn, confirmed only by a compact_boundary
// line.
//
// What the agent may change is Claude Code's own business, set through
// --settings and --permission-mode (see claudeSandbox).
//
// A turn ends at Claude Code's result line: the process then takes a tenth
// of a second more to save its transcript and exit, which the session need
// not wait for. The next process of the session (a turn, a compaction) and
// Stop wait for it instead, so two never run on one conversation.
type Claude struct {
	mu sync.Mutex
	// windows remembers each session's context window: a /compact turn
	// reports tokens but no window.
	windows map[string]int64
	// exits are, by session, closed when its last process has exited.
	exits map[string]<-chan struct{}
}

// NewClaude returns a Claude Code agent.
func NewClaude() *Claude {
	return &Claude{windows: map[string]int64{}, exits: map[string]<-chan struct{}{}}
}

// Turn runs one `claude -p` process.
func (c *Claude) Turn(ctx context.Context, req TurnRequest) (TurnReport, error) {
	args := []string{}
	if req.Conversation == "" {
		args = append(args, "--session-id", newUUID())
	} else {
		args = append(args, "--resume", req.Conversation)
	}
	limited, retries, answers, calls := false, 0, 0, 0
	st, err := c.run(ctx, req.Session, req.Process, req.Prompt, args, req.MCP, func(s *ClaudeStream) {
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
	st, err := c.run(ctx, req.Session, req.Process, "/compact", []string{"--resume", req.Conversation}, req.MCP, nil)
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
	rep.Usage = Usage{UsedTokens: rep.AfterTokens, WindowTokens: c.window(req.Session, st.Window), Source: SourceReported, Model: st.Model}
	return rep, nil
}

// Stop waits for the session's last process to exit: each turn's process
// ends with its turn.
func (c *Claude) Stop(ctx context.Context, req StopRequest) error {
	return c.waitExit(ctx, req.Session)
}

// Close waits for every session's last process to exit.
func (c *Claude) Close() error {
	c.mu.Lock()
	exits := slices.Collect(maps.Values(c.exits))
	c.mu.Unlock()
	for _, e := range exits {
		<-e
	}
	return nil
}

// waitExit waits until the session's last process has exited.
func (c *Claude) waitExit(ctx context.Context, ref SessionRef) error {
	c.mu.Lock()
	e := c.exits[ref.WorkflowID]
	c.mu.Unlock()
	if e == nil {
		return nil
	}
	select {
	case <-e:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run runs one claude process and folds its output. progress, if set, sees
// the stream after every line.
func (c *Claude) run(ctx context.Context, ref SessionRef, p Process, prompt string, extra []string, mcp MCPAccess, progress func(*ClaudeStream)) (*ClaudeStream, error) {
	path, err := lookCommand(KindClaude, p)
	if err != nil {
		return nil, err
	}
	if err := c.waitExit(ctx, ref); err != nil {
		return nil, err
	}
	args := []string{"-p", "--output-format", "stream-json", "--verbose"}
	args = append(args, extra...)
	args = append(args, claudeSandbox(p)...)
	// Claude Code keeps the sockets of its sandbox's proxy in its own temp
	// directory, /tmp/claude-<uid> unless told otherwise, whose path must
	// stay short: the session gets a cache directory, not a temp one.
	env := sandboxEnv(p, map[string]string{"XDG_CACHE_HOME": "cache"})
	if mcp.URL != "" {
		// Claude Code expands ${VAR} in an MCP server's headers from its own
		// environment, so the token never appears on the command line.
		cfg, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"nid": map[string]any{
			"type": "http", "url": mcp.URL, "headers": map[string]string{"Authorization": "Bearer ${" + EnvMCPToken + "}"}}}})
		env[EnvMCPToken] = mcp.Token
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
	// runUntil ends the process when runCtx ends, unless the turn is over
	// first: the command itself must outlive runCtx to exit by itself.
	cmd := newCommand(context.WithoutCancel(runCtx), path, args, p, env)
	cmd.Stdin = strings.NewReader(prompt)
	st := &ClaudeStream{}
	refused := false
	exited, runErr := runUntil(runCtx, KindClaude, cmd, p, func(line []byte) bool {
		st.Feed(line)
		if !refused && (st.Retries > 0 && AuthStatus(st.RetryStatus) || st.SandboxFailure != "") {
			refused = true
			cancel()
		}
		if progress != nil {
			progress(st)
		}
		// A failed result waits for the exit, whose status may say more.
		return st.Result && !st.IsError && !refused
	})
	c.mu.Lock()
	c.exits[ref.WorkflowID] = exited
	c.mu.Unlock()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if st.StartupFailure == claudeSandboxRequired {
		return nil, SandboxUnavailable("claude: Claude Code's sandbox cannot run on this host, so nid did not start the agent: %s. "+
			"Install what it names (on Debian or Ubuntu: apt-get install bubblewrap socat), or set permissions: %s for this session to run it without a sandbox",
			strings.Join(st.Errors, "; "), config.PermissionsFull)
	}
	if st.SandboxFailure != "" {
		return nil, SandboxUnavailable("claude: Claude Code's sandbox cannot run commands on this host, so nid stopped the agent: %s. "+
			"Its sandbox runs them with bubblewrap (bwrap) in a user namespace: allow unprivileged user namespaces or install a working bubblewrap, "+
			"or set permissions: %s for this session to run it without a sandbox", st.SandboxFailure, config.PermissionsFull)
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
	if mcp.URL != "" && st.MCPStatus != "connected" {
		// The turn still counts; the agent just cannot reach nid's tools.
		loggerFor(ctx).Warn("Claude Code did not connect to nid's MCP server", "status", st.MCPStatus)
	}
	return st, nil
}

// claudeSandboxRequired is the startup_failure_reason of a run whose
// sandbox settings say failIfUnavailable and whose sandbox cannot start.
const claudeSandboxRequired = "sandbox_required_unavailable"

// claudeSandbox returns the arguments that give a Claude Code process its
// permissions, all through Claude Code's own mechanisms:
//
//   - workspace: its sandbox (bubblewrap on Linux) around every Bash
//     command, with every command allowed inside it, so the agent runs its
//     builds and tests without approval and its commands cannot write
//     outside the working directory (Claude Code adds a git worktree's own
//     git directory itself, and keeps hooks, git config and its settings
//     files read-only); the acceptEdits mode, so its edit tools change files
//     in the working directory and nowhere else (a write elsewhere needs an
//     approval nobody can give to `claude -p`, so it is refused).
//   - readonly: the same sandbox with the working directory and its git
//     directories read-only too (Claude Code would open a worktree's to
//     commits), and the default mode, so every edit tool call is refused.
//   - full: no sandbox, and every tool allowed.
//
// In both sandboxed modes the sandbox must start or the process refuses to
// run (failIfUnavailable), and no command may leave it
// (allowUnsandboxedCommands false): by default Claude Code would warn and
// run commands unsandboxed on a host without bubblewrap. Network access is
// Claude Code's default, none (its proxy allows no domain), unless
// Process.Network allows every domain. These settings come on the command
// line, above the user's settings files, and hold no secret; the project's
// settings files are not read at all in a sandbox.
func claudeSandbox(p Process) []string {
	if !p.sandboxed() {
		settings, _ := json.Marshal(map[string]any{
			"permissions": map[string]any{"allow": []string{"Bash", "Edit", "Write", "NotebookEdit", "WebFetch"}},
			"sandbox":     map[string]any{"enabled": false},
		})
		return []string{"--settings", string(settings), "--permission-mode", "acceptEdits"}
	}
	sandbox := map[string]any{
		"enabled":                  true,
		"failIfUnavailable":        true,
		"autoAllowBashIfSandboxed": true,
		"allowUnsandboxedCommands": false,
	}
	if p.network() {
		sandbox["network"] = map[string]any{"allowedDomains": []string{"*"}}
	}
	fs := map[string]any{}
	if p.TempDir != "" {
		fs["allowWrite"] = []string{p.TempDir}
	}
	mode := "acceptEdits"
	if p.readonly() {
		mode = "default"
		deny := []string{workDir(p)}
		if gitDir, common := gitDirs(p); gitDir != "" {
			deny = append(deny, gitDir, common)
		}
		fs["denyWrite"] = slices.Compact(deny)
	}
	if len(fs) > 0 {
		sandbox["filesystem"] = fs
	}
	settings, _ := json.Marshal(map[string]any{
		// Some commands (ones Claude Code cannot parse, say) still ask for
		// approval under auto-allow; inside the sandbox they may all run.
		"permissions": map[string]any{"allow": []string{"Bash"}},
		"sandbox":     sandbox,
	})
	// Only the user's own settings files: the project's (.claude/settings*.json
	// and .mcp.json) are in the working directory, where agents write, and
	// the hooks and MCP servers they name run outside the sandbox. Claude
	// Code keeps its own agent from writing them, not another agent sharing
	// the directory (Codex's sandbox leaves them writable) or a checkout.
	return []string{"--settings", string(settings), "--setting-sources", "user", "--permission-mode", mode}
}

// usage is the context record a turn's stream gives.
func (c *Claude) usage(ref SessionRef, st *ClaudeStream) Usage {
	if !st.UsageSeen {
		return Usage{Source: SourceUnknown}
	}
	return Usage{UsedTokens: st.Used, WindowTokens: c.window(ref, st.Window), Source: SourceReported, Model: st.Model}
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

// claudeKeys are the variables Claude Code takes an API key or token from.
var claudeKeys = []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"}

// claudeClouds are the variables that send Claude Code to a cloud's own
// API, whose credentials the cloud's tools hold.
var claudeClouds = []struct{ env, cloud string }{
	{"CLAUDE_CODE_USE_BEDROCK", "Amazon Bedrock"}, {"CLAUDE_CODE_USE_VERTEX", "Google Vertex AI"}, {"CLAUDE_CODE_USE_FOUNDRY", "Microsoft Foundry"},
}

// claudeCredentials finds what Claude Code logs in with: a key in its
// environment, a cloud's API, or a login (`claude` then /login) in its
// configuration directory: the credentials file on Linux, the account
// recorded in .claude.json where the key itself is in the system's keychain
// (macOS), or an apiKeyHelper in its settings.
func claudeCredentials(env map[string]string, _ Process) Check {
	c := Check{Name: "credentials", Status: CheckOK}
	if k := firstSet(env, claudeKeys...); k != "" {
		c.Text = k + " is set"
		return c
	}
	for _, cl := range claudeClouds {
		if env[cl.env] != "" && env[cl.env] != "0" {
			c.Text = cl.env + " is set: Claude Code uses " + cl.cloud + " with that cloud's own credentials"
			return c
		}
	}
	home := env["HOME"]
	dir := cmp.Or(env["CLAUDE_CONFIG_DIR"], filepath.Join(home, ".claude"))
	state := filepath.Join(home, ".claude.json")
	if env["CLAUDE_CONFIG_DIR"] != "" {
		state = filepath.Join(dir, ".claude.json")
	}
	switch {
	case home == "" && env["CLAUDE_CONFIG_DIR"] == "":
	case exists(filepath.Join(dir, ".credentials.json")):
		c.Text = "a login in " + filepath.Join(dir, ".credentials.json")
		return c
	case fileHas(state, "oauthAccount", "primaryApiKey"):
		c.Text = "a login recorded in " + state
		return c
	case fileHas(filepath.Join(dir, "settings.json"), "apiKeyHelper"):
		c.Text = "an apiKeyHelper in " + filepath.Join(dir, "settings.json")
		return c
	}
	c.Status, c.errType = CheckFail, ErrUnknownAgent
	c.Text = fmt.Sprintf("claude: no credentials for Claude Code: no %s in its environment and no login in %s; "+
		"set ANTHROPIC_API_KEY (agents.claude.env, or nid's own environment), or log in by running claude once as this user with HOME=%s",
		strings.Join(claudeKeys, ", "), dir, cmp.Or(home, "(unset)"))
	return c
}

// claudeSandboxCheck checks what Claude Code's sandbox needs on Linux:
// bubblewrap and socat on the agent's PATH (Claude Code itself refuses to
// start without them, as nid has it: failIfUnavailable), and, with deep,
// that bubblewrap can make a sandbox here, which a host refusing
// unprivileged user namespaces does not let it. Elsewhere (macOS) its
// sandbox is the system's own.
func claudeSandboxCheck(ctx context.Context, _ string, p Process, env map[string]string, deep bool) Check {
	k := KindOf(KindClaude)
	if !p.sandboxed() {
		return sandboxNotNeeded(k)
	}
	c := Check{Name: "sandbox", Status: CheckOK}
	if runtime.GOOS != "linux" {
		c.Text = "Claude Code's own sandbox (" + runtime.GOOS + "'s)"
		return c
	}
	bwrap, okB := lookPathIn("bwrap", env["PATH"])
	socat, okS := lookPathIn("socat", env["PATH"])
	if !okB || !okS {
		var missing []string
		if !okB {
			missing = append(missing, "bubblewrap (bwrap)")
		}
		if !okS {
			missing = append(missing, "socat")
		}
		verb := "is"
		if len(missing) > 1 {
			verb = "are"
		}
		c.Status, c.errType = CheckFail, ErrSandboxUnavailable
		c.Text = fmt.Sprintf("claude: Claude Code's sandbox needs bubblewrap and socat, and %s %s not on the agent's PATH: "+
			"install them (on Debian or Ubuntu: apt-get install bubblewrap socat), or set permissions: %s for this session to run it without a sandbox",
			strings.Join(missing, " and "), verb, config.PermissionsFull)
		return c
	}
	c.Text = "bubblewrap (" + bwrap + ") and socat (" + socat + ")"
	if !deep {
		return c
	}
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := newCommand(pctx, bwrap, []string{"--ro-bind", "/", "/", "--dev", "/dev", "--unshare-net", "--unshare-pid", "--die-with-parent", "true"}, p, nil)
	cmd.Dir = ""
	if out, err := cmd.CombinedOutput(); err != nil {
		c.Status, c.errType = CheckFail, ErrSandboxUnavailable
		c.Text = fmt.Sprintf("claude: bubblewrap cannot make a sandbox on this host (%s: %s): Claude Code's sandbox runs commands with it in a user namespace; "+
			"allow unprivileged user namespaces or install a working bubblewrap, or set permissions: %s for this session to run it without a sandbox",
			err, cmp.Or(oneLine(string(out), 200), "no message"), config.PermissionsFull)
		return c
	}
	c.Text += ": bubblewrap runs a sandbox here"
	return c
}
