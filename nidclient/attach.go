package nidclient

import (
	"context"

	"go.temporal.io/sdk/client"

	"github.com/nid-dev/nid/workflows"
)

// Attach asks a session for the hold nid attach takes: the answer says
// whether it is ready or waits for a turn to end. A hold the session will
// not give (held by another, stopped, a sim, the wrong host) is a
// *RefusedError in the session's own words.
func Attach(ctx context.Context, c client.Client, group, name string, req workflows.AttachRequest) (workflows.AttachAnswer, error) {
	var ans workflows.AttachAnswer
	err := updateSession(ctx, c, group, name, workflows.UpdateAttach, req, &ans)
	return ans, err
}

// RenewAttach renews the hold's lease, so that the session does not take
// it back while the person works.
func RenewAttach(ctx context.Context, c client.Client, group, name, lease string) error {
	err := c.SignalWorkflow(ctx, workflows.SessionID(group, name), "", workflows.SignalAttachRenew, workflows.AttachRenewal{Lease: lease})
	if err != nil {
		return sessionError(ctx, c, group, name, err)
	}
	return nil
}

// ReleaseAttach hands the session back and returns what the hand-back
// found in the vendor's records.
func ReleaseAttach(ctx context.Context, c client.Client, group, name, lease string) (workflows.Handback, error) {
	var h workflows.Handback
	err := updateSession(ctx, c, group, name, workflows.UpdateAttachRelease, workflows.AttachRelease{Lease: lease}, &h)
	return h, err
}

// updateSession runs update on a session workflow, as UpdateGroup does on
// a group's.
func updateSession(ctx context.Context, c client.Client, group, name, update string, arg, out any) error {
	var sent bool
	err := Resend(ctx, func() error {
		handle, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
			WorkflowID:   workflows.SessionID(group, name),
			UpdateName:   update,
			Args:         []any{arg},
			WaitForStage: client.WorkflowUpdateStageCompleted,
		})
		if sent = err == nil; sent {
			err = handle.Get(ctx, out)
		}
		return err
	})
	switch {
	case err == nil:
		return nil
	case !sent:
		return sessionError(ctx, c, group, name, err)
	}
	return &RefusedError{Message: workflows.ErrorText(err)}
}
