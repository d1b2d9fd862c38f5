package config

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strconv"

	yamlv3 "go.yaml.in/yaml/v3"
)

// yamlSyntax matches the YAML parser's complaint about a line.
var yamlSyntax = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// yamlError names the line of a YAML mistake. The parser reports the line
// where the block holding the mistake starts, which may be many lines
// above it: a session list's bad indentation on line 9 is reported at
// line 4, where groups: opens. The mistake is on the line where the text
// up to it stops parsing and starts failing with the same complaint as
// the whole file; a binary search between the reported line and the end
// finds it in a few parses even in a file of thousands of sessions.
func yamlError(data []byte, err error) error {
	m := yamlSyntax.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	reported, _ := strconv.Atoi(m[1])
	complaint := m[2]
	lines := bytes.SplitAfter(data, []byte("\n"))
	fails := func(n int) bool {
		var out map[string]any
		perr := yamlv3.Unmarshal(bytes.Join(lines[:n], nil), &out)
		if perr == nil {
			return false
		}
		pm := yamlSyntax.FindStringSubmatch(perr.Error())
		return pm != nil && pm[2] == complaint
	}
	// The text up to lo parses (or fails otherwise); up to hi it fails as
	// the whole file does.
	lo, hi := max(reported-1, 0), len(lines)
	if fails(lo) {
		lo = 0
	}
	if !fails(hi) {
		return errors.New("line " + m[1] + ": " + complaint)
	}
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if fails(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return fmt.Errorf("line %d: %s", hi, complaint)
}
