package nidclient

import (
	"context"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/nid-dev/nid/workflows"
)

// Hosts is every host the registry knows, with its sessions, its capacity
// and whether it is alive. With no registry yet (no worker has beaten) the
// answer is no hosts; a registry that does not answer is an
// *UnavailableError.
func Hosts(ctx context.Context, c client.Client) (workflows.HostsView, error) {
	ctx, cancel := context.WithTimeout(ctx, QueryTimeout)
	defer cancel()
	v := workflows.HostsView{Hosts: []workflows.HostView{}}
	val, err := c.QueryWorkflow(ctx, workflows.HostsID, "", workflows.QueryHosts)
	if IsNotFound(err) {
		return v, nil
	}
	if err != nil {
		return v, &UnavailableError{Who: "the hosts registry (" + workflows.HostsID + ")", Err: err}
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
