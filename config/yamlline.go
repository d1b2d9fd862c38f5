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
// line 4, where groups: opens. The mistake is on the first line, from
// there on, where the text up to it no longer parses with the same
// complaint.
func yamlError(data []byte, err error) error {
	m := yamlSyntax.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	reported, _ := strconv.Atoi(m[1])
	complaint := m[2]
	lines := bytes.SplitAfter(data, []byte("\n"))
	for n := max(reported, 1); n <= len(lines); n++ {
		var out map[string]any
		perr := yamlv3.Unmarshal(bytes.Join(lines[:n], nil), &out)
		if perr == nil {
			continue
		}
		if pm := yamlSyntax.FindStringSubmatch(perr.Error()); pm != nil && pm[2] == complaint {
			return fmt.Errorf("line %d: %s", n, complaint)
		}
	}
	return errors.New("line " + m[1] + ": " + complaint)
}
