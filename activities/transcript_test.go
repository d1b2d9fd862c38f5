package activities

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/internal/agenttest"
	"github.com/nid-dev/nid/internal/clip"
	"github.com/nid-dev/nid/transcript"
)

// TestTranscriptAcrossAHandoff runs a session's turns through a handoff and
// a compaction the way the workflows do and reads back one transcript that
// spans both conversations with each rotation marked.
func TestTranscriptAcrossAHandoff(t *testing.T) {
	ctx := context.Background()
	rec := agenttest.StartHandoffRecorder(t, "")
	state := t.TempDir()
	logs := transcript.New(state)
	acts := &Activities{
		Agents:      map[string]agents.Agent{agents.KindSim: agents.NewSim()},
		StateDir:    state,
		MCP:         func(agents.SessionRef, int) agents.MCPAccess { return agents.MCPAccess{URL: rec.URL} },
		Transcripts: logs,
	}
	spec := agents.AgentSpec{Kind: agents.KindSim, Sim: config.Sim{TurnDelay: config.Duration(time.Millisecond)}}
	turn := func(conv, kind, prompt string) string {
		res, err := acts.RunTurn(ctx, TurnInput{Session: lead, Spec: spec, Conversation: conv, Prompt: prompt, Kind: kind})
		require.NoError(t, err)
		return res.Conversation
	}

	first := turn("", agents.TurnWork, "Goal: write the parser")
	turn(first, agents.TurnHandoffRequest, "Call handoff_write now")
	require.Len(t, rec.Summaries(), 1)
	fresh := turn("", agents.TurnFresh, "Handoff from your previous conversation:\nThe parser is done; next: tests.")
	require.NotEqual(t, first, fresh)
	turn(fresh, agents.TurnWork, "Continue working toward the goal")
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
		{transcript.KindTool, "", first, "handoff_write(" + clip.Runes(rec.Summaries()[0], 60) + ")"},
		{transcript.KindOutput, "", first, "sim turn 2 of conversation " + first + ": wrote a handoff with handoff_write"},
		{transcript.KindRotation, "handoff", "", "Handoff from your previous conversation:\nThe parser is done; next: tests."},
		{transcript.KindOutput, "", fresh, `sim turn 1 of conversation ` + fresh + `: worked on "Handoff from your previous conversation:\nThe parser is done…"`},
		{transcript.KindPrompt, "", fresh, "Continue working toward the goal"},
		{transcript.KindOutput, "", fresh, `sim turn 2 of conversation ` + fresh + `: worked on "Continue working toward the goal"`},
		{transcript.KindRotation, "compact", fresh, got[9].text},
	}, got)
	require.Regexp(t, `^\d+ → \d+ tokens$`, got[9].text)
}

func TestTranscriptRecordsFailures(t *testing.T) {
	state := t.TempDir()
	logs := transcript.New(state)
	acts := &Activities{Agents: map[string]agents.Agent{"broken": failing(agents.AgentFailed("no credentials"))}, StateDir: state, Transcripts: logs}
	_, err := acts.RunTurn(context.Background(), TurnInput{Session: lead, Spec: agents.AgentSpec{Kind: "broken"}, Prompt: "go"})
	require.Error(t, err)
	entries, err := logs.Read(lead.Group, lead.Name, 0)
	require.NoError(t, err)
	require.Len(t, entries, 2)
	require.Equal(t, transcript.KindError, entries[1].Kind)
	require.Equal(t, "turn failed: no credentials", entries[1].Text)
}

// jsonLine is v as one line the way the agents' CLIs write it: `<` as
// itself, one byte, where Go's encoder takes six.
func jsonLine(t *testing.T, v any) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(v))
	return b.Bytes()
}

// fill sets key of m to the longest run of `<` that keeps m's line within
// MaxLineBytes, the longest line an adapter reads whole.
func fill(t *testing.T, m map[string]any, key string) []byte {
	t.Helper()
	m[key] = ""
	room := agents.MaxLineBytes - len(jsonLine(t, m))
	m[key] = strings.Repeat("<", room)
	line := jsonLine(t, m)
	require.Len(t, line, agents.MaxLineBytes)
	return line
}

// largestOutput writes a stream that makes each agent kind hand over the
// largest output it can, all `<`, and returns the command that prints it.
func largestOutput(t *testing.T, kind string) string {
	t.Helper()
	stream := filepath.Join(t.TempDir(), "stream")
	var body string
	switch kind {
	case agents.KindClaude:
		// A turn whose result line is as long as a line can be.
		rec, err := os.ReadFile(filepath.Join("..", "agents", "testdata", "claude", "turn.jsonl"))
		require.NoError(t, err)
		lines := strings.Split(strings.TrimSpace(string(rec)), "\n")
		var result map[string]any
		require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &result))
		require.Equal(t, "result", result["type"])
		out := strings.Join(lines[:len(lines)-1], "\n") + "\n" + string(fill(t, result, "result"))
		require.NoError(t, os.WriteFile(stream, []byte(out), 0o600))
		return agenttest.FakeClaude(t, `cat '`+stream+`'`)
	case agents.KindCodex:
		// An app-server whose agent message is as long as a line can be.
		item := map[string]any{"type": "agentMessage", "id": "m1"}
		note := map[string]any{"method": "item/completed", "params": map[string]any{"threadId": "t1", "item": item}}
		item["text"] = ""
		room := agents.MaxLineBytes - len(jsonLine(t, note))
		item["text"] = strings.Repeat("<", room)
		line := jsonLine(t, note)
		require.Len(t, line, agents.MaxLineBytes)
		require.NoError(t, os.WriteFile(stream, line, 0o600))
		body = `while read -r req; do
  id=$(printf '%s' "$req" | sed -n 's/^{"id":\([0-9]*\),"method":"\([^"]*\)".*/\1 \2/p')
  set -- $id
  case "$2" in
  "") ;;
  thread/start|thread/resume) echo '{"id":'$1',"result":{"thread":{"id":"t1"}}}' ;;
  turn/start)
    echo '{"id":'$1',"result":{"turn":{"id":"u1","status":"inProgress"}}}'
    cat '` + stream + `'
    echo '{"method":"turn/completed","params":{"threadId":"t1","turn":{"id":"u1","status":"completed"}}}' ;;
  *) echo '{"id":'$1',"result":{}}' ;;
  esac
done`
	case agents.KindExec:
		// Lines of `<` past what an exec turn keeps.
		line := strings.Repeat("<", 999) + "\n"
		require.NoError(t, os.WriteFile(stream, []byte(strings.Repeat(line, agents.MaxExecOutputBytes/len(line)+10)), 0o600))
		body = `cat '` + stream + `'`
	}
	return agenttest.Script(t, body)
}

// The largest output each agent kind can hand over, all `<` (six bytes
// each as JSON), is written clipped with a mark, reads back, and leaves the
// transcript writable by the next worker.
func TestTranscriptTakesTheLargestOutputOfEachAgent(t *testing.T) {
	kinds := map[string]agents.Agent{agents.KindClaude: agents.NewClaude(), agents.KindCodex: agents.NewCodex(), agents.KindExec: agents.NewExec()}
	for _, kind := range slices.Sorted(maps.Keys(kinds)) {
		t.Run(kind, func(t *testing.T) {
			readyHost(t)
			state := t.TempDir()
			cmd := largestOutput(t, kind)
			acts := &Activities{
				Agents:      map[string]agents.Agent{kind: kinds[kind]},
				StateDir:    state,
				Transcripts: transcript.New(state),
				Settings: func(agents.SessionRef) (string, config.AgentSettings, bool) {
					// A fake of the CLI: no sandbox to speak of.
					return kind, config.AgentSettings{Command: cmd, Permissions: config.PermissionsFull}, true
				},
			}
			t.Cleanup(func() { _ = acts.Close() })
			res, err := acts.RunTurn(context.Background(), TurnInput{Session: lead, Spec: agents.AgentSpec{Kind: kind}, Prompt: "answer at length"})
			require.NoError(t, err)
			// Less the rest of the line (the result line of Claude Code
			// carries its usage), or the last line of `<` that no longer fit.
			min := agents.MaxLineBytes - 4096
			if kind == agents.KindExec {
				min = agents.MaxExecOutputBytes - 1000
			}
			require.Greater(t, res.OutputBytes, min, "the agent handed over the most it can")

			// A restarted worker reads the transcript and writes on.
			logs := transcript.New(state)
			require.NoError(t, logs.Append(lead.Group, lead.Name, transcript.Entry{Kind: transcript.KindPrompt, Text: "next"}))
			entries, err := logs.Read(lead.Group, lead.Name, 0)
			require.NoError(t, err)
			require.Len(t, entries, 3)
			out := entries[1]
			require.Equal(t, transcript.KindOutput, out.Kind)
			require.True(t, strings.HasPrefix(out.Text, strings.Repeat("<", 500)), "the output's start is kept")
			require.Regexp(t, `\n\[nid: \d+ more bytes of this entry are not in the transcript\]$`, out.Text)
			require.Equal(t, "next", entries[2].Text)

			b, err := os.ReadFile(logs.Path(lead.Group, lead.Name))
			require.NoError(t, err)
			for line := range strings.Lines(string(b)) {
				require.LessOrEqual(t, len(line), transcript.MaxTextBytes+1024, "a line is well below what a reader takes (%d)", transcript.MaxLineBytes)
			}
		})
	}
}
