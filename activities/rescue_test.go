package activities_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/activities"
	"github.com/nid-dev/nid/transcript"
)

// rescueFirstLine is how every rescued handoff begins.
const rescueFirstLine = "nid wrote this handoff from the session's transcript, because the agent gave no handoff of its own."

// twoConversations writes a session's transcript the way its turns do: a
// first conversation, a handoff into a second whose first turn's prompt and
// tool call carry no conversation yet, and the second's work.
func twoConversations(t *testing.T, logs *transcript.Log) {
	t.Helper()
	e := func(kind, conv, text string) transcript.Entry {
		return transcript.Entry{Kind: kind, Conversation: conv, Text: text}
	}
	require.NoError(t, logs.Append(webLead.Group, webLead.Name,
		e(transcript.KindPrompt, "", "Goal: write the parser"),
		e(transcript.KindOutput, "c1", "Wrote the lexer of the OLD conversation"),
		e(transcript.KindPrompt, "c1", "Call handoff_write now"),
		e(transcript.KindOutput, "c1", "OLD: I will not"),
		transcript.Entry{Kind: transcript.KindRotation, Method: "handoff", Text: "Handoff from your previous conversation:\nthe lexer is done; next: the parser"},
		e(transcript.KindTool, "", "board_read()"),
		e(transcript.KindOutput, "c2", "Read the board; starting on the parser"),
		e(transcript.KindPrompt, "c2", "Continue working toward the goal"),
		e(transcript.KindTool, "c2", "task_claim(3)"),
		e(transcript.KindOutput, "c2", "Parser half done: expressions parse, statements do not"),
		e(transcript.KindPrompt, "c2", "Call handoff_write now"),
		e(transcript.KindError, "c2", "turn failed: prompt is too long"),
	))
}

func rescue(t *testing.T, acts *activities.Activities, conv string) activities.RescueResult {
	t.Helper()
	res, err := acts.RescueHandoff(t.Context(), activities.RescueInput{Session: webLead, Conversation: conv})
	require.NoError(t, err)
	return res
}

// A short conversation's handoff is the whole of it, newest last: how it
// began (the handoff it started from), the prompts, tool calls, answers and
// the failure, and nothing of the conversation before.
func TestRescueHandoffOfAShortConversation(t *testing.T) {
	state := t.TempDir()
	acts := &activities.Activities{StateDir: state, Transcripts: transcript.New(state)}
	twoConversations(t, acts.Transcripts)

	res := rescue(t, acts, "c2")
	require.Equal(t, 8, res.Entries)
	lines := strings.Split(res.Summary, "\n")
	require.True(t, strings.HasPrefix(lines[0], rescueFirstLine), lines[0])
	var body []string
	for _, l := range lines[1:] {
		// Drop the time each entry is stamped with.
		if len(l) > 9 && l[2] == ':' && l[5] == ':' {
			l = l[9:]
		}
		body = append(body, l)
	}
	require.Equal(t, []string{
		"",
		"The conversation began with:",
		"↻ handoff: Handoff from your previous conversation:",
		"           the lexer is done; next: the parser",
		"",
		"Then:",
		"· board_read()",
		"< Read the board; starting on the parser",
		"> Continue working toward the goal",
		"· task_claim(3)",
		"< Parser half done: expressions parse, statements do not",
		"> Call handoff_write now",
		"✗ turn failed: prompt is too long",
		"",
	}, body)
	require.NotContains(t, res.Summary, "OLD")

	first := rescue(t, acts, "c1")
	require.Equal(t, 4, first.Entries, "the first conversation: its goal, its answers and the request")
	require.Contains(t, first.Summary, "began with:\n")
	require.Contains(t, first.Summary, "> Goal: write the parser\n")
	require.NotContains(t, first.Summary, "Parser half done")
	require.NotContains(t, first.Summary, "board_read")
}

// A conversation of hundreds of turns gives a handoff within
// MaxRescueBytes that keeps how it began and its newest turns, says how
// many entries it left out between, and clips an answer of 100 KiB to its
// start and end.
func TestRescueHandoffOfALongConversationIsBounded(t *testing.T) {
	state := t.TempDir()
	logs := transcript.New(state)
	logs.MaxBytes = 64 << 20
	acts := &activities.Activities{StateDir: state, Transcripts: logs}
	var entries []transcript.Entry
	entries = append(entries, transcript.Entry{Kind: transcript.KindPrompt, Text: "You are session web/lead.\nGoal: the BRIEFING " + strings.Repeat("of many words ", 1000)})
	for i := range 300 {
		entries = append(entries,
			transcript.Entry{Kind: transcript.KindOutput, Conversation: "c1", Text: fmt.Sprintf("answer %d: %s", i, strings.Repeat("done some more ", 40))},
			transcript.Entry{Kind: transcript.KindPrompt, Conversation: "c1", Text: fmt.Sprintf("prompt %d", i+1)},
			transcript.Entry{Kind: transcript.KindTool, Conversation: "c1", Text: fmt.Sprintf("edit_file(%d)", i)},
		)
	}
	huge := "START of the last answer " + strings.Repeat("x", 100<<10) + " END of the last answer"
	entries = append(entries, transcript.Entry{Kind: transcript.KindOutput, Conversation: "c1", Text: huge})
	require.NoError(t, logs.Append(webLead.Group, webLead.Name, entries...))

	res := rescue(t, acts, "c1")
	require.LessOrEqual(t, len(res.Summary), activities.MaxRescueBytes)
	require.Greater(t, len(res.Summary), activities.MaxRescueBytes-2<<10, "the bound is used, not wasted")
	require.True(t, strings.HasPrefix(res.Summary, rescueFirstLine))
	require.Contains(t, res.Summary, "Goal: the BRIEFING of many words")
	require.Less(t, res.Entries, len(entries))
	require.Greater(t, res.Entries, 10)
	require.Regexp(t, fmt.Sprintf(`\[nid: %d earlier entries left out\]`, len(entries)-res.Entries), res.Summary)

	// Newest last, clipped in the middle.
	require.True(t, strings.HasSuffix(res.Summary, " END of the last answer\n"), res.Summary[len(res.Summary)-200:])
	require.Contains(t, res.Summary, "< START of the last answer")
	require.Regexp(t, `\[nid: \d+ bytes left out\]`, res.Summary)
	require.Contains(t, res.Summary, "edit_file(299)")
	require.Less(t, strings.Index(res.Summary, "prompt 300"), strings.Index(res.Summary, "edit_file(299)"))
	require.NotContains(t, res.Summary, "answer 0:", "the oldest turns are the ones left out")
}

// Without a transcript, or with nothing of the conversation in it, there is
// nothing to rescue: an empty summary, which the rotation answers with the
// last resort.
func TestRescueHandoffWithoutATranscript(t *testing.T) {
	state := t.TempDir()
	require.Equal(t, activities.RescueResult{}, rescue(t, &activities.Activities{StateDir: state}, "c1"))

	acts := &activities.Activities{StateDir: state, Transcripts: transcript.New(state)}
	require.Equal(t, activities.RescueResult{}, rescue(t, acts, "c1"), "no file yet")

	twoConversations(t, acts.Transcripts)
	require.Equal(t, activities.RescueResult{}, rescue(t, acts, "c9"), "a conversation the transcript does not have")
	require.Equal(t, activities.RescueResult{}, rescue(t, acts, ""), "every entry has a conversation after the last with one")

	// A fresh conversation whose first turn failed has no id yet.
	require.NoError(t, acts.Transcripts.Append(webLead.Group, webLead.Name,
		transcript.Entry{Kind: transcript.KindRotation, Method: "handoff", Text: "Handoff from your previous conversation:\nnothing"},
		transcript.Entry{Kind: transcript.KindError, Text: "turn failed: overloaded"}))
	res := rescue(t, acts, "")
	require.Equal(t, 2, res.Entries)
	require.Contains(t, res.Summary, "✗ turn failed: overloaded\n")

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := acts.RescueHandoff(ctx, activities.RescueInput{Session: webLead, Conversation: "c2"})
	require.ErrorIs(t, err, context.Canceled)
}
