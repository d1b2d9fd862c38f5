package agents

import "fmt"

// Error types an adapter's failures carry (Error.Type), which the activities
// turn into non-retryable temporal.ApplicationError types workflows branch
// on. Retrying cannot fix them.
const (
	// ErrUnknownAgent is an agent this host cannot run: no adapter for
	// its kind, or (the checks nid doctor shares with every turn) its CLI
	// is not installed or nothing it could log in with is found. The
	// message says what to install or set.
	ErrUnknownAgent = "UnknownAgent"
	ErrBadInput     = "BadInput"    // the request itself is malformed
	ErrAgentFailed  = "AgentFailed" // the agent ran and reported a failure it cannot recover from
	// ErrContextFull is a turn the vendor refused because the conversation
	// no longer fits its context window: only a fresh conversation helps.
	ErrContextFull = "ContextFull"
	// ErrSandboxUnavailable is an agent nid would not start because the
	// sandbox its permissions ask for cannot work on this host (bubblewrap
	// missing, user namespaces refused, a kind with no sandbox). The
	// message says what to install, or to set permissions: full. nid never
	// runs such an agent unsandboxed instead.
	ErrSandboxUnavailable = "SandboxUnavailable"
)

// Error is a failure an adapter reports that retrying cannot fix. Type is
// ErrBadInput, ErrAgentFailed, ErrContextFull or ErrSandboxUnavailable; the
// activities turn it into a non-retryable temporal.ApplicationError of that
// type, which workflows branch on.
type Error struct {
	Type string
	Err  error
}

// Error returns the failure's message.
func (e *Error) Error() string { return e.Err.Error() }

// Unwrap returns the failure itself, so errors.Is sees through the type.
func (e *Error) Unwrap() error { return e.Err }

// BadInput reports a request that is malformed, formatted as by fmt.Errorf.
func BadInput(format string, args ...any) error {
	return &Error{Type: ErrBadInput, Err: fmt.Errorf(format, args...)}
}

// AgentFailed reports an agent that ran and failed in a way a retry cannot
// fix, formatted as by fmt.Errorf.
func AgentFailed(format string, args ...any) error {
	return &Error{Type: ErrAgentFailed, Err: fmt.Errorf(format, args...)}
}

// ContextFull reports a turn the vendor refused because the conversation
// no longer fits the context window, formatted as by fmt.Errorf.
func ContextFull(format string, args ...any) error {
	return &Error{Type: ErrContextFull, Err: fmt.Errorf(format, args...)}
}

// SandboxUnavailable reports an agent that was not started because its
// sandbox cannot work on this host, formatted as by fmt.Errorf. The message
// should say what to install, or to set permissions: full.
func SandboxUnavailable(format string, args ...any) error {
	return &Error{Type: ErrSandboxUnavailable, Err: fmt.Errorf(format, args...)}
}
