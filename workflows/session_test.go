package workflows

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/nid-dev/nid/activities"
	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/config"
)

// fakeAgent plays an agent in the workflow tests: its context grows by
// perTurn each turn in a conversation, compaction shrinks it to a tenth, and
// asked for a handoff it calls handoff_write the way the MCP endpoint would,
// by signalling the session.
type fakeAgent struct {
	env *testsuite.TestWorkflowEnvironment

	mu          sync.Mutex
	window      int64
	perTurn     int64
	used        map[string]int64
	convs       int
	failCompact bool
	noHandoff   bool
	// vendorAt makes the agent compact by itself, to a tenth, at the start
	// of a turn once its context has reached this many tokens (0: never),
	// as Claude Code does.
	vendorAt int64
	// compactTo is what a compaction leaves, as a fraction (0: a tenth).
	compactTo float64
	// freshTokens is where a fresh conversation starts (0: its prompt's
	// length).
	freshTokens int64
	// onTurn runs inside a work turn, e.g. to signal mid-turn; onCompact
	// inside a compaction.
	onTurn    func(in activities.TurnInput)
	onCompact func()
	// cut, when set, runs inside a work turn first; an error it returns
	// is the turn's (a worker that died under it, a host gone).
	cut   func(ctx context.Context, in activities.TurnInput) error
	turns []activities.TurnInput
	// queues are the task queues the turns were sent to.
	queues []string
	stops  []string
	// ack is how a fresh conversation answers the request to call
	// handoff_ack, as the sim's switch says ("": correctly).
	ack string
	// facts is what GatherFacts reads (nil: no repository); rescued the
	// handoff RescueHandoff builds ("": none). factsErr fails GatherFacts.
	facts    *activities.Facts
	factsErr error
	rescued  string
	rescues  []activities.RescueInput
	// handback is what the vendor's records say at a hand-back (the
	// person's turns, usage and compactions), handbackErr fails reading
	// them; handbacks are the hand-backs asked for.
	handback    agents.Handback
	handbackErr error
	handbacks   []activities.HandbackInput
}

func newFakeAgent(env *testsuite.TestWorkflowEnvironment) *fakeAgent {
	return &fakeAgent{env: env, window: 100_000, perTurn: 10_000, used: map[string]int64{}}
}

func (f *fakeAgent) register() {
	f.env.RegisterActivityWithOptions(f.RunTurn, activity.RegisterOptions{Name: activities.RunTurnName})
	f.env.RegisterActivityWithOptions(f.Compact, activity.RegisterOptions{Name: activities.CompactName})
	f.env.RegisterActivityWithOptions(f.Stop, activity.RegisterOptions{Name: activities.StopAgentName})
	f.env.RegisterActivityWithOptions(f.GatherFacts, activity.RegisterOptions{Name: activities.FactsName})
	f.env.RegisterActivityWithOptions(f.RescueHandoff, activity.RegisterOptions{Name: activities.RescueName})
	f.env.RegisterActivityWithOptions(f.Handback, activity.RegisterOptions{Name: activities.HandbackName})
}

// Handback reads what the person did, as the vendor's records would say
// it; the conversation they ended in is the agent's from then on.
func (f *fakeAgent) Handback(_ context.Context, in activities.HandbackInput) (activities.HandbackResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.handbacks = append(f.handbacks, in)
	if f.handbackErr != nil {
		return activities.HandbackResult{}, f.handbackErr
	}
	hb := f.handback
	if hb.Found {
		conv := cmpOr(hb.Conversation, in.Conversation)
		f.used[conv] = hb.Usage.UsedTokens
	}
	return activities.HandbackResult{Handback: hb}, nil
}

func (f *fakeAgent) GatherFacts(_ context.Context, in activities.FactsInput) (activities.Facts, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.factsErr != nil {
		return activities.Facts{}, f.factsErr
	}
	if f.facts == nil {
		return activities.Facts{}, nil
	}
	return *f.facts, nil
}

func (f *fakeAgent) RescueHandoff(_ context.Context, in activities.RescueInput) (activities.RescueResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rescues = append(f.rescues, in)
	return activities.RescueResult{Summary: f.rescued}, nil
}

func (f *fakeAgent) RunTurn(ctx context.Context, in activities.TurnInput) (activities.TurnResult, error) {
	f.mu.Lock()
	f.turns = append(f.turns, in)
	f.queues = append(f.queues, activity.GetInfo(ctx).TaskQueue)
	conv := in.Conversation
	if conv == "" {
		f.convs++
		conv = fmt.Sprintf("conv-%d", f.convs)
		f.used[conv] = int64(len(in.Prompt))
		if f.freshTokens > 0 {
			f.used[conv] = f.freshTokens
		}
	}
	var vendor *agents.VendorCompaction
	if f.vendorAt > 0 && f.used[conv] >= f.vendorAt {
		// Like Claude Code, it compacts at the start of a turn, when what
		// it would send is past its own point.
		vendor = &agents.VendorCompaction{BeforeTokens: f.used[conv], AfterTokens: f.used[conv] / 10}
		f.used[conv] /= 10
	}
	f.used[conv] += f.perTurn
	used := f.used[conv]
	onTurn := f.onTurn
	noHandoff := f.noHandoff
	cut := f.cut
	f.mu.Unlock()
	if cut != nil && in.Kind == agents.TurnWork {
		if err := cut(ctx, in); err != nil {
			return activities.TurnResult{}, err
		}
	}

	out := fmt.Sprintf("output of turn in %s", conv)
	switch in.Kind {
	case agents.TurnHandoffRequest:
		if !noHandoff {
			f.env.SignalWorkflow(SignalHandoffWrite, HandoffWrite{Summary: "handoff from " + conv})
			out = "handoff written"
		}
	case agents.TurnWork:
		if onTurn != nil {
			onTurn(in)
		}
	case agents.TurnFresh:
		f.acknowledge(in)
	}
	return activities.TurnResult{TurnReport: agents.TurnReport{
		Conversation: conv,
		Output:       out,
		Usage:        agents.Usage{UsedTokens: used, WindowTokens: f.window, Source: agents.SourceReported, Model: "fake-1"},
		Vendor:       vendor,
	}}, nil
}

// acknowledge calls handoff_ack, as the MCP endpoint would signal it, the
// way the sim does.
func (f *fakeAgent) acknowledge(in activities.TurnInput) {
	tasks, asked := agents.AckRequested(in.Prompt)
	f.mu.Lock()
	mode := f.ack
	f.mu.Unlock()
	switch {
	case !asked || mode == config.SimAckNone:
		return
	case mode == config.SimAckWrong:
		tasks = []string{"t999"}
	case mode == "stale":
		// The conversation rotated away, answering for the fresh one.
		in.Generation--
	}
	f.env.SignalWorkflow(SignalHandoffAck, HandoffAck{Tasks: tasks, Generation: in.Generation})
}

func (f *fakeAgent) Compact(_ context.Context, in activities.CompactInput) (agents.CompactReport, error) {
	if f.onCompact != nil {
		f.onCompact()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	before := f.used[in.Conversation]
	if f.failCompact {
		return agents.CompactReport{OK: false, Conversation: in.Conversation, BeforeTokens: before, AfterTokens: before, Detail: "refused"}, nil
	}
	after := before / 10
	if f.compactTo > 0 {
		after = int64(float64(before) * f.compactTo)
	}
	f.used[in.Conversation] = after
	return agents.CompactReport{OK: true, Conversation: in.Conversation, BeforeTokens: before, AfterTokens: after,
		Usage: agents.Usage{UsedTokens: after, WindowTokens: f.window, Source: agents.SourceReported}}, nil
}

func (f *fakeAgent) Stop(_ context.Context, in activities.StopInput) (activities.StopResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stops = append(f.stops, in.Conversation)
	return activities.StopResult{}, nil
}

func (f *fakeAgent) turnsOfKind(kind string) []activities.TurnInput {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []activities.TurnInput
	for _, t := range f.turns {
		if t.Kind == kind {
			out = append(out, t)
		}
	}
	return out
}

type harness struct {
	t     *testing.T
	env   *testsuite.TestWorkflowEnvironment
	agent *fakeAgent
	group *fakeGroup
	inbox []InboxItem
	mu    sync.Mutex
	// ask, when set, is what a test asks of the session mid-turn.
	ask func()
	// learned are the points the session told its group.
	learned []LearnedPoint
}

func newHarness(t *testing.T) *harness { return newHarnessLogging(t, io.Discard) }

// newHarnessLogging is newHarness with the workflows' log, from info up,
// written to logs.
func newHarnessLogging(t *testing.T, logs io.Writer) *harness {
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(logs, nil))))
	env := suite.NewTestWorkflowEnvironment()
	h := &harness{t: t, env: env, agent: newFakeAgent(env)}
	h.agent.register()
	env.RegisterWorkflowWithOptions(SessionWorkflow, workflow.RegisterOptions{Name: SessionWorkflowName})
	env.RegisterWorkflowWithOptions(RotationWorkflow, workflow.RegisterOptions{Name: RotationWorkflowName})
	onSignalOut(env, GroupID("web"), SignalInbox, func(_ string, item InboxItem) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.inbox = append(h.inbox, item)
	})
	h.group = &fakeGroup{h: h, board: BoardState{Prompts: config.DefaultPrompts()}}
	onSignalOut(env, GroupID("web"), SignalClaimNext, func(_ string, c ClaimNext) { h.group.claimNext(c.Session) })
	onSignalOut(env, GroupID("web"), SignalReserve, func(_ string, r Reserve) { h.group.reserve(r) })
	onSignalOut(env, GroupID("web"), SignalCharge, func(_ string, c Charge) { h.group.charge(c) })
	onSignalOut(env, GroupID("web"), SignalSlot, func(_ string, r SlotRequest) { h.group.slot(r) })
	onSignalOut(env, GroupID("web"), SignalLearned, func(_ string, p LearnedPoint) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.learned = append(h.learned, p)
	})
	return h
}

// onSignalOut hands every signal name that the workflow under test sends
// to the workflow id to (any workflow when empty) to fn, with the id it went
// to and its payload.
func onSignalOut[T any](env *testsuite.TestWorkflowEnvironment, to, name string, fn func(id string, arg T)) {
	var target any = mock.Anything
	if to != "" {
		target = to
	}
	env.OnSignalExternalWorkflow(mock.Anything, target, "", name, mock.Anything).Return(
		func(_, id, _, _ string, arg interface{}) error {
			fn(id, arg.(T))
			return nil
		})
}

// fakeGroup plays the session's group with the real board logic: it hands
// out tasks on claim_next, counts charges, and pushes the board back.
type fakeGroup struct {
	h       *harness
	mu      sync.Mutex
	board   BoardState
	goal    string
	charges []Charge
	pushes  int
	// staleAfterGrant makes every grant followed by an older board, as a
	// push from another handler of the real group can be.
	staleAfterGrant bool
	// maxSlots is the group's maxConcurrentRotations; slotRequests what
	// the session asked of the governor.
	maxSlots     int
	slotRequests []SlotRequest
	// othersTakeFrom makes another session spend the last turn of the
	// budget just before this session's reservation number othersTakeFrom
	// (and later ones) arrives, which is then refused.
	othersTakeFrom int64
	// exhaustAfterGrant makes another session spend what is left of a
	// tokens limit just after this session's reservation number
	// exhaustAfterGrant is granted, before the session starts what it
	// reserved for.
	exhaustAfterGrant int64
	last              BoardView
	// silent makes the group take claims (counted in claims) and answer
	// none, as one too busy to answer yet.
	silent bool
	claims int
}

func (g *fakeGroup) push() {
	g.pushes++
	// As the group sends it since VersionTargetedBoard: the session's seat.
	b := g.board.view("web", g.goal).seat("lead", true)
	b.Rev = int64(g.pushes)
	g.h.env.SignalWorkflow(SignalBoard, b)
	g.last = b
}

func (g *fakeGroup) claimNext(session string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.claims++
	if g.silent {
		return
	}
	g.board.claimNext(session, time.Time{})
	g.push()
}

func (g *fakeGroup) charge(c Charge) {
	g.mu.Lock()
	defer g.mu.Unlock()
	before := g.board.exhausted()
	g.board.charge(c)
	g.charges = append(g.charges, c)
	if g.board.exhausted() != before {
		g.push()
	}
}

func (g *fakeGroup) reserve(r Reserve) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.othersTakeFrom > 0 && r.Seq >= g.othersTakeFrom {
		// The refusal reaches the session a while later, after it sat down
		// to wait for its grant.
		g.board.charge(Charge{Session: "other", Turns: 1})
		g.h.env.RegisterDelayedCallback(func() {
			g.mu.Lock()
			defer g.mu.Unlock()
			g.push()
		}, time.Minute)
		return
	}
	if g.board.reserve(r.Session, r.Seq) {
		g.charges = append(g.charges, Charge{Session: r.Session, Turns: 1})
	}
	before := g.last
	g.push()
	if g.staleAfterGrant && before.Rev > 0 {
		g.h.env.SignalWorkflow(SignalBoard, before)
	}
	if g.exhaustAfterGrant > 0 && r.Seq == g.exhaustAfterGrant {
		g.board.charge(Charge{Session: "other", Tokens: g.board.Budget.Tokens})
		g.push()
	}
}

// slot runs the real governor on the board for this session: the rest of
// the group's slots are whatever the test put there.
func (g *fakeGroup) slot(r SlotRequest) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.slotRequests = append(g.slotRequests, r)
	if r.Want && !g.board.askSlot(r, g.maxSlots) {
		return
	}
	if !r.Want {
		g.board.releaseSlot(r.Session)
		g.board.grantWaiting(g.maxSlots)
	}
	g.push()
}

// update changes the board from a test callback and pushes it.
func (g *fakeGroup) update(fn func(b *BoardState)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	fn(&g.board)
	g.push()
}

func sessionInput(policy config.Rotate) SessionInput {
	return SessionInput{
		Group:         "web",
		Name:          "lead",
		Spec:          agents.AgentSpec{Kind: "fake"},
		Policy:        policy,
		ActivityQueue: "host-a",
	}
}

func policy(mode string, percent, maxTurns int) config.Rotate {
	return config.Rotate{Mode: mode, ContextPercent: percent, MaxTurns: maxTurns}
}

// at schedules fn at d after the start of the (simulated) run.
func (h *harness) at(d time.Duration, fn func()) {
	h.env.RegisterDelayedCallback(fn, d)
}

// send queues n human messages at d.
func (h *harness) send(d time.Duration, n int) {
	h.at(d, func() {
		for i := 0; i < n; i++ {
			h.env.SignalWorkflow(SignalMessage, Message{Text: fmt.Sprintf("message %d", i+1)})
		}
	})
}

// onLoop runs f on the test environment's own loop and waits for it. A
// turn's hooks run on the activity's goroutine: a query made there would
// run beside the workflow's code and fail it, while the loop runs one
// thing at a time, after everything posted before (a signal just sent
// included).
func (h *harness) onLoop(f func()) {
	done := make(chan struct{})
	h.env.RegisterDelayedCallback(func() {
		defer close(done)
		f()
	}, 0)
	<-done
}

// view is the session's view; call it from the loop (h.at, h.onLoop).
func (h *harness) view() SessionView {
	v, err := h.env.QueryWorkflow(QuerySession)
	require.NoError(h.t, err)
	var out SessionView
	require.NoError(h.t, v.Get(&out))
	return out
}

// run executes the session until everything scheduled before end has
// happened, then returns its final view.
func (h *harness) run(in SessionInput, end time.Duration) SessionView {
	var final SessionView
	h.at(end, func() {
		final = h.view()
		h.env.CancelWorkflow()
	})
	h.env.ExecuteWorkflow(SessionWorkflowName, in)
	require.True(h.t, h.env.IsWorkflowCompleted())
	err := h.env.GetWorkflowError()
	var canceled *temporal.CanceledError
	require.True(h.t, errors.As(err, &canceled), "session ended with %v", err)
	return final
}

// rotations are the session's rotations, failures its failed ones, oldest
// first.
func rotations(v SessionView) []RotationEvent { return rotationEvents(v, EventRotation) }

func failures(v SessionView) []RotationEvent { return rotationEvents(v, EventRotationFailed) }

func rotationEvents(v SessionView, kind string) []RotationEvent {
	var out []RotationEvent
	for _, e := range v.Events {
		if e.Kind == kind {
			out = append(out, *e.Rotation)
		}
	}
	return out
}

// eventTexts are the texts of the session's events of kind, oldest first.
func eventTexts(v SessionView, kind string) []string {
	var out []string
	for _, e := range v.Events {
		if e.Kind == kind {
			out = append(out, e.Text)
		}
	}
	return out
}

func TestPolicyRotatesByContextPercent(t *testing.T) {
	h := newHarness(t)
	// 10k per turn of a 100k window: the 8th turn reaches 80%.
	h.send(time.Minute, 10)
	v := h.run(sessionInput(policy(config.ModeCompact, 80, 0)), time.Hour)

	rots := rotations(v)
	require.Len(t, rots, 1)
	require.Equal(t, config.ModeCompact, rots[0].Method)
	require.Equal(t, ReasonContext, rots[0].Reason)
	require.GreaterOrEqual(t, rots[0].BeforeTokens, int64(80_000))
	require.Less(t, rots[0].AfterTokens, rots[0].BeforeTokens)
	require.Equal(t, "conv-1", rots[0].NewConversation, "compaction keeps the vendor conversation")
	require.Equal(t, 1, v.Context.Rotations)
	require.Equal(t, 10, v.Context.TotalTurns)
	require.Equal(t, 2, v.Context.Turns, "the count starts again after a rotation")
	require.Equal(t, StatusIdle, v.Status)
	require.Equal(t, agents.SourceReported, v.Context.Source)
	require.NotNil(t, v.Context.LastRotation)
	require.True(t, v.Context.LastRotation.OK)
}

func TestPolicyRotatesByMaxTurnsAndNeverLoops(t *testing.T) {
	h := newHarness(t)
	h.agent.perTurn = 100 // the percent never matters here
	h.send(time.Minute, 9)
	v := h.run(sessionInput(policy(config.ModeHandoff, 85, 4)), time.Hour)

	rots := rotations(v)
	require.Len(t, rots, 2, "9 turns with maxTurns 4 rotate after turns 4 and 8")
	for _, r := range rots {
		require.Equal(t, ReasonMaxTurns, r.Reason)
		require.Equal(t, config.ModeHandoff, r.Method)
	}
	require.Equal(t, 1, v.Context.Turns)
	require.Equal(t, "conv-3", v.Conversation)
}

func TestOffModeNeverRotatesByItself(t *testing.T) {
	h := newHarness(t)
	h.send(time.Minute, 12) // 120% of the window, 12 turns
	v := h.run(sessionInput(policy(config.ModeOff, 50, 3)), time.Hour)
	require.Empty(t, rotations(v))
	require.Equal(t, 12, v.Context.Turns)
}

func TestManualRotateWhileIdleRunsAtOnce(t *testing.T) {
	h := newHarness(t)
	h.send(time.Minute, 2)
	var before SessionView
	h.at(10*time.Minute, func() {
		before = h.view()
		h.env.SignalWorkflow(SignalRotate, RotateRequest{Reason: ReasonManual})
	})
	var after SessionView
	h.at(10*time.Minute+time.Second, func() { after = h.view() })
	v := h.run(sessionInput(policy(config.ModeOff, 85, 0)), time.Hour)

	require.Equal(t, StatusIdle, before.Status)
	require.Equal(t, 1, after.Context.Rotations, "an idle session rotates at once")
	rots := rotations(v)
	require.Len(t, rots, 1)
	require.Equal(t, config.ModeCompact, rots[0].Method, "an off group rotates with auto, which compacts first")
	require.Equal(t, ReasonManual, rots[0].Reason)
	require.Len(t, h.agent.turnsOfKind(agents.TurnWork), 2, "a manual rotation sends no work turn")
}

func TestManualRotateWhileWorkingWaitsForTheTurn(t *testing.T) {
	h := newHarness(t)
	h.agent.onTurn = func(in activities.TurnInput) {
		if in.Prompt == "message 2" {
			h.env.SignalWorkflow(SignalRotate, RotateRequest{Mode: config.ModeHandoff, Reason: ReasonManual})
		}
	}
	h.send(time.Minute, 3)
	v := h.run(sessionInput(policy(config.ModeAuto, 85, 0)), time.Hour)

	queued := eventTexts(v, EventRotateQueued)
	require.Equal(t, []string{"web/lead is working: it rotates (handoff) when the current turn ends"}, queued)
	rots := rotations(v)
	require.Len(t, rots, 1)
	require.Equal(t, config.ModeHandoff, rots[0].Method)
	// The rotation ran between message 2 and message 3: message 3 went to
	// the fresh conversation.
	work := h.agent.turnsOfKind(agents.TurnWork)
	require.Len(t, work, 3)
	require.Equal(t, "conv-1", work[1].Conversation)
	require.Equal(t, "conv-2", work[2].Conversation)
	require.Equal(t, "conv-1", rots[0].OldConversation)
	require.Equal(t, "conv-2", rots[0].NewConversation)
	require.Equal(t, "handoff from conv-1", rots[0].Summary)
	require.Equal(t, SummaryFromAgent, rots[0].SummarySource)
	require.Equal(t, []string{"conv-1"}, h.agent.stops, "the old agent is stopped")
}

func TestAgentInitiatedHandoffRotatesWithoutAsking(t *testing.T) {
	h := newHarness(t)
	h.agent.onTurn = func(in activities.TurnInput) {
		if in.Prompt == "message 2" {
			h.env.SignalWorkflow(SignalHandoffWrite, HandoffWrite{Summary: "cluttered: done A, next B"})
		}
	}
	h.send(time.Minute, 3)
	v := h.run(sessionInput(policy(config.ModeCompact, 85, 0)), time.Hour)

	rots := rotations(v)
	require.Len(t, rots, 1)
	require.Equal(t, config.ModeHandoff, rots[0].Method, "the agent's handoff overrides the group's compact mode")
	require.Equal(t, ReasonAgent, rots[0].Reason)
	require.Equal(t, "cluttered: done A, next B", rots[0].Summary)
	require.Empty(t, h.agent.turnsOfKind(agents.TurnHandoffRequest), "nid does not ask again")
	fresh := h.agent.turnsOfKind(agents.TurnFresh)
	require.Len(t, fresh, 1)
	require.Contains(t, fresh[0].Prompt, "cluttered: done A, next B")
	require.Contains(t, fresh[0].Prompt, "The board")
	require.False(t, v.HandoffPending)
}

func TestCompactionFailureFallsBackToHandoffInAuto(t *testing.T) {
	h := newHarness(t)
	h.agent.failCompact = true
	h.send(time.Minute, 9)
	v := h.run(sessionInput(policy(config.ModeAuto, 80, 0)), time.Hour)

	fails := failures(v)
	require.Len(t, fails, 1, "the failed compaction is recorded")
	require.Equal(t, config.ModeCompact, fails[0].Method)
	require.Contains(t, fails[0].Error, "refused")
	rots := rotations(v)
	require.Len(t, rots, 1)
	require.Equal(t, config.ModeHandoff, rots[0].Method)
	require.True(t, rots[0].FellBack)
	require.Equal(t, "conv-2", v.Conversation)
	require.Empty(t, h.inbox, "a fallback that worked is not the human's problem")
}

func TestCompactionFailureInCompactModeGoesToInbox(t *testing.T) {
	h := newHarness(t)
	h.agent.failCompact = true
	h.send(time.Minute, 9)
	v := h.run(sessionInput(policy(config.ModeCompact, 80, 0)), time.Hour)

	require.Empty(t, rotations(v))
	fails := failures(v)
	// Turn 8 reaches 80%: one failure. Turn 9 is past the held turn, so the
	// policy tries once more, and fails once more; it never loops.
	require.Len(t, fails, 2)
	require.Equal(t, "conv-1", v.Conversation, "the conversation goes on")
	require.Equal(t, StatusIdle, v.Status)
	require.Len(t, h.inbox, 2)
	require.Equal(t, "lead", h.inbox[0].Session)
	require.Contains(t, h.inbox[0].Text, "compact rotation (context) failed")
	require.False(t, v.Context.LastRotation.OK)
	require.Equal(t, 0, v.Context.Rotations)
}

func TestHandoffWithoutSummaryUsesLastOutput(t *testing.T) {
	h := newHarness(t)
	h.agent.noHandoff = true
	h.send(time.Minute, 2)
	h.at(10*time.Minute, func() {
		h.env.SignalWorkflow(SignalRotate, RotateRequest{Mode: config.ModeHandoff})
	})
	v := h.run(sessionInput(policy(config.ModeAuto, 85, 0)), time.Hour)

	rots := rotations(v)
	require.Len(t, rots, 1)
	require.Equal(t, SummaryFromLastOutput, rots[0].SummarySource)
	require.Equal(t, "output of turn in conv-1", rots[0].Summary)
	fresh := h.agent.turnsOfKind(agents.TurnFresh)
	require.Len(t, fresh, 1)
	require.Contains(t, fresh[0].Prompt, "wrote no handoff")
	require.Contains(t, fresh[0].Prompt, "output of turn in conv-1")
}

func TestTwoRequestsBeforeItRunsAreOneRotation(t *testing.T) {
	h := newHarness(t)
	h.agent.onTurn = func(in activities.TurnInput) {
		if in.Prompt == "message 1" {
			h.env.SignalWorkflow(SignalRotate, RotateRequest{})
			h.env.SignalWorkflow(SignalRotate, RotateRequest{Mode: config.ModeHandoff})
		}
	}
	h.send(time.Minute, 2)
	v := h.run(sessionInput(policy(config.ModeAuto, 85, 0)), time.Hour)

	rots := rotations(v)
	require.Len(t, rots, 1)
	require.Equal(t, config.ModeHandoff, rots[0].Method, "the later request's mode wins")
	require.Equal(t, 1, v.Context.Rotations)
}

func TestManualRequestDuringAPolicyRotationRunsAfterIt(t *testing.T) {
	h := newHarness(t)
	h.agent.onCompact = func() {
		h.env.SignalWorkflow(SignalRotate, RotateRequest{Mode: config.ModeHandoff})
	}
	h.send(time.Minute, 8)
	v := h.run(sessionInput(policy(config.ModeCompact, 80, 0)), time.Hour)

	rots := rotations(v)
	require.Len(t, rots, 2)
	require.Equal(t, config.ModeCompact, rots[0].Method)
	require.Equal(t, ReasonContext, rots[0].Reason)
	require.Equal(t, config.ModeHandoff, rots[1].Method, "the human's handoff is not swallowed by the compaction")
	require.Equal(t, ReasonManual, rots[1].Reason)
	require.Nil(t, v.PendingRotate)
}

// failTurns makes the agent's turn fail (the agent crashed) when fails
// says so of the turn (numbered from 1) and its input, and answer
// otherwise; calls counts the turns.
func failTurns(h *harness, calls *int, fails func(n int, in activities.TurnInput) bool) {
	h.env.OnActivity(activities.RunTurnName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.TurnInput) (activities.TurnResult, error) {
			*calls++
			if fails(*calls, in) {
				return activities.TurnResult{}, temporal.NewNonRetryableApplicationError("agent crashed", activities.ErrAgentFailed, nil)
			}
			return activities.TurnResult{TurnReport: agents.TurnReport{Conversation: "c", Output: "yes",
				Usage: agents.Usage{UsedTokens: 10, WindowTokens: 100, Source: agents.SourceReported}}}, nil
		})
}

func TestFailingTurnsNeedAttentionUntilTheHumanWrites(t *testing.T) {
	h := newHarness(t)
	calls := 0
	failTurns(h, &calls, func(_ int, in activities.TurnInput) bool { return in.Prompt != "are you there?" })
	in := sessionInput(policy(config.ModeAuto, 85, 0))
	var stuck SessionView
	h.at(30*time.Minute, func() { stuck = h.view() })
	h.at(40*time.Minute, func() { h.env.SignalWorkflow(SignalMessage, Message{Text: "are you there?"}) })
	h.send(time.Minute, 3)
	v := h.run(in, time.Hour)

	require.Equal(t, StatusNeedsAttention, stuck.Status, "three failures in a row stop automatic turns")
	require.Equal(t, 2, stuck.QueuedMessages, "the human's other messages are kept")
	require.Len(t, h.inbox, 2)
	require.Equal(t, "3 turns failed in a row; last: agent crashed; your message was not run: message 1", h.inbox[0].Text)
	// The human's answer runs first; then the messages kept are tried
	// again, and message 2 fails three times in its turn.
	require.Equal(t, "3 turns failed in a row; last: agent crashed; your message was not run: message 2", h.inbox[1].Text)
	require.Equal(t, StatusNeedsAttention, v.Status)
	require.Equal(t, 1, v.Context.TotalTurns)
	require.Equal(t, 7, calls, "no turn is tried while the session waits for the human")
	require.Equal(t, 1, v.QueuedMessages, "message 3 still waits")
}

func TestConfigSignalChangesTheGoalFromTheNextTurn(t *testing.T) {
	h := newHarness(t)
	h.agent.onTurn = func(in activities.TurnInput) {
		if strings.Contains(in.Prompt, "Ship dark mode") {
			// Without a goal the session stops after this turn.
			h.env.SignalWorkflow(SignalConfig, SessionConfig{Goal: "", Spec: agents.AgentSpec{Kind: "fake"}})
		}
	}
	h.send(time.Minute, 1)
	h.at(10*time.Minute, func() {
		h.env.SignalWorkflow(SignalConfig, SessionConfig{Goal: "Ship dark mode", Spec: agents.AgentSpec{Kind: "fake"}})
	})
	v := h.run(sessionInput(policy(config.ModeOff, 85, 0)), time.Hour)

	work := h.agent.turnsOfKind(agents.TurnWork)
	require.Len(t, work, 2)
	require.Contains(t, work[1].Prompt, "Goal: Ship dark mode", "the new goal briefs the session")
	kinds := eventTexts(v, EventConfig)
	require.Len(t, kinds, 2)
}

func TestUnknownUsageRotatesOnlyOnMaxTurns(t *testing.T) {
	h := newHarness(t)
	h.env.OnActivity(activities.RunTurnName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.TurnInput) (activities.TurnResult, error) {
			return activities.TurnResult{TurnReport: agents.TurnReport{Conversation: "x", Output: "ok",
				Usage: agents.Usage{Source: agents.SourceUnknown}}}, nil
		})
	h.send(time.Minute, 5)
	v := h.run(sessionInput(policy(config.ModeHandoff, 1, 3)), time.Hour)

	require.Nil(t, v.Context.Percent, "no percent without numbers")
	require.Equal(t, agents.SourceUnknown, v.Context.Source)
	rots := rotations(v)
	require.Len(t, rots, 1)
	require.Equal(t, ReasonMaxTurns, rots[0].Reason)
}

func TestPolicySignalChangesBehaviour(t *testing.T) {
	h := newHarness(t)
	h.agent.perTurn = 100
	h.send(time.Minute, 3)
	h.at(10*time.Minute, func() {
		h.env.SignalWorkflow(SignalPolicy, PolicyChange{Rotate: policy(config.ModeHandoff, 85, 2)})
	})
	h.send(20*time.Minute, 2)
	v := h.run(sessionInput(policy(config.ModeAuto, 85, 0)), time.Hour)

	rots := rotations(v)
	// Three turns without a limit, then maxTurns 2: the idle session is
	// already past it and rotates at once, then once more after two turns.
	require.Len(t, rots, 2)
	require.Equal(t, config.ModeHandoff, rots[0].Method)
	require.Equal(t, ReasonMaxTurns, rots[0].Reason)
	require.Equal(t, 2, v.Policy.MaxTurns)
}

func TestContinueAsNewKeepsState(t *testing.T) {
	h := newHarness(t)
	h.agent.onTurn = func(in activities.TurnInput) {
		if in.Prompt == "message 9" {
			h.env.SignalWorkflow(SignalRotate, RotateRequest{Mode: config.ModeHandoff})
		}
	}
	h.send(time.Minute, 9)
	h.at(2*time.Minute, func() { h.env.SetContinueAsNewSuggested(true) })
	in := sessionInput(policy(config.ModeCompact, 80, 0))
	h.env.ExecuteWorkflow(SessionWorkflowName, in)
	require.True(t, h.env.IsWorkflowCompleted())
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(h.env.GetWorkflowError(), &can), "got %v", h.env.GetWorkflowError())
	require.Equal(t, SessionWorkflowName, can.WorkflowType.Name)

	var next SessionInput
	require.NoError(t, decodeFirst(can, &next))
	st := next.State
	require.NotNil(t, st)
	// The compaction at 80% (turn 8), then the manual handoff after turn 9.
	require.Equal(t, 2, st.Context.Rotations)
	require.Equal(t, 9, st.Context.TotalTurns)
	require.Equal(t, 2, st.RotationAttempts)
	require.Equal(t, "conv-2", st.Conversation)
	require.NotEmpty(t, st.Events)
	require.Equal(t, "web", next.Group)
	require.Equal(t, in.Policy, next.Policy)

	// The next run picks up exactly there, including a message that was
	// waiting when the run ended.
	st.Messages = []string{"queued before continuing"}
	h2 := newHarness(t)
	h2.agent.convs = 2
	h2.send(time.Minute, 1)
	h2.at(10*time.Minute, func() { h2.env.SignalWorkflow(SignalRotate, RotateRequest{Mode: config.ModeHandoff}) })
	v := h2.run(next, time.Hour)
	require.Equal(t, 3, v.Context.Rotations)
	require.Equal(t, 11, v.Context.TotalTurns)
	work := h2.agent.turnsOfKind(agents.TurnWork)
	require.Len(t, work, 2)
	require.Equal(t, "queued before continuing", work[0].Prompt)
	require.Equal(t, "conv-2", work[0].Conversation)
	rots := rotations(v)
	require.Equal(t, 3, rots[len(rots)-1].Number, "rotation children keep their own numbering")
	require.Equal(t, "conv-3", rots[len(rots)-1].NewConversation)
	last := st.Events[len(st.Events)-1].Seq
	var kinds []string
	for _, e := range v.Events {
		if e.Seq > last {
			kinds = append(kinds, e.Kind)
		}
	}
	require.Equal(t, []string{EventTurn, EventMessage, EventTurn, EventRotateQueued, EventHandoffWritten, EventRotation}, kinds,
		"the feed goes on after the events carried over")
}

func decodeFirst(can *workflow.ContinueAsNewError, out interface{}) error {
	return converter.GetDefaultDataConverter().FromPayloads(can.Input, out)
}

func TestFreshMessageSaysWhereTheSummaryCameFrom(t *testing.T) {
	ref := agents.SessionRef{Group: "web", Name: "lead"}
	board := BoardText(BoardView{Group: "web", Goal: "Add dark mode"}, "lead")
	own := FreshMessage(ref, ReasonContext, "done A; next B", SummaryFromAgent, board)
	require.Contains(t, own, "Handoff from your previous conversation:\ndone A; next B")
	require.Contains(t, own, "Goal: Add dark mode")
	last := FreshMessage(ref, ReasonManual, "raw output", SummaryFromLastOutput, board)
	require.Contains(t, last, "wrote no handoff")
	require.True(t, strings.Contains(last, "raw output"))
}

func TestSessionWorksThroughTheBoard(t *testing.T) {
	h := newHarness(t)
	h.group.board.add("Dark mode toggle", "a switch in settings")
	h.group.board.add("Settings page", "")
	h.group.goal = "Add dark mode"
	// The agent finishes each task on its second turn, as task_done over
	// MCP would: the group marks it done and pushes the board.
	h.agent.onTurn = func(in activities.TurnInput) {
		if strings.HasPrefix(in.Prompt, "Continue with task ") {
			id := strings.TrimSuffix(strings.Fields(in.Prompt)[3], ":")
			h.group.update(func(b *BoardState) { b.done(id, time.Time{}) })
		}
	}
	in := sessionInput(policy(config.ModeAuto, 85, 0))
	in.Goal = "Add dark mode"
	v := h.run(in, time.Hour)

	work := h.agent.turnsOfKind(agents.TurnWork)
	require.Len(t, work, 4, "brief and continue each of the two tasks, then idle")
	require.Contains(t, work[0].Prompt, "Your task: task t1: Dark mode toggle\na switch in settings")
	require.Contains(t, work[0].Prompt, "t1 [claimed] Dark mode toggle (claimed by lead) <- yours", "the board comes with the task")
	require.Contains(t, work[1].Prompt, "Continue with task t1")
	require.Contains(t, work[2].Prompt, "Your task: task t2: Settings page")
	require.Equal(t, StatusIdle, v.Status, "nothing left: idle until a task or a message arrives")
	require.Nil(t, v.Task)
	require.EqualValues(t, 4, chargedTurns(h.group.charges), "every turn is charged to the group")
}

// A session whose copy of the board leaves out every task, all taken by
// other sessions, waits for one: it does not work on the group's goal as on
// a board without tasks.
func TestSessionWaitsWhenEveryTaskIsTakenByOthers(t *testing.T) {
	h := newHarness(t)
	h.group.board.add("Dark mode toggle", "")
	h.group.board.add("Settings page", "")
	h.group.board.claim("worker", "t1", time.Time{})
	h.group.board.claim("other", "t2", time.Time{})
	h.group.goal = "Add dark mode"
	h.agent.onTurn = func(in activities.TurnInput) {
		if strings.HasPrefix(in.Prompt, "Continue with task ") {
			h.group.update(func(b *BoardState) { b.done("t3", time.Time{}) })
		}
	}
	in := sessionInput(policy(config.ModeAuto, 85, 0))
	in.Goal = "Add dark mode"
	var idle SessionView
	h.at(20*time.Minute, func() { idle = h.view() })
	h.at(30*time.Minute, func() {
		// Pushed outside the fake group's lock: the session asks for the
		// task at once, in this same call.
		h.group.mu.Lock()
		h.group.board.add("Docs", "the README")
		h.group.mu.Unlock()
		h.group.push()
	})
	h.run(in, time.Hour)

	require.Equal(t, StatusIdle, idle.Status)
	require.Nil(t, idle.Task)
	work := h.agent.turnsOfKind(agents.TurnWork)
	require.Len(t, work, 2, "the task added is claimed and worked on, and nothing else")
	require.Contains(t, work[0].Prompt, "Your task: task t3: Docs\nthe README", "no goal turn before it")
	require.Contains(t, work[0].Prompt, "(and 2 claimed or done by other sessions: board_read lists them)")
}

func chargedTurns(cs []Charge) int64 {
	var n int64
	for _, c := range cs {
		n += c.Turns
	}
	return n
}

func TestBudgetPausesTurnsAndPolicyRotationsButNotManualOnes(t *testing.T) {
	h := newHarness(t)
	h.group.board.Budget = config.Budget{Turns: 3}
	h.agent.perTurn = 30_000 // 90% after three turns: the policy would rotate
	in := sessionInput(policy(config.ModeCompact, 80, 0))
	in.Goal = "Spend it all"
	var paused SessionView
	h.at(10*time.Minute, func() { paused = h.view() })
	h.at(20*time.Minute, func() { h.env.SignalWorkflow(SignalRotate, RotateRequest{Mode: config.ModeCompact}) })
	var rotated SessionView
	h.at(30*time.Minute, func() { rotated = h.view() })
	h.at(40*time.Minute, func() {
		h.group.update(func(b *BoardState) { b.Budget.Turns = 5 })
	})
	v := h.run(in, time.Hour)

	require.Equal(t, StatusPaused, paused.Status)
	require.Equal(t, 3, paused.Context.TotalTurns, "no new turn once the budget is spent")
	require.Equal(t, 0, paused.Context.Rotations, "the policy rotation waits: it costs a turn")
	require.Equal(t, 1, rotated.Context.Rotations, "nid rotate still runs")
	require.Equal(t, StatusPaused, rotated.Status)
	// Three turns and the compaction spent four of five: one more turn.
	require.Equal(t, 4, v.Context.TotalTurns, "raising the budget resumes the session")
	require.EqualValues(t, 5, chargedTurns(h.group.charges))
	require.Equal(t, StatusPaused, v.Status, "and it pauses again at the new limit")
}

func TestRaisingTheBudgetRunsTheWaitingPolicyRotation(t *testing.T) {
	h := newHarness(t)
	h.group.board.Budget = config.Budget{Turns: 3}
	h.agent.perTurn = 30_000 // 90% after three turns: the policy is due
	in := sessionInput(policy(config.ModeCompact, 80, 0))
	in.Goal = "Spend it all"
	var paused SessionView
	h.at(10*time.Minute, func() { paused = h.view() })
	h.at(20*time.Minute, func() { h.group.update(func(b *BoardState) { b.Budget.Turns = 4 }) })
	v := h.run(in, time.Hour)

	require.Equal(t, StatusPaused, paused.Status)
	require.Equal(t, 0, paused.Context.Rotations, "due, but waiting for budget")
	rots := rotations(v)
	require.Len(t, rots, 1, "raising the budget lets the waiting rotation run")
	require.Equal(t, ReasonContext, rots[0].Reason)
	require.Equal(t, 3, v.Context.TotalTurns, "the new turn of budget went to the rotation")
}

// Boards can reach a session out of order. One older than the session's
// must not take back a grant: the turn would wait for it forever, or be
// charged a second time.
func TestAnOlderBoardDoesNotTakeBackAGrant(t *testing.T) {
	h := newHarness(t)
	h.group.board.Budget = config.Budget{Turns: 5}
	h.group.staleAfterGrant = true
	h.agent.perTurn = 100
	in := sessionInput(policy(config.ModeOff, 80, 0))
	in.Goal = "Spend it all"
	v := h.run(in, time.Hour)

	require.Equal(t, 5, v.Context.TotalTurns, "every granted turn runs")
	require.EqualValues(t, 5, chargedTurns(h.group.charges), "and is counted once")
	require.Equal(t, StatusPaused, v.Status)
}

// A manual request that arrives while the agent's own handoff waits for its
// turn to end joins that handoff: one rotation, not a second one on the
// fresh conversation.
func TestManualRotateDuringTheAgentsHandoffJoinsIt(t *testing.T) {
	h := newHarness(t)
	h.agent.onTurn = func(in activities.TurnInput) {
		if in.Prompt == "message 2" {
			h.env.SignalWorkflow(SignalHandoffWrite, HandoffWrite{Summary: "cluttered: done A, next B"})
			h.env.SignalWorkflow(SignalRotate, RotateRequest{})
		}
	}
	h.send(time.Minute, 3)
	v := h.run(sessionInput(policy(config.ModeAuto, 85, 0)), time.Hour)

	rots := rotations(v)
	require.Len(t, rots, 1, "the request joins the agent's handoff")
	require.Equal(t, ReasonAgent, rots[0].Reason)
	require.Equal(t, config.ModeHandoff, rots[0].Method)
	require.Nil(t, v.PendingRotate)
	queued := eventTexts(v, EventRotateQueued)
	require.Equal(t, []string{"web/lead wrote its own handoff and rotates (handoff) when the current turn ends: this request joins it"}, queued)
}

// A request already pending when the agent writes its own handoff is served
// by that handoff.
func TestPendingRequestJoinsTheAgentsHandoff(t *testing.T) {
	h := newHarness(t)
	h.agent.onTurn = func(in activities.TurnInput) {
		if in.Prompt == "message 2" {
			h.env.SignalWorkflow(SignalRotate, RotateRequest{Mode: config.ModeCompact})
			h.env.SignalWorkflow(SignalHandoffWrite, HandoffWrite{Summary: "done A, next B"})
		}
	}
	h.send(time.Minute, 3)
	v := h.run(sessionInput(policy(config.ModeAuto, 85, 0)), time.Hour)

	rots := rotations(v)
	require.Len(t, rots, 1, "no second rotation on the fresh conversation")
	require.Equal(t, ReasonAgent, rots[0].Reason)
	require.Equal(t, "done A, next B", rots[0].Summary)
	require.Nil(t, v.PendingRotate)
	work := h.agent.turnsOfKind(agents.TurnWork)
	require.Equal(t, "conv-2", work[2].Conversation, "message 3 goes to the fresh conversation")
}

// What the session records of a manual request is what DecideRotate, run by
// `nid rotate` on the view it queried just before, answered.
func TestTheAnswerIsWhatTheSessionDoes(t *testing.T) {
	tests := []struct {
		name string
		// setup arranges the scenario; it returns when to query and signal.
		setup func(h *harness) time.Duration
		mode  string
		want  string
	}{
		{"idle", func(h *harness) time.Duration { h.send(time.Minute, 1); return 10 * time.Minute },
			"", "rotating web/lead now (compact)"},
		{"never took a turn", func(h *harness) time.Duration { return time.Minute },
			config.ModeHandoff, "rotate request ignored: web/lead has taken no turn yet: there is no conversation to rotate"},
		{"working", func(h *harness) time.Duration { midTurn(h, "message 2"); return 0 },
			config.ModeHandoff, "web/lead is working: it rotates (handoff) when the current turn ends"},
		{"stopped", func(h *harness) time.Duration {
			h.send(time.Minute, 1)
			h.at(5*time.Minute, func() { h.env.SignalWorkflow(SignalStop, struct{}{}) })
			return 10 * time.Minute
		}, "", "rotate request ignored: web/lead is stopped (nid stop): it takes no more turns, messages or rotations"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			at := tt.setup(h)
			var answer RotateAnswer
			var refused error
			ask := func() {
				d := DecideRotate(tt.mode, h.view())
				answer, refused = d.Answer("web/lead"), d.Err("web/lead")
				h.env.SignalWorkflow(SignalRotate, RotateRequest{Mode: tt.mode})
			}
			if at > 0 {
				h.at(at, ask)
			} else {
				h.ask = ask
			}
			v := h.run(sessionInput(policy(config.ModeCompact, 85, 0)), time.Hour)
			require.Equal(t, []string{tt.want}, eventTexts(v, EventRotateQueued))
			require.Equal(t, tt.want, answer.Text)
			if strings.HasPrefix(tt.want, "rotate request ignored") {
				require.Error(t, refused)
				require.Empty(t, rotations(v))
			} else {
				require.NoError(t, refused)
				require.Len(t, rotations(v), 1)
			}
		})
	}
}

// A session still on an older rung (it has not continued as new since the
// upgrade) decides a rotate request by that rung's rules, and the answer a
// client gives from its view is that same decision: before
// VersionOneRotateDecision, a request made while the agent's own handoff
// waits is a rotation of its own, after the handoff.
func TestAnOlderRungIsAnsweredByItsOwnRules(t *testing.T) {
	h := newHarness(t)
	h.env.OnGetVersion(versionChangeID, workflow.DefaultVersion, workflow.Version(versionLatest)).Return(workflow.Version(VersionTeam))
	var asked SessionView
	var answer RotateAnswer
	h.agent.onTurn = func(in activities.TurnInput) {
		if in.Prompt == "message 2" {
			h.env.SignalWorkflow(SignalHandoffWrite, HandoffWrite{Summary: "done A, next B"})
			h.onLoop(func() {
				asked = h.view()
				answer = DecideRotate("", asked).Answer("web/lead")
				h.env.SignalWorkflow(SignalRotate, RotateRequest{})
			})
		}
	}
	h.send(time.Minute, 3)
	v := h.run(sessionInput(policy(config.ModeAuto, 85, 0)), time.Hour)

	require.True(t, asked.HandoffPending, "the request came while the agent's handoff waited")
	want := "web/lead is working: it rotates (auto) when the current turn ends"
	require.Equal(t, want, answer.Text)
	require.Equal(t, []string{want}, eventTexts(v, EventRotateQueued), "the session did what the client answered")
	rots := rotations(v)
	require.Len(t, rots, 2, "the rung's own rules: a second rotation after the agent's handoff")
	require.Equal(t, []string{ReasonAgent, ReasonManual}, []string{rots[0].Reason, rots[1].Reason})
}

// midTurn makes the agent ask the harness's question (h.ask) during the
// turn whose prompt is prompt. Three messages are sent.
func midTurn(h *harness, prompt string) {
	h.agent.onTurn = func(in activities.TurnInput) {
		if in.Prompt == prompt {
			h.onLoop(h.ask)
		}
	}
	h.send(time.Minute, 3)
}

// The cases a workflow test cannot arrange at one instant: the decision on
// a view, and what it tells the CLI.
func TestDecideRotate(t *testing.T) {
	pct := 90.0
	busy := SessionView{Status: StatusWorking, Conversation: "c1", Context: ContextRecord{TotalTurns: 3, Percent: &pct},
		Policy: policy(config.ModeCompact, 85, 0)}
	with := func(f func(v *SessionView)) SessionView { v := busy; f(&v); return v }
	tests := []struct {
		name    string
		mode    string
		view    SessionView
		version Version
		when    string
		method  string
		text    string
	}{
		{"working", "", busy, versionLatest, RotateAfterTurn, config.ModeCompact,
			"web/lead is working: it rotates (compact) when the current turn ends"},
		{"rate limited", config.ModeHandoff, with(func(v *SessionView) { v.Status = StatusRateLimited }), versionLatest, RotateAfterTurn, config.ModeHandoff,
			"web/lead is rate-limited: it rotates (handoff) when the current turn ends"},
		{"off group", "", with(func(v *SessionView) { v.Status, v.Policy.Mode = StatusIdle, config.ModeOff }), versionLatest, RotateNow, config.ModeAuto,
			"rotating web/lead now (auto)"},
		{"agent's handoff waits", config.ModeCompact, with(func(v *SessionView) { v.HandoffPending = true }), versionLatest, RotateAfterTurn, config.ModeHandoff,
			"web/lead wrote its own handoff and rotates (handoff) when the current turn ends: this request joins it"},
		{"agent's handoff, before the one decision", config.ModeCompact, with(func(v *SessionView) { v.HandoffPending = true }), VersionTeam, RotateAfterTurn, config.ModeCompact,
			"web/lead is working: it rotates (compact) when the current turn ends"},
		{"agent's handoff waits while the policy is stopped", "", with(func(v *SessionView) { v.HandoffPending, v.PolicyHalted = true, "thrashing" }), versionLatest,
			RotateAfterTurn, config.ModeHandoff,
			"web/lead is working: it rotates (handoff) when the current turn ends, with the handoff its agent wrote (it waited: policy rotations are stopped)"},
		{"a mode asked for while the policy is stopped", config.ModeCompact, with(func(v *SessionView) {
			v.Status, v.HandoffPending, v.PolicyHalted = StatusIdle, true, "thrashing"
		}), versionLatest, RotateNow, config.ModeCompact, "rotating web/lead now (compact)"},
		{"agent's handoff while the policy is stopped, before it could wait", "", with(func(v *SessionView) { v.HandoffPending, v.PolicyHalted = true, "thrashing" }),
			VersionVouchedHandoff, RotateAfterTurn, config.ModeHandoff,
			"web/lead wrote its own handoff and rotates (handoff) when the current turn ends: this request joins it"},
		{"context full", "", with(func(v *SessionView) { v.Status, v.ContextFull = StatusIdle, true }), versionLatest, RotateAfterTurn, config.ModeHandoff,
			"web/lead's conversation no longer fits its window and rotates (handoff) next: this request joins it"},
		{"pending", "", with(func(v *SessionView) { v.PendingRotate = &RotateRequest{Mode: config.ModeHandoff} }), versionLatest, RotateAfterTurn, config.ModeHandoff,
			"a rotation is already pending for web/lead: this request joins it (handoff); it runs when the current turn ends"},
		{"manual running, same mode", "", with(func(v *SessionView) {
			v.Status, v.Rotating = StatusRotating, &RotateRequest{Mode: config.ModeHandoff, Reason: ReasonManual}
		}), versionLatest, RotateJoined, config.ModeHandoff, "web/lead is rotating now (handoff): this request joins that rotation"},
		{"policy rotation running", config.ModeHandoff, with(func(v *SessionView) {
			v.Status, v.Rotating = StatusRotating, &RotateRequest{Mode: config.ModeCompact, Reason: ReasonContext}
		}), versionLatest, RotateAfterTurn, config.ModeHandoff, "web/lead is in another rotation now: it rotates (handoff) when that one ends"},
		{"fresh session", "", SessionView{Status: StatusIdle}, versionLatest, "", "",
			"rotate request ignored: web/lead has taken no turn yet: there is no conversation to rotate"},
		{"fresh session, before the one decision", "", SessionView{Status: StatusIdle}, VersionTeam, RotateNow, config.ModeAuto,
			"rotating web/lead now (auto)"},
		{"stopped", "", with(func(v *SessionView) { v.Status = StatusStopped }), versionLatest, "", "",
			"rotate request ignored: web/lead is stopped (nid stop): it takes no more turns, messages or rotations"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := tt.view
			v.Rung = tt.version
			d := DecideRotate(tt.mode, v)
			a := d.Answer("web/lead")
			require.Equal(t, tt.text, a.Text)
			require.Equal(t, tt.when, a.When)
			require.Equal(t, tt.method, a.Mode)
			require.Equal(t, tt.when == "", d.Err("web/lead") != nil)
		})
	}
}

// A session holds at most MaxQueuedMessages: the rest are refused in its
// feed, and those it holds all run.
func TestMessagesPastTheQueueCapAreRefused(t *testing.T) {
	h := newHarness(t)
	h.agent.perTurn = 10
	h.agent.onTurn = func(in activities.TurnInput) {
		if in.Prompt == "first" {
			for i := 0; i < MaxQueuedMessages+3; i++ {
				h.env.SignalWorkflow(SignalMessage, Message{Text: fmt.Sprintf("message %d", i+1)})
			}
		}
	}
	h.at(time.Minute, func() { h.env.SignalWorkflow(SignalMessage, Message{Text: "first"}) })
	v := h.run(sessionInput(policy(config.ModeOff, 85, 0)), time.Hour)

	var refused []string
	for _, text := range eventTexts(v, EventMessage) {
		if strings.HasPrefix(text, "message not queued") {
			refused = append(refused, text)
		}
	}
	require.Len(t, refused, 3)
	require.Equal(t, "message not queued: web/lead has 20 messages queued, the most it holds: send more once its turns have taken some", refused[0])
	require.Equal(t, 1+MaxQueuedMessages, v.Context.TotalTurns, "every message it held ran")
}

// The queue holds at most MaxQueuedBytes: a message past it is refused,
// saying so, and the ones it holds all run.
func TestMessagesPastTheQueuedBytesAreRefused(t *testing.T) {
	h := newHarness(t)
	h.agent.perTurn = 10
	big := strings.Repeat("x", 60<<10)
	h.agent.onTurn = func(in activities.TurnInput) {
		if in.Prompt == "first" {
			for i := range 5 {
				h.env.SignalWorkflow(SignalMessage, Message{Text: fmt.Sprintf("message %d %s", i+1, big)})
			}
		}
	}
	h.at(time.Minute, func() { h.env.SignalWorkflow(SignalMessage, Message{Text: "first"}) })
	v := h.run(sessionInput(policy(config.ModeOff, 85, 0)), time.Hour)

	var refused []string
	for _, text := range eventTexts(v, EventMessage) {
		if strings.HasPrefix(text, "message not queued") {
			refused = append(refused, text)
		}
	}
	require.Equal(t, []string{"message not queued: web/lead has 245800 bytes of messages queued; with this one it would hold more than 262144: send it once its turns have taken some"}, refused)
	require.Equal(t, 1+4, v.Context.TotalTurns, "every message it held ran")
}

func TestAStoppedSessionQueuesNoMessage(t *testing.T) {
	h := newHarness(t)
	h.send(time.Minute, 1)
	h.at(10*time.Minute, func() { h.env.SignalWorkflow(SignalStop, struct{}{}) })
	h.send(20*time.Minute, 1)
	v := h.run(sessionInput(policy(config.ModeOff, 85, 0)), time.Hour)

	require.Equal(t, 1, v.Context.TotalTurns)
	require.Equal(t, 0, v.QueuedMessages)
	texts := eventTexts(v, EventMessage)
	require.Equal(t, "message not queued: web/lead is stopped (nid stop): it takes no more turns, messages or rotations", texts[len(texts)-1])
}

func TestMessageRefusal(t *testing.T) {
	tests := []struct {
		name string
		text string
		view SessionView
		want string
	}{
		{"fine", "hi", SessionView{Status: StatusWorking, QueuedMessages: 3, QueuedBytes: 100}, ""},
		{"stopped", "hi", SessionView{Status: StatusStopped}, stoppedRefusal},
		{"too large", strings.Repeat("x", MaxMessageBytes+1), SessionView{Status: StatusIdle}, "does not take a message of 65537 bytes: the limit is 65536"},
		{"queue full", "hi", SessionView{Status: StatusWorking, QueuedMessages: MaxQueuedMessages}, "has 20 messages queued, the most it holds: send more once its turns have taken some"},
		{"queue bytes", strings.Repeat("x", 1000), SessionView{Status: StatusWorking, QueuedMessages: 5, QueuedBytes: MaxQueuedBytes - 999},
			"has 261145 bytes of messages queued; with this one it would hold more than 262144: send it once its turns have taken some"},
		{"before the bounded queue", "hi", SessionView{Status: StatusStopped, QueuedMessages: MaxQueuedMessages, Rung: VersionOneRotateDecision}, ""},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, MessageRefusal(tt.text, tt.view), tt.name)
	}
}

// A session stopped while it rotates cancels the rotation: no fresh
// conversation starts after the stop, and a cancelled rotation is not a
// failure for the inbox.
func TestStopDuringARotationCancelsIt(t *testing.T) {
	h := newHarness(t)
	h.agent.noHandoff = true
	stopped := false
	h.env.OnActivity(activities.RunTurnName, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.TurnInput) (activities.TurnResult, error) {
			if in.Kind == agents.TurnHandoffRequest && !stopped {
				stopped = true
				h.env.SignalWorkflow(SignalStop, struct{}{})
			}
			return h.agent.RunTurn(ctx, in)
		})
	h.send(time.Minute, 2)
	h.at(10*time.Minute, func() { h.env.SignalWorkflow(SignalRotate, RotateRequest{Mode: config.ModeHandoff}) })
	v := h.run(sessionInput(policy(config.ModeOff, 85, 0)), time.Hour)

	require.True(t, stopped)
	require.Empty(t, h.agent.turnsOfKind(agents.TurnFresh), "no fresh conversation after the stop")
	require.Empty(t, rotations(v))
	require.Equal(t, StatusStopped, v.Status)
	require.Empty(t, h.inbox, "a cancelled rotation is not a failure")
	require.Contains(t, eventTexts(v, EventRotationFailed), "✗ handoff rotation (manual) cancelled: the session was stopped")
	require.Contains(t, h.agent.stops, "conv-1", "the agent is stopped")
}

// A handoff request a stop cuts off is no warning on the worker's terminal
// (nid's default log level): the feed says the rotation was cancelled.
func TestAStopCuttingARotationWarnsNobody(t *testing.T) {
	var logs bytes.Buffer
	h := newHarnessLogging(t, &logs)
	h.env.OnActivity(activities.RunTurnName, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.TurnInput) (activities.TurnResult, error) {
			if in.Kind != agents.TurnHandoffRequest {
				return h.agent.RunTurn(ctx, in)
			}
			h.env.SignalWorkflow(SignalStop, StopRequest{})
			return activities.TurnResult{}, temporal.NewCanceledError()
		})
	h.send(time.Minute, 1)
	h.at(10*time.Minute, func() { h.env.SignalWorkflow(SignalRotate, RotateRequest{Mode: config.ModeHandoff}) })
	v := h.run(sessionInput(policy(config.ModeOff, 85, 0)), time.Hour)

	require.Contains(t, eventTexts(v, EventRotationFailed), "✗ handoff rotation (manual) cancelled: the session was stopped")
	require.NotContains(t, logs.String(), `level=WARN msg="handoff request turn failed"`)
}

// A kind that cannot compact (exec) goes straight to a handoff in auto mode,
// with no failure recorded, and nid does not wait for a handoff_write it
// cannot call.
func TestAKindThatCannotCompactHandsOffInAuto(t *testing.T) {
	h := newHarness(t)
	h.agent.noHandoff = true
	h.send(time.Minute, 9)
	in := sessionInput(policy(config.ModeAuto, 80, 0))
	in.Spec.Kind = agents.KindExec
	v := h.run(in, time.Hour)

	require.Empty(t, failures(v), "no compaction was tried, so none failed")
	rots := rotations(v)
	require.Len(t, rots, 1)
	require.Equal(t, config.ModeHandoff, rots[0].Method)
	require.False(t, rots[0].FellBack)
	require.Equal(t, SummaryFromLastOutput, rots[0].SummarySource)
	var lastTurn, rotated time.Time
	for _, e := range v.Events {
		switch {
		case e.Kind == EventTurn && e.Context.TotalTurns == 8:
			lastTurn = e.At
		case e.Kind == EventRotation:
			rotated = e.At
		}
	}
	require.Less(t, rotated.Sub(lastTurn), handoffWait, "no wait for a tool exec cannot call")
}

// Compact mode on a kind that cannot compact fails, backs off, and after
// three failures in a row stops and tells the human what to change.
func TestRotationsThatKeepFailingSettleAndSayWhatToChange(t *testing.T) {
	h := newHarness(t)
	h.agent.perTurn = 20_000
	h.send(time.Minute, 15)
	in := sessionInput(policy(config.ModeCompact, 50, 0))
	in.Spec.Kind = agents.KindExec
	v := h.run(in, time.Hour)

	fails := failures(v)
	require.Len(t, fails, 3, "three failures, then the session stops trying")
	require.Equal(t, "exec agents cannot compact: rotate them by handoff or auto", fails[0].Error)
	var failedAt []int
	turns := 0
	for _, e := range v.Events {
		switch e.Kind {
		case EventTurn:
			turns = e.Context.TotalTurns
		case EventRotationFailed:
			failedAt = append(failedAt, turns)
		}
	}
	require.Equal(t, []int{3, 4, 6}, failedAt, "each failure waits longer: 1, then 2 turns")
	require.Equal(t, StatusNeedsAttention, v.Status)
	require.Equal(t, 6, v.Context.TotalTurns, "no turns once it needs the human")
	require.Len(t, h.inbox, 3)
	last := h.inbox[2].Text
	require.Contains(t, last, "3 rotations failed in a row")
	require.Contains(t, last, `exec agents cannot compact, so set the group's rotate mode to handoff or auto (nid group set web rotate='{"mode":"auto"}')`)
}

// An agent that cannot run here at all (no sandbox) needs the human at
// once: retrying cannot help.
func TestAnAgentThatCannotRunNeedsTheHumanAtOnce(t *testing.T) {
	h := newHarness(t)
	calls := 0
	h.env.OnActivity(activities.RunTurnName, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.TurnInput) (activities.TurnResult, error) {
			calls++
			return activities.TurnResult{}, temporal.NewNonRetryableApplicationError(
				"claude: the sandbox cannot start here: install bubblewrap (apt-get install bubblewrap), or set permissions: full", activities.ErrSandboxUnavailable, nil)
		})
	h.send(time.Minute, 2)
	v := h.run(sessionInput(policy(config.ModeAuto, 85, 0)), time.Hour)

	require.Equal(t, 1, calls)
	require.Equal(t, StatusNeedsAttention, v.Status)
	require.Len(t, h.inbox, 1)
	require.Equal(t, "web/lead cannot run its agent: claude: the sandbox cannot start here: install bubblewrap (apt-get install bubblewrap), or set permissions: full", h.inbox[0].Text)
}

// A session waiting to retry a failed turn says so.
func TestASessionWaitingToRetryShowsRetrying(t *testing.T) {
	h := newHarness(t)
	failed := false
	h.env.OnActivity(activities.RunTurnName, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.TurnInput) (activities.TurnResult, error) {
			if !failed {
				failed = true
				return activities.TurnResult{}, temporal.NewNonRetryableApplicationError("agent crashed", activities.ErrAgentFailed, nil)
			}
			return h.agent.RunTurn(ctx, in)
		})
	h.send(time.Minute, 1)
	var waiting SessionView
	h.at(time.Minute+5*time.Second, func() { waiting = h.view() })
	v := h.run(sessionInput(policy(config.ModeOff, 85, 0)), time.Hour)
	require.Equal(t, StatusRetrying, waiting.Status)
	require.Equal(t, StatusIdle, v.Status)
	require.Equal(t, 1, v.Context.TotalTurns, "the message ran on the retry")
}

// A rotation costs one turn of budget, reserved first: a handoff (two model
// calls) with the agent's own summary never takes the group past its
// limit. With one turn left it costs that turn and no more: charging both
// calls was the overspend a soak found (1,513 turns of a 1,511-turn
// budget).
func TestRotationsReserveTheirTurnOfBudget(t *testing.T) {
	for _, tt := range []struct {
		budget           int64
		turns, rotations int
	}{
		{budget: 6, turns: 4, rotations: 2}, // turns 1-2, rotation, turns 3-4, rotation
		{budget: 3, turns: 2, rotations: 1}, // turns 1-2, the rotation takes the last turn
	} {
		t.Run(fmt.Sprintf("budget %d", tt.budget), func(t *testing.T) {
			h := newHarness(t)
			h.group.board.Budget = config.Budget{Turns: tt.budget}
			h.agent.perTurn = 100
			in := sessionInput(policy(config.ModeHandoff, 85, 2))
			in.Goal = "Spend it all"
			v := h.run(in, time.Hour)

			require.EqualValues(t, tt.budget, chargedTurns(h.group.charges), "exactly the budget")
			require.Equal(t, tt.turns, v.Context.TotalTurns)
			require.Equal(t, tt.rotations, v.Context.Rotations)
			require.Len(t, h.agent.turnsOfKind(agents.TurnHandoffRequest), tt.rotations)
			require.Equal(t, StatusPaused, v.Status)
		})
	}
}

// A turn or a rotation granted just before another session's turn spent
// the last of a tokens limit does not start once the session hears it:
// after "budget exhausted" only what already runs spends, and the turn
// reserved for it goes back.
func TestASpentTokensLimitStartsNothingGrantedBefore(t *testing.T) {
	tests := []struct {
		name     string
		maxTurns int
		seq      int64 // the reservation the limit is spent right after
	}{
		{"a policy rotation", 2, 3}, // turns 1 and 2, then the rotation's
		{"a work turn", 0, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.group.board.Budget = config.Budget{Tokens: 10_000_000}
			h.group.exhaustAfterGrant = tt.seq
			h.agent.perTurn = 1000
			in := sessionInput(policy(config.ModeHandoff, 85, tt.maxTurns))
			in.Goal = "Spend it all"
			v := h.run(in, time.Hour)

			require.Empty(t, rotations(v), "nothing starts past the limit")
			require.Equal(t, 2, v.Context.TotalTurns)
			require.Equal(t, StatusPaused, v.Status)
			require.EqualValues(t, 2, chargedTurns(h.group.charges), "the reserved turn went back")
			require.Contains(t, eventTexts(v, EventBudget), "budget exhausted (tokens): paused")
		})
	}
}

// A session that hears the budget is spent while its turn runs says it
// pauses when that turn ends, and does.
func TestTheFeedSaysWhenASpentBudgetPauses(t *testing.T) {
	h := newHarness(t)
	h.group.board.Budget = config.Budget{Tokens: 10_000_000}
	turns := 0
	h.agent.onTurn = func(activities.TurnInput) {
		if turns++; turns == 2 {
			// Another session's turn spends the rest meanwhile.
			h.group.update(func(b *BoardState) { b.Spent.Tokens = b.Budget.Tokens })
		}
	}
	in := sessionInput(policy(config.ModeOff, 85, 0))
	in.Goal = "Spend it all"
	v := h.run(in, time.Hour)

	require.Equal(t, []string{"budget exhausted (tokens): it pauses when the running turn ends"}, eventTexts(v, EventBudget))
	require.Equal(t, 2, v.Context.TotalTurns)
	require.Equal(t, StatusPaused, v.Status)
}

// A session whose reservation the spent budget refused while it waited
// shows paused, like its siblings, not idle.
func TestASessionRefusedItsTurnShowsPaused(t *testing.T) {
	h := newHarness(t)
	h.group.board.Budget = config.Budget{Turns: 2}
	h.agent.perTurn = 100
	// Another session spends the last turn just before this one's second
	// reservation reaches the group, which refuses it.
	h.group.othersTakeFrom = 2
	in := sessionInput(policy(config.ModeOff, 85, 0))
	in.Goal = "Spend it all"
	var waiting SessionView
	h.at(10*time.Minute, func() { waiting = h.view() })
	h.run(in, time.Hour)
	require.Equal(t, 1, waiting.Context.TotalTurns)
	require.Equal(t, StatusPaused, waiting.Status)
}

// Each handoff starts a new generation of the session's conversations; a
// compaction keeps it. The fresh conversation's first turn already runs
// with the new one, the old conversation's handoff request with the old.
func TestGenerationsCountConversations(t *testing.T) {
	h := newHarness(t)
	h.send(time.Minute, 2)
	h.at(10*time.Minute, func() { h.env.SignalWorkflow(SignalRotate, RotateRequest{Mode: config.ModeCompact}) })
	h.at(20*time.Minute, func() { h.env.SignalWorkflow(SignalRotate, RotateRequest{Mode: config.ModeHandoff}) })
	h.send(30*time.Minute, 1)
	v := h.run(sessionInput(policy(config.ModeOff, 85, 0)), time.Hour)

	require.Equal(t, 1, v.Generation)
	var gens []string
	for _, in := range h.agent.turns {
		gens = append(gens, fmt.Sprintf("%s:%d", in.Kind, in.Generation))
	}
	require.Equal(t, []string{"work:0", "work:0", "handoff-request:0", "fresh:1", "work:1"}, gens)
}

// listing is what the session's listing said after a memo it wrote, and
// when it wrote it.
type listing struct {
	ContextRecord
	// events is the newest event's number the listing held.
	events int64
	// newContext says the memo wrote the context.
	newContext bool
	at         time.Time
}

// contextWrites are the listings whose memo wrote the context.
func contextWrites(all []listing) []listing {
	return slices.DeleteFunc(slices.Clone(all), func(l listing) bool { return !l.newContext })
}

// listed records every memo the session writes to its listing.
func (h *harness) listed() *[]listing {
	var memos []listing
	h.env.OnUpsertMemo(mock.Anything).Run(func(args mock.Arguments) {
		memo := args.Get(0).(map[string]interface{})
		var l listing
		if len(memos) > 0 {
			l = memos[len(memos)-1]
		}
		l.at = h.env.Now()
		c, ok := memo[MemoContext].(ContextRecord)
		if l.newContext = ok; ok {
			l.ContextRecord = c
		}
		if n, ok := memo[MemoEvents].(int64); ok {
			l.events = n
		}
		memos = append(memos, l)
	}).Return(nil)
	return &memos
}

// A session writes its listing once per workflow task (VersionQuietStart):
// a new session whose first task lists it, finds it working and starts its
// first turn writes its search attributes once, where it wrote them at
// each change before (the memo changed once either way).
func TestASessionListsEachWorkflowTaskOnce(t *testing.T) {
	for _, tt := range []struct {
		rung        Version
		attrs, memo int
	}{
		{VersionCancelledWaits, 2, 1},
		{VersionQuietStart, 1, 1},
	} {
		t.Run(fmt.Sprintf("rung %d", tt.rung), func(t *testing.T) {
			h := newHarness(t)
			h.env.OnGetVersion(versionChangeID, workflow.DefaultVersion, workflow.Version(versionLatest)).Return(workflow.Version(tt.rung))
			memos := h.listed()
			var attrs []time.Time
			h.env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(mock.Arguments) { attrs = append(attrs, h.env.Now()) }).Return(nil)
			in := sessionInput(policy(config.ModeOff, 0, 0))
			in.Goal = "Add dark mode"
			board := StartingBoard(GroupInput{Name: "web", Goal: in.Goal, Sessions: []string{"lead"}}, "lead")
			in.Board = &board
			start := h.env.Now()
			h.env.OnActivity(activities.RunTurnName, mock.Anything, mock.Anything).After(time.Hour).Return(h.agent.RunTurn)
			v := h.run(in, time.Minute)

			atStart := func(at time.Time) bool { return at.Equal(start) }
			require.Len(t, slices.DeleteFunc(attrs, func(at time.Time) bool { return !atStart(at) }), tt.attrs)
			require.Len(t, slices.DeleteFunc(slices.Clone(*memos), func(l listing) bool { return !atStart(l.at) }), tt.memo)
			require.Equal(t, StatusWorking, v.Status)
		})
	}
}

func TestBackToBackTurnsListTheirContextAtAPace(t *testing.T) {
	t.Run("sub-second turns", func(t *testing.T) {
		h := newHarness(t)
		all := h.listed()
		h.send(time.Minute, 12)
		v := h.run(sessionInput(policy(config.ModeOff, 0, 0)), time.Hour)
		require.Equal(t, 12, v.Context.TotalTurns)
		// At the start; with the second turn, the first change in a minute;
		// then not again until the turns, which took no time, are over and
		// the session waits.
		memos := contextWrites(*all)
		require.Len(t, memos, 3)
		require.Equal(t, 1, memos[1].TotalTurns)
		last := memos[len(memos)-1]
		require.Equal(t, 12, last.TotalTurns, "what waited is written when the session waits")
		require.Equal(t, v.Context.UsedTokens, last.UsedTokens)
		// The first message woke the session: its event is listed with the
		// status, before any turn ended.
		require.Len(t, *all, 4)
		require.False(t, (*all)[1].newContext)
		require.Equal(t, (*all)[0].events+1, (*all)[1].events)
		require.Equal(t, int64(len(v.Events)), last.events, "every event is listed by the end")
	})
	t.Run("turns slower than the pace", func(t *testing.T) {
		h := newHarness(t)
		all := h.listed()
		h.env.OnActivity(activities.RunTurnName, mock.Anything, mock.Anything).After(2 * listingPace).Return(h.agent.RunTurn)
		h.send(time.Minute, 12)
		v := h.run(sessionInput(policy(config.ModeOff, 0, 0)), time.Hour)
		require.Equal(t, 12, v.Context.TotalTurns)
		// At the start and with every turn: each follows one that took
		// longer than the pace.
		memos := contextWrites(*all)
		require.Len(t, memos, 13)
		for i, m := range memos[1:] {
			require.Equal(t, i+1, m.TotalTurns)
		}
		// The messages queued while the first turn ran are listed within
		// the pace, not when it ends.
		queued := (*all)[2]
		require.False(t, queued.newContext)
		require.Equal(t, int64(13), queued.events, "the session's start and twelve messages queued")
		require.Equal(t, listingPace, queued.at.Sub((*all)[1].at))
	})
	t.Run("a rotation is listed at once", func(t *testing.T) {
		h := newHarness(t)
		memos := h.listed()
		h.send(time.Minute, 9)
		v := h.run(sessionInput(policy(config.ModeCompact, 0, 4)), time.Hour)
		require.Equal(t, 2, v.Context.Rotations)
		var rotations []int
		for _, m := range *memos {
			rotations = append(rotations, m.Rotations)
		}
		require.Contains(t, rotations, 1, "the first rotation was listed before the next turns ended")
		require.Equal(t, 9, (*memos)[len(*memos)-1].TotalTurns)
	})
}

// A short turn, then a long one: the short one's context is listed within
// the pace, not when the long one ends.
func TestALongTurnAfterAShortOneListsTheShortOne(t *testing.T) {
	h := newHarness(t)
	writes := h.listed()
	calls := 0
	h.env.OnActivity(activities.RunTurnName, mock.Anything, mock.Anything).AfterFn(func() time.Duration {
		calls++
		if calls == 3 {
			return 10 * time.Minute
		}
		return 0
	}).Return(h.agent.RunTurn)
	h.send(time.Minute, 3)
	start := h.env.Now()
	v := h.run(sessionInput(policy(config.ModeOff, 0, 0)), time.Hour)
	require.Equal(t, 3, v.Context.TotalTurns)
	i := slices.IndexFunc(*writes, func(w listing) bool { return w.TotalTurns == 2 })
	require.GreaterOrEqual(t, i, 0, "the second turn's context was listed: %v", *writes)
	require.LessOrEqual(t, (*writes)[i].at.Sub(start), time.Minute+listingPace, "listed within the pace, not after the ten-minute turn")
}

// A new session given the board its new group starts with
// (VersionBoardAtStart) works toward the goal at once, though its group
// has not answered. Until VersionQuietStart it asks the group once; since,
// not at all. The group's next board replaces the one it started with
// however new that one claims to be.
func TestASessionStartedWithItsGroupsBoardWorksWithoutWaitingForTheGroup(t *testing.T) {
	for _, rung := range []Version{VersionCancelledWaits, VersionQuietStart} {
		t.Run(fmt.Sprintf("rung %d", rung), func(t *testing.T) {
			claims := sessionStartedWithItsGroupsBoard(t, rung)
			if rung >= VersionQuietStart {
				require.Zero(t, claims, "the group is asked nothing")
			} else {
				require.Equal(t, 1, claims, "the group is asked once")
			}
		})
	}
}

// sessionStartedWithItsGroupsBoard runs a session at rung started with its
// group's board, whose group pushes a board after its first turn, and
// says how often the session asked the group for a task.
func sessionStartedWithItsGroupsBoard(t *testing.T, rung Version) int {
	h := newHarness(t)
	h.env.OnGetVersion(versionChangeID, workflow.DefaultVersion, workflow.Version(versionLatest)).Return(workflow.Version(rung))
	h.group.silent = true
	in := sessionInput(policy(config.ModeOff, 85, 0))
	in.Goal = "Add dark mode"
	board := StartingBoard(GroupInput{Name: "web", Goal: in.Goal, Sessions: []string{"lead"}}, "lead")
	board.Rev = 1 << 40
	in.Board = &board
	turns := 0
	h.agent.onTurn = func(activities.TurnInput) {
		turns++
		switch turns {
		case 1:
			// The group's board comes now (its answer, or its push once
			// nid up says the session started): a task another session
			// took, which leaves this one nothing to work on.
			h.group.mu.Lock()
			defer h.group.mu.Unlock()
			h.group.board.add("Taken by another", "")
			h.group.board.claimNext("other", time.Time{})
			h.group.push()
		case 5:
			h.env.SignalWorkflow(SignalConfig, SessionConfig{Spec: agents.AgentSpec{Kind: "fake"}})
		}
	}
	h.run(in, time.Hour)

	work := h.agent.turnsOfKind(agents.TurnWork)
	require.NotEmpty(t, work, "the session works before its group answers")
	require.Contains(t, work[0].Prompt, "Add dark mode")
	require.Len(t, work, 1, "the group's board replaced the starting board, however new that one said it was")
	return h.group.claims
}

// A session whose starting board has an open task waits for its claim, as
// one started without a board does.
func TestASessionStartedWithOpenTasksWaitsForItsClaim(t *testing.T) {
	h := newHarness(t)
	h.group.silent = true
	in := sessionInput(policy(config.ModeOff, 85, 0))
	in.Goal = "Add dark mode"
	board := StartingBoard(GroupInput{Name: "web", Goal: in.Goal, Sessions: []string{"lead"},
		Tasks: []config.Task{{Title: "Toggle in settings"}}}, "lead")
	in.Board = &board
	h.run(in, time.Hour)

	require.Empty(t, h.agent.turnsOfKind(agents.TurnWork))
	require.Equal(t, 1, h.group.claims)
}

// A starting board past the caps (the input is anyone's who can start a
// workflow) is not taken: the session asks its group and waits, as one
// started without a board.
func TestAStartingBoardPastTheCapsIsNotTaken(t *testing.T) {
	h := newHarness(t)
	h.group.silent = true
	in := sessionInput(policy(config.ModeOff, 85, 0))
	in.Goal = "Add dark mode"
	huge := BoardView{Group: "web"}
	for i := range MaxTasks + 1 {
		huge.Tasks = append(huge.Tasks, Task{ID: fmt.Sprintf("f%d", i), Title: "forged", Status: TaskTodo})
	}
	in.Board = &huge
	v := h.run(in, time.Hour)

	require.Empty(t, h.agent.turnsOfKind(agents.TurnWork))
	require.Equal(t, 1, h.group.claims)
	require.True(t, slices.ContainsFunc(v.Events, func(e Event) bool { return strings.HasPrefix(e.Text, "board not taken") }), "events: %v", v.Events)
}

// A failed turn's pause, ended early by a message, cancels its timer
// (VersionCancelledWaits): left running, it fired into a workflow task of
// its own after the session had moved on.
func TestAPauseAMessageEndsLeavesNoTimerRunning(t *testing.T) {
	h := newHarness(t)
	calls := 0
	failTurns(h, &calls, func(n int, _ activities.TurnInput) bool { return n == 1 })
	pauses := map[string]bool{}
	var firedPauses int
	h.env.SetOnTimerScheduledListener(func(id string, d time.Duration) {
		if d == 10*time.Second {
			pauses[id] = true
		}
	})
	h.env.SetOnTimerFiredListener(func(id string) {
		if pauses[id] {
			firedPauses++
		}
	})
	h.send(time.Minute, 1)
	h.at(time.Minute+2*time.Second, func() { h.env.SignalWorkflow(SignalMessage, Message{Text: "try again"}) })
	v := h.run(sessionInput(policy(config.ModeOff, 85, 0)), time.Hour)

	require.Equal(t, 3, calls, "the failed turn, the message that ended the pause, the one kept")
	require.Equal(t, 2, v.Context.TotalTurns)
	require.Len(t, pauses, 1, "one pause after the one failure")
	require.Zero(t, firedPauses, "the pause's timer was cancelled when the message ended it")
}
