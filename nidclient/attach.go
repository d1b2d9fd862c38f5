package nidclient

import (
	"context"
	"fmt"
	"strings"

	"go.temporal.io/sdk/client"

	"github.com/nid-dev/nid/workflows"
)

// nid attach's three calls on a session: take the hold, renew its lease,
// hand the session back. The session decides; a refusal (held by another,
// stopped, a kind with no interactive CLI, the wrong host, a lease that does
// not hold it) comes back as a *RefusedError in its own sentence.

// Attach takes the hold on a session for req.Who, on req.Host, by the lease
// req.Lease. The answer is Ready once the session's agent process is
// closed; until then it names the turn it waits for (poll the view's
// Attach.Ready). Asking again with the same lease answers the same hold.
func Attach(ctx context.Context, c client.Client, group, name string, req workflows.AttachRequest) (workflows.AttachAnswer, error) {
	var a workflows.AttachAnswer
	switch {
	case strings.TrimSpace(req.Who) == "":
		return a, &InvalidError{Field: "who", Message: "who: missing: who attaches, as user@host"}
	case strings.TrimSpace(req.Lease) == "":
		return a, &InvalidError{Field: "lease", Message: "lease: missing: the random id that renewals and the hand-back name"}
	}
	err := UpdateSession(ctx, c, group, name, workflows.UpdateAttach, req, &a)
	return a, err
}

// RenewAttach renews the lease that holds a session, as nid attach does
// every workflows.AttachRenewEvery while its command runs. A session that
// is gone is a *NotFoundError; a renewal naming a lease that no longer
// holds the session is ignored by it (and said in its feed).
func RenewAttach(ctx context.Context, c client.Client, group, name, lease string) error {
	if err := c.SignalWorkflow(ctx, workflows.SessionID(group, name), "", workflows.SignalAttachRenew, workflows.AttachRenewal{Lease: lease}); err != nil {
		return sessionError(ctx, c, group, name, err)
	}
	return nil
}

// ReleaseAttach hands back the session lease holds and answers what the
// hand-back found in the vendor's records. Sent again after its answer was
// lost, it answers the same hand-back.
func ReleaseAttach(ctx context.Context, c client.Client, group, name, lease string) (workflows.Handback, error) {
	var h workflows.Handback
	err := UpdateSession(ctx, c, group, name, workflows.UpdateAttachRelease, workflows.AttachRelease{Lease: lease}, &h)
	return h, err
}

// UpdateSession runs update on a session's workflow with arg, waits for
// its answer and decodes it into out. A refusal comes back as a
// *RefusedError; a session that is not running as a *NotFoundError; no
// answer as an *UnavailableError.
func UpdateSession(ctx context.Context, c client.Client, group, name, update string, arg, out any) error {
	sent, err := updateWorkflow(ctx, c, workflows.SessionID(group, name), update, arg, out)
	switch {
	case err == nil:
		return nil
	case IsUnknownUpdate(err):
		return &RefusedError{Message: fmt.Sprintf("%s/%s runs a version of nid from before nid attach: it can be attached once it has continued as new (nid doctor says which rung it runs)", group, name)}
	case !sent:
		return sessionError(ctx, c, group, name, err)
	}
	return &RefusedError{Message: workflows.ErrorText(err)}
}

// IsUnknownUpdate says the workflow has no handler for the update: its run
// follows a rung from before the update existed.
func IsUnknownUpdate(err error) bool {
	return strings.Contains(err.Error(), "unknown update")
}
