// Package clip shortens text that nid did not write itself (an agent's
// output, a name in a request, a process's stderr) to fit a message, a
// column or a record, always on a character boundary and always saying
// that it was cut. Each need has one function: a cut counted in
// characters, one counted in bytes, and one that keeps both ends.
package clip

import (
	"fmt"
	"unicode/utf8"
)

// Ellipsis marks a cut counted in characters.
const Ellipsis = "…"

// Runes returns s when it has at most n characters (runes); otherwise its
// first n-1 characters and Ellipsis, n in all. For text shown to a
// person: a column, a line of an event, a name quoted in an error.
func Runes(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if len(s) <= n || utf8.RuneCountInString(s) <= n {
		return s
	}
	i, count := 0, 0
	for i < len(s) && count < n-1 {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
		count++
	}
	return s[:i] + Ellipsis
}

// Bytes returns s when it has at most n bytes; otherwise its longest
// prefix that ends on a character boundary and leaves room for mark,
// followed by mark, at most n bytes in all (mark alone, cut the same way,
// when n is smaller than mark). For text kept under a size: a record, an
// activity's result, a prompt.
func Bytes(s string, n int, mark string) string {
	if len(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	if len(mark) >= n {
		return prefix(mark, n)
	}
	return prefix(s, n-len(mark)) + mark
}

// Middle returns s when it has at most n bytes; otherwise its start and
// its end, about two thirds and one third of n, joined by a line saying
// how many bytes were left out. For a long text whose start says what it
// is about and whose end says where it got to, such as a conversation.
func Middle(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "\n[nid: %d bytes left out]\n"
	room := max(n-len(mark)-8, 0)
	i, j := room*2/3, len(s)-room/3
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	for j < len(s) && !utf8.RuneStart(s[j]) {
		j++
	}
	return s[:i] + fmt.Sprintf(mark, j-i) + s[j:]
}

// prefix is the longest prefix of s of at most n bytes that ends on a
// character boundary.
func prefix(s string, n int) string {
	if n >= len(s) {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
