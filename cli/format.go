package cli

import (
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

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

// formatTokens writes a token count the way people say it: 999, 1.5k, 200k,
// 258.4k, 1M.
func formatTokens(n int64) string {
	if n < 1000 {
		return strconv.FormatInt(n, 10)
	}
	// Rounded to tenths of a thousand, in integers so 1250 is always 1.3k.
	if tenths := (n + 50) / 100; tenths < 10_000 {
		return tenthsString(tenths) + "k"
	}
	return tenthsString((n+50_000)/100_000) + "M"
}

func tenthsString(tenths int64) string {
	if tenths%10 == 0 {
		return strconv.FormatInt(tenths/10, 10)
	}
	return fmt.Sprintf("%d.%d", tenths/10, tenths%10)
}

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
	return utf8.RuneCountInString(ansiRE.ReplaceAllString(s, ""))
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
		for i, cell := range row {
			if i == len(row)-1 {
				b.WriteString(cell)
				break
			}
			b.WriteString(padRight(cell, widths[i]))
			b.WriteString("  ")
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// clip shortens s to n characters on one line, marking the cut with "…".
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

// plural is "1 item" or "n items".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
