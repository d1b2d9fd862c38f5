package activities

import (
	"context"
	"fmt"

	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/transcript"
)

// Writing a transcript is best effort: a full disk must not fail a turn the
// agent already ran, so failures are logged and the turn goes on.

func (a *Activities) note(ctx context.Context, ref agents.SessionRef, entries ...transcript.Entry) {
	if a.Transcripts == nil {
		return
	}
	if err := a.Transcripts.Append(ref.Group, ref.Name, entries...); err != nil {
		loggerFor(ctx).Warn("Transcript not written", "sessionID", ref.WorkflowID, "error", err)
	}
}

// notePrompt writes the prompt as the turn starts, so a follower sees what
// the agent is working on. The first message of a handoff's fresh
// conversation is the rotation's mark: it carries the summary.
func (a *Activities) notePrompt(ctx context.Context, in TurnInput, kind string) {
	e := transcript.Entry{Kind: transcript.KindPrompt, Conversation: in.Conversation, Turn: kind, Text: in.Prompt}
	if kind == agents.TurnFresh {
		e.Kind, e.Method = transcript.KindRotation, "handoff"
	}
	a.note(ctx, in.Session, e)
}

// toolNoter is the TurnRequest.ToolCalled a turn reports its tool calls to.
func (a *Activities) toolNoter(ctx context.Context, in TurnInput) func(string) {
	if a.Transcripts == nil {
		return nil
	}
	return func(call string) {
		a.note(ctx, in.Session, transcript.Entry{Kind: transcript.KindTool, Conversation: in.Conversation, Text: call})
	}
}

// noteTurn writes how a turn ended: its output, a compaction the vendor did
// by itself, or the failure.
func (a *Activities) noteTurn(ctx context.Context, in TurnInput, kind string, rep agents.TurnReport, err error) {
	if err != nil {
		if ctx.Err() == nil {
			a.note(ctx, in.Session, transcript.Entry{Kind: transcript.KindError, Conversation: in.Conversation, Turn: kind, Text: "turn failed: " + err.Error()})
		}
		return
	}
	var entries []transcript.Entry
	if rep.Vendor != nil {
		entries = append(entries, transcript.Entry{Kind: transcript.KindRotation, Method: "compact", Conversation: rep.Conversation,
			Text: fmt.Sprintf("by the agent's CLI (%d → %d tokens)", rep.Vendor.BeforeTokens, rep.Vendor.AfterTokens)})
	}
	entries = append(entries, transcript.Entry{Kind: transcript.KindOutput, Conversation: rep.Conversation, Turn: kind, Text: rep.Output})
	a.note(ctx, in.Session, entries...)
}

// noteCompact writes a compaction's mark, or why it failed.
func (a *Activities) noteCompact(ctx context.Context, in CompactInput, rep agents.CompactReport, err error) {
	e := transcript.Entry{Kind: transcript.KindRotation, Method: "compact", Conversation: rep.Conversation,
		Text: fmt.Sprintf("%d → %d tokens", rep.BeforeTokens, rep.AfterTokens)}
	switch {
	case err != nil && ctx.Err() != nil:
		return
	case err != nil:
		e = transcript.Entry{Kind: transcript.KindError, Conversation: in.Conversation, Text: "compaction failed: " + err.Error()}
	case !rep.OK:
		e = transcript.Entry{Kind: transcript.KindError, Conversation: in.Conversation, Text: "compaction refused: " + rep.Detail}
	}
	a.note(ctx, in.Session, e)
}
