package activities

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"

	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/transcript"
)

// ErrTransient is the error type of a failure a retry may fix: the agent's
// process died, the model was overloaded, nid's MCP endpoint did not answer.
// Unlike the types in activities.go it is retryable.
const ErrTransient = "Transient"

// DefaultHeartbeatEvery is how often a running turn, compaction or stop
// heartbeats when Activities.HeartbeatEvery is zero. Workflows should give
// these activities a heartbeat timeout of several times this.
const DefaultHeartbeatEvery = 5 * time.Second

// Activities runs agents for session workflows. Build one in the worker and
// register RunTurn, Compact and StopAgent under RunTurnName, CompactName and
// StopAgentName.
type Activities struct {
	// Agents maps an agent kind (KindSim, ...) to its adapter.
	Agents map[string]agents.Agent
	// StateDir is where adapters keep per-session files on this host.
	StateDir string
	// MCP returns a session's own MCP endpoint and the token of one of its
	// conversations, by generation (TurnInput.Generation): a conversation
	// the session rotated away cannot act with it. Nil means agents get no
	// MCP endpoint.
	MCP func(ref agents.SessionRef, generation int) agents.MCPAccess
	// HeartbeatEvery overrides DefaultHeartbeatEvery.
	HeartbeatEvery time.Duration
	// Transcripts receives every turn's prompt, tool calls and output and
	// every compaction; nil means no transcripts.
	Transcripts *transcript.Log
	// Settings returns what this worker's own nid.yaml says of a session's
	// agent: its kind and how to run it. It is the only authority on what
	// runs; the spec in workflow history only names a kind, which must be
	// this one. Nil, or ok false for a session the file does not list,
	// means no process agent runs for the session (the sim still may).
	Settings func(ref agents.SessionRef) (kind string, set config.AgentSettings, ok bool)
	// Places returns where this worker's own nid.yaml puts a session: its
	// group's repository, whose sessions work in worktrees nid makes under
	// the state directory, or else the group's shared working directory
	// (empty: WorkDir). It decides where an agent works, and so what its
	// sandbox lets it write: the repository and working directory in a
	// workflow's input, which anything that reaches Temporal can write,
	// are not believed. Nil, or ok false, leaves them to the input.
	Places func(ref agents.SessionRef) (repo, workDir string, ok bool)
	// Notify tells a session's workflow what a running turn learns before
	// it ends; nil means nobody is told.
	Notify Notifier
	// WorkDir is where process agents run; empty means the worker's own
	// working directory.
	WorkDir string

	// repoLocks holds a *sync.Mutex per repository directory, for
	// lockRepo.
	repoLocks sync.Map
}

// lockRepo serialises the git commands that change the worktrees of repo:
// the sessions of a group prepare theirs at once when they start, and one's
// `worktree prune` removes the .git/worktrees directory another's
// `worktree add` is filling.
func (a *Activities) lockRepo(repo string) (unlock func()) {
	m, _ := a.repoLocks.LoadOrStore(filepath.Clean(repo), &sync.Mutex{})
	mu := m.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}

// Close ends the agent processes that outlive a turn (Claude Code's
// stream-json processes, Codex's app-servers).
// Call it once the worker runs no more activities.
func (a *Activities) Close() error {
	var errs []error
	for _, kind := range slices.Sorted(maps.Keys(a.Agents)) {
		if c, ok := a.Agents[kind].(io.Closer); ok {
			errs = append(errs, c.Close())
		}
	}
	return errors.Join(errs...)
}

// Notifier carries news from a running turn to its session workflow.
type Notifier interface {
	// RateLimited says the vendor is answering 429 or 529 and the agent's
	// CLI is retrying (true), or that the turn got through (false).
	RateLimited(ctx context.Context, ref agents.SessionRef, limited bool) error
}

// process resolves how to run a session's agent on this worker, where
// workDirOf says, with what
// nid.yaml leaves unset taken from the kind's entry in Kinds. It refuses a
// spec whose kind is not the one this worker's nid.yaml gives the session,
// and a process agent for a session the file does not list: a spec comes
// from workflow history, which anyone who can signal the workflow can write.
// It refuses as well permissions the kind cannot enforce, and a sandbox
// around a directory that holds the state directory: nid never runs an
// agent with less confinement than it was given.
func (a *Activities) process(ref agents.SessionRef, spec agents.AgentSpec) (agents.Process, error) {
	var (
		kind string
		set  config.AgentSettings
		ok   bool
	)
	if a.Settings != nil {
		kind, set, ok = a.Settings(ref)
	}
	k := agents.KindOf(spec.Kind)
	switch {
	case ok && spec.Kind != kind:
		return agents.Process{}, agents.BadInput("session %s/%s asks for agent kind %q, but this worker's nid.yaml gives it %q",
			ref.Group, ref.Name, spec.Kind, kind)
	case !ok && k.Process:
		// nid's own sim runs nothing and writes only its files under
		// the state directory, so it may go on for a session the file
		// no longer lists (nid up --keep-removed); no process agent may.
		return agents.Process{}, agents.BadInput("session %s/%s asks for agent kind %q, but this worker's nid.yaml has no such session, so no agent command may run for it",
			ref.Group, ref.Name, spec.Kind)
	}
	p := agents.Process{Kind: k.Name, Command: cmp.Or(set.Command, k.DefaultCommand), Args: set.Args, Env: set.Env, Model: set.Model, WorkDir: a.WorkDir, Timeout: set.TurnTimeout.D(),
		// A session this worker's nid.yaml does not know gets the default,
		// never more: what an agent may do is the worker's decision.
		Permissions: cmp.Or(set.Permissions, config.DefaultPermissions), Network: k.Network, Window: set.Window}
	if set.Network != nil {
		p.Network = *set.Network
	}
	if k.Process && !slices.Contains(k.Permissions, p.Permissions) {
		return agents.Process{}, agents.SandboxUnavailable("%s: %s/%s would run with permissions: %s, which %s agents cannot enforce; "+
			"set permissions: %s for it (agents.%s, its group or the session)%s",
			k.Name, ref.Group, ref.Name, p.Permissions, k.Name, strings.Join(k.Permissions, " or "), k.Name, unconfined(k))
	}
	p.WorkDir = a.workDirOf(ref)
	if a.StateDir != "" {
		p.PidDir = agents.PidDir(a.StateDir)
		// Agents run in their worktree: a relative path would not lead back.
		if state, err := filepath.Abs(a.StateDir); err == nil {
			p.TempDir = filepath.Join(state, "agents", ref.Group, ref.Name)
			p.GitDirs = agents.GitDirsFile(state, ref)
			p.StateDir = state
			if dir := agents.WorkDir(p); k.Process && p.Sandboxed() && config.Within(state, dir) {
				return agents.Process{}, agents.SandboxUnavailable("%s: %s/%s would work in %s, which holds nid's state directory %s, so its sandbox would let the agent "+
					"write nid's own records, its database and the other sessions' worktrees; give group %s a repo (each session then works in a worktree of "+
					"its own), or a workdir that does not hold the state directory, or set permissions: %s for the session to run it without a sandbox",
					k.Name, ref.Group, ref.Name, dir, state, ref.Group, config.PermissionsFull)
			}
		}
	}
	return p, nil
}

// stoppable refuses to stop a session's agent of another kind than this
// worker's nid.yaml gives it; a session the file no longer lists may be
// stopped whatever it ran, since stopping starts nothing.
func (a *Activities) stoppable(ref agents.SessionRef, spec agents.AgentSpec) error {
	if a.Settings == nil {
		return nil
	}
	if kind, _, ok := a.Settings(ref); ok && spec.Kind != kind {
		return agents.BadInput("session %s/%s asks for agent kind %q, but this worker's nid.yaml gives it %q", ref.Group, ref.Name, spec.Kind, kind)
	}
	return nil
}

// workDirOf is where the session's agent works: where this worker's
// nid.yaml puts it (see placeOf), else WorkDir, never a directory a
// workflow's input names.
func (a *Activities) workDirOf(ref agents.SessionRef) string {
	p, err := a.placeOf(ref)
	if err != nil {
		return a.WorkDir
	}
	return a.placeWorkDir(p)
}

// placeWorkDir is where a session placed at p works: its worktree, else
// its group's directory, else WorkDir.
func (a *Activities) placeWorkDir(p place) string {
	return cmp.Or(p.worktree, p.workDir, a.WorkDir)
}

// unconfined says what the only way out means for a kind with no sandbox.
func unconfined(k agents.Kind) string {
	if slices.Equal(k.Permissions, []string{config.PermissionsFull}) {
		return " to run it with no sandbox, able to do everything the user running nid can"
	}
	return ""
}

// rateLimited returns the callback a turn uses to report rate limiting.
func (a *Activities) rateLimited(ctx context.Context, ref agents.SessionRef) func(bool) {
	if a.Notify == nil {
		return nil
	}
	return func(limited bool) {
		if err := a.Notify.RateLimited(ctx, ref, limited); err != nil {
			loggerFor(ctx).Warn("Could not tell the session about rate limiting", "sessionID", ref.WorkflowID, "error", err)
		}
	}
}

// classify is the one place that decides whether Temporal retries a failure.
// Adapters' *Error values become non-retryable errors of their type;
// cancellation passes through untouched so Temporal records the activity as
// cancelled; everything else (timeouts, dead processes, network) is
// retryable.
func classify(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := errors.AsType[*temporal.ApplicationError](err); ok {
		return err
	}
	// Benign: the session records every failure in its feed (and, when it
	// needs the human, the inbox), so the SDK need not log each one as an
	// error on the worker's terminal; it logs them at debug.
	if e, ok := errors.AsType[*agents.Error](err); ok {
		return temporal.NewApplicationErrorWithOptions(err.Error(), e.Type, temporal.ApplicationErrorOptions{
			NonRetryable: true, Category: temporal.ApplicationErrorCategoryBenign,
		})
	}
	if errors.Is(err, context.Canceled) {
		return err
	}
	return temporal.NewApplicationErrorWithOptions(err.Error(), ErrTransient, temporal.ApplicationErrorOptions{
		Category: temporal.ApplicationErrorCategoryBenign,
	})
}

// RunTurn sends one prompt to a session's agent and reports what came back,
// with the output cut to MaxOutputBytes.
func (a *Activities) RunTurn(ctx context.Context, in TurnInput) (TurnResult, error) {
	if err := agents.CheckSession(&in.Session); err != nil {
		return TurnResult{}, classify(err)
	}
	kind := cmp.Or(in.Kind, agents.TurnWork)
	var invalid error
	switch {
	case kind != agents.TurnWork && kind != agents.TurnHandoffRequest && kind != agents.TurnFresh:
		invalid = agents.BadInput("turn kind %q is not one of %s, %s, %s", kind, agents.TurnWork, agents.TurnHandoffRequest, agents.TurnFresh)
	case strings.TrimSpace(in.Prompt) == "":
		invalid = agents.BadInput("empty prompt for %s/%s", in.Session.Group, in.Session.Name)
	}
	var rep agents.TurnReport
	err := a.call(ctx, request{op: "turn", what: "Turn", session: in.Session, spec: in.Spec, invalid: invalid, logs: []any{"kind", kind}, ready: true},
		func(ctx context.Context, agent agents.Agent, p agents.Process) (done []any, err error) {
			a.notePrompt(ctx, in, kind)
			rep, err = agent.Turn(ctx, agents.TurnRequest{
				Session:      in.Session,
				Spec:         in.Spec,
				Conversation: in.Conversation,
				Prompt:       in.Prompt,
				Kind:         kind,
				Generation:   in.Generation,
				MCP:          a.mcp(in.Session, in.Generation),
				StateDir:     a.StateDir,
				Process:      p,
				RateLimited:  a.rateLimited(ctx, in.Session),
				ToolCalled:   a.toolNoter(ctx, in),
			})
			rep.Usage = rep.Usage.WithWindow(p.Window)
			a.noteTurn(ctx, in, kind, rep, err)
			return []any{"conversation", rep.Conversation, "usedTokens", rep.Usage.UsedTokens, "windowTokens", rep.Usage.WindowTokens}, err
		})
	if err != nil {
		return TurnResult{}, err
	}
	return cutOutput(rep), nil
}

// Compact asks a session's agent to compact its conversation in place. A
// compaction the vendor refused is a report with OK false, not an error.
func (a *Activities) Compact(ctx context.Context, in CompactInput) (agents.CompactReport, error) {
	if err := agents.CheckSession(&in.Session); err != nil {
		return agents.CompactReport{}, classify(err)
	}
	var invalid error
	if in.Conversation == "" {
		invalid = agents.BadInput("%s/%s has no conversation to compact", in.Session.Group, in.Session.Name)
	}
	var rep agents.CompactReport
	err := a.call(ctx, request{op: "compact", what: "Compaction", session: in.Session, spec: in.Spec, invalid: invalid, logs: []any{"conversation", in.Conversation}},
		func(ctx context.Context, agent agents.Agent, p agents.Process) (done []any, err error) {
			rep, err = agent.Compact(ctx, agents.CompactRequest{
				Session:      in.Session,
				Spec:         in.Spec,
				Conversation: in.Conversation,
				MCP:          a.mcp(in.Session, in.Generation),
				StateDir:     a.StateDir,
				Process:      p,
			})
			rep.Usage = rep.Usage.WithWindow(p.Window)
			a.noteCompact(ctx, in, rep, err)
			return []any{"ok", rep.OK, "beforeTokens", rep.BeforeTokens, "afterTokens", rep.AfterTokens}, err
		})
	if err != nil {
		return agents.CompactReport{}, err
	}
	return rep, nil
}

// StopAgent ends a session's agent process, if it has one.
func (a *Activities) StopAgent(ctx context.Context, in StopInput) (StopResult, error) {
	if err := agents.CheckSession(&in.Session); err != nil {
		return StopResult{}, classify(err)
	}
	err := a.call(ctx, request{op: "stop", what: "Stop", session: in.Session, spec: in.Spec, logs: []any{"conversation", in.Conversation}, stop: true},
		func(ctx context.Context, agent agents.Agent, p agents.Process) ([]any, error) {
			return nil, agent.Stop(ctx, agents.StopRequest{
				Session:      in.Session,
				Spec:         in.Spec,
				Conversation: in.Conversation,
				StateDir:     a.StateDir,
				Process:      p,
			})
		})
	return StopResult{}, err
}

// request is what RunTurn, Compact and StopAgent ask of call.
type request struct {
	// op names the request in heartbeats ("turn running for 5s"), what in
	// log messages ("Turn failed").
	op, what string
	session  agents.SessionRef
	spec     agents.AgentSpec
	// invalid is what is wrong with the request itself, if anything.
	invalid error
	// logs are the keys and values every log line of the request carries.
	logs []any
	// ready checks, before the agent starts, that it can run here at all
	// (see ready): a turn that cannot says so in nid doctor's words.
	ready bool
	// stop ends what the session runs: it starts nothing, so it needs no
	// settings, and a session nid.yaml no longer lists can be stopped.
	stop bool
}

// call is the skeleton of every activity that asks an agent for something:
// find the session's agent, refuse a malformed request, resolve how the
// agent runs on this worker, check that it can run here at all (r.ready),
// run do while heartbeating, log how it ended (do returns what to log on
// success), and classify its error, once, for Temporal.
func (a *Activities) call(ctx context.Context, r request, do func(ctx context.Context, agent agents.Agent, p agents.Process) (done []any, err error)) error {
	agent, err := a.agent(r.spec.Kind)
	if err != nil {
		return err
	}
	if err := r.invalid; err != nil {
		return classify(err)
	}
	var p agents.Process
	if r.stop {
		err = a.stoppable(r.session, r.spec)
	} else {
		p, err = a.process(r.session, r.spec)
	}
	if err != nil {
		return classify(err)
	}
	if k := agents.KindOf(r.spec.Kind); r.ready && k.Process {
		if err := agents.Ready(ctx, r.session, k, p); err != nil {
			return classify(err)
		}
	}
	var done []any
	err = a.heartbeating(ctx, r.op, func(ctx context.Context) (err error) {
		done, err = do(agents.WithLogger(ctx, loggerFor(ctx)), agent, p)
		return err
	})
	logger := loggerFor(ctx)
	keys := append([]any{"sessionID", r.session.WorkflowID}, r.logs...)
	if err != nil {
		// A request cut short by the worker stopping is retried by the
		// next worker; it is not the agent's failure. One that failed the
		// session records in its feed: info here, not a warning.
		if ctx.Err() == nil {
			logger.Info(r.what+" failed", append(keys, "error", err)...)
		}
		return classify(err)
	}
	logger.Debug(r.what+" done", append(keys, done...)...)
	return nil
}

// agent returns the adapter for kind, or a non-retryable ErrUnknownAgent
// error that lists the kinds this host can run.
func (a *Activities) agent(kind string) (agents.Agent, error) {
	if ag, ok := a.Agents[kind]; ok {
		return ag, nil
	}
	known := slices.Sorted(maps.Keys(a.Agents))
	return nil, temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("agent %q cannot run on this host (known agents: %s)", kind, strings.Join(known, ", ")),
		ErrUnknownAgent, nil)
}

func (a *Activities) mcp(ref agents.SessionRef, generation int) agents.MCPAccess {
	if a.MCP == nil {
		return agents.MCPAccess{}
	}
	return a.MCP(ref, generation)
}

// heartbeating runs fn, heartbeating meanwhile so that a worker that died
// mid-turn is noticed within the heartbeat timeout and a cancellation from
// the workflow reaches fn through ctx. Outside an activity it just runs fn.
func (a *Activities) heartbeating(ctx context.Context, step string, fn func(context.Context) error) error {
	if !activity.IsActivity(ctx) {
		return fn(ctx)
	}
	every := a.HeartbeatEvery
	if every <= 0 {
		every = DefaultHeartbeatEvery
	}
	start := time.Now()
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
				activity.RecordHeartbeat(ctx, fmt.Sprintf("%s running for %s", step, time.Since(start).Round(time.Second)))
			}
		}
	}()
	err := fn(ctx)
	close(done)
	<-stopped
	return err
}

// cutOutput keeps at most MaxOutputBytes of the output, cut on a UTF-8
// boundary, and records the whole output's size and digest.
func cutOutput(rep agents.TurnReport) TurnResult {
	sum := sha256.Sum256([]byte(rep.Output))
	res := TurnResult{TurnReport: rep, OutputDigest: hex.EncodeToString(sum[:]), OutputBytes: len(rep.Output)}
	if len(rep.Output) > MaxOutputBytes {
		n := MaxOutputBytes
		for n > 0 && !utf8.RuneStart(rep.Output[n]) {
			n--
		}
		res.Output = rep.Output[:n]
	}
	return res
}

// loggerFor is the activity's logger, or one that discards when adapters or
// activities run outside Temporal (in tests).
func loggerFor(ctx context.Context) log.Logger {
	if activity.IsActivity(ctx) {
		return activity.GetLogger(ctx)
	}
	return log.NewStructuredLogger(slog.New(slog.DiscardHandler))
}
