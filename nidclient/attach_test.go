package nidclient_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/internal/temporaltest"
	"github.com/nid-dev/nid/nidclient"
	"github.com/nid-dev/nid/workflows"
)

func TestAttachHoldsAndHandsBack(t *testing.T) {
	t.Parallel()
	c := start(t, `  web:
    rotate: {mode: off}
    sessions:
      - {agent: exec, name: lint, command: /bin/true, permissions: full}
      - {agent: sim, name: lead, sim: {turnDelay: 0s}}
`)
	ctx := context.Background()
	temporaltest.TakeTurns(t, c, "web", "lint", "first")
	alice := workflows.AttachRequest{Who: "alice@box", Host: temporaltest.Host, Lease: "lease-a"}

	a, err := nidclient.Attach(ctx, c, "web", "lint", alice)
	require.NoError(t, err)
	require.True(t, a.Ready, "an idle session is ready at once")
	require.Equal(t, 1, a.Context.TotalTurns)
	v := temporaltest.Session(t, c, "web", "lint")
	require.Equal(t, workflows.StatusAttached, v.Status)
	require.Equal(t, "alice@box", v.Attach.Who)

	_, err = nidclient.Attach(ctx, c, "web", "lint", workflows.AttachRequest{Who: "bob@other", Host: temporaltest.Host, Lease: "lease-b"})
	refused := requireErrorPrefix[*nidclient.RefusedError](t, err, "web/lint is attached by alice@box since ")
	require.Contains(t, refused.Message, "wait for them to hand it back")
	_, err = nidclient.Attach(ctx, c, "web", "lead", alice)
	requireError[*nidclient.RefusedError](t, err, "the sim agent has no interactive CLI to attach to: nid send gives it a message for its next turn, and nid transcript shows what it did")
	_, err = nidclient.Attach(ctx, c, "web", "lint", workflows.AttachRequest{Who: "alice@box", Lease: ""})
	requireError[*nidclient.InvalidError](t, err, "lease: missing: the random id that renewals and the hand-back name")
	_, err = nidclient.Attach(ctx, c, "web", "nobody", alice)
	requireError[*nidclient.NotFoundError](t, err, `no session "web/nobody"; sessions in web: lead, lint`)

	said, err := nidclient.Send(ctx, c, "web", "lint", "after you")
	require.NoError(t, err)
	require.Equal(t, "queued for web/lint: it is attached by alice@box (nid attach), and its next turn takes the message once they hand it back", said)
	require.NoError(t, nidclient.RenewAttach(ctx, c, "web", "lint", "lease-a"))

	_, err = nidclient.ReleaseAttach(ctx, c, "web", "lint", "lease-b")
	requireErrorPrefix[*nidclient.RefusedError](t, err, "lease lease-b does not hold web/lint: it is attached by alice@box since ")
	h, err := nidclient.ReleaseAttach(ctx, c, "web", "lint", "lease-a")
	require.NoError(t, err)
	require.Equal(t, "alice@box", h.Who)
	require.Equal(t, "an exec agent keeps no records nid can read: the context is as its last turn reported it", h.Note)
	require.Equal(t, 1, h.After.TotalTurns)
	again, err := nidclient.ReleaseAttach(ctx, c, "web", "lint", "lease-a")
	require.NoError(t, err)
	require.Equal(t, h, again, "a release sent again answers the same hand-back")

	v = temporaltest.WaitSession(t, c, "web", "lint", "to take the queued message", func(v workflows.SessionView) bool {
		return v.Context.TotalTurns == 2
	})
	require.Nil(t, v.Attach)
	require.Equal(t, "alice@box", v.LastHandback.Who)
}

// requireErrorPrefix asserts err is of type E with a message starting
// with want, and returns it.
func requireErrorPrefix[E error](t *testing.T, err error, want string) E {
	t.Helper()
	var e E
	require.ErrorAs(t, err, &e)
	require.True(t, strings.HasPrefix(e.Error(), want), "got %q", e.Error())
	return e
}
