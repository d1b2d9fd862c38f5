package transcript

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/statedir"
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

	// Transcripts are the user's and the agents' words: for no one else.
	for path, mode := range map[string]os.FileMode{l.Path("web", "lead"): statedir.FileMode, filepath.Dir(l.Path("web", "lead")): statedir.DirMode, l.dir: statedir.DirMode} {
		fi, err := os.Stat(path)
		require.NoError(t, err)
		require.Equal(t, mode, fi.Mode().Perm(), path)
	}
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

// Text that JSON writes six bytes a character for (markup, control
// characters) is clipped as written, on a character boundary, with a mark.
func TestLongTextsAreClipped(t *testing.T) {
	l := New(t.TempDir())
	fits := strings.Repeat("<", MaxTextBytes/6)
	long := strings.Repeat("<\x01é", MaxTextBytes)
	require.NoError(t, l.Append("web", "lead", Entry{Kind: KindOutput, Text: fits}, Entry{Kind: KindOutput, Text: long}))

	entries, err := l.Read("web", "lead", 0)
	require.NoError(t, err)
	require.Len(t, entries, 2)
	require.Equal(t, fits, entries[0].Text, "a text that fits is whole")
	clipped := entries[1].Text
	kept, mark, ok := strings.Cut(clipped, "\n[nid: ")
	require.True(t, ok, "the cut is marked")
	require.Equal(t, fmt.Sprintf("%d more bytes of this entry are not in the transcript]", len(long)-len(kept)), mark)
	require.True(t, strings.HasPrefix(long, kept))
	require.Greater(t, len(kept), MaxTextBytes/6-100, "as much is kept as fits")
	// Wherever the cut falls, it falls between characters.
	for pad := range 12 {
		text := strings.Repeat("a", pad) + strings.Repeat("€<", MaxTextBytes)
		require.NoError(t, l.Append("web", "cuts", Entry{Kind: KindOutput, Text: text}))
		cuts, err := l.Tail("web", "cuts", 1)
		require.NoError(t, err)
		kept, _, _ := strings.Cut(cuts[0].Text, "\n[nid: ")
		require.True(t, strings.HasPrefix(text, kept), "cut between characters, not into one (%q)", kept[len(kept)-8:])
	}

	b, err := os.ReadFile(l.Path("web", "lead"))
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	require.Len(t, lines, 2)
	for _, line := range lines {
		require.LessOrEqual(t, len(line), MaxTextBytes+200)
	}
}

// A line too long to read, as an older nid could write, costs that entry
// only: the rest reads, and a restarted writer appends after it.
func TestAnOverlongLineIsSkipped(t *testing.T) {
	dir := t.TempDir()
	l := New(dir)
	require.NoError(t, l.Append("web", "lead", Entry{Kind: KindPrompt, Text: "one"}))
	f, err := os.OpenFile(l.Path("web", "lead"), os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = fmt.Fprintf(f, `{"seq":2,"at":"2026-01-02T15:04:05Z","kind":"output","text":"%s"}`+"\n", strings.Repeat(`\u003c`, MaxLineBytes/6+1))
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.NoError(t, New(dir).Append("web", "lead", Entry{Kind: KindPrompt, Text: "three"}))

	entries, err := New(dir).Read("web", "lead", 0)
	require.NoError(t, err)
	require.Equal(t, []string{"one", "three"}, texts(entries))
}
