package agents

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/internal/clip"
	"github.com/nid-dev/nid/statedir"
)

// Sim is nid's built-in simulated agent: it needs no API key, behaves the
// same on every run, and drives the tests.
//
// Each turn takes Spec.Sim.TurnDelay and adds Spec.Sim.TokensPerTurn to the
// conversation's context; a fresh conversation starts at Spec.Sim.StartTokens
// (its system prompt and tools) plus the size of its first message,
// ceil(len(prompt)/4) tokens, plus that turn's TokensPerTurn. The context
// never grows past the window: a full sim keeps working at 100%, so a group
// with rotation off still runs. Compaction shrinks the context to
// Spec.Sim.CompactKeeps percent (a tenth by default); with Spec.Sim.CompactAt
// the sim compacts by itself, as Claude Code does, at the start of a turn
// once its context is that full, and reports it as the vendor's compaction.
// Asked for a handoff, or on its HandoffAfterTurns-th turn since the
// conversation started or was last compacted, the sim calls handoff_write on
// nid's MCP endpoint like a real agent.
//
// A conversation's state is a small JSON file,
// <StateDir>/sim/<group>/<session>/<conversation>.json, so it survives worker
// restarts as a real agent's transcript does. Conversation ids are sim-1,
// sim-2, ... counted from the files in the session's directory and from
// the session's generation (its handoffs so far): readable in events, the
// same on every run of a test, and never reused within a session, because
// the files outlive the worker and the generation outlives a move to a
// host without them.
type Sim struct {
	// HTTPClient makes the sim's MCP calls; nil means http.DefaultClient.
	HTTPClient *http.Client
}

// NewSim returns a sim agent.
func NewSim() *Sim { return &Sim{} }

// simState is one conversation's file.
type simState struct {
	Conversation string `json:"conversation"`
	UsedTokens   int64  `json:"usedTokens"`
	// Turns counts every turn of the conversation; SinceCompact the turns
	// since it started or was last compacted, which is what makes the sim's
	// context feel cluttered.
	Turns        int `json:"turns"`
	SinceCompact int `json:"sinceCompact"`
	Compactions  int `json:"compactions"`
	// Task is the start of the last work prompt, for handoff summaries.
	Task string `json:"task,omitempty"`
	// FirstMessage is how the conversation began (a fresh conversation's
	// handoff and board), kept as an agent's transcript would.
	FirstMessage string `json:"firstMessage,omitempty"`
	// TaskID is the board task the sim works on, TaskTurns the turns it
	// has spent on it in this conversation.
	TaskID    string `json:"taskID,omitempty"`
	TaskTurns int    `json:"taskTurns,omitempty"`
}

// simTaskRE finds the task a prompt is about: nid's default prompts say
// "task t3".
var simTaskRE = regexp.MustCompile(`\btask (t[0-9]+)\b`)

// simConfig is a session's sim settings with defaults for what is unset.
func simConfig(c config.Sim) config.Sim {
	if c.Window <= 0 {
		c.Window = config.DefaultSimWindow
	}
	if c.TokensPerTurn <= 0 {
		c.TokensPerTurn = config.DefaultSimTokensPerTurn
	}
	if c.TaskTurns <= 0 {
		c.TaskTurns = config.DefaultSimTaskTurns
	}
	if c.CompactKeeps <= 0 {
		c.CompactKeeps = config.DefaultSimCompactKeeps
	}
	return c
}

// compacted is what a compaction leaves of used tokens.
func compacted(cfg config.Sim, used int64) int64 {
	return used * int64(cfg.CompactKeeps) / 100
}

// compactsItself says the sim compacts by itself before a turn on a
// context of used tokens, as a vendor does near its own limit.
func compactsItself(cfg config.Sim, used int64) bool {
	return cfg.CompactAt > 0 && used*100 >= int64(cfg.CompactAt)*cfg.Window
}

// Turn runs one simulated turn.
func (s *Sim) Turn(ctx context.Context, req TurnRequest) (TurnReport, error) {
	cfg := simConfig(req.Spec.Sim)
	if strings.TrimSpace(req.Prompt) == "" {
		return TurnReport{}, BadInput("sim: empty prompt")
	}
	dir, err := simDir(req.StateDir, req.Session)
	if err != nil {
		return TurnReport{}, err
	}
	var st simState
	if req.Conversation == "" {
		if st.Conversation, err = nextConversation(dir, req.Generation); err != nil {
			return TurnReport{}, err
		}
		st.UsedTokens = min(cfg.StartTokens+promptTokens(req.Prompt), cfg.Window)
		st.FirstMessage = clip.Runes(req.Prompt, 64<<10)
	} else if st, err = loadSim(dir, req.Conversation); err != nil {
		return TurnReport{}, err
	}

	if err := sleep(ctx, cfg.TurnDelay.D()); err != nil {
		return TurnReport{}, err
	}
	var vendor *VendorCompaction
	if compactsItself(cfg, st.UsedTokens) {
		before := st.UsedTokens
		st.UsedTokens = compacted(cfg, before)
		st.SinceCompact = 0
		st.Compactions++
		vendor = &VendorCompaction{BeforeTokens: reported(cfg, before), AfterTokens: reported(cfg, st.UsedTokens)}
	}
	st.Turns++
	st.SinceCompact++
	st.UsedTokens = min(st.UsedTokens+cfg.TokensPerTurn, cfg.Window)
	if req.Kind != TurnHandoffRequest {
		st.Task = clip.Runes(req.Prompt, 60)
	}

	out := fmt.Sprintf("sim turn %d of conversation %s: worked on %q", st.Turns, st.Conversation, clip.Runes(req.Prompt, 60))
	switch {
	case req.Kind == TurnHandoffRequest && cfg.NoHandoff:
		out = fmt.Sprintf("sim turn %d of conversation %s: I will not write a handoff (noHandoff)", st.Turns, st.Conversation)
	case req.Kind == TurnHandoffRequest:
		summary := st.summary(req.Session, "")
		if err := s.handoffWrite(ctx, req.MCP.TokenURL(), summary); err != nil {
			return TurnReport{}, err
		}
		req.toolCalled(ToolHandoffWrite + "(" + clip.Runes(summary, 60) + ")")
		out = fmt.Sprintf("sim turn %d of conversation %s: wrote a handoff with handoff_write", st.Turns, st.Conversation)
	case req.Kind == TurnWork && cfg.HandoffAfterTurns > 0 && st.SinceCompact == cfg.HandoffAfterTurns:
		why := fmt.Sprintf("My context is cluttered after %d turns: start me fresh from this summary. ", st.SinceCompact)
		summary := st.summary(req.Session, why)
		if err := s.handoffWrite(ctx, req.MCP.TokenURL(), summary); err != nil {
			return TurnReport{}, err
		}
		req.toolCalled(ToolHandoffWrite + "(" + clip.Runes(summary, 60) + ")")
		out += "; my context is cluttered, so I wrote a handoff with handoff_write"
	}
	if req.Kind == TurnFresh {
		acked, err := s.acknowledge(ctx, req, cfg)
		if err != nil {
			return TurnReport{}, err
		}
		out += acked
	}
	if req.Kind == TurnWork {
		done, err := s.workOnTask(ctx, req, cfg, &st)
		if err != nil {
			return TurnReport{}, err
		}
		out += done
	}

	// Saved last, so a turn that failed or was cancelled leaves the
	// conversation as it was and its retry starts from the same place.
	if err := saveSim(dir, st); err != nil {
		return TurnReport{}, err
	}
	return TurnReport{Conversation: st.Conversation, Output: out, Usage: simUsage(cfg, st.UsedTokens), Vendor: vendor}, nil
}

// workOnTask counts the turns spent on the task the prompt names and,
// after TaskTurns of them, marks it done with task_done over MCP.
func (s *Sim) workOnTask(ctx context.Context, req TurnRequest, cfg config.Sim, st *simState) (string, error) {
	m := simTaskRE.FindStringSubmatch(req.Prompt)
	if m == nil {
		return "", nil
	}
	if m[1] != st.TaskID {
		st.TaskID, st.TaskTurns = m[1], 0
	}
	st.TaskTurns++
	if st.TaskTurns < cfg.TaskTurns {
		return "", nil
	}
	if err := s.callTool(ctx, req.MCP.TokenURL(), ToolTaskDone, map[string]any{"task_id": st.TaskID}); err != nil {
		return "", err
	}
	req.toolCalled(ToolTaskDone + "(" + st.TaskID + ")")
	done := fmt.Sprintf("; task %s is done (task_done)", st.TaskID)
	st.TaskID, st.TaskTurns = "", 0
	return done, nil
}

// acknowledge answers a fresh conversation's request to call handoff_ack as
// the session's sim.ack says: with the tasks the request names, with a
// task it does not hold, or not at all.
func (s *Sim) acknowledge(ctx context.Context, req TurnRequest, cfg config.Sim) (string, error) {
	tasks, asked := AckRequested(req.Prompt)
	if !asked || cfg.Ack == config.SimAckNone {
		return "", nil
	}
	if cfg.Ack == config.SimAckWrong {
		tasks = []string{wrongTask(tasks)}
	}
	if err := s.callTool(ctx, req.MCP.TokenURL(), ToolHandoffAck, map[string]any{"tasks": tasks}); err != nil {
		return "", err
	}
	named := strings.Join(tasks, ", ")
	req.toolCalled(ToolHandoffAck + "(" + named + ")")
	return fmt.Sprintf("; acknowledged the handoff (handoff_ack: %s)", cmp.Or(named, "no task")), nil
}

// wrongTask is a task id that is not among held.
func wrongTask(held []string) string {
	for n := 999; ; n++ {
		id := "t" + strconv.Itoa(n)
		if !slices.Contains(held, id) {
			return id
		}
	}
}

// Compact shrinks the conversation's context to CompactKeeps percent,
// unless the session is configured with failCompact.
func (s *Sim) Compact(ctx context.Context, req CompactRequest) (CompactReport, error) {
	cfg := simConfig(req.Spec.Sim)
	dir, err := simDir(req.StateDir, req.Session)
	if err != nil {
		return CompactReport{}, err
	}
	st, err := loadSim(dir, req.Conversation)
	if err != nil {
		return CompactReport{}, err
	}
	if err := sleep(ctx, cfg.TurnDelay.D()); err != nil {
		return CompactReport{}, err
	}
	before := st.UsedTokens
	if cfg.FailCompact {
		return CompactReport{
			Conversation: st.Conversation,
			BeforeTokens: reported(cfg, before),
			AfterTokens:  reported(cfg, before),
			Usage:        simUsage(cfg, before),
			Detail:       "sim: compaction refused (failCompact)",
		}, nil
	}
	st.UsedTokens = compacted(cfg, before)
	st.SinceCompact = 0
	st.Compactions++
	if err := saveSim(dir, st); err != nil {
		return CompactReport{}, err
	}
	return CompactReport{
		OK:           true,
		Conversation: st.Conversation,
		BeforeTokens: reported(cfg, before),
		AfterTokens:  reported(cfg, st.UsedTokens),
		Usage:        simUsage(cfg, st.UsedTokens),
	}, nil
}

// Stop does nothing: the sim has no process to kill.
func (s *Sim) Stop(ctx context.Context, req StopRequest) error { return nil }

// summary is the handoff the sim writes: self-contained, with the sections a
// real agent is asked for.
func (st simState) summary(ref SessionRef, why string) string {
	task := st.Task
	if task == "" {
		task = "(no task given yet)"
	}
	return fmt.Sprintf("%sHandoff from sim conversation %s of %s/%s after %d turns.\n"+
		"Goal: %q.\n"+
		"Done: %d simulated turns of work, %d compactions; nothing outside nid was changed.\n"+
		"Next: continue with the goal above.\n"+
		"Decisions: none.\n"+
		"Gotchas: this is nid's built-in sim agent; its work is simulated.",
		why, st.Conversation, ref.Group, ref.Name, st.Turns, task, st.Turns, st.Compactions)
}

// handoffWrite calls the handoff_write tool on the session's MCP endpoint.
// A tool error is the agent's failure; a call that never got an answer may
// succeed on retry.
func (s *Sim) handoffWrite(ctx context.Context, url, summary string) error {
	return s.callTool(ctx, url, ToolHandoffWrite, map[string]any{"summary": summary})
}

// callTool calls one of nid's tools on the session's MCP endpoint, as a
// real agent would.
func (s *Sim) callTool(ctx context.Context, url, tool string, args map[string]any) error {
	if url == "" {
		return AgentFailed("sim: no MCP endpoint to call %s on", tool)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "nid-sim", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   url,
		HTTPClient: s.HTTPClient,
		// The sim never waits for server-initiated messages.
		DisableStandaloneSSE: true,
	}, nil)
	if err != nil {
		return fmt.Errorf("sim: connect to nid's MCP endpoint: %w", err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return fmt.Errorf("sim: call %s: %w", tool, err)
	}
	if res.IsError {
		return AgentFailed("sim: %s failed: %s", tool, ToolText(res))
	}
	return nil
}

// ToolText is the text of a tool's answer, its parts joined by newlines.
func ToolText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func simUsage(cfg config.Sim, used int64) Usage {
	if cfg.Silent {
		return Usage{Source: SourceUnknown}
	}
	return Usage{UsedTokens: used, WindowTokens: cfg.Window, Source: SourceReported, Model: "sim"}
}

// reported is what a sim says about a token count: nothing when silent.
func reported(cfg config.Sim, tokens int64) int64 {
	if cfg.Silent {
		return 0
	}
	return tokens
}

// promptTokens estimates a message's size at four bytes a token.
func promptTokens(prompt string) int64 {
	return max(1, (int64(len(prompt))+3)/4)
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func simDir(stateDir string, ref SessionRef) (string, error) {
	if stateDir == "" {
		return "", BadInput("sim: no state directory")
	}
	if err := CheckSession(&ref); err != nil {
		return "", err
	}
	return filepath.Join(stateDir, "sim", ref.Group, ref.Name), nil
}

var simIDRE = regexp.MustCompile(`^sim-([1-9][0-9]*)$`)

// nextConversation is one more than the highest conversation number in the
// session's directory, and at least one more than generation: a host the
// session moved to has none of its earlier conversations' files.
func nextConversation(dir string, generation int) (string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("sim: %w", err)
	}
	highest := max(generation, 0)
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		m := simIDRE.FindStringSubmatch(id)
		if !ok || m == nil {
			continue
		}
		if n, err := strconv.Atoi(m[1]); err == nil && n > highest {
			highest = n
		}
	}
	return fmt.Sprintf("sim-%d", highest+1), nil
}

func loadSim(dir, conversation string) (simState, error) {
	if !simIDRE.MatchString(conversation) {
		return simState{}, AgentFailed("sim: no conversation %q", conversation)
	}
	b, err := os.ReadFile(filepath.Join(dir, conversation+".json"))
	if errors.Is(err, fs.ErrNotExist) {
		return simState{}, AgentFailed("sim: no conversation %q in %s", conversation, dir)
	}
	if err != nil {
		return simState{}, fmt.Errorf("sim: %w", err)
	}
	var st simState
	if err := json.Unmarshal(b, &st); err != nil {
		return simState{}, AgentFailed("sim: conversation file %s is corrupt: %v", filepath.Join(dir, conversation+".json"), err)
	}
	return st, nil
}

// saveSim writes the state through a temporary file and a rename, so a
// worker killed mid-write leaves the old state or the new, never half.
func saveSim(dir string, st simState) error {
	if err := os.MkdirAll(dir, statedir.DirMode); err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	tmp := f.Name()
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, st.Conversation+".json"))
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("sim: save conversation %s: %w", st.Conversation, err)
	}
	return nil
}
