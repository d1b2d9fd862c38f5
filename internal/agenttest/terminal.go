package agenttest

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/stretchr/testify/require"
)

// Terminal is a pseudo-terminal an interactive command runs in, read as a
// person would see it: its output without the escape sequences and, since
// the CLIs move the cursor instead of printing spaces, without spaces.
type Terminal struct {
	t    testing.TB
	cmd  *exec.Cmd
	f    *os.File
	mu   sync.Mutex
	seen string
	done chan struct{}
}

var escapes = regexp.MustCompile(`\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b[=>78]|\s`)

// StartTerminal runs cmd in a pseudo-terminal, as in a person's; the
// test's end kills it if it still runs.
func StartTerminal(t testing.TB, cmd *exec.Cmd) *Terminal {
	t.Helper()
	f := StartInPTY(t, cmd, 50, 160)
	term := &Terminal{t: t, cmd: cmd, f: f, done: make(chan struct{})}
	var raw []byte
	go func() {
		b := make([]byte, 64<<10)
		for {
			n, err := f.Read(b)
			raw = append(raw, b[:n]...)
			term.mu.Lock()
			term.seen = escapes.ReplaceAllString(string(raw), "")
			term.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	go func() {
		_ = cmd.Wait()
		close(term.done)
	}()
	t.Cleanup(func() {
		select {
		case <-term.done:
		default:
			_ = cmd.Process.Kill()
			<-term.done
		}
		f.Close()
	})
	return term
}

// StartInPTY starts cmd in a new pseudo-terminal of rows and cols, as in
// a person's terminal: cmd leads a session whose controlling terminal it
// is. It returns the terminal's end the person's side reads and writes.
// The test holds the other end open until it ends: when the last of the
// command's processes closes it, Linux may fail the reader's next read
// before it has read what they wrote last (nid attach's hand-back line).
func StartInPTY(t testing.TB, cmd *exec.Cmd, rows, cols uint16) *os.File {
	t.Helper()
	f, tty, err := pty.Open()
	require.NoError(t, err)
	t.Cleanup(func() { _ = tty.Close() })
	require.NoError(t, pty.Setsize(f, &pty.Winsize{Rows: rows, Cols: cols}))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		require.NoError(t, err)
	}
	return f
}

// Done is closed when the command has ended.
func (term *Terminal) Done() <-chan struct{} { return term.done }

// Screen is everything the terminal showed so far, spaces aside.
func (term *Terminal) Screen() string {
	term.mu.Lock()
	defer term.mu.Unlock()
	return term.seen
}

// WaitFor waits until the terminal has shown text (spaces aside) since
// mark, a length of Screen, and returns the new mark.
func (term *Terminal) WaitFor(mark int, text string) int {
	term.t.Helper()
	want := strings.Join(strings.Fields(text), "")
	var at int
	require.Eventually(term.t, func() bool {
		s := term.Screen()
		if mark > len(s) {
			return false
		}
		i := strings.Index(s[mark:], want)
		at = mark + i + len(want)
		return i >= 0
	}, 60*time.Second, 100*time.Millisecond, "the terminal never showed %q; it shows:\n%s", text, term.Tail())
	return at
}

// Tail is the end of what the terminal showed, for a failure's message.
func (term *Terminal) Tail() string {
	s := term.Screen()
	if len(s) > 3000 {
		return "…" + s[len(s)-3000:]
	}
	return s
}

// TypeLine types text and, once the CLI has echoed it, Enter.
func (term *Terminal) TypeLine(mark int, text string) int {
	term.t.Helper()
	_, err := term.f.Write([]byte(text))
	require.NoError(term.t, err)
	mark = term.WaitFor(mark, text)
	time.Sleep(300 * time.Millisecond)
	_, err = term.f.Write([]byte("\r"))
	require.NoError(term.t, err)
	return mark
}

// Exit leaves the CLI the way a person does, with /exit, and waits up to
// within for the command to end.
func (term *Terminal) Exit(mark int, within time.Duration) {
	term.t.Helper()
	term.TypeLine(mark, "/exit")
	select {
	case <-term.done:
	case <-time.After(within):
		term.t.Fatalf("the command did not end after /exit; it shows:\n%s", term.Tail())
	}
}

// TrustWorkDir sets, in the agent's HOME (Claude Code's .claude.json) or
// CODEX_HOME (Codex's config.toml), what a person's own settings say once
// they have used the CLI of kind ("claude" or "codex") in workDir: its
// first-run screens seen, the directory trusted and, for Claude Code, the
// API key apiKey approved. nid leaves a person's settings to them; its
// turns, which are not interactive, need none of this.
func TrustWorkDir(t testing.TB, kind, home, codexHome, workDir, apiKey string) {
	t.Helper()
	switch kind {
	case "claude":
		path := filepath.Join(home, ".claude.json")
		state := map[string]any{}
		if b, err := os.ReadFile(path); err == nil {
			require.NoError(t, json.Unmarshal(b, &state))
		}
		state["hasCompletedOnboarding"] = true
		state["projects"] = map[string]any{workDir: map[string]any{"hasTrustDialogAccepted": true, "hasCompletedProjectOnboarding": true}}
		// The last 20 characters of the key the person approved.
		state["customApiKeyResponses"] = map[string]any{"approved": []string{apiKey}, "rejected": []string{}}
		b, err := json.Marshal(state)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(path, b, 0o600))
	case "codex":
		path := filepath.Join(codexHome, "config.toml")
		f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
		require.NoError(t, err)
		defer f.Close()
		_, err = fmt.Fprintf(f, "[tui]\nscreen_reader_detection_done = true\n[projects.%q]\ntrust_level = \"trusted\"\n[notice.model_migrations]\n\"gpt-5.5\" = \"gpt-6-sol\"\n", workDir)
		require.NoError(t, err)
	default:
		t.Fatalf("TrustWorkDir knows the first-run settings of claude and codex, not of %q", kind)
	}
}
