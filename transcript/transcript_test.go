package transcript

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func texts(entries []Entry) []string {
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = e.Text
	}
	return out
}

func TestAppendAndRead(t *testing.T) {
	dir := t.TempDir()
	l := New(dir)
	require.NoError(t, l.Append("web", "lead", Entry{Kind: KindPrompt, Text: "one"}, Entry{Kind: KindOutput, Text: "two"}))
	require.NoError(t, l.Append("web", "worker", Entry{Kind: KindPrompt, Text: "other session"}))

	// A restarted worker numbers on from what is on disk.
	l = New(dir)
	require.NoError(t, l.Append("web", "lead", Entry{Kind: KindPrompt, Text: "three"}))
	all, err := l.Read("web", "lead", 0)
	require.NoError(t, err)
	require.Equal(t, []string{"one", "two", "three"}, texts(all))
	require.Equal(t, []int64{1, 2, 3}, []int64{all[0].Seq, all[1].Seq, all[2].Seq})

	after, err := l.Read("web", "lead", 2)
	require.NoError(t, err)
	require.Equal(t, []string{"three"}, texts(after))

	tail, err := l.Tail("web", "lead", 2)
	require.NoError(t, err)
	require.Equal(t, []string{"two", "three"}, texts(tail))

	none, err := l.Read("web", "nobody", 0)
	require.NoError(t, err)
	require.Empty(t, none)

	require.Error(t, l.Append("..", "lead", Entry{Text: "x"}), "names cannot leave the transcripts directory")
}

func TestTranscriptsAreBounded(t *testing.T) {
	l := New(t.TempDir())
	l.MaxBytes, l.Keep = 400, 2
	for i := range 40 {
		require.NoError(t, l.Append("web", "lead", Entry{Kind: KindOutput, Text: strings.Repeat("x", 50) + string(rune('a'+i%26))}))
	}
	var total int64
	for _, p := range []string{l.Path("web", "lead"), l.old("web", "lead", 1), l.old("web", "lead", 2)} {
		fi, err := os.Stat(p)
		require.NoError(t, err, "the current file and two old ones are kept")
		require.LessOrEqual(t, fi.Size(), l.MaxBytes)
		total += fi.Size()
	}
	_, err := os.Stat(l.old("web", "lead", 3))
	require.ErrorIs(t, err, os.ErrNotExist, "older files are dropped")

	all, err := l.Read("web", "lead", 0)
	require.NoError(t, err)
	require.Less(t, len(all), 40, "the oldest entries are gone")
	require.Equal(t, int64(40), all[len(all)-1].Seq, "the newest entry is kept")
	for i := 1; i < len(all); i++ {
		require.Equal(t, all[i-1].Seq+1, all[i].Seq, "what is kept is contiguous, oldest first")
	}
	entries, err := os.ReadDir(filepath.Join(l.dir, "web"))
	require.NoError(t, err)
	require.Len(t, entries, 3)
}

func TestLine(t *testing.T) {
	at := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	tests := []struct {
		e    Entry
		want string
	}{
		{Entry{At: at, Kind: KindPrompt, Text: "Run the tests"}, "15:04:05 > Run the tests"},
		{Entry{At: at, Kind: KindOutput, Text: "ok\nall green\n"}, "15:04:05 < ok\n           all green"},
		{Entry{At: at, Kind: KindTool, Text: "handoff_write(Parser done)"}, "15:04:05 · handoff_write(Parser done)"},
		{Entry{At: at, Kind: KindRotation, Method: "compact", Text: "171000 → 17100 tokens"}, "15:04:05 ↻ compact: 171000 → 17100 tokens"},
		{Entry{At: at, Kind: KindError, Text: "turn failed: exit 1"}, "15:04:05 ✗ turn failed: exit 1"},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, Line(tt.e))
	}
}
