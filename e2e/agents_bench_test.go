package e2e

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"

	"github.com/nid-dev/nid/activities"
	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/internal/fakemodel"
	"github.com/nid-dev/nid/worker"
	"github.com/nid-dev/nid/workflows"
)

// BenchmarkAgents compares a turn of the real Claude Code and Codex CLIs,
// pinned in agents/testdata/agents, run by hand with the same turn run
// through nid up, against a fake model on 127.0.0.1 that answers at once,
// so the CLI's own work is all a turn costs. By hand is `claude -p
// --resume` once per turn, and one `codex app-server` thread over JSON-RPC;
// through nid is a session with no rotation due that is sent each prompt as
// `nid send` sends it, timed from the message reaching the session to the
// session having folded the turn's report (the times Temporal recorded).
// The two alternate turn by turn, so the machine's noise hits both. It
// prints the median and p90 seconds per turn of each and their ratio, with
// the goals beside them. NID_BENCH_TURNS sets the turns of each (default
// 20); the first of each is a warm-up and is not counted.
func BenchmarkAgents(b *testing.B) {
	turns := 20
	if n, err := strconv.Atoi(os.Getenv("NID_BENCH_TURNS")); err == nil && n > 0 {
		turns = n
	}
	var lines []string
	for _, a := range []benchAgent{claudeBench(), codexBench()} {
		b.Run(a.kind, func(b *testing.B) {
			bin := agentCLI(b, a.kind)
			model := fakemodel.Start(b)
			bare := a.bare(b, bin, model)
			nid := startNidAgent(b, a, bin, model)
			var byHand, through []time.Duration
			for i := 0; i <= turns; i++ {
				prompt := fmt.Sprintf("turn %d: say done", i)
				first := func() { byHand = append(byHand, bare.turn(b, prompt)) }
				second := func() { through = append(through, nid.turn(b, prompt)) }
				if i%2 == 1 {
					first, second = func() { through = append(through, nid.turn(b, prompt)) }, func() { byHand = append(byHand, bare.turn(b, prompt)) }
				}
				first()
				second()
			}
			bh, th := summarize(byHand[1:]), summarize(through[1:])
			ratio := th.median.Seconds() / bh.median.Seconds()
			b.ReportMetric(bh.median.Seconds(), "s-bare-median")
			b.ReportMetric(th.median.Seconds(), "s-nid-median")
			b.ReportMetric(ratio, "ratio")
			verdict := "met"
			if ratio > a.goal {
				verdict = "NOT met"
			}
			lines = append(lines,
				fmt.Sprintf("%-7s by hand  median %.3fs  p90 %.3fs  (%d turns, %.3f–%.3fs)", a.kind, bh.median.Seconds(), bh.p90.Seconds(), bh.n, bh.min.Seconds(), bh.max.Seconds()),
				fmt.Sprintf("%-7s nid      median %.3fs  p90 %.3fs  (%d turns, %.3f–%.3fs)", a.kind, th.median.Seconds(), th.p90.Seconds(), th.n, th.min.Seconds(), th.max.Seconds()),
				fmt.Sprintf("%-7s ratio    %.3f of the median  (p90: %.3f)   goal: at most %.2f  %s", a.kind, ratio, th.p90.Seconds()/bh.p90.Seconds(), a.goal, verdict),
				fmt.Sprintf("%-7s where nid's turn went (medians): %s", a.kind, nid.breakdown()))
		})
	}
	fmt.Println("seconds per turn, the real CLIs against a model that answers at once:")
	for _, l := range lines {
		fmt.Println("  " + l)
	}
}

// benchAgent is one CLI as the benchmark runs it.
type benchAgent struct {
	kind string
	goal float64
	// model is the model nid's adapter is told to run.
	model string
	// env is the CLI's environment for a private home, pointed at model.
	env func(home, tmp string, model *fakemodel.Model) map[string]string
	// bare starts the CLI by hand.
	bare func(b *testing.B, bin string, model *fakemodel.Model) bareAgent
	// settings are the extra keys of its agents: entry in nid.yaml.
	settings string
}

type bareAgent interface {
	turn(b *testing.B, prompt string) time.Duration
}

// privateDirs makes a home and a short temp directory (Claude Code keeps
// its sandbox's sockets there, so the path must stay short).
func privateDirs(b *testing.B) (home, tmp string) {
	home = b.TempDir()
	tmp, err := os.MkdirTemp("", "nidb-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = os.RemoveAll(tmp) })
	return home, tmp
}

// environ is the environment a CLI of the kind run by hand gets: what the
// worker passes of its own to the agents it runs, with env on top. A bare PATH made the comparison unfair: Codex reads the
// CA bundle SSL_CERT_FILE names for every model call, about 7 ms a turn
// here, which a person's shell and nid's worker both pay.
func environ(kind string, env map[string]string) []string {
	all := agents.ProcessEnv(agents.Process{Kind: kind, Env: env}, nil)
	var out []string
	for _, k := range slices.Sorted(maps.Keys(all)) {
		out = append(out, k+"="+all[k])
	}
	return out
}

func claudeBench() benchAgent {
	a := benchAgent{kind: agents.KindClaude, goal: 1.03, model: "claude-sonnet-4-5", settings: "    model: claude-sonnet-4-5\n"}
	a.env = func(home, tmp string, model *fakemodel.Model) map[string]string {
		env := model.ClaudeEnv()
		env["HOME"], env["TMPDIR"], env["CLAUDE_CODE_TMPDIR"] = home, tmp, tmp
		return env
	}
	a.bare = func(b *testing.B, bin string, model *fakemodel.Model) bareAgent {
		home, tmp := privateDirs(b)
		return &bareClaude{bin: bin, dir: b.TempDir(), env: environ(a.kind, a.env(home, tmp, model))}
	}
	return a
}

// bareClaude runs `claude -p` once per turn, as a person scripting it
// would: --session-id on the first turn, --resume after.
type bareClaude struct {
	bin, dir string
	env      []string
	session  string
}

func (c *bareClaude) turn(b *testing.B, prompt string) time.Duration {
	args := []string{"-p", "--output-format", "stream-json", "--verbose", "--model", "claude-sonnet-4-5"}
	if c.session == "" {
		c.session = uuid.NewString()
		args = append(args, "--session-id", c.session)
	} else {
		args = append(args, "--resume", c.session)
	}
	cmd := exec.Command(c.bin, args...)
	cmd.Dir, cmd.Env, cmd.Stdin = c.dir, c.env, strings.NewReader(prompt)
	start := time.Now()
	out, err := cmd.Output()
	took := time.Since(start)
	if err != nil || !strings.Contains(string(out), `"type":"result"`) {
		b.Fatalf("claude by hand: %v\n%s", err, out)
	}
	return took
}

func codexBench() benchAgent {
	a := benchAgent{kind: agents.KindCodex, goal: 1.10}
	a.env = func(home, tmp string, model *fakemodel.Model) map[string]string {
		codexHome := filepath.Join(home, ".codex")
		cfg := model.CodexConfig()
		if err := os.MkdirAll(codexHome, 0o755); err == nil {
			_ = os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(cfg), 0o644)
		}
		return map[string]string{"HOME": home, "TMPDIR": tmp, "CODEX_HOME": codexHome, fakemodel.CodexAPIKeyEnv: "bench-key"}
	}
	a.bare = func(b *testing.B, bin string, model *fakemodel.Model) bareAgent {
		home, tmp := privateDirs(b)
		return startBareCodex(b, bin, b.TempDir(), environ(a.kind, a.env(home, tmp, model)))
	}
	return a
}

// bareCodex is one `codex app-server` with one thread, driven over
// JSON-RPC as a person's own script would.
type bareCodex struct {
	in     io.WriteCloser
	out    *bufio.Scanner
	thread string
	id     int
}

func startBareCodex(b *testing.B, bin, dir string, env []string) *bareCodex {
	cmd := exec.Command(bin, "app-server")
	cmd.Dir, cmd.Env = dir, env
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = in.Close(); _ = cmd.Process.Kill(); _ = cmd.Wait() })
	c := &bareCodex{in: in, out: bufio.NewScanner(out)}
	c.out.Buffer(make([]byte, 1<<20), 16<<20)
	c.call(b, "initialize", map[string]any{"clientInfo": map[string]any{"name": "bench", "version": "1"}, "capabilities": map[string]any{"experimentalApi": true}})
	c.send(b, map[string]any{"method": "initialized"})
	res := c.call(b, "thread/start", map[string]any{"cwd": dir, "approvalPolicy": "never", "sandbox": "danger-full-access"})
	var started struct {
		Thread struct {
			ID string `json:"id"`
		} `json:"thread"`
	}
	if err := json.Unmarshal(res, &started); err != nil || started.Thread.ID == "" {
		b.Fatalf("codex thread/start: %v %s", err, res)
	}
	c.thread = started.Thread.ID
	return c
}

func (c *bareCodex) send(b *testing.B, msg map[string]any) {
	line, _ := json.Marshal(msg)
	if _, err := c.in.Write(append(line, '\n')); err != nil {
		b.Fatal(err)
	}
}

// call sends a request and reads until its answer, answering any request
// of the server's with a decline (none comes in these turns).
func (c *bareCodex) call(b *testing.B, method string, params any) json.RawMessage {
	c.id++
	c.send(b, map[string]any{"id": c.id, "method": method, "params": params})
	for {
		m := c.read(b)
		if m.ID != nil && m.Method == "" && string(*m.ID) == strconv.Itoa(c.id) {
			if m.Error != nil {
				b.Fatalf("codex %s: %s", method, m.Error)
			}
			return m.Result
		}
	}
}

type rpcMessage struct {
	ID     *json.RawMessage `json:"id"`
	Method string           `json:"method"`
	Result json.RawMessage  `json:"result"`
	Error  json.RawMessage  `json:"error"`
}

func (c *bareCodex) read(b *testing.B) rpcMessage {
	if !c.out.Scan() {
		b.Fatalf("codex app-server ended: %v", c.out.Err())
	}
	var m rpcMessage
	if err := json.Unmarshal(c.out.Bytes(), &m); err != nil {
		b.Fatalf("codex app-server printed %q: %v", c.out.Text(), err)
	}
	if m.ID != nil && m.Method != "" {
		c.send(b, map[string]any{"id": m.ID, "result": map[string]any{"decision": "decline"}})
	}
	return m
}

func (c *bareCodex) turn(b *testing.B, prompt string) time.Duration {
	start := time.Now()
	c.call(b, "turn/start", map[string]any{"threadId": c.thread, "input": []map[string]string{{"type": "text", "text": prompt}}})
	for c.read(b).Method != "turn/completed" {
	}
	return time.Since(start)
}

// nidAgent is a session of the agent's kind on nid up, taking a turn for
// each message.
type nidAgent struct {
	s      *site
	c      client.Client
	events client.HistoryEventIterator
	// phases are, per turn, how long from the message to the turn's
	// activity being scheduled, from then to it starting, its run, and from
	// its end to the session having folded its report.
	phases [][4]time.Duration
}

func startNidAgent(b *testing.B, a benchAgent, bin string, model *fakemodel.Model) *nidAgent {
	home, tmp := privateDirs(b)
	vars := a.env(home, tmp, model)
	var env strings.Builder
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		fmt.Fprintf(&env, "      %s: %q\n", k, vars[k])
	}
	s := newSite(b, fmt.Sprintf(`  bench:
    workdir: %s
    rotate: {mode: off}
    sessions:
      - {agent: %s, name: one}
`, b.TempDir(), a.kind))
	s.top = fmt.Sprintf("agents:\n  %s:\n    command: %s\n%s    env:\n%s", a.kind, bin, a.settings, env.String())
	s.writeConfig()
	s.up()
	s.eventually("the session to be listed", 2*time.Minute, func() bool { _, ok := s.ls()["bench/one"]; return ok })
	n := &nidAgent{s: s, c: s.client()}
	n.events = n.c.GetWorkflowHistory(context.Background(), workflows.SessionID("bench", "one"), "", true, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	return n
}

// turn sends prompt and follows the session's history until the turn's
// report is folded; it returns the time between the two as Temporal
// recorded them.
func (n *nidAgent) turn(b *testing.B, prompt string) time.Duration {
	if err := n.c.SignalWorkflow(context.Background(), workflows.SessionID("bench", "one"), "", workflows.SignalMessage, workflows.Message{Text: prompt}); err != nil {
		b.Fatal(err)
	}
	var signaled, scheduled, started, completed time.Time
	turnID := int64(0)
	for {
		e := n.next(b)
		at := e.GetEventTime().AsTime()
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
			if e.GetWorkflowExecutionSignaledEventAttributes().GetSignalName() == workflows.SignalMessage && signaled.IsZero() {
				signaled = at
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			if e.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() == activities.RunTurnName && !signaled.IsZero() {
				turnID, scheduled = e.GetEventId(), at
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			if turnID != 0 && e.GetActivityTaskStartedEventAttributes().GetScheduledEventId() == turnID {
				started = at
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			if turnID != 0 && e.GetActivityTaskCompletedEventAttributes().GetScheduledEventId() == turnID {
				completed = at
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED, enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
			b.Fatalf("the turn through nid failed: %v", e)
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			if !completed.IsZero() {
				n.phases = append(n.phases, [4]time.Duration{scheduled.Sub(signaled), started.Sub(scheduled), completed.Sub(started), at.Sub(completed)})
				return at.Sub(signaled)
			}
		}
	}
}

func (n *nidAgent) next(b *testing.B) *historypb.HistoryEvent {
	if !n.events.HasNext() {
		b.Fatal("the session's history ended")
	}
	e, err := n.events.Next()
	if err != nil {
		b.Fatal(err)
	}
	return e
}

// breakdown says where the median turn through nid went.
func (n *nidAgent) breakdown() string {
	phases := n.phases[1:]
	at := func(i int) time.Duration {
		var d []time.Duration
		for _, p := range phases {
			d = append(d, p[i])
		}
		return summarize(d).median
	}
	ms := func(i int) string { return fmt.Sprintf("%.1fms", float64(at(i).Microseconds())/1000) }
	return fmt.Sprintf("message to the turn scheduled %s, to it started %s, the turn itself (the CLI and nid's adapter) %s, its report folded %s",
		ms(0), ms(1), ms(2), ms(3))
}

type summary struct {
	n                     int
	median, p90, min, max time.Duration
}

func summarize(d []time.Duration) summary {
	s := slices.Clone(d)
	slices.Sort(s)
	return summary{n: len(s), median: s[len(s)/2], p90: s[(len(s)*9)/10], min: s[0], max: s[len(s)-1]}
}

// BenchmarkAdditions finds where a turn through nid goes, for Claude Code
// and Codex: the same turn by hand and through nid's own adapter with each
// of nid's additions on its own: the permissions (Claude Code's --settings
// with its sandbox and --permission-mode; Codex's workspace-write sandbox),
// nid's MCP server, and both, as a worker runs it. The variants alternate
// turn by turn; it prints the median of each and what it adds to the turn
// by hand.
func BenchmarkAdditions(b *testing.B) {
	turns := 20
	if n, err := strconv.Atoi(os.Getenv("NID_BENCH_TURNS")); err == nil && n > 0 {
		turns = n
	}
	for _, a := range []benchAgent{claudeBench(), codexBench()} {
		b.Run(a.kind, func(b *testing.B) { additions(b, a, turns) })
	}
}

func additions(b *testing.B, a benchAgent, turns int) {
	bin := agentCLI(b, a.kind)
	model := fakemodel.Start(b)
	mcp := benchMCP(b)
	ref := agents.SessionRef{Group: "bench", Name: "one", WorkflowID: workflows.SessionID("bench", "one")}
	adapter := func(permissions string, withMCP bool) func(b *testing.B, prompt string) time.Duration {
		home, tmp := privateDirs(b)
		p := agents.Process{Command: bin, Env: a.env(home, tmp, model), Model: a.model, WorkDir: b.TempDir(), Permissions: permissions,
			TempDir: filepath.Join(tmp, "session")}
		access := agents.MCPAccess{}
		if withMCP {
			access = mcp.Access(ref, 0)
		}
		agent, conv := agents.KindOf(a.kind).New(), ""
		b.Cleanup(func() { _ = agent.Stop(context.Background(), agents.StopRequest{Session: ref, Conversation: conv}) })
		return func(b *testing.B, prompt string) time.Duration {
			start := time.Now()
			rep, err := agent.Turn(context.Background(), agents.TurnRequest{Session: ref, Conversation: conv, Prompt: prompt, Kind: agents.TurnWork, MCP: access, Process: p})
			took := time.Since(start)
			if err != nil {
				b.Fatal(err)
			}
			conv = rep.Conversation
			return took
		}
	}
	bare := a.bare(b, bin, model)
	variants := []struct {
		name string
		turn func(b *testing.B, prompt string) time.Duration
	}{
		{"by hand", bare.turn},
		{"nid's adapter, permissions full, no MCP", adapter(config.PermissionsFull, false)},
		{"nid's adapter, permissions workspace (sandbox), no MCP", adapter(config.PermissionsWorkspace, false)},
		{"nid's adapter, permissions full, nid's MCP server", adapter(config.PermissionsFull, true)},
		{"nid's adapter as a worker runs it (workspace, MCP)", adapter(config.PermissionsWorkspace, true)},
	}
	took := make([][]time.Duration, len(variants))
	for i := 0; i <= turns; i++ {
		for k := range variants {
			// A different variant goes first each turn.
			v := (i + k) % len(variants)
			took[v] = append(took[v], variants[v].turn(b, fmt.Sprintf("turn %d: say done", i)))
		}
	}
	base := summarize(took[0][1:]).median
	fmt.Printf("a %s turn, %d turns of each (medians, spread min–max):\n", a.kind, turns)
	for v, d := range took {
		s := summarize(d[1:])
		fmt.Printf("  %-56s %.3fs (%.3f–%.3fs)  %+.0f ms\n", variants[v].name, s.median.Seconds(), s.min.Seconds(), s.max.Seconds(),
			float64((s.median-base).Microseconds())/1000)
	}
}

// benchMCP serves nid's MCP endpoint on 127.0.0.1, as a worker does, for
// agents that only connect to it and list its tools.
func benchMCP(b *testing.B) *worker.MCPEndpoint {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	ep := worker.NewMCPEndpoint(key, nil, "http://"+ln.Addr().String())
	srv := &http.Server{Handler: ep.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() { _ = srv.Close() })
	return ep
}
