package activities

import (
	"time"

	"github.com/nid-dev/nid/agents"
)

// HandbackName reads what a person did in a session they attached to.
const HandbackName = "nid.Handback"

// HandbackInput names the session handed back, the conversation it had
// when the person attached and when they did: the vendor's records of that
// session, on this worker's host, say the rest.
type HandbackInput struct {
	Session      agents.SessionRef `json:"session"`
	Spec         agents.AgentSpec  `json:"spec"`
	Conversation string            `json:"conversation,omitempty"`
	Since        time.Time         `json:"since"`
}

// HandbackResult is what the vendor's records say after the person's
// work (see agents.Handback).
type HandbackResult struct {
	agents.Handback
}
