package workflows

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/nid-dev/nid/activities"
	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/internal/clip"
)

// handoffWait is how long a rotation waits, after the handoff request turn
// ended, for the agent's handoff_write signal to arrive. The tool call happens
// during the turn, so the signal is normally already there.
const handoffWait = 30 * time.Second

type rotation struct {
	in      RotationInput
	res     RotationResult
	handoff workflow.ReceiveChannel
	ack     workflow.ReceiveChannel
	// kind is what the session's agent kind can do.
	kind agents.Kind
	ladder
	// queue is the host the agent runs on: the session's, until a move
	// puts the fresh conversation on its new host. Where on that host is
	// the worker's to say, never the workflow's.
	queue string
}

// RotationWorkflow rotates one session's conversation once: compaction, or a
// handoff into a fresh conversation, or (auto) a compaction that falls back to
// a handoff. Each step is an activity, so a crash resumes at the step it
// reached and the rotation happens exactly once.
func RotationWorkflow(ctx workflow.Context, in RotationInput) (RotationResult, error) {
	r := &rotation{in: in, handoff: workflow.GetSignalChannel(ctx, SignalHandoffWrite), ack: workflow.GetSignalChannel(ctx, SignalHandoffAck),
		kind: agents.KindOf(in.Spec.Kind), ladder: ladder{versionOf(ctx)}, queue: in.ActivityQueue}
	if r.has(VersionCheckedInput) {
		if err := checkNames("session.group", in.Session.Group, "session.name", in.Session.Name); err != nil {
			return RotationResult{}, err
		}
	}
	r.res.RotationEvent = RotationEvent{
		Number:          in.Number,
		Method:          in.Method,
		Reason:          in.Reason,
		OldConversation: in.Conversation,
		BeforeTokens:    in.BeforeTokens,
	}
	res, err := r.run(ctx)
	if r.cancelled(ctx) {
		// The session was stopped: nothing more starts, and the session
		// stops its agent itself.
		return res, ctx.Err()
	}
	return res, err
}

// cancelled says the session cancelled this rotation (it was stopped), so
// no further step may start.
func (r *rotation) cancelled(ctx workflow.Context) bool {
	return r.has(VersionStopAtOnce) && ctx.Err() != nil
}

func (r *rotation) run(ctx workflow.Context) (RotationResult, error) {
	switch r.in.Method {
	case config.ModeCompact, config.ModeAuto:
		if r.has(VersionFailuresSettle) && !r.kind.Compacts {
			// Not a failure to fall back from: this kind never compacts.
			if r.in.Method == config.ModeAuto {
				return r.handoffInto(ctx)
			}
			r.res.Method = config.ModeCompact
			r.res.Error = fmt.Sprintf("%s agents cannot compact: rotate them by handoff or auto", r.kind.Name)
			return r.res, nil
		}
		if r.compact(ctx) {
			return r.res, nil
		}
		if r.in.Method == config.ModeCompact || r.cancelled(ctx) {
			return r.res, nil
		}
		r.res.FellBack = true
		r.res.CompactError = r.res.Error
		r.res.Error = ""
		return r.handoffInto(ctx)
	case config.ModeHandoff:
		return r.handoffInto(ctx)
	default:
		r.res.Error = fmt.Sprintf("unknown rotation method %q (allowed: auto, compact, handoff)", r.in.Method)
		return r.res, nil
	}
}

func (r *rotation) activityCtx(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, activityOptions(r.queue, turnTimeout(r.in.Spec)))
}

// compact asks the vendor to compact in place. It succeeds only when the
// vendor confirmed it and the context actually shrank.
func (r *rotation) compact(ctx workflow.Context) bool {
	r.res.Method = config.ModeCompact
	if r.in.Conversation == "" {
		r.res.Error = "no conversation to compact yet"
		return false
	}
	var rep agents.CompactReport
	err := workflow.ExecuteActivity(r.activityCtx(ctx), activities.CompactName, activities.CompactInput{
		Session: r.in.Session, Spec: r.in.Spec, Conversation: r.in.Conversation,
		Generation: r.in.Generation,
	}).Get(ctx, &rep)
	if err == nil {
		// Compaction is a model call over the whole context: it costs a turn.
		r.addCost(Charge{Turns: 1, Tokens: rep.BeforeTokens})
	}
	switch {
	case err != nil:
		r.res.Error = ErrorText(err)
		return false
	case !rep.OK:
		r.res.Error = "the agent did not compact"
		if rep.Detail != "" {
			r.res.Error += ": " + rep.Detail
		}
		return false
	case rep.AfterTokens >= rep.BeforeTokens && rep.Usage.Source != agents.SourceUnknown:
		r.res.Error = fmt.Sprintf("the context did not shrink (%d → %d tokens)", rep.BeforeTokens, rep.AfterTokens)
		return false
	}
	r.res.OK = true
	r.res.NewConversation = rep.Conversation
	r.res.BeforeTokens, r.res.AfterTokens = rep.BeforeTokens, rep.AfterTokens
	r.res.Usage = rep.Usage
	return true
}

// handoffInto gets a handoff (the agent's own; else, since
// VersionVouchedHandoff, one nid builds from the transcript; the last output
// as a last resort), reads the facts of the session's work, stops the agent
// and starts a fresh conversation on the same session whose first message is
// the handoff, the facts, the board and what the session holds, and checks
// the fresh conversation's acknowledgement against the board.
func (r *rotation) handoffInto(ctx workflow.Context) (RotationResult, error) {
	r.res.Method = config.ModeHandoff
	vouched := r.has(VersionVouchedHandoff)
	// A host that is down can be asked nothing: its agent, transcript and
	// worktree are out of reach.
	reachable := r.in.Move == nil || !r.in.Move.FromDown
	summary, source, facts := r.handoffSummary(ctx, reachable, vouched)
	if r.cancelled(ctx) {
		return r.res, nil
	}
	if reachable {
		r.stopOldAgent(ctx)
	}
	if r.cancelled(ctx) {
		return r.res, nil
	}
	if r.in.Move != nil {
		if !r.moveWork(ctx) {
			return r.res, nil
		}
		if vouched {
			// What arrived on the new host is what the fresh
			// conversation resumes from.
			facts = r.gatherFacts(ctx)
		}
	}
	message := Fresh{Ref: r.in.Session, Reason: r.in.Reason, Summary: summary, Source: source, Board: r.in.Board}
	if vouched {
		r.res.Facts = digestFacts(facts)
		message.Facts, message.Tasks, message.Locks, message.Ack = facts, r.in.HeldTasks, r.in.HeldLocks, r.kind.Tools
	}
	if r.startFresh(ctx, message) && vouched {
		r.verify(ctx)
	}
	return r.res, nil
}

// handoffSummary is what the fresh conversation starts from and where it
// came from: the agent's own handoff, one asked for now, one nid rescues
// from the transcript, or the agent's last output; and, for a vouched
// handoff that stays on its host, the git facts beside it.
func (r *rotation) handoffSummary(ctx workflow.Context, reachable, vouched bool) (string, string, *activities.Facts) {
	summary, source := r.in.Summary, SummaryFromAgent
	if summary == "" && reachable {
		summary, source = r.requestHandoff(ctx)
	} else if summary == "" {
		summary, source = r.in.LastOutput, SummaryFromLastOutput
	}
	var facts *activities.Facts
	if vouched && !r.cancelled(ctx) {
		if source != SummaryFromAgent && reachable {
			if rescued := r.rescue(ctx); rescued != "" {
				summary, source = rescued, SummaryFromNid
			}
		}
		if r.in.Move == nil {
			facts = r.gatherFacts(ctx)
		}
		r.res.SummaryBytes = len(summary)
	}
	r.res.Summary, r.res.SummarySource = summary, source
	return summary, source, facts
}

// stopOldAgent stops the old conversation's agent process, if it has one.
func (r *rotation) stopOldAgent(ctx workflow.Context) {
	if r.in.Conversation == "" {
		return
	}
	err := workflow.ExecuteActivity(r.activityCtx(ctx), activities.StopAgentName, activities.StopInput{
		Session: r.in.Session, Spec: r.in.Spec, Conversation: r.in.Conversation,
	}).Get(ctx, nil)
	if err != nil {
		// The old process may linger, but the session must not: a fresh
		// conversation is still started.
		workflow.GetLogger(ctx).Warn("agent did not stop", "error", err)
	}
}

// startFresh starts the fresh conversation with message as its first turn
// and records it in the result; false when it did not start, which leaves
// the session stuck without a working conversation.
func (r *rotation) startFresh(ctx workflow.Context, message Fresh) bool {
	var fresh activities.TurnResult
	err := workflow.ExecuteActivity(r.activityCtx(ctx), activities.RunTurnName, activities.TurnInput{
		Session:    r.in.Session,
		Spec:       r.in.Spec,
		Prompt:     message.Text(),
		Kind:       agents.TurnFresh,
		Generation: r.in.Generation + 1,
	}).Get(ctx, &fresh)
	if err != nil {
		r.res.OK = false
		r.res.Stuck = true
		r.res.Error = "fresh conversation did not start: " + ErrorText(err)
		return false
	}
	r.addCost(turnCharge(fresh.TurnReport))
	r.res.OK = true
	r.res.NewConversation = fresh.Conversation
	r.res.AfterTokens = fresh.Usage.UsedTokens
	r.res.Usage = fresh.Usage
	r.res.Output = fresh.Output
	return true
}

// ackWait is how long a rotation waits, after the fresh conversation's
// first turn, for its handoff_ack: the call happens during the turn, so it
// is normally there already.
const ackWait = 10 * time.Second

// verify compares what the fresh conversation says it resumes with what the
// session holds. A kind that calls no tools cannot say: none, and no more.
func (r *rotation) verify(ctx workflow.Context) {
	ack, got := r.freshAck(ctx)
	held := slices.Sorted(slices.Values(r.in.HeldTasks))
	said := slices.Sorted(slices.Values(ack.Tasks))
	ref := r.in.Session.Group + "/" + r.in.Session.Name
	switch {
	case !got && !r.kind.Tools && r.has(VersionLostTurns):
		// Its first message asked for no handoff_ack: it cannot call one.
		r.res.Verified = VerifiedNotAsked
	case !got:
		r.res.Verified = VerifiedNone
		if r.kind.Tools {
			r.res.VerifyNote = fmt.Sprintf("%s's fresh conversation did not acknowledge what it resumes (handoff_ack) in its first turn; it holds %s", ref, heldText(held))
		}
	case slices.Equal(held, said):
		r.res.Verified = VerifiedTrue
	default:
		r.res.Verified = VerifiedFalse
		r.res.VerifyNote = fmt.Sprintf("%s's fresh conversation says it resumes %s, but it holds %s", ref, heldText(said), heldText(held))
	}
}

// freshAck is the fresh conversation's acknowledgement, if it gave one: an
// ack from any other conversation (the one rotated away, still running its
// last tool calls) says nothing about what the fresh one resumes.
func (r *rotation) freshAck(ctx workflow.Context) (HandoffAck, bool) {
	fresh := r.in.Generation + 1
	var ack HandoffAck
	for r.ack.ReceiveAsync(&ack) {
		if ack.Generation == fresh {
			return ack, true
		}
	}
	if !r.kind.Tools {
		return HandoffAck{}, false
	}
	deadline := workflow.Now(ctx).Add(ackWait)
	for {
		wait := deadline.Sub(workflow.Now(ctx))
		if wait <= 0 {
			return HandoffAck{}, false
		}
		ok, _ := r.ack.ReceiveWithTimeout(ctx, wait, &ack)
		if !ok {
			return HandoffAck{}, false
		}
		if ack.Generation == fresh {
			return ack, true
		}
	}
}

func heldText(tasks []string) string {
	if len(tasks) == 0 {
		return "no task"
	}
	if len(tasks) == 1 {
		return "task " + tasks[0]
	}
	return "tasks " + strings.Join(tasks, ", ")
}

// readOptions run an activity that only reads (the facts, the transcript):
// bounded by its own timeout, without heartbeats, and tried again only
// when its worker went away, since a second attempt would read the same.
func readOptions(queue string) workflow.ActivityOptions {
	o := activityOptions(queue, time.Minute)
	o.HeartbeatTimeout = 0
	o.RetryPolicy.MaximumAttempts = 2
	return o
}

// rescue builds a handoff from the transcript of the conversation rotated
// away, when the agent gave none; "" when there is nothing to build from.
func (r *rotation) rescue(ctx workflow.Context) string {
	actx := workflow.WithActivityOptions(ctx, readOptions(r.in.ActivityQueue))
	var res activities.RescueResult
	err := workflow.ExecuteActivity(actx, activities.RescueName, activities.RescueInput{
		Session: r.in.Session, Conversation: r.in.Conversation,
	}).Get(ctx, &res)
	if err != nil {
		workflow.GetLogger(ctx).Warn("no handoff from the transcript", "error", err)
		return ""
	}
	return res.Summary
}

// gatherFacts reads where the session's work stands; nil when it cannot.
func (r *rotation) gatherFacts(ctx workflow.Context) *activities.Facts {
	actx := workflow.WithActivityOptions(ctx, readOptions(r.queue))
	var f activities.Facts
	err := workflow.ExecuteActivity(actx, activities.FactsName, activities.FactsInput{
		Session: r.in.Session,
	}).Get(ctx, &f)
	if err != nil {
		workflow.GetLogger(ctx).Warn("no facts of the session's work", "error", err)
		if r.has(VersionCheckedInput) && ctx.Err() == nil {
			r.res.FactsNote = fmt.Sprintf("%s/%s's fresh conversation got no git facts: %s", r.in.Session.Group, r.in.Session.Name, clip.Runes(ErrorText(err), 1000))
		}
		return nil
	}
	return &f
}

// digestFacts is what a receipt keeps of the facts.
func digestFacts(f *activities.Facts) *FactsDigest {
	if f == nil {
		return nil
	}
	return &FactsDigest{Repo: f.Repo, Branch: f.Branch, Head: f.Head,
		Commits: len(f.Commits) + f.CommitsMore, Changed: len(f.Status) + f.StatusMore}
}

// requestHandoff runs one turn asking the agent to call handoff_write and
// waits for the call. Before VersionVouchedHandoff an agent that writes
// nothing is represented by its last output; since, the caller first has
// nid build one from the transcript.
func (r *rotation) requestHandoff(ctx workflow.Context) (string, string) {
	last := r.in.LastOutput
	// A conversation past its window cannot take the request either.
	if r.in.Conversation != "" && r.in.Reason != ReasonContextFull {
		var tr activities.TurnResult
		err := workflow.ExecuteActivity(r.activityCtx(ctx), activities.RunTurnName, activities.TurnInput{
			Session:      r.in.Session,
			Spec:         r.in.Spec,
			Conversation: r.in.Conversation,
			Prompt:       HandoffRequestPrompt,
			Kind:         agents.TurnHandoffRequest,
			Generation:   r.in.Generation,
		}).Get(ctx, &tr)
		if err == nil {
			r.addCost(turnCharge(tr.TurnReport))
			if tr.Output != "" {
				last = tr.Output
			}
			wait := handoffWait
			if r.has(VersionFailuresSettle) && !r.kind.Tools {
				// Its output stands in; it cannot call handoff_write.
				wait = 0
			}
			if s := r.receiveHandoff(ctx, wait); s != "" {
				return s, SummaryFromAgent
			}
		} else if !r.cancelled(ctx) {
			// Not a warning on the worker's terminal: the handoff falls back
			// to what nid builds, and the rotation's receipt says so.
			workflow.GetLogger(ctx).Info("handoff request turn failed", "error", err)
		}
	}
	if s := r.receiveHandoff(ctx, 0); s != "" {
		return s, SummaryFromAgent
	}
	return last, SummaryFromLastOutput
}

func (r *rotation) addCost(c Charge) {
	r.res.Cost.Turns += c.Turns
	r.res.Cost.Tokens += c.Tokens
	r.res.Cost.USD += c.USD
	if r.has(VersionVouchedHandoff) {
		r.res.CostTokens, r.res.CostUSD = r.res.Cost.Tokens, r.res.Cost.USD
	}
}

func (r *rotation) receiveHandoff(ctx workflow.Context, wait time.Duration) string {
	var hw HandoffWrite
	if r.handoff.ReceiveAsync(&hw) {
		return hw.Summary
	}
	if wait <= 0 {
		return ""
	}
	ok, _ := r.handoff.ReceiveWithTimeout(ctx, wait, &hw)
	if !ok {
		return ""
	}
	return hw.Summary
}

// moveWork carries the session's work to its new host: saved on the old
// one (its uncommitted changes on a salvage ref, the branch and salvage
// pushed, the old worktree removed), then a fresh worktree of the same
// branch on the new one with the salvage laid over it. From there the
// fresh conversation runs on the new host. It says false, with the error
// in the result, when the work could not be carried: the session stays.
func (r *rotation) moveWork(ctx workflow.Context) bool {
	m := r.in.Move
	r.res.FromHost, r.res.ToHost = m.From, m.To
	if m.Repo != "" && m.Worktree != "" && !m.FromDown {
		actx := workflow.WithActivityOptions(ctx, activityOptions(r.in.ActivityQueue, 5*time.Minute))
		var saved activities.SaveWorkResult
		err := workflow.ExecuteActivity(actx, activities.SaveWorkName, activities.SaveWorkInput{
			Session: r.in.Session, Number: m.Number,
		}).Get(ctx, &saved)
		if err != nil {
			r.res.Error = fmt.Sprintf("the work on %s could not be saved, so the session stays there: %s", m.From, ErrorText(err))
			return false
		}
		r.res.Salvage, r.res.Pushed = saved.Salvage, saved.Pushed
	}
	r.queue = HostQueue(m.To)
	if m.Repo != "" {
		actx := workflow.WithActivityOptions(ctx, activityOptions(r.queue, 5*time.Minute))
		var ws activities.WorkspaceResult
		err := workflow.ExecuteActivity(actx, activities.PrepareWorkspaceName, activities.WorkspaceInput{
			Session: r.in.Session, Salvage: r.res.Salvage,
		}).Get(ctx, &ws)
		if err != nil {
			// The work is saved (branch and salvage), but has nowhere to
			// go: the session has no working conversation left.
			r.res.Stuck = true
			r.res.Error = fmt.Sprintf("no worktree on %s: %s (the work is on branch %s and %s)", m.To, ErrorText(err),
				activities.WorkspaceBranch(r.in.Session), cmp.Or(r.res.Salvage, "no salvage"))
			return false
		}
		r.res.Worktree = ws.Worktree
	}
	return true
}
