package activities

import (
	"context"
	"fmt"
	"strings"

	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/internal/clip"
	"github.com/nid-dev/nid/transcript"
)

// RescueName is RescueHandoff's activity type name.
const RescueName = "nid.RescueHandoff"

// MaxRescueBytes bounds a rescued handoff. It equals
// workflows.MaxSummaryBytes, the most a summary may take in workflow
// history (activities cannot import workflows; a test in worker holds the
// two together).
const MaxRescueBytes = 16 << 10

// How much of one transcript entry a rescued handoff keeps, by kind: an
// answer says most of what was done, a prompt what was asked, a tool call
// only which tool.
var rescueEntryBytes = map[string]int{
	transcript.KindPrompt:   1536,
	transcript.KindOutput:   3 << 10,
	transcript.KindTool:     300,
	transcript.KindError:    600,
	transcript.KindRotation: 1536,
}

// rescueFirstBytes is how much of the conversation's first prompt (its
// task briefing, or the handoff it started from) a rescued handoff keeps.
const rescueFirstBytes = 3 << 10

// rescueHeader opens every rescued handoff.
const rescueHeader = "nid wrote this handoff from the session's transcript, because the agent gave no handoff of its own. " +
	"It shows how the conversation began and its last turns, oldest first, each clipped: " +
	"> a prompt nid gave the agent, · a tool the agent called, < what the agent answered, ✗ a failure, ↻ a rotation.\n"

// RescueInput names the conversation whose handoff nid builds.
type RescueInput struct {
	Session agents.SessionRef `json:"session"`
	// Conversation is the conversation being rotated away; empty means
	// one that never got an id (its first turn failed).
	Conversation string `json:"conversation,omitempty"`
}

// RescueResult is a handoff nid built from the transcript.
type RescueResult struct {
	// Summary is the handoff, at most MaxRescueBytes; empty when the
	// transcript has nothing of the conversation.
	Summary string `json:"summary"`
	// Entries is how many transcript entries it drew on.
	Entries int `json:"entries"`
}

// RescueHandoff builds a handoff for a conversation whose agent could not
// give one, from the session's transcript: the prompt the conversation
// began with, then its last prompts, tool calls and answers, newest last,
// each clipped, the whole within MaxRescueBytes. A session without a
// transcript gets an empty summary, not an error.
func (a *Activities) RescueHandoff(ctx context.Context, in RescueInput) (RescueResult, error) {
	if err := agents.CheckSession(&in.Session); err != nil {
		return RescueResult{}, classify(err)
	}

	if err := ctx.Err(); err != nil || a.Transcripts == nil {
		return RescueResult{}, err
	}
	entries, err := a.Transcripts.Read(in.Session.Group, in.Session.Name, 0)
	if err != nil {
		return RescueResult{}, classify(err)
	}
	summary, n := rescueSummary(conversationEntries(entries, in.Conversation))
	return RescueResult{Summary: summary, Entries: n}, nil
}

// conversationEntries are the entries of conversation conv, oldest first.
// A conversation's id is known only once its agent first answers, so the
// prompt and tool calls of its first turn carry none: they are the entries
// without one just before its first. A conversation that never got an id
// ("") is the entries after the last that has one.
func conversationEntries(entries []transcript.Entry, conv string) []transcript.Entry {
	end := len(entries)
	if conv != "" {
		for end > 0 && entries[end-1].Conversation != conv {
			end--
		}
		if end == 0 {
			return nil
		}
	}
	start := end
	for start > 0 && (entries[start-1].Conversation == conv || entries[start-1].Conversation == "") {
		start--
	}
	return entries[start:end]
}

// rescueSummary renders a conversation's entries within MaxRescueBytes: the
// header, the first prompt, and as many of the last entries as fit, and
// returns how many entries it shows.
func rescueSummary(conv []transcript.Entry) (string, int) {
	if len(conv) == 0 {
		return "", 0
	}
	var head strings.Builder
	head.WriteString(rescueHeader)
	from := 0
	if first := conv[0]; first.Kind == transcript.KindPrompt || (first.Kind == transcript.KindRotation && first.Method == "handoff") {
		head.WriteString("\nThe conversation began with:\n")
		head.WriteString(rescueLine(conv[0], rescueFirstBytes))
		from = 1
	}
	// The last entries, newest first, while they fit beside the head
	// and the marker of what was left out between.
	budget := MaxRescueBytes - head.Len() - len("\nIts last turns ([nid: 1000000 earlier entries left out]):\n")
	var last []string
	for i := len(conv) - 1; i >= from; i-- {
		line := rescueLine(conv[i], rescueEntryBytes[conv[i].Kind])
		if len(line) > budget {
			break
		}
		budget -= len(line)
		last = append(last, line)
	}
	if len(last) > 0 {
		if skipped := len(conv) - from - len(last); skipped > 0 {
			fmt.Fprintf(&head, "\nIts last turns ([nid: %d earlier entries left out]):\n", skipped)
		} else {
			head.WriteString("\nThen:\n")
		}
	}
	for i := len(last) - 1; i >= 0; i-- {
		head.WriteString(last[i])
	}
	return head.String(), from + len(last)
}

// rescueLine is one entry as `nid transcript` shows it, clipped to n bytes
// (2 KiB for a kind without a bound of its own).
func rescueLine(e transcript.Entry, n int) string {
	if n == 0 {
		n = 2 << 10
	}
	return clip.Middle(transcript.Line(e), n) + "\n"
}
