package activities

import "github.com/nid-dev/nid/agents"

// lead is the session the tests run their turns and processes as.
var lead = agents.SessionRef{Group: "web", Name: "lead", WorkflowID: "nid/web/lead"}
