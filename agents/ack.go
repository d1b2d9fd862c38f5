package agents

import (
	"fmt"
	"regexp"
	"strings"
)

// AckRequest is the line of a fresh conversation's first message that asks
// it to call handoff_ack with the tasks it resumes. The workflow writes it
// and the sim reads it back (AckRequested), so both keep to one wording.
func AckRequest(tasks []string) string {
	ids := "an empty list"
	if len(tasks) > 0 {
		ids = strings.Join(tasks, ", ")
	}
	return fmt.Sprintf("Before anything else, call the %s tool with the ids of the tasks you resume (here: %s), "+
		"so nid can check you picked up where you left off.", ToolHandoffAck, ids)
}

var ackRequestRE = regexp.MustCompile(`call the ` + ToolHandoffAck + ` tool with the ids of the tasks you resume \(here: ([^)]*)\)`)

// AckRequested returns the tasks a message's AckRequest names, and whether
// it has one.
func AckRequested(prompt string) ([]string, bool) {
	m := ackRequestRE.FindStringSubmatch(prompt)
	if m == nil {
		return nil, false
	}
	if m[1] == "an empty list" {
		return []string{}, true
	}
	return strings.Split(m[1], ", "), true
}
