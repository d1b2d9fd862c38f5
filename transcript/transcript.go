// Package transcript keeps each session's transcript: the prompts, outputs
// and tool calls of its turns across all its vendor conversations, with each
// rotation as a marked line. Transcripts are files on the worker's host, in
// the state directory, never workflow history: a turn's whole output is
// there, where history keeps only its first few kilobytes.
//
// The activities append; `nid transcript` and the dashboard read:
//
//	log := transcript.New(stateDir)
//	_ = log.Append("web", "lead", transcript.Entry{Kind: transcript.KindPrompt, Text: prompt})
//	entries, err := log.Read("web", "lead", 0)
//
// Each session's transcript is bounded: past MaxBytes the current file is
// renamed to <session>.1.jsonl (older ones shift up) and at most Keep old
// files are kept. An entry's text is clipped to MaxTextBytes as written
// (with a mark saying so), well below MaxLineBytes, the longest line a
// reader takes; a longer line, from an older nid, is skipped.
package transcript

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/nid-dev/nid/statedir"
)

// Entry kinds.
const (
	KindPrompt   = "prompt"   // what nid sent the agent
	KindOutput   = "output"   // what the agent answered
	KindTool     = "tool"     // a tool the agent called, in short
	KindRotation = "rotation" // ↻ compact or ↻ handoff
	KindError    = "error"    // a turn or compaction that failed
)

// Entry is one line of a transcript.
type Entry struct {
	// Seq numbers a session's entries from 1, so a reader that follows the
	// transcript knows what it has already shown.
	Seq          int64     `json:"seq"`
	At           time.Time `json:"at"`
	Kind         string    `json:"kind"`
	Conversation string    `json:"conversation,omitempty"`
	// Turn is the turn kind (work, handoff-request, fresh) of prompts and
	// outputs.
	Turn string `json:"turn,omitempty"`
	// Method is compact or handoff on rotation entries.
	Method string `json:"method,omitempty"`
	Text   string `json:"text"`
}

// Defaults for Log's bounds.
const (
	DefaultMaxBytes = 1 << 20
	DefaultKeep     = 3
)

// Bounds of one entry. JSON may take six bytes for one of the text (a `<`
// is written \u003c), so the text is measured as written: an agent's
// answer of megabytes of markup still makes a line a reader can take.
const (
	// MaxTextBytes is the most an entry's text takes in the file.
	MaxTextBytes = 256 << 10
	// MaxLineBytes is the longest line Read takes; longer ones are skipped.
	MaxLineBytes = 1 << 20
)

// Log is the transcripts under one state directory. It is safe for
// concurrent use; one process (the worker on this host) appends.
type Log struct {
	dir string
	// MaxBytes is the size past which a session's current file is rotated.
	MaxBytes int64
	// Keep is how many rotated files a session keeps.
	Keep int

	mu sync.Mutex
	// next is the next sequence number by session, learned from the files
	// on first append.
	next map[string]int64
}

// New returns the transcripts kept under stateDir/transcripts.
func New(stateDir string) *Log {
	return &Log{
		dir:      filepath.Join(stateDir, "transcripts"),
		MaxBytes: DefaultMaxBytes,
		Keep:     DefaultKeep,
		next:     map[string]int64{},
	}
}

// Path is the file the session's transcript is currently written to.
func (l *Log) Path(group, name string) string {
	return filepath.Join(l.dir, group, name+".jsonl")
}

// Sessions lists the sessions with a transcript here, as group/name,
// sorted.
func (l *Log) Sessions() ([]string, error) {
	paths, err := filepath.Glob(filepath.Join(l.dir, "*", "*.jsonl"))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range paths {
		name := strings.TrimSuffix(filepath.Base(p), ".jsonl")
		if strings.Contains(name, ".") {
			continue // a rotated file: the session's current one is listed too
		}
		out = append(out, filepath.Base(filepath.Dir(p))+"/"+name)
	}
	slices.Sort(out)
	return out, nil
}

// old is the path of the session's n-th rotated file (1 is the newest).
func (l *Log) old(group, name string, n int) string {
	return filepath.Join(l.dir, group, fmt.Sprintf("%s.%d.jsonl", name, n))
}

func checkNames(group, name string) error {
	for _, s := range []string{group, name} {
		if s == "" || s == "." || s == ".." || strings.ContainsAny(s, `/\`) {
			return fmt.Errorf("%q/%q does not name a session", group, name)
		}
	}
	return nil
}

// Append adds entries to the session's transcript, numbering them and
// stamping those without a time.
func (l *Log) Append(group, name string, entries ...Entry) error {
	if err := checkNames(group, name); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	key := group + "/" + name
	if _, ok := l.next[key]; !ok {
		last, err := l.lastSeq(group, name)
		if err != nil {
			return err
		}
		l.next[key] = last + 1
	}
	var buf bytes.Buffer
	for _, e := range entries {
		e.Seq = l.next[key]
		l.next[key]++
		if e.At.IsZero() {
			e.At = time.Now()
		}
		e.Text = fitJSON(e.Text)
		b, err := json.Marshal(e)
		if err != nil {
			return err
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	path := l.Path(group, name)
	if err := os.MkdirAll(filepath.Dir(path), statedir.DirMode); err != nil {
		return err
	}
	if err := l.rotateIfFull(group, name, int64(buf.Len())); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, statedir.FileMode)
	if err != nil {
		return err
	}
	_, err = f.Write(buf.Bytes())
	return errors.Join(err, f.Close())
}

// clipMark ends a text clipped to MaxTextBytes.
const clipMark = "\n[nid: %d more bytes of this entry are not in the transcript]"

// fitJSON cuts text, on a character boundary, so that as JSON (escapes
// counted, which clip.Bytes cannot know) it takes at
// most MaxTextBytes, mark included, and marks the cut.
func fitJSON(text string) string {
	// Every byte of text takes at least one of JSON.
	if len(text) <= MaxTextBytes && jsonLen(text) <= MaxTextBytes {
		return text
	}
	budget := MaxTextBytes - len(clipMark) - 16
	// The longest prefix that fits: adding bytes never makes JSON
	// shorter, except a character cut in two, which the end trims.
	lo, hi := 0, min(len(text), budget)
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if jsonLen(text[:mid]) <= budget {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	for lo > 0 && lo < len(text) && !utf8.RuneStart(text[lo]) {
		lo--
	}
	return text[:lo] + fmt.Sprintf(clipMark, len(text)-lo)
}

// jsonLen is how many bytes s takes as a JSON string, quotes excluded.
func jsonLen(s string) int {
	b, _ := json.Marshal(s)
	return len(b) - 2
}

// rotateIfFull shifts the session's files up by one when adding n bytes
// would take the current file past MaxBytes, dropping the oldest.
func (l *Log) rotateIfFull(group, name string, n int64) error {
	path := l.Path(group, name)
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && (fi.Size() == 0 || fi.Size()+n <= l.MaxBytes)) {
		return nil
	}
	if err != nil {
		return err
	}
	keep := max(l.Keep, 0)
	if keep == 0 {
		return os.Remove(path)
	}
	if err := os.Remove(l.old(group, name, keep)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	for i := keep - 1; i >= 1; i-- {
		if err := os.Rename(l.old(group, name, i), l.old(group, name, i+1)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return os.Rename(path, l.old(group, name, 1))
}

// lastSeq is the sequence number of the newest entry on disk, 0 when there
// is none.
func (l *Log) lastSeq(group, name string) (int64, error) {
	entries, err := l.Read(group, name, 0)
	if err != nil || len(entries) == 0 {
		return 0, err
	}
	return entries[len(entries)-1].Seq, nil
}

// Read returns the session's entries after seq, oldest first, from the
// rotated files and the current one. A session with no transcript has no
// entries.
func (l *Log) Read(group, name string, after int64) ([]Entry, error) {
	if err := checkNames(group, name); err != nil {
		return nil, err
	}
	paths := make([]string, 0, l.Keep+1)
	for i := max(l.Keep, 0); i >= 1; i-- {
		paths = append(paths, l.old(group, name, i))
	}
	paths = append(paths, l.Path(group, name))
	var out []Entry
	for _, p := range paths {
		f, err := os.Open(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		err = readLines(f, func(line []byte) {
			var e Entry
			// A line cut short by a crash is skipped, not fatal.
			if json.Unmarshal(line, &e) == nil && e.Seq > after {
				out = append(out, e)
			}
		})
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", p, err)
		}
	}
	return out, nil
}

// readLines hands each line of r to fn, skipping lines longer than
// MaxLineBytes: one entry too long to read must not make the rest of the
// transcript unreadable, nor, through lastSeq, stop a worker appending.
func readLines(r io.Reader, fn func([]byte)) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	tooLong := false
	for {
		chunk, err := br.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) > MaxLineBytes+1 {
				line, tooLong = nil, true
			} else {
				line = append(line, chunk...)
			}
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if !tooLong && len(line) > 0 {
			fn(line)
		}
		line, tooLong = line[:0], false
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// Tail returns the session's last n entries (all of them when n <= 0).
func (l *Log) Tail(group, name string, n int) ([]Entry, error) {
	entries, err := l.Read(group, name, 0)
	if err != nil {
		return nil, err
	}
	if n > 0 && len(entries) > n {
		entries = entries[len(entries)-n:]
	}
	return entries, nil
}

// Line renders an entry as one line of `nid transcript`:
//
//	15:04:05 > Continue working toward the goal…      (prompt)
//	15:04:05 < Refactored the parser…                   (output)
//	15:04:05 · handoff_write                            (tool)
//	15:04:05 ↻ handoff: Handoff from your previous…    (rotation)
//
// Multi-line texts are indented under their first line.
func Line(e Entry) string {
	mark := map[string]string{KindPrompt: ">", KindOutput: "<", KindTool: "·", KindRotation: "↻", KindError: "✗"}[e.Kind]
	if mark == "" {
		mark = e.Kind
	}
	text := strings.TrimRight(e.Text, "\n")
	if e.Kind == KindRotation && e.Method != "" {
		text = e.Method + ": " + text
	}
	return e.At.Format("15:04:05") + " " + mark + " " + strings.ReplaceAll(text, "\n", "\n           ")
}
