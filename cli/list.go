package cli

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/client"

	"github.com/nid-dev/nid/nidclient"
	"github.com/nid-dev/nid/workflows"
)

// session is one running session as Temporal visibility lists it.
type session = nidclient.Session

// The reads below are nidclient's, under the names the commands use.

func listSessions(ctx context.Context, c client.Client, group string) ([]session, error) {
	return nidclient.ListSessions(ctx, c, group)
}

func listGroups(ctx context.Context, c client.Client) ([]string, error) {
	return nidclient.ListGroups(ctx, c)
}

func unknownGroup(ctx context.Context, c client.Client, group string) error {
	return nidclient.UnknownGroup(ctx, c, group)
}

func groupMissing(group string, groups []string) error { return nidclient.GroupMissing(group, groups) }

func unknownSession(ctx context.Context, c client.Client, group, name string) error {
	return nidclient.UnknownSession(ctx, c, group, name)
}

func isNotFound(err error) bool { return nidclient.IsNotFound(err) }

func notAnswering(who string, err error) error { return nidclient.NotAnswering(who, err) }

func querySession(ctx context.Context, c client.Client, group, name string) (workflows.SessionView, error) {
	return nidclient.QuerySession(ctx, c, group, name)
}

func queryGroup(ctx context.Context, c client.Client, group string) (workflows.GroupView, error) {
	return nidclient.QueryGroup(ctx, c, group)
}

// validGroup checks a GROUP argument.
func validGroup(g string) error {
	if !workflows.ValidName(g) {
		return fmt.Errorf("%q is not a group name: use lower-case letters, digits, - and _", g)
	}
	return nil
}

// optionalGroup reads the [GROUP] argument of a command.
func optionalGroup(command string, args []string) (string, error) {
	switch len(args) {
	case 0:
		return "", nil
	case 1:
		if err := validGroup(args[0]); err != nil {
			return "", err
		}
		return args[0], nil
	default:
		return "", fmt.Errorf("too many arguments: nid %s takes at most one GROUP", command)
	}
}
