package activities

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// A claude whose stream is broken by garbage, a line cut short and a 50 MB
// line still gives the turn the recorded stream has: those lines are
// skipped, the ones around them read.
func TestClaudeSkipsBadLines(t *testing.T) {
	rec, err := filepath.Abs(filepath.Join("testdata", "claude", "turn.jsonl"))
	require.NoError(t, err)
	cmd := script(t, `head -c 20000 /dev/urandom | tr -d '\n'; echo
printf '{"type":"assistant","message":{"content":[{"text":"cut'; echo
head -c 50000000 /dev/zero | tr '\0' '{'; echo
cat '`+rec+`'
echo 'not json at all'
`)
	rep, err := NewClaude().Turn(context.Background(), TurnRequest{
		Session: SessionRef{Group: "web", Name: "lead"}, Prompt: "go", Kind: TurnWork,
		StateDir: t.TempDir(), Process: Process{Command: cmd},
	})
	require.NoError(t, err)
	require.Equal(t, "first answer", rep.Output)
	require.Equal(t, "11111111-2222-4333-8444-555555555555", rep.Conversation)
	require.Equal(t, Usage{UsedTokens: 5000, WindowTokens: 200000, Source: SourceReported, Model: "claude-sonnet-4-5"}, rep.Usage)
}

// A claude that ends without its result line (killed, or its output cut)
// is a failed turn a retry may fix, not a turn with no output.
func TestClaudeWithoutResultLine(t *testing.T) {
	cmd := script(t, `echo '{"type":"system","subtype":"init","session_id":"s1"}'; printf '{"type":"result","subtype":"succ'`)
	_, err := NewClaude().Turn(context.Background(), TurnRequest{
		Session: SessionRef{Group: "web", Name: "lead"}, Prompt: "go", Kind: TurnWork,
		StateDir: t.TempDir(), Process: Process{Command: cmd},
	})
	require.Error(t, err)
	var typed *Error
	require.NotErrorAs(t, err, &typed, "retryable: %v", err)
	require.Contains(t, err.Error(), "without a result line")
}
