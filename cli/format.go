package cli

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/nid-dev/nid/internal/clip"
	"github.com/nid-dev/nid/workflows"
)

// ANSI colours, used only when the output is a terminal and NO_COLOR is
// not set.
const (
	ansiYellow = "\x1b[33m"
	ansiReset  = "\x1b[0m"
)

// yellowFrom is the context percent from which nid ls shows it in yellow.
const yellowFrom = 75

// formatTokens writes a token count the way people say it (see
// workflows.TokensText).
func formatTokens(n int64) string { return workflows.TokensText(n) }

// percentText is "62% of 200k", or "—" when the percent is unknown: a
// meter never shows a guess as a fact. Percents are rounded down, so a
// session shows 85% only once it has reached 85%.
func percentText(rec workflows.ContextRecord, color bool) string {
	if rec.Percent == nil {
		return "—"
	}
	pct := int(math.Floor(*rec.Percent))
	s := strconv.Itoa(pct) + "%"
	if rec.WindowTokens > 0 {
		s += " of " + formatTokens(rec.WindowTokens)
	}
	if pct > 100 {
		// Not a fuller meter: the agent says it holds more than its window.
		s += " (more than the window, as the agent reports it)"
	}
	if color && pct >= yellowFrom {
		s = ansiYellow + s + ansiReset
	}
	return s
}

// contextText is nid ls's CONTEXT column: "62% of 200k ↻2".
func contextText(rec workflows.ContextRecord, color bool) string {
	s := percentText(rec, color)
	if rec.Rotations > 0 {
		s += " ↻" + strconv.Itoa(rec.Rotations)
	}
	return s
}

var ansiRE = regexp.MustCompile("\x1b\\[[0-9;]*m")

// visibleWidth is how many columns s takes on a terminal: colour codes take
// none, and ↻ or — one each although they are several bytes.
func visibleWidth(s string) int {
	if strings.IndexByte(s, '\x1b') >= 0 {
		// The regexp only where there is a code: nid ls measures every
		// cell of a thousand rows twice.
		s = ansiRE.ReplaceAllString(s, "")
	}
	return utf8.RuneCountInString(s)
}

func padRight(s string, width int) string {
	if n := visibleWidth(s); n < width {
		return s + strings.Repeat(" ", width-n)
	}
	return s
}

// writeTable writes rows (a header is just the first) in columns two spaces
// apart, padded by visible width, with no trailing spaces.
func writeTable(w io.Writer, rows [][]string) error {
	var widths []int
	for _, row := range rows {
		for i, cell := range row {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], visibleWidth(cell))
		}
	}
	var b strings.Builder
	for _, row := range rows {
		var line strings.Builder
		for i, cell := range row {
			if i == len(row)-1 {
				line.WriteString(cell)
				break
			}
			line.WriteString(padRight(cell, widths[i]))
			line.WriteString("  ")
		}
		// Empty last cells leave no padding behind.
		b.WriteString(strings.TrimRight(line.String(), " "))
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// oneLine is s on one line, its first n characters kept and a cut marked
// with "…" after them.
func oneLine(s string, n int) string {
	return clip.Runes(strings.Join(strings.Fields(s), " "), n+1)
}

// plural is "1 item" or "n items".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// printable makes text nid did not write itself (an agent's output, a
// summary, a task title, an inbox item, an error from a workflow) safe to
// print on a terminal: every character that a terminal acts on rather
// than shows becomes a visible stand-in, so the text cannot move the
// cursor, rewrite lines, set the title or write the clipboard (OSC 52),
// nor turn itself around with bidirectional overrides. C0 controls show as
// their control pictures (ESC as ␛, CR as ␍), DEL as ␡; C1 controls,
// overrides and broken UTF-8 as �. Newlines and tabs stay unless oneLine,
// where a newline shows as ␊ and a tab as a space, so the text cannot pass
// for a line of its own.
func printable(s string, oneLine bool) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return actsOnTerminal(r) || r == utf8.RuneError }) {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError:
			b.WriteRune(utf8.RuneError)
		case r == '\r' && !oneLine && strings.HasPrefix(s[i+1:], "\n"):
			// A CRLF line end is a line end.
		case (r == '\n' || r == '\t') && !oneLine:
			b.WriteRune(r)
		case r == '\t':
			b.WriteByte(' ')
		case r < 0x20:
			b.WriteRune(0x2400 + r)
		case r == 0x7f:
			b.WriteRune('␡')
		case actsOnTerminal(r):
			b.WriteRune(utf8.RuneError)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// printLine writes one line of output made from text nid did not write
// itself, made printable.
func printLine(w io.Writer, format string, args ...any) error {
	_, err := io.WriteString(w, printable(fmt.Sprintf(format, args...), true)+"\n")
	return err
}

// printableError shows an error's text made printable: an error may quote
// a workflow, a board or an agent.
type printableError struct{ error }

func (e printableError) Error() string { return printable(e.error.Error(), false) }
func (e printableError) Unwrap() error { return e.error }

// actsOnTerminal says whether a terminal, or the way it lays out text,
// acts on r rather than showing it: C0 and C1 controls, DEL, and the
// bidirectional marks, embeddings, overrides and isolates.
func actsOnTerminal(r rune) bool {
	switch {
	case r < 0x20, r >= 0x7f && r <= 0x9f:
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

// printableJSON escapes what encoding/json leaves raw but a terminal
// would act on (DEL, C1 controls, bidirectional overrides): the same
// JSON, safe to print. Those characters appear only inside strings, where
// \uXXXX means the same.
func printableJSON(b []byte) []byte {
	// encoding/json escapes C0 controls in strings; outside them, newlines
	// are layout.
	raw := func(r rune) bool { return r >= 0x20 && actsOnTerminal(r) }
	s := string(b)
	if !strings.ContainsFunc(s, raw) {
		return b
	}
	var out bytes.Buffer
	for _, r := range s {
		if raw(r) {
			fmt.Fprintf(&out, `\u%04x`, r)
			continue
		}
		out.WriteRune(r)
	}
	return out.Bytes()
}
