package workflows

// What nid attach and a session say to each other: a person takes the
// session over in the agent's own terminal, holds it by a lease that nid
// attach renews, and hands it back (VersionAttach).

import "time"

// Attach names: the update that takes the hold, the signal that renews its
// lease, and the update that hands the session back.
const (
	UpdateAttach        = "session.attach"
	SignalAttachRenew   = "session.attach.renew"
	UpdateAttachRelease = "session.attach.release"
)

// StatusAttached is a session a person holds with nid attach: no turn
// starts and its policy does not rotate it until they hand it back.
const StatusAttached = "attached"

// AttachLease is how long a hold lasts without a renewal: a nid attach
// that died (kill -9, a lost ssh connection) frees its session within it.
// nid attach renews every AttachRenewEvery, so a person attached for hours
// is never cut off while the process lives, even across a short restart
// of the server.
const (
	AttachLease      = time.Minute
	AttachRenewEvery = 10 * time.Second
)

// AttachRequest is what nid attach asks: who attaches (user@host), on
// which host it runs (the session's own, or it is refused), and the lease,
// a random id that renewals and the release name.
type AttachRequest struct {
	Who   string `json:"who"`
	Host  string `json:"host"`
	Lease string `json:"lease"`
}

// AttachAnswer is the hold as taken: Ready once the session's turn has
// ended and its agent process was closed; until then WaitingForTurn is the
// turn it waits for. Conversation and Generation are what the person
// resumes; Context is the record before they start.
type AttachAnswer struct {
	Ready          bool          `json:"ready"`
	WaitingForTurn int           `json:"waitingForTurn,omitempty"`
	Conversation   string        `json:"conversation,omitempty"`
	Generation     int           `json:"generation"`
	Context        ContextRecord `json:"context"`
}

// AttachRenewal renews the lease it names.
type AttachRenewal struct {
	Lease string `json:"lease"`
}

// AttachRelease hands back the session the lease holds.
type AttachRelease struct {
	Lease string `json:"lease"`
}

// AttachView is who holds a session and since when, in its view.
type AttachView struct {
	Who   string    `json:"who"`
	Host  string    `json:"host,omitempty"`
	Since time.Time `json:"since"`
	// Ready is false while the hold waits for the running turn
	// (WaitingForTurn) to end and the agent process to close.
	Ready          bool `json:"ready"`
	WaitingForTurn int  `json:"waitingForTurn,omitempty"`
}

// Handback is what a hand-back found in the vendor's own records: the
// context before and after, the turns the person took by hand, the
// compactions they ran, the conversation they ended in. It is the release
// update's answer and, as LastHandback, part of the session's view.
type Handback struct {
	Who         string        `json:"who"`
	Since       time.Time     `json:"since"`
	Until       time.Time     `json:"until"`
	Before      ContextRecord `json:"before"`
	After       ContextRecord `json:"after"`
	HandTurns   int           `json:"handTurns"`
	Compactions int           `json:"compactions,omitempty"`
	// Conversation is the one the session goes on with: the person's last,
	// a /clear or a new thread included.
	Conversation string `json:"conversation,omitempty"`
	// Expired is true when the lease ran out (nid attach died) rather than
	// the person exiting.
	Expired bool `json:"expired,omitempty"`
	// Note says what could not be read, if anything.
	Note string `json:"note,omitempty"`
}
