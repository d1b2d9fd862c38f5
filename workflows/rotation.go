package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/nid-dev/nid/activities"
	"github.com/nid-dev/nid/config"
)

// handoffWait is how long a rotation waits, after the handoff request turn
// ended, for the agent's handoff_write signal to arrive. The tool call happens
// during the turn, so the signal is normally already there.
const handoffWait = 30 * time.Second

type rotation struct {
	in      RotationInput
	res     RotationResult
	handoff workflow.ReceiveChannel
	// kind is what the session's agent kind can do; version the rung this
	// run follows.
	kind    activities.Kind
	version Version
}

// RotationWorkflow rotates one session's conversation once: compaction, or a
// handoff into a fresh conversation, or (auto) a compaction that falls back to
// a handoff. Each step is an activity, so a crash resumes at the step it
// reached and the rotation happens exactly once.
func RotationWorkflow(ctx workflow.Context, in RotationInput) (RotationResult, error) {
	r := &rotation{in: in, handoff: workflow.GetSignalChannel(ctx, SignalHandoffWrite),
		kind: activities.KindOf(in.Spec.Kind), version: versionOf(ctx)}
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
	return r.version >= VersionStopAtOnce && ctx.Err() != nil
}

func (r *rotation) run(ctx workflow.Context) (RotationResult, error) {
	switch r.in.Method {
	case config.ModeCompact, config.ModeAuto:
		if r.version >= VersionFailuresSettle && !r.kind.Compacts {
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
	return workflow.WithActivityOptions(ctx, activityOptions(r.in.ActivityQueue, turnTimeout(r.in.Spec)))
}

// compact asks the vendor to compact in place. It succeeds only when the
// vendor confirmed it and the context actually shrank.
func (r *rotation) compact(ctx workflow.Context) bool {
	r.res.Method = config.ModeCompact
	if r.in.Conversation == "" {
		r.res.Error = "no conversation to compact yet"
		return false
	}
	var rep activities.CompactReport
	err := workflow.ExecuteActivity(r.activityCtx(ctx), activities.CompactName, activities.CompactInput{
		Session: r.in.Session, Spec: r.in.Spec, Conversation: r.in.Conversation, WorkDir: r.in.WorkDir,
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
	case rep.AfterTokens >= rep.BeforeTokens && rep.Usage.Source != activities.SourceUnknown:
		r.res.Error = fmt.Sprintf("the context did not shrink (%d → %d tokens)", rep.BeforeTokens, rep.AfterTokens)
		return false
	}
	r.res.OK = true
	r.res.NewConversation = rep.Conversation
	r.res.BeforeTokens, r.res.AfterTokens = rep.BeforeTokens, rep.AfterTokens
	r.res.Usage = rep.Usage
	return true
}

// handoffInto gets a handoff (the agent's own, or its last output), stops the
// agent and starts a fresh conversation on the same session whose first
// message is the handoff plus the board.
func (r *rotation) handoffInto(ctx workflow.Context) (RotationResult, error) {
	r.res.Method = config.ModeHandoff
	summary, source := r.in.Summary, SummaryFromAgent
	if summary == "" {
		summary, source = r.requestHandoff(ctx)
	}
	r.res.Summary, r.res.SummarySource = summary, source
	if r.cancelled(ctx) {
		return r.res, nil
	}

	if r.in.Conversation != "" {
		err := workflow.ExecuteActivity(r.activityCtx(ctx), activities.StopAgentName, activities.StopInput{
			Session: r.in.Session, Spec: r.in.Spec, Conversation: r.in.Conversation,
		}).Get(ctx, nil)
		if err != nil {
			// The old process may linger, but the session must not: a fresh
			// conversation is still started.
			workflow.GetLogger(ctx).Warn("agent did not stop", "error", err)
		}
	}

	if r.cancelled(ctx) {
		return r.res, nil
	}
	var fresh activities.TurnResult
	err := workflow.ExecuteActivity(r.activityCtx(ctx), activities.RunTurnName, activities.TurnInput{
		Session:    r.in.Session,
		Spec:       r.in.Spec,
		Prompt:     FreshMessage(r.in.Session, r.in.Reason, summary, source, r.in.Board),
		Kind:       activities.TurnFresh,
		WorkDir:    r.in.WorkDir,
		Generation: r.in.Generation + 1,
	}).Get(ctx, &fresh)
	if err == nil {
		r.addCost(turnCharge(fresh.TurnReport))
	}
	if err != nil {
		r.res.OK = false
		r.res.Stuck = true
		r.res.Error = "fresh conversation did not start: " + ErrorText(err)
		return r.res, nil
	}
	r.res.OK = true
	r.res.NewConversation = fresh.Conversation
	r.res.AfterTokens = fresh.Usage.UsedTokens
	r.res.Usage = fresh.Usage
	r.res.Output = fresh.Output
	return r.res, nil
}

// requestHandoff runs one turn asking the agent to call handoff_write and
// waits for the call. An agent that writes nothing is represented by its
// last output, and the fresh conversation is told so.
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
			Kind:         activities.TurnHandoffRequest,
			WorkDir:      r.in.WorkDir,
			Generation:   r.in.Generation,
		}).Get(ctx, &tr)
		if err == nil {
			r.addCost(turnCharge(tr.TurnReport))
			if tr.Output != "" {
				last = tr.Output
			}
			wait := handoffWait
			if r.version >= VersionFailuresSettle && !r.kind.Tools {
				// Its output stands in; it cannot call handoff_write.
				wait = 0
			}
			if s := r.receiveHandoff(ctx, wait); s != "" {
				return s, SummaryFromAgent
			}
		} else {
			workflow.GetLogger(ctx).Warn("handoff request turn failed", "error", err)
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
