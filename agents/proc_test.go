package agents

import (
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"
)

func TestReadLinesCutsOverlongLines(t *testing.T) {
	long := strings.Repeat("x", MaxLineBytes+1000)
	input := "first\n" + long + "\n\n  spaced  \n" + strings.Repeat("y", MaxLineBytes) + "\nno newline"
	var got []string
	// A reader that hands over a few bytes at a time, as a pipe does.
	readLines(iotest.HalfReader(strings.NewReader(input)), func(line []byte) { got = append(got, string(line)) })
	require.Len(t, got, 5)
	require.Equal(t, "first", got[0])
	require.Equal(t, long[:MaxLineBytes], got[1])
	require.Equal(t, "spaced", got[2])
	require.Len(t, got[3], MaxLineBytes, "a line of exactly the limit is whole")
	require.Equal(t, "no newline", got[4])
}
