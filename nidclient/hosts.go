package nidclient

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/workflows"
)

// Hosts is every host the registry knows, with its sessions, its capacity
// and whether it is alive. With no registry yet (no worker has beaten) the
// answer is no hosts; a registry that does not answer is an
// *UnavailableError.
func Hosts(ctx context.Context, c client.Client) (workflows.HostsView, error) {
	v := workflows.HostsView{Hosts: []workflows.HostView{}}
	asked := time.Now()
	val, err := query(ctx, c, workflows.HostsID, workflows.QueryHosts)
	if IsNotFound(err) {
		return v, nil
	}
	if err != nil {
		return v, unanswered(ctx, c, "the hosts registry ("+workflows.HostsID+")", &queryError{err: err, asked: asked})
	}
	if err := val.Get(&v); err != nil {
		return v, err
	}
	if v.Hosts == nil {
		v.Hosts = []workflows.HostView{}
	}
	return v, nil
}

// HostSeenAgo is how long ago the host last beat, as of now; the registry's
// own Alive is what its sessions were told.
func HostSeenAgo(h workflows.HostView, now time.Time) time.Duration {
	if h.LastSeen.IsZero() {
		return 0
	}
	return now.Sub(h.LastSeen).Round(time.Second)
}

// Move asks a session to move to host: at its next turn boundary it hands
// off, its work carried along, and its fresh conversation starts there. A
// move that makes no sense (a session of before hosts, a stopped one, the
// host it is on, a host no worker registered, one that is down) is a
// *RefusedError or an *InvalidError and is not sent. It says what happens.
func Move(ctx context.Context, c client.Client, group, name, host string) (string, error) {
	ref := group + "/" + name
	if !config.ValidHost(host) {
		return "", &InvalidError{Field: "host", Message: fmt.Sprintf("host: %q is not a host name (letters, digits, '.', '-' or '_'; nid hosts lists them)", host)}
	}
	v, err := GetSession(ctx, c, group, name)
	if err != nil {
		return "", err
	}
	hosts, err := Hosts(ctx, c)
	if err != nil {
		return "", err
	}
	var names []string
	var to *workflows.HostView
	for i, h := range hosts.Hosts {
		names = append(names, h.Name)
		if h.Name == host {
			to = &hosts.Hosts[i]
		}
	}
	switch {
	case v.Host == "":
		return "", &RefusedError{Message: ref + " runs from before hosts: it can move once it has continued as new"}
	case v.Status == workflows.StatusStopped:
		return "", &RefusedError{Message: ref + " is stopped: start it (nid start " + ref + ") before moving it"}
	case v.Host == host:
		return "", &RefusedError{Message: fmt.Sprintf("%s is on host %s already", ref, host)}
	case to == nil:
		return "", &RefusedError{Message: fmt.Sprintf("no host %s: the hosts are %s (nid hosts)", host, strings.Join(names, ", "))}
	case !to.Alive:
		return "", &RefusedError{Message: fmt.Sprintf("host %s is down: start nid worker --host %s there first", host, host)}
	}
	if err := c.SignalWorkflow(ctx, workflows.SessionID(group, name), "", workflows.SignalMove, workflows.MoveRequest{Host: host}); err != nil {
		return "", sessionError(ctx, c, group, name, err)
	}
	how := "when its current turn ends it hands off"
	if v.HostDown {
		how = "its host is down, so it hands off at once with what it last said, and its uncommitted work stays on " + v.Host
	} else if v.Worktree != "" {
		how += ", its branch and a salvage of its uncommitted work go along, and a fresh worktree of the branch is made"
	}
	return fmt.Sprintf("%s moves from host %s to host %s: %s; the fresh conversation starts on %s, with the same tasks and locks",
		ref, v.Host, host, how, host), nil
}
