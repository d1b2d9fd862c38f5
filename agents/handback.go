package agents

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// The vendors' records a hand-back reads are the agent's own writing: a
// person's CLI, and the model through it, may have put anything there. So
// they are read within bounds (recordTail of a file, recordLine of a line;
// a longer line is skipped whole), only as regular files reached without
// a symlink below the vendor's configuration directory, and a line that
// is not what nid expects is skipped.
const (
	recordTail = 64 << 20
	recordLine = 8 << 20
	// recordFiles bounds the files a search for the newest record looks
	// at.
	recordFiles = 100_000
)

// readRecord calls line with each complete line of the last recordTail
// bytes of the regular file path, skipping lines longer than recordLine.
// A symlink is refused, and so is anything that is not a regular file (a
// FIFO would block the read).
func readRecord(ctx context.Context, path string, line func([]byte)) error {
	f, err := openRegular(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	partial := false
	if fi.Size() > recordTail {
		if _, err := f.Seek(fi.Size()-recordTail, io.SeekStart); err != nil {
			return err
		}
		// The first line read is a part of one.
		partial = true
	}
	r := bufio.NewReaderSize(io.LimitReader(f, recordTail), 64<<10)
	var buf []byte
	long := false
	for {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		chunk, err := r.ReadSlice('\n')
		if !long {
			buf = append(buf, chunk...)
			if len(buf) > recordLine {
				long, buf = true, buf[:0]
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err == nil {
			if !long && !partial {
				line(bytes.TrimSuffix(buf, []byte("\n")))
			}
			buf, long, partial = buf[:0], false, false
			continue
		}
		// A last line without its newline may be one the CLI is still
		// writing: it is read only when whole JSON.
		if !long && !partial && json.Valid(bytes.TrimSpace(buf)) {
			line(buf)
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		return err
	}
}

// recordFile is a vendor's record file and when it was last written.
type recordFile struct {
	path string
	mod  time.Time
}

// recordsSince lists the regular files under dir, depth directories down,
// whose names match, written at since or later, newest first. Symlinks,
// to files or directories, are not followed; a dir that does not exist
// holds none.
func recordsSince(dir string, depth int, match func(name string) bool, since time.Time) ([]recordFile, error) {
	var found []recordFile
	seen := 0
	var walk func(d string, depth int) error
	walk = func(d string, depth int) error {
		entries, err := os.ReadDir(d)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		for _, e := range entries {
			if seen++; seen > recordFiles {
				return nil
			}
			path := filepath.Join(d, e.Name())
			switch {
			case e.Type()&fs.ModeSymlink != 0:
			case e.IsDir() && depth > 0:
				if err := walk(path, depth-1); err != nil {
					return err
				}
			case e.Type().IsRegular() && depth == 0 && match(e.Name()):
				fi, err := e.Info()
				if err == nil && !fi.ModTime().Before(since) {
					found = append(found, recordFile{path, fi.ModTime()})
				}
			}
		}
		return nil
	}
	if fi, err := os.Lstat(dir); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		return nil, fmt.Errorf("%s is a symlink: nid reads a vendor's records only where the vendor itself writes them", dir)
	}
	if err := walk(dir, depth); err != nil {
		return nil, err
	}
	slices.SortStableFunc(found, func(a, b recordFile) int { return b.mod.Compare(a.mod) })
	return found, nil
}

// recordTime reads a record line's timestamp; the zero time when it has
// none.
func recordTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t
}

// claudeProjectDirs are where Claude Code, run with p's environment in
// p's working directory, keeps that directory's transcripts: <config
// dir>/projects/<the path with every character but letters and digits
// made '-'>, the config dir being CLAUDE_CONFIG_DIR, else ~/.claude. A
// path longer than Claude Code's limit for a name is cut there and given
// a hash of its own, which nid does not compute: the directories starting
// with the cut name are its candidates, and cut says so (their
// transcripts must then name the working directory). cwds are the working
// directory's names: as given, and with its symlinks resolved.
func claudeProjectDirs(p Process) (dirs, cwds []string, cut bool) {
	env := ProcessEnv(p, nil)
	if env["CLAUDE_CONFIG_DIR"] == "" && env["HOME"] == "" {
		return nil, nil, false
	}
	config := cmp.Or(env["CLAUDE_CONFIG_DIR"], filepath.Join(env["HOME"], ".claude"))
	projects := filepath.Join(config, "projects")
	wd := WorkDir(p)
	cwds = []string{wd}
	if real, err := filepath.EvalSymlinks(wd); err == nil && real != wd {
		cwds = append(cwds, real)
	}
	for _, cwd := range cwds {
		name := claudeUnsafe.ReplaceAllString(cwd, "-")
		if len(name) <= claudeNameMax {
			dirs = append(dirs, filepath.Join(projects, name))
			continue
		}
		cut = true
		entries, _ := os.ReadDir(projects)
		for _, e := range entries {
			if e.IsDir() && strings.HasPrefix(e.Name(), name[:claudeNameMax]+"-") {
				dirs = append(dirs, filepath.Join(projects, e.Name()))
			}
		}
	}
	return slices.Compact(dirs), cwds, cut
}

// claudeUnsafe is what Claude Code replaces in a path to name its
// project's directory, and claudeNameMax the longest name it keeps whole.
var (
	claudeUnsafe  = regexp.MustCompile(`[^a-zA-Z0-9]`)
	claudeNameMax = 200
)

// claudeRecord is what a hand-back reads of a line of a Claude Code
// transcript.
type claudeRecord struct {
	Type             string `json:"type"`
	Subtype          string `json:"subtype"`
	Timestamp        string `json:"timestamp"`
	IsMeta           bool   `json:"isMeta"`
	IsSidechain      bool   `json:"isSidechain"`
	IsCompactSummary bool   `json:"isCompactSummary"`
	PromptSource     string `json:"promptSource"`
	Cwd              string `json:"cwd"`
	Message          *struct {
		Model   string          `json:"model"`
		Content json.RawMessage `json:"content"`
	} `json:"message"`
	CompactMetadata *struct {
		PreTokens  int64 `json:"preTokens"`
		PostTokens int64 `json:"postTokens"`
	} `json:"compactMetadata"`
}

// Handback reads Claude Code's transcripts of the session's working
// directory: the newest written since the person attached, of conv and
// those with prompts typed since, is the conversation they ended in (a
// /clear starts another). Its last answer's
// usage is the context, counted as a turn's is (ClaudeStream); its
// compact_boundary lines since then are compactions, the context before
// and the next answer's after; the prompts typed since are the turns
// taken by hand.
func (c *Claude) Handback(ctx context.Context, ref SessionRef, p Process, conv string, since time.Time) (Handback, error) {
	dirs, cwds, cut := claudeProjectDirs(p)
	var files []recordFile
	for _, d := range dirs {
		found, err := recordsSince(d, 0, func(name string) bool { return strings.HasSuffix(name, ".jsonl") }, since)
		if err != nil {
			return Handback{}, AgentFailed("claude: cannot read Claude Code's transcripts: %v", err)
		}
		files = append(files, found...)
	}
	slices.SortStableFunc(files, func(a, b recordFile) int { return b.mod.Compare(a.mod) })
	stray := ""
	for _, f := range files {
		h, cwd, begun, err := c.readTranscript(ctx, ref, f.path, since)
		if err != nil {
			return Handback{}, AgentFailed("claude: cannot read Claude Code's transcript %s: %v", f.path, err)
		}
		if (cut || cwd != "") && !slices.Contains(cwds, cwd) {
			// Another directory whose name starts the same, or is the
			// same once Claude Code has made it a name (a-b/c, a/b-c).
			continue
		}
		if CheckConversation(h.Conversation) != nil {
			// Not a name Claude Code gives a transcript: nid's next turn
			// would pass it on the command line.
			continue
		}
		if h.Conversation != conv && (h.HandTurns == 0 || begun.Before(since)) {
			// Sessions of a group without a repo share its directory:
			// a conversation that is neither the one nid gave the person
			// nor one they started and typed in is another session's,
			// which its own turns write meanwhile, or one the person
			// resumed (/resume) that may be.
			if h.HandTurns > 0 && stray == "" {
				stray = h.Conversation
			}
			continue
		}
		if h.Usage.Source == SourceReported && h.Usage.Model == "" {
			h.Usage.Model = p.Model
		}
		h.Note = strayNote(stray, h.Conversation)
		return h, nil
	}
	note := fmt.Sprintf("Claude Code wrote no transcript for %s since %s: the context is as its last turn reported it",
		WorkDir(p), since.UTC().Format(time.RFC3339))
	if stray != "" {
		note = strayNote(stray, conv)
	}
	return Handback{Note: note}, nil
}

// strayNote says that the conversation the person typed in, stray, was
// not taken, and which one the session goes on with: it began before they
// attached and is not the session's, so it may be another session's.
func strayNote(stray, kept string) string {
	if stray == "" {
		return ""
	}
	if kept == "" {
		kept = "a new one"
	}
	return fmt.Sprintf("conversation %s, which you typed in, is not taken: it is not the session's and began before you attached "+
		"(another session's, or an older one resumed); the session goes on with %s", stray, kept)
}

// readTranscript folds one Claude Code transcript into a hand-back, and
// says the working directory its first line names and the time of its
// first line read.
func (c *Claude) readTranscript(ctx context.Context, ref SessionRef, path string, since time.Time) (h Handback, cwd string, begun time.Time, err error) {
	h = Handback{Found: true, Conversation: strings.TrimSuffix(filepath.Base(path), ".jsonl")}
	st := &ClaudeStream{}
	model := ""
	awaiting := -1
	err = readRecord(ctx, path, func(line []byte) {
		var l claudeRecord
		if json.Unmarshal(line, &l) != nil || l.IsSidechain {
			return
		}
		if cwd == "" {
			cwd = l.Cwd
		}
		at := recordTime(l.Timestamp)
		if begun.IsZero() {
			begun = at
		}
		recent := !at.Before(since)
		switch {
		case l.Type == "assistant" && l.Message != nil:
			// Claude Code writes what no model said (an interrupted
			// turn's, an error's) as "<synthetic>", with no usage.
			if strings.HasPrefix(l.Message.Model, "<") {
				return
			}
			was := st.Assistants
			st.Feed(line)
			if st.Assistants > was && l.Message.Model != "" {
				model = l.Message.Model
			}
			if awaiting >= 0 && st.UsageSeen {
				h.Compactions[awaiting].AfterTokens = st.Used
				awaiting = -1
			}
		case l.Type == "system" && l.Subtype == "compact_boundary" && l.CompactMetadata != nil && recent:
			h.Compactions = append(h.Compactions, VendorCompaction{BeforeTokens: max(l.CompactMetadata.PreTokens, 0), AfterTokens: max(l.CompactMetadata.PostTokens, 0)})
			awaiting = len(h.Compactions) - 1
		case l.Type == "user" && l.Message != nil && recent && !l.IsMeta && !l.IsCompactSummary && l.PromptSource != claudeSDKPrompt && claudeTyped(l.Message.Content):
			h.HandTurns++
		}
	})
	if err != nil {
		return Handback{}, "", time.Time{}, err
	}
	h.Usage = c.usage(ref, st)
	if h.Usage.Source == SourceReported && h.Usage.Model == "" {
		h.Usage.Model = model
	}
	return h, cwd, begun, nil
}

// claudeSDKPrompt is the promptSource of a prompt sent to `claude -p`:
// one of nid's own turns, which may have ended after the person asked to
// attach.
const claudeSDKPrompt = "sdk"

// claudeTyped says a user line's content is a prompt a person typed: text,
// not a tool's result, nor what Claude Code writes of a slash command or a
// shell escape it ran locally.
func claudeTyped(content json.RawMessage) bool {
	var text string
	if json.Unmarshal(content, &text) != nil {
		var blocks []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if json.Unmarshal(content, &blocks) != nil {
			return false
		}
		for _, b := range blocks {
			if b.Type != "text" {
				return false
			}
			text += b.Text
		}
	}
	text = strings.TrimSpace(text)
	for _, local := range []string{"<command-name>", "<command-message>", "<local-command-", "<bash-input>", "<bash-stdout>", "<bash-stderr>", "Caveat:"} {
		if strings.HasPrefix(text, local) {
			return false
		}
	}
	return text != ""
}

// codexSessionsDir is where Codex, run with p's environment, keeps its
// rollouts: $CODEX_HOME/sessions, CODEX_HOME being ~/.codex unless set.
func codexSessionsDir(p Process) string {
	env := ProcessEnv(p, nil)
	if env["CODEX_HOME"] == "" && env["HOME"] == "" {
		return ""
	}
	return filepath.Join(cmp.Or(env["CODEX_HOME"], filepath.Join(env["HOME"], ".codex")), "sessions")
}

// codexRecord is what a hand-back reads of a line of a Codex rollout.
type codexRecord struct {
	Timestamp string `json:"timestamp"`
	Type      string `json:"type"`
	Payload   struct {
		Type       string `json:"type"`
		ID         string `json:"id"`
		Cwd        string `json:"cwd"`
		Originator string `json:"originator"`
		Info       *struct {
			Last struct {
				TotalTokens int64 `json:"total_tokens"`
			} `json:"last_token_usage"`
			Window *int64 `json:"model_context_window"`
		} `json:"info"`
		Item *struct {
			Type string `json:"type"`
		} `json:"item"`
	} `json:"payload"`
}

// Handback reads Codex's rollouts of the session's working directory
// under CODEX_HOME/sessions/YYYY/MM/DD: the newest written since the
// person attached is the thread they ended in (a thread resumed keeps its
// file, so all days are looked at). Its last token_count is the context,
// counted as a turn's is (CodexTurn: the last response's total tokens and
// the model's window); each compaction since is one, with the context
// before it and the next count after; the user messages since are the
// turns taken by hand.
func (c *Codex) Handback(ctx context.Context, ref SessionRef, p Process, conv string, since time.Time) (Handback, error) {
	dir := codexSessionsDir(p)
	nothing := Handback{Note: fmt.Sprintf("Codex wrote no rollout for %s since %s: the context is as its last turn reported it",
		WorkDir(p), since.UTC().Format(time.RFC3339))}
	if dir == "" {
		return nothing, nil
	}
	files, err := recordsSince(dir, 3, func(name string) bool {
		return strings.HasPrefix(name, "rollout-") && strings.HasSuffix(name, ".jsonl")
	}, since)
	if err != nil {
		return Handback{}, AgentFailed("codex: cannot read Codex's rollouts: %v", err)
	}
	wd := WorkDir(p)
	for _, f := range files {
		h, meta, err := readCodexRollout(ctx, f.path, since)
		if err != nil {
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return Handback{}, err
			}
			continue
		}
		// The same CODEX_HOME may hold the person's other work.
		if meta.cwd != wd || CheckConversation(h.Conversation) != nil {
			continue
		}
		if h.Conversation != conv && (meta.originator == codexOriginator || meta.started.Before(since)) {
			// Sessions of a group without a repo share its directory: a
			// thread that is neither the one nid gave the person nor one
			// their CLI started since is another session's (its
			// app-server's, or a thread the person only looked at).
			continue
		}
		if h.Usage.Source == SourceReported {
			// As a turn's: the model nid.yaml names.
			h.Usage.Model = p.Model
		}
		return h, nil
	}
	return nothing, nil
}

// codexThread is what a rollout's session_meta says of its thread: the
// working directory it runs in, who started it (nid's app-server says
// codexOriginator) and when.
type codexThread struct {
	cwd, originator string
	started         time.Time
}

// readCodexRollout folds one rollout into a hand-back, and says what its
// session_meta says of its thread.
func readCodexRollout(ctx context.Context, path string, since time.Time) (h Handback, meta codexThread, err error) {
	h.Found = true
	h.Usage = Usage{Source: SourceUnknown}
	var used, window int64
	seen := false
	awaiting := -1
	items, events := 0, 0
	err = readRecord(ctx, path, func(line []byte) {
		var l codexRecord
		if json.Unmarshal(line, &l) != nil {
			return
		}
		recent := !recordTime(l.Timestamp).Before(since)
		switch {
		case l.Type == "session_meta":
			if h.Conversation == "" {
				h.Conversation = l.Payload.ID
				meta = codexThread{cwd: l.Payload.Cwd, originator: l.Payload.Originator, started: recordTime(l.Timestamp)}
			}
		case l.Type == "compacted" && recent:
			h.Compactions = append(h.Compactions, VendorCompaction{BeforeTokens: used})
			awaiting = len(h.Compactions) - 1
		case l.Type == "event_msg" && l.Payload.Type == "token_count" && l.Payload.Info != nil:
			used, seen = max(l.Payload.Info.Last.TotalTokens, 0), true
			if w := l.Payload.Info.Window; w != nil && *w > 0 {
				window = *w
			}
			if awaiting >= 0 && used > 0 {
				h.Compactions[awaiting].AfterTokens = used
				awaiting = -1
			}
		case l.Type == "event_msg" && l.Payload.Type == "user_message" && recent:
			events++
		case l.Type == "event_msg" && l.Payload.Type == "item_completed" && l.Payload.Item != nil && l.Payload.Item.Type == "UserMessage" && recent:
			items++
		}
	})
	if err != nil {
		return Handback{}, codexThread{}, err
	}
	// Releases write a user's message as an event or as a completed item.
	h.HandTurns = max(items, events)
	if seen {
		h.Usage = Usage{UsedTokens: used, WindowTokens: window, Source: SourceReported}
	}
	return h, meta, nil
}
