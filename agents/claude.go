package agents

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/internal/clip"
)

// Claude drives Claude Code: one long-lived `claude -p --input-format
// stream-json` process per session, which reads one user message per line
// of its stdin (the prompt JSON-encoded, so no prompt can end its line or
// add a message) and prints each turn's stream-json lines, ending with a
// result line. The conversation id is chosen with --session-id when a
// conversation starts and continued with --resume by any later process, so
// it survives worker restarts. nid's MCP server is added to the user's own
// as "nid", its token sent as a bearer header read from the process's
// environment, and all its tools are allowed. Compaction is `/compact` sent
// as a message, confirmed only by a compact_boundary line.
//
// A process serves one conversation with what it was started with (see
// commandKey). A turn of another conversation (a handoff's fresh one, a
// late retry of an old one), or one that would start it differently
// (nid.yaml reloaded, another MCP token), closes it and starts a new one
// that resumes the conversation; so does a turn after the process died,
// was killed at a timeout or sat idle for liveIdleTimeout. A process asked
// to end gets its stdin closed, so it saves its transcript and exits; the
// next one of the session waits for that, so two never run on one
// conversation.
//
// What the agent may change is Claude Code's own business, set through
// --settings and --permission-mode (see claudeSandbox).
type Claude struct {
	mu sync.Mutex
	// windows remembers each session's context window: a /compact turn
	// reports tokens but no window.
	windows map[string]int64
	procs   *liveProcs[*claudeProc]
}

// NewClaude returns a Claude Code agent.
func NewClaude() *Claude {
	return &Claude{windows: map[string]int64{}, procs: newLiveProcs[*claudeProc]()}
}

// Turn sends one prompt to the session's process.
func (c *Claude) Turn(ctx context.Context, req TurnRequest) (TurnReport, error) {
	limited, retries, answers, calls := false, 0, 0, 0
	st, err := c.run(ctx, req.Session, req.Process, req.MCP, req.Conversation, req.Prompt, func(s *ClaudeStream) {
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

// Compact sends `/compact` to the session's process.
func (c *Claude) Compact(ctx context.Context, req CompactRequest) (CompactReport, error) {
	st, err := c.run(ctx, req.Session, req.Process, req.MCP, req.Conversation, "/compact", nil)
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
			rep.Detail += ": " + clip.Runes(strings.TrimSpace(st.Text), 200)
		}
		return rep, nil
	}
	rep.Usage = Usage{UsedTokens: rep.AfterTokens, WindowTokens: c.window(req.Session, st.Window), Source: SourceReported, Model: st.Model}
	return rep, nil
}

// Stop closes the session's process and returns once it has exited, so
// that nothing of the old conversation still runs when the next one
// starts.
func (c *Claude) Stop(ctx context.Context, req StopRequest) error {
	return c.procs.stop(ctx, req.Session.WorkflowID)
}

// Close closes every session's process and returns once they have exited;
// the conversations stay with Claude Code, to be resumed by the next
// worker.
func (c *Claude) Close() error {
	c.procs.stopAll()
	return nil
}

// run sends prompt to the session's process for conversation conv (empty:
// a new one), starting the process as needed, and folds the turn's lines
// until its result line. progress, if set, sees the stream after every
// line of the turn.
func (c *Claude) run(ctx context.Context, ref SessionRef, p Process, mcp MCPAccess, conv, prompt string, progress func(*ClaudeStream)) (*ClaudeStream, error) {
	cmd, err := claudeCommand(p, mcp)
	if err != nil {
		return nil, err
	}
	proc, done, err := c.procs.use(ctx, ref.WorkflowID)
	if err != nil {
		return nil, err
	}
	defer done()
	if proc != nil && (conv == "" || proc.conv != conv || proc.key != commandKey(cmd) || !proc.alive()) {
		c.procs.drop(ref.WorkflowID, proc)
		proc.end()
		if err := proc.wait(ctx); err != nil {
			return nil, err
		}
		proc = nil
	}
	if proc == nil {
		if proc, err = startClaude(cmd, p, conv); err != nil {
			return nil, err
		}
		c.procs.set(ref.WorkflowID, proc)
	}

	t := &claudeTurn{id: newUUID(), progress: progress, st: &ClaudeStream{}, ended: make(chan struct{})}
	proc.setTurn(t)
	defer proc.setTurn(nil)
	// A process that died cannot take it (its exit says why), and one that
	// stopped reading would hold the write until the turn's timeout or end
	// kills it, which closes its stdin.
	go func() { _ = proc.write(claudeMessage(t.id, prompt)) }()
	var timeout <-chan time.Time
	if p.Timeout > 0 {
		timer := time.NewTimer(p.Timeout)
		defer timer.Stop()
		timeout = timer.C
	}
	// A turn cut short ends the process at once; the next turn resumes
	// the conversation in a new one once this one is gone.
	kill := func() {
		c.procs.drop(ref.WorkflowID, proc)
		proc.kill()
		<-proc.exited
	}
	select {
	case <-t.ended:
	case <-proc.exited:
	case <-ctx.Done():
		kill()
		return nil, ctx.Err()
	case <-timeout:
		kill()
		return nil, turnTimedOut(KindClaude, p.Timeout)
	}
	var exitErr error
	select {
	case <-t.ended:
		if t.refused {
			kill()
		}
	default:
		// It exited before the turn's result: every line it printed has
		// been read.
		c.procs.drop(ref.WorkflowID, proc)
		exitErr = proc.exitError(KindClaude)
		if exitErr == nil {
			exitErr = fmt.Errorf("claude ended without a result line%s", quote(proc.stderr.String()))
		}
	}
	st := t.st
	if st.SessionID != "" {
		proc.conv = st.SessionID
	}
	// total_cost_usd is the process's, summed over its turns.
	st.CostUSD = proc.charge(st.CostUSD)
	return claudeOutcome(ctx, st, t.refused, exitErr, mcp)
}

// claudeOutcome is what a turn's stream and, when the process ended
// before the turn did, its exit say of the turn.
func claudeOutcome(ctx context.Context, st *ClaudeStream, refused bool, exitErr error, mcp MCPAccess) (*ClaudeStream, error) {
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
		msg := clip.Runes(strings.TrimSpace(st.Text), 300)
		if st.APIErrorStatus != 0 {
			msg = fmt.Sprintf("API status %d: %s", st.APIErrorStatus, msg)
		}
		if RateLimitStatus(st.APIErrorStatus) || st.APIErrorStatus >= 500 {
			return nil, fmt.Errorf("claude: %s", msg)
		}
		return nil, AgentFailed("claude: %s", msg)
	}
	if exitErr != nil {
		return nil, exitErr
	}
	if mcp.URL != "" && st.MCPStatus != "connected" {
		// The turn still counts; the agent just cannot reach nid's tools.
		loggerFor(ctx).Warn("Claude Code did not connect to nid's MCP server", "status", st.MCPStatus)
	}
	return st, nil
}

// claudeCommand builds the command of a session's process, all but the
// conversation it resumes (startClaude adds that).
func claudeCommand(p Process, mcp MCPAccess) (*exec.Cmd, error) {
	// --replay-user-messages has Claude Code say when each message's turn
	// starts (see claudeTurn).
	return claudeCLI(p, mcp, "-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose", "--replay-user-messages")
}

// claudeCLI builds a Claude Code command with mode's arguments (none: its
// interactive CLI) and everything else the session gives it: the sandbox
// and permissions, the environment, nid's MCP server, the model and the
// args nid.yaml adds. A turn's process and a person's attached CLI are
// built here both, so that they differ in nothing else.
func claudeCLI(p Process, mcp MCPAccess, mode ...string) (*exec.Cmd, error) {
	path, err := lookCommand(KindClaude, p)
	if err != nil {
		return nil, err
	}
	args := append([]string(nil), mode...)
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
	// The process outlives the turn that starts it: it is not bound to
	// the turn's context.
	return newCommand(context.Background(), path, args, p, env), nil
}

// claudeProc is one session's running Claude Code.
type claudeProc struct {
	*liveProc
	// key is what it was started with (commandKey), before the
	// conversation was added.
	key string

	// conv is the conversation it serves, the newest session_id it
	// printed, and cost the last total_cost_usd; only the request that
	// uses the process (liveProcs.use) touches them.
	conv string
	cost float64

	mu sync.Mutex
	// turn reads its lines while a turn runs; between turns they are
	// dropped.
	turn *claudeTurn
}

// startClaude starts cmd on conversation conv, a new one when empty.
// onClaudeConversation points cmd at conversation conv, checked first,
// since it goes on the command line, or at a new one when conv is empty,
// and returns the conversation it names.
func onClaudeConversation(cmd *exec.Cmd, conv string) (string, error) {
	if conv == "" {
		conv = newUUID()
		cmd.Args = append(cmd.Args, "--session-id", conv)
		return conv, nil
	}
	if err := CheckConversation(conv); err != nil {
		return "", err
	}
	cmd.Args = append(cmd.Args, "--resume", conv)
	return conv, nil
}

func startClaude(cmd *exec.Cmd, p Process, conv string) (*claudeProc, error) {
	key := commandKey(cmd)
	conv, err := onClaudeConversation(cmd, conv)
	if err != nil {
		return nil, err
	}
	proc := &claudeProc{key: key, conv: conv}
	proc.liveProc = newLiveProc(cmd)
	if err := proc.start(p.PidDir, proc.receive); err != nil {
		return nil, AgentFailed("claude: %v", err)
	}
	return proc, nil
}

func (p *claudeProc) end() { p.close() }

func (p *claudeProc) receive(line []byte) {
	p.mu.Lock()
	t := p.turn
	p.mu.Unlock()
	if t != nil {
		t.feed(line)
	}
}

func (p *claudeProc) setTurn(t *claudeTurn) {
	p.mu.Lock()
	p.turn = t
	p.mu.Unlock()
}

// charge records the process's total cost so far and returns what of it
// is new since the last result.
func (p *claudeProc) charge(total float64) float64 {
	if total <= p.cost {
		return 0
	}
	turn := total - p.cost
	p.cost = total
	return turn
}

// claudeTurn is one message's turn, told by the process's lines. With
// --replay-user-messages Claude Code names the message it takes up (a
// command_lifecycle line with the uuid nid gave the message), and the
// first result line after that ends its turn. Lines before it are not the
// turn's (the end of an earlier turn, one Claude Code started by itself):
// they are dropped once it starts, and kept only to say why a process that
// exits before it (a sandbox that cannot start) failed.
type claudeTurn struct {
	id       string
	progress func(*ClaudeStream)
	// ended is closed at the turn's result line, or at an answer that
	// means the process must go (refused).
	ended chan struct{}
	// Only the process's reader touches these until ended is closed or
	// the process has exited.
	st      *ClaudeStream
	started bool
	over    bool
	// refused says the API refused the credentials or the sandbox cannot
	// run commands: Claude Code would retry, or work on blind.
	refused bool
}

func (t *claudeTurn) feed(line []byte) {
	if t.over {
		return
	}
	if !t.started {
		if claudeTurnStarts(line, t.id) {
			t.started, t.st = true, &ClaudeStream{}
			return
		}
		t.st.Feed(line)
		return
	}
	t.st.Feed(line)
	st := t.st
	t.refused = st.Retries > 0 && AuthStatus(st.RetryStatus) || st.SandboxFailure != ""
	if t.progress != nil {
		t.progress(st)
	}
	if st.Result || t.refused {
		t.over = true
		close(t.ended)
	}
}

// claudeMessage is the stdin line of one user message: the prompt as one
// text block, JSON-encoded, so that nothing in it can end the line.
func claudeMessage(id, prompt string) []byte {
	type text struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	type message struct {
		Role    string `json:"role"`
		Content []text `json:"content"`
	}
	b, _ := json.Marshal(struct {
		Type    string  `json:"type"`
		UUID    string  `json:"uuid"`
		Message message `json:"message"`
	}{"user", id, message{"user", []text{{"text", prompt}}}})
	return b
}

// loopbackHosts are the names and addresses of this host's loopback, which
// Claude Code's sandbox proxy refuses to commands even where network: true
// allows every domain.
var loopbackHosts = []string{"localhost", "*.localhost", "127.0.0.1", "0.0.0.0", "[::1]", "[::]"}

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
// run commands unsandboxed on a host without bubblewrap. Commands cannot
// read nid's state directory but for the session's own places in it
// (readPolicy), and its Read tool is denied nid's secrets, whatever the
// user's settings allow. The files that say where a worktree's repository
// is and what git runs there (gitReadOnly) are denied to writes: Claude
// Code keeps them read-only by itself today, and nid names them so as not
// to depend on it. Network access is Claude Code's default, none (its
// proxy allows no domain), unless Process.Network allows every domain but
// loopback. These settings come on the command line, above the user's
// settings files, and hold no secret; the project's settings files are
// not read at all in a sandbox.
func claudeSandbox(p Process) []string {
	if !p.Sandboxed() {
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
		// Every domain but this host's own: its proxy would otherwise
		// carry a command to the Temporal frontend and nid's HTTP port on
		// 127.0.0.1 (names that resolve to loopback it refuses by itself).
		sandbox["network"] = map[string]any{"allowedDomains": []string{"*"}, "deniedDomains": loopbackHosts}
	}
	fs := map[string]any{}
	if p.TempDir != "" {
		fs["allowWrite"] = []string{p.TempDir}
	}
	deny := gitReadOnly(p)
	mode := "acceptEdits"
	if p.readonly() {
		mode = "default"
		deny = append(deny, WorkDir(p))
		if gitDir, common := gitDirs(p); gitDir != "" {
			deny = append(deny, gitDir, common)
		}
	}
	if len(deny) > 0 {
		fs["denyWrite"] = slices.Compact(deny)
	}
	denyRead, allowRead := readPolicy(p)
	if len(denyRead) > 0 {
		fs["denyRead"], fs["allowRead"] = denyRead, allowRead
	}
	if len(fs) > 0 {
		sandbox["filesystem"] = fs
	}
	perms := map[string]any{"allow": []string{"Bash"}}
	if p.StateDir != "" {
		// The sandbox confines commands; Claude Code's own Read tool obeys
		// its permission rules instead.
		var rules []string
		for _, f := range stateSecrets {
			rules = append(rules, "Read(/"+filepath.Join(p.StateDir, f)+")")
		}
		perms["deny"] = rules
	}
	settings, _ := json.Marshal(map[string]any{
		// Some commands (ones Claude Code cannot parse, say) still ask for
		// approval under auto-allow; inside the sandbox they may all run.
		"permissions": perms,
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
	c.Status, c.ErrType = CheckFail, ErrUnknownAgent
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
	if !p.Sandboxed() {
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
		c.Status, c.ErrType = CheckFail, ErrSandboxUnavailable
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
		c.Status, c.ErrType = CheckFail, ErrSandboxUnavailable
		c.Text = fmt.Sprintf("claude: bubblewrap cannot make a sandbox on this host (%s: %s): Claude Code's sandbox runs commands with it in a user namespace; "+
			"allow unprivileged user namespaces or install a working bubblewrap, or set permissions: %s for this session to run it without a sandbox",
			err, cmp.Or(oneLine(string(out), 200), "no message"), config.PermissionsFull)
		return c
	}
	c.Text += ": bubblewrap runs a sandbox here"
	return c
}
