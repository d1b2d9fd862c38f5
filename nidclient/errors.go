package nidclient

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
)

// The operations return these error types, so that each client decides only
// how to show them: the command line prints the message, the HTTP API maps
// the type to a status and a code.

// NotFoundError is a session or group that is not running. Its message
// names what is running instead.
type NotFoundError struct {
	// Kind is "session" or "group".
	Kind string
	// Ref is the session's GROUP/SESSION or the group's name.
	Ref     string
	Message string
}

func (e *NotFoundError) Error() string { return e.Message }

// RefusedError is a request nid understood and will not carry out: the
// session is stopped, the task is claimed by another, the group's validator
// said no. Message is the refusal in the workflow's own words, e.g. "task t1
// is claimed by lead".
type RefusedError struct{ Message string }

func (e *RefusedError) Error() string { return e.Message }

// InvalidError is bad input: Field names what was wrong (a request field or
// a setting), Message says what is allowed.
type InvalidError struct {
	Field   string
	Message string
	// Shape says the value has the wrong shape (not an object, a string
	// for a number, an unknown key) rather than a value not allowed.
	Shape bool
}

func (e *InvalidError) Error() string { return e.Message }

// UnavailableError is a Temporal server or worker that did not answer.
type UnavailableError struct {
	Who string
	Err error
	// NoWorker, when set, says that no worker runs nid's workflows, which
	// is why the workflow did not answer.
	NoWorker string
	// Served says Temporal answered and a worker asked it for nid's work
	// LastPoll ago, recently enough that it may still run: the workflow
	// is busy, or its worker is taking its sessions back after a start.
	Served   bool
	LastPoll time.Duration
}

func (e *UnavailableError) Error() string {
	switch {
	case e.NoWorker != "":
		return fmt.Sprintf("%s did not answer: %s; start nid up or nid worker", e.Who, e.NoWorker)
	case e.Served:
		return fmt.Sprintf("%s did not answer within %s, though a worker asked Temporal for nid's work %s ago: it may still be taking its sessions back after a start, so try again (start nid up or nid worker if none runs)",
			e.Who, QueryTimeout, e.LastPoll)
	}
	return NotAnswering(e.Who, e.Err).Error()
}

func (e *UnavailableError) Unwrap() error { return e.Err }

// IsNotFound reports whether err says the workflow does not exist, as
// Temporal says it or as an operation here does.
func IsNotFound(err error) bool {
	var nf *serviceerror.NotFound
	var mine *NotFoundError
	return errors.As(err, &nf) || errors.As(err, &mine)
}

// NotAnswering words a query that failed for another reason than the
// workflow not existing: almost always no worker is running.
func NotAnswering(who string, err error) error {
	return fmt.Errorf("%s did not answer (is nid up or nid worker running?): %w", who, err)
}

// sessionError turns a failure to reach a session into a *NotFoundError
// naming the sessions that exist, or an *UnavailableError.
func sessionError(ctx context.Context, c client.Client, group, name string, err error) error {
	if !IsNotFound(err) {
		return unanswered(ctx, c, group+"/"+name, err)
	}
	return &NotFoundError{Kind: "session", Ref: group + "/" + name, Message: UnknownSession(ctx, c, group, name).Error()}
}

// groupError is sessionError for a group.
func groupError(ctx context.Context, c client.Client, group string, err error) error {
	if !IsNotFound(err) {
		return unanswered(ctx, c, "group "+group, err)
	}
	return &NotFoundError{Kind: "group", Ref: group, Message: UnknownGroup(ctx, c, group).Error()}
}

// UnknownGroup is the error for a group that is not running: it lists the
// groups that are.
func UnknownGroup(ctx context.Context, c client.Client, group string) error {
	groups, err := ListGroups(ctx, c)
	if err != nil {
		return fmt.Errorf("no group %q", group)
	}
	return GroupMissing(group, groups)
}

// GroupMissing words the error for a group that is not among groups.
func GroupMissing(group string, groups []string) error {
	if len(groups) == 0 {
		return fmt.Errorf("no group %q: no group is running (start them with nid up)", group)
	}
	return fmt.Errorf("no group %q; running groups: %s", group, strings.Join(groups, ", "))
}

// UnknownSession is the error for a session that is not running: it lists
// the group's sessions, or the groups when the group is not running either.
func UnknownSession(ctx context.Context, c client.Client, group, name string) error {
	ref := group + "/" + name
	all, err := ListSessions(ctx, c, "")
	if err != nil {
		return fmt.Errorf("no session %q", ref)
	}
	var names []string
	for _, s := range all {
		if s.Group == group {
			names = append(names, s.Name)
		}
	}
	if len(names) > 0 {
		return fmt.Errorf("no session %q; sessions in %s: %s", ref, group, strings.Join(names, ", "))
	}
	groups, err := ListGroups(ctx, c)
	if err != nil {
		return fmt.Errorf("no session %q", ref)
	}
	if slices.Contains(groups, group) {
		return fmt.Errorf("no session %q: group %s has no running sessions", ref, group)
	}
	return GroupMissing(group, groups)
}
