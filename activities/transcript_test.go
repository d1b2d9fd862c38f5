package activities

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/transcript"
)

// TestTranscriptAcrossAHandoff runs a session's turns through a handoff and
// a compaction the way the workflows do and reads back one transcript that
// spans both conversations with each rotation marked.
func TestTranscriptAcrossAHandoff(t *testing.T) {
	ctx := context.Background()
	rec := startHandoffRecorder(t, "")
	state := t.TempDir()
	logs := transcript.New(state)
	acts := &Activities{
		Agents:      map[string]Agent{KindSim: NewSim()},
		StateDir:    state,
		MCP:         func(SessionRef) MCPAccess { return MCPAccess{URL: rec.URL} },
		Transcripts: logs,
	}
	spec := AgentSpec{Kind: KindSim, Sim: config.Sim{TurnDelay: config.Duration(time.Millisecond)}}
	turn := func(conv, kind, prompt string) string {
		res, err := acts.RunTurn(ctx, TurnInput{Session: lead, Spec: spec, Conversation: conv, Prompt: prompt, Kind: kind})
		require.NoError(t, err)
		return res.Conversation
	}

	first := turn("", TurnWork, "Goal: write the parser")
	turn(first, TurnHandoffRequest, "Call handoff_write now")
	require.Len(t, rec.Summaries(), 1)
	fresh := turn("", TurnFresh, "Handoff from your previous conversation:\nThe parser is done; next: tests.")
	require.NotEqual(t, first, fresh)
	turn(fresh, TurnWork, "Continue working toward the goal")
	_, err := acts.Compact(ctx, CompactInput{Session: lead, Spec: spec, Conversation: fresh})
	require.NoError(t, err)

	entries, err := logs.Read(lead.Group, lead.Name, 0)
	require.NoError(t, err)
	type line struct{ kind, method, conversation, text string }
	var got []line
	for _, e := range entries {
		got = append(got, line{e.Kind, e.Method, e.Conversation, e.Text})
	}
	require.Equal(t, []line{
		{transcript.KindPrompt, "", "", "Goal: write the parser"},
		{transcript.KindOutput, "", first, `sim turn 1 of conversation ` + first + `: worked on "Goal: write the parser"`},
		{transcript.KindPrompt, "", first, "Call handoff_write now"},
		{transcript.KindTool, "", first, "handoff_write(" + clip(rec.Summaries()[0], 60) + ")"},
		{transcript.KindOutput, "", first, "sim turn 2 of conversation " + first + ": wrote a handoff with handoff_write"},
		{transcript.KindRotation, "handoff", "", "Handoff from your previous conversation:\nThe parser is done; next: tests."},
		{transcript.KindOutput, "", fresh, `sim turn 1 of conversation ` + fresh + `: worked on "Handoff from your previous conversation:\nThe parser is done;"`},
		{transcript.KindPrompt, "", fresh, "Continue working toward the goal"},
		{transcript.KindOutput, "", fresh, `sim turn 2 of conversation ` + fresh + `: worked on "Continue working toward the goal"`},
		{transcript.KindRotation, "compact", fresh, got[9].text},
	}, got)
	require.Regexp(t, `^\d+ → \d+ tokens$`, got[9].text)
}

func TestTranscriptRecordsFailures(t *testing.T) {
	state := t.TempDir()
	logs := transcript.New(state)
	acts := &Activities{Agents: map[string]Agent{"broken": failing(AgentFailed("no credentials"))}, StateDir: state, Transcripts: logs}
	_, err := acts.RunTurn(context.Background(), TurnInput{Session: lead, Spec: AgentSpec{Kind: "broken"}, Prompt: "go"})
	require.Error(t, err)
	entries, err := logs.Read(lead.Group, lead.Name, 0)
	require.NoError(t, err)
	require.Len(t, entries, 2)
	require.Equal(t, transcript.KindError, entries[1].Kind)
	require.Equal(t, "turn failed: no credentials", entries[1].Text)
}
