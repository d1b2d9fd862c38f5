package clip

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestRunesCountsCharactersNotBytes(t *testing.T) {
	cases := []struct {
		in   string
		n    int
		want string
	}{
		{"hello", 5, "hello"},
		{"hello!", 5, "hell…"},
		{"héllo", 5, "héllo"}, // 6 bytes, 5 characters: not cut
		{"日本語のテキスト", 4, "日本語…"},
		{"ab", 1, "…"},
		{"ab", 0, ""},
		{"", 3, ""},
	}
	for _, c := range cases {
		if got := Runes(c.in, c.n); got != c.want {
			t.Errorf("Runes(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
		if got := Runes(c.in, c.n); c.n > 0 && utf8.RuneCountInString(got) > c.n {
			t.Errorf("Runes(%q, %d) has %d characters", c.in, c.n, utf8.RuneCountInString(got))
		}
	}
}

func TestBytesCutsOnACharacterBoundary(t *testing.T) {
	const mark = "[cut]"
	cases := []struct {
		in   string
		n    int
		want string
	}{
		{"abcdef", 6, "abcdef"},
		{"abcdefghij", 8, "abc[cut]"},
		// "é" is two bytes: a cut after 4 bytes would split it, so it
		// moves back to the character's start.
		{"abcéfghij", 9, "abc[cut]"},
		{"abcéfghijk", 10, "abcé[cut]"},
		{"€€€€", 8, "€[cut]"}, // three-byte characters
		{"abcdefghij", 3, "[cu"},
		{"abcdefghij", 0, ""},
	}
	for _, c := range cases {
		got := Bytes(c.in, c.n, mark)
		if got != c.want {
			t.Errorf("Bytes(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
		if len(got) > c.n {
			t.Errorf("Bytes(%q, %d) has %d bytes", c.in, c.n, len(got))
		}
		if !utf8.ValidString(got) {
			t.Errorf("Bytes(%q, %d) = %q is not valid UTF-8", c.in, c.n, got)
		}
	}
}

func TestMiddleKeepsBothEndsWhole(t *testing.T) {
	s := strings.Repeat("é", 100) + "END"
	got := Middle(s, 120)
	if !utf8.ValidString(got) {
		t.Fatalf("Middle cut a character: %q", got)
	}
	if !strings.HasPrefix(got, "é") || !strings.HasSuffix(got, "END") {
		t.Errorf("Middle lost an end: %q", got)
	}
	if !strings.Contains(got, "bytes left out]") {
		t.Errorf("Middle did not say what it left out: %q", got)
	}
	if short := "short"; Middle(short, 120) != short {
		t.Errorf("Middle cut a text that fits")
	}
}
