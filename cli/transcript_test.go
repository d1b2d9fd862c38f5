package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/internal/temporaltest"
	"github.com/nid-dev/nid/transcript"
)

func writeHandoffTranscript(t *testing.T, logs *transcript.Log) {
	t.Helper()
	at := time.Date(2026, 1, 2, 15, 0, 0, 0, time.Local)
	require.NoError(t, logs.Append("web", "lead",
		transcript.Entry{At: at, Kind: transcript.KindPrompt, Text: "Goal: write the parser"},
		transcript.Entry{At: at, Kind: transcript.KindOutput, Conversation: "sim-1", Text: "wrote it"},
		transcript.Entry{At: at, Kind: transcript.KindTool, Conversation: "sim-1", Text: "handoff_write(The parser is done)"},
		transcript.Entry{At: at, Kind: transcript.KindRotation, Method: "handoff", Text: "Handoff from your previous conversation:\nThe parser is done"},
		transcript.Entry{At: at, Kind: transcript.KindOutput, Conversation: "sim-2", Text: "testing it"},
		transcript.Entry{At: at, Kind: transcript.KindRotation, Method: "compact", Conversation: "sim-2", Text: "30000 → 3000 tokens"},
	))
}

func TestTranscriptAcrossConversations(t *testing.T) {
	logs := transcript.New(t.TempDir())
	writeHandoffTranscript(t, logs)
	var out bytes.Buffer
	require.NoError(t, runTranscript(context.Background(), logs, transcriptOptions{Group: "web", Name: "lead"}, &out))
	require.Equal(t, ""+
		"── conversation sim-1\n"+
		"15:00:00 > Goal: write the parser\n"+
		"15:00:00 < wrote it\n"+
		"15:00:00 · handoff_write(The parser is done)\n"+
		"15:00:00 ↻ handoff: Handoff from your previous conversation:\n"+
		"           The parser is done\n"+
		"── conversation sim-2\n"+
		"15:00:00 < testing it\n"+
		"15:00:00 ↻ compact: 30000 → 3000 tokens\n", out.String())

	out.Reset()
	require.NoError(t, runTranscript(context.Background(), logs, transcriptOptions{Group: "web", Name: "lead", Lines: 1, JSON: true}, &out))
	require.Equal(t, 1, strings.Count(out.String(), "\n"))
	require.Contains(t, out.String(), `"kind":"rotation","conversation":"sim-2","method":"compact"`)

	err := runTranscript(context.Background(), logs, transcriptOptions{Group: "web", Name: "nobody"}, &out)
	require.ErrorContains(t, err, `no transcript for web/nobody at `)
	require.ErrorContains(t, err, `; transcripts on this host: web/lead`, "it names the sessions it has")
}

func TestTranscriptFollow(t *testing.T) {
	logs := transcript.New(t.TempDir())
	writeHandoffTranscript(t, logs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out temporaltest.SyncBuffer
	done := make(chan error, 1)
	go func() {
		done <- runTranscript(ctx, logs, transcriptOptions{Group: "web", Name: "lead", Lines: 2, Follow: true, Interval: time.Millisecond}, &out)
	}()
	require.NoError(t, logs.Append("web", "lead", transcript.Entry{Kind: transcript.KindPrompt, Conversation: "sim-2", Text: "run the tests"}))
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "> run the tests") }, 10*time.Second, time.Millisecond)
	cancel()
	require.NoError(t, <-done)
	require.NotContains(t, out.String(), "Goal: write the parser", "only the last 2 entries come first")
	require.Equal(t, 1, strings.Count(out.String(), "run the tests"), "each entry is printed once")
}

func TestTranscriptArgs(t *testing.T) {
	_, err := newTranscriptOptions([]string{"lead"}, 0, false, false)
	require.EqualError(t, err, `"lead" is not a session: write GROUP/SESSION, e.g. web/lead`)
	_, err = newTranscriptOptions(nil, 0, false, false)
	require.EqualError(t, err, "nid transcript takes one GROUP/SESSION, e.g. nid transcript web/lead (got 0 arguments)")
	_, err = newTranscriptOptions([]string{"web/lead"}, -3, false, false)
	require.EqualError(t, err, "--lines -3: give a number of entries, 0 for all")
}

func TestTranscriptFlagAliasesAfterTheSession(t *testing.T) {
	dir := t.TempDir()
	logs := transcript.New(dir)
	writeHandoffTranscript(t, logs)
	out, _, err := runApp(t, Deps{Environ: []string{"NID_STATE=" + dir}}, "transcript", "web/lead", "-n", "1")
	require.NoError(t, err)
	require.Equal(t, "15:00:00 ↻ compact: 30000 → 3000 tokens\n", out)
}
