package temporaltest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/nidclient"
	"github.com/nid-dev/nid/workflows"
)

// waitTimeout bounds how long a test waits for a workflow to reach a state;
// sim turns in tests take milliseconds, so only a broken test waits this
// long.
const waitTimeout = time.Minute

// Session is a session's view, as its workflow answers the query.
func Session(t testing.TB, c client.Client, group, name string) workflows.SessionView {
	t.Helper()
	var v workflows.SessionView
	query(t, c, workflows.SessionID(group, name), workflows.QuerySession, &v)
	return v
}

// Group is a group's view, as its workflow answers the query.
func Group(t testing.TB, c client.Client, group string) workflows.GroupView {
	t.Helper()
	var v workflows.GroupView
	query(t, c, workflows.GroupID(group), workflows.QueryGroup, &v)
	return v
}

func query(t testing.TB, c client.Client, id, query string, out any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// A query the server gives up on before ctx does (its own deadline,
	// reached on a machine loaded by the other packages' tests) is asked
	// again: how fast the server answers is not what these tests check.
	val, err := c.QueryWorkflow(ctx, id, "", query)
	for err != nil && ctx.Err() == nil && isDeadline(err) {
		time.Sleep(200 * time.Millisecond)
		val, err = c.QueryWorkflow(ctx, id, "", query)
	}
	if err != nil {
		t.Fatalf("query %s of %s: %v", query, id, err)
	}
	if err := val.Get(out); err != nil {
		t.Fatalf("query %s of %s: %v", query, id, err)
	}
}

// WaitSession polls a session until ok holds of its view, and returns that
// view; what names the state in the failure.
func WaitSession(t testing.TB, c client.Client, group, name, what string, ok func(workflows.SessionView) bool) workflows.SessionView {
	t.Helper()
	return wait(t, group+"/"+name+" "+what, func() (workflows.SessionView, bool) {
		v := Session(t, c, group, name)
		return v, ok(v)
	})
}

// WaitGroup polls a group until ok holds of its view, and returns that view.
func WaitGroup(t testing.TB, c client.Client, group, what string, ok func(workflows.GroupView) bool) workflows.GroupView {
	t.Helper()
	return wait(t, "group "+group+" "+what, func() (workflows.GroupView, bool) {
		v := Group(t, c, group)
		return v, ok(v)
	})
}

func wait[V any](t testing.TB, what string, poll func() (V, bool)) V {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		v, ok := poll()
		if ok {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; last: %+v", what, v)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Signal sends a session a signal, as nid's clients and its MCP endpoint
// do.
func Signal(t testing.TB, c client.Client, group, name, signal string, arg any) {
	t.Helper()
	if err := c.SignalWorkflow(context.Background(), workflows.SessionID(group, name), "", signal, arg); err != nil {
		t.Fatalf("signal %s to %s/%s: %v", signal, group, name, err)
	}
}

// TakeTurns has a session take one turn for each message, one after the
// other, and returns its view after the last.
func TakeTurns(t testing.TB, c client.Client, group, name string, messages ...string) workflows.SessionView {
	t.Helper()
	v := Session(t, c, group, name)
	for _, m := range messages {
		want := v.Context.TotalTurns + 1
		Signal(t, c, group, name, workflows.SignalMessage, workflows.Message{Text: m})
		v = WaitSession(t, c, group, name, "to finish its turn", func(v workflows.SessionView) bool {
			return v.Context.TotalTurns >= want && v.Status == workflows.StatusIdle
		})
	}
	return v
}

// Settle waits until visibility lists every running session of the
// namespace as its workflow answers for itself: visibility is updated
// after the fact, so a test that drove a session somewhere and then lists
// (nid ls, watch, the API's session.list) waits for it first.
func Settle(t testing.TB, c client.Client) {
	t.Helper()
	wait(t, "visibility to catch up", func() (string, bool) {
		listed, err := nidclient.ListSessions(context.Background(), c, "")
		if err != nil {
			return err.Error(), false
		}
		for _, l := range listed {
			v := Session(t, c, l.Group, l.Name)
			if l.Status != v.Status || !reflect.DeepEqual(l.Context, v.Context) {
				return fmt.Sprintf("%s listed %s %+v, is %s %+v", l.Ref(), l.Status, l.Context, v.Status, v.Context), false
			}
		}
		return "", true
	})
}

// Listed waits until visibility lists every group and session of cfg: a
// node has started them when it returns, but visibility learns of them
// after the fact, and an error naming the running groups or a group's
// sessions reads them from there.
func Listed(t testing.TB, c client.Client, cfg *config.Config) {
	t.Helper()
	var want []string
	for _, g := range cfg.GroupNames() {
		want = append(want, g)
		for _, s := range cfg.Groups[g].Sessions {
			want = append(want, g+"/"+s.Name)
		}
	}
	wait(t, "visibility to list "+strings.Join(want, ", "), func() (string, bool) {
		groups, err := nidclient.ListGroups(context.Background(), c)
		if err != nil {
			return err.Error(), false
		}
		sessions, err := nidclient.ListSessions(context.Background(), c, "")
		if err != nil {
			return err.Error(), false
		}
		listed := groups
		for _, s := range sessions {
			listed = append(listed, s.Ref())
		}
		for _, w := range want {
			if !slices.Contains(listed, w) {
				return "listed: " + strings.Join(listed, ", "), false
			}
		}
		return "", true
	})
}

// Rotate asks a session to rotate by mode, as nid rotate does, and waits
// until the rotation completed.
func Rotate(t testing.TB, c client.Client, group, name, mode string) workflows.SessionView {
	t.Helper()
	want := Session(t, c, group, name).Context.Rotations + 1
	Signal(t, c, group, name, workflows.SignalRotate, workflows.RotateRequest{Mode: mode, Reason: workflows.ReasonManual})
	return WaitSession(t, c, group, name, "to rotate", func(v workflows.SessionView) bool {
		return v.Context.Rotations >= want && v.Status == workflows.StatusIdle
	})
}

// isDeadline says a call ran out of time, on either side.
func isDeadline(err error) bool {
	_, server := errors.AsType[*serviceerror.DeadlineExceeded](err)
	return server || errors.Is(err, context.DeadlineExceeded)
}

// Signals counts the signals workflow id received; name, when not empty,
// counts only those called so.
func Signals(t testing.TB, c client.Client, id, name string) int {
	t.Helper()
	n := 0
	iter := c.GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iter.HasNext() {
		e, err := iter.Next()
		if err != nil {
			t.Fatalf("history of %s: %v", id, err)
		}
		if a := e.GetWorkflowExecutionSignaledEventAttributes(); a != nil && (name == "" || a.GetSignalName() == name) {
			n++
		}
	}
	return n
}
