package worker

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/nidclient"
	"github.com/nid-dev/nid/workflows"
)

// hostsStart is how the registry is started when a heartbeat or a
// placement finds none.
func hostsStart() client.StartWorkflowOptions {
	return client.StartWorkflowOptions{
		ID:                       workflows.HostsID,
		TaskQueue:                workflows.TaskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		StaticSummary:            "nid hosts registry",
		StaticDetails: "The hosts nid's workers serve under: their capacity and heartbeats. It places new sessions " +
			"on the live host with the most room and tells a host's sessions when it goes down or comes back.",
	}
}

// Beat tells the registry this host is alive (or, leaving, that it stops).
// The beat is an update, which cannot refuse the registry's
// continue-as-new as a signal does (workflows.VersionBeatUpdate). It is
// sent as the signal instead to a registry whose run is older, until its
// next run, and as well when the registry has not answered the update
// within beatPatience: a registry behind on placements queues its updates,
// and a host whose beats queue with them would count as down. An update
// waits for a worker to take the registry's workflow task: a node's first
// beat, sent before its worker starts, is beatBySignal.
func Beat(ctx context.Context, c client.Client, b workflows.HostBeat) error {
	uctx, cancel := context.WithTimeout(ctx, beatPatience)
	err := updateRegistry(uctx, c, workflows.UpdateHeartbeat, b, nil)
	cancel()
	switch {
	case err == nil:
		return nil
	case nidclient.IsUnknownUpdate(err), uctx.Err() != nil && ctx.Err() == nil:
		return beatBySignal(ctx, c, b)
	}
	return fmt.Errorf("hosts registry: %s", workflows.ErrorText(err))
}

// beatPatience is how long a beat waits for the registry's answer before
// it is sent as a signal: ten times the registry's p99 at a hundred
// placements a second (docs/scale.md), and no longer than the shortest
// period a host may beat at (config: 500 ms; three are missed before a
// host counts as down).
const beatPatience = 500 * time.Millisecond

// beatBySignal is Beat as a signal, which the server records before any
// worker runs the registry: the registry then takes it in its next
// workflow task, before a timer that fired for this host meanwhile.
func beatBySignal(ctx context.Context, c client.Client, b workflows.HostBeat) error {
	_, err := c.SignalWithStartWorkflow(ctx, workflows.HostsID, workflows.SignalHeartbeat, b, hostsStart(),
		workflows.HostsWorkflowName, workflows.HostsInput{})
	if err != nil {
		return fmt.Errorf("hosts registry: %w", err)
	}
	return nil
}

// Place asks the registry where a session runs: where it already is, else
// want, else the live host with the most room. A placement lost with its
// workflow task (the registry continuing as new while a thousand sessions
// ask at once) is asked again: asking twice places a session once.
func Place(ctx context.Context, c client.Client, session, want string) (string, error) {
	var p workflows.Placement
	err := updateRegistry(ctx, c, workflows.UpdatePlace, workflows.PlaceRequest{Session: session, Want: want}, &p)
	if err != nil {
		return "", fmt.Errorf("placing %s: %s", session, workflows.ErrorText(err))
	}
	return p.Host, nil
}

// placeBatch is how many sessions PlaceAll places in one update: a
// thousand-session fleet is two round trips through the registry.
const placeBatch = workflows.MaxPlaceBatch / 2

// PlaceAll places many sessions, as Place would one by one and in the same
// order, in one update of the registry for each placeBatch of them;
// placed[i] is where reqs[i] runs. A registry whose run is older than
// batches (workflows.VersionBatchedPlacement) is asked one session at a
// time, and its answers say no host alive.
func PlaceAll(ctx context.Context, c client.Client, reqs []workflows.PlaceRequest) (placed []workflows.Placement, err error) {
	for chunk := range slices.Chunk(reqs, placeBatch) {
		var p workflows.Placements
		err := updateRegistry(ctx, c, workflows.UpdatePlaceAll, workflows.PlaceBatch{Sessions: chunk}, &p)
		switch {
		case err != nil && nidclient.IsUnknownUpdate(err):
			for _, req := range chunk {
				host, err := Place(ctx, c, req.Session, req.Want)
				if err != nil {
					return nil, err
				}
				placed = append(placed, workflows.Placement{Host: host})
			}
		case err != nil:
			return nil, fmt.Errorf("placing %d sessions from %s on: %s", len(chunk), chunk[0].Session, workflows.ErrorText(err))
		case len(p.Placed) != len(chunk):
			return nil, fmt.Errorf("placing %d sessions from %s on: the registry answered for %d", len(chunk), chunk[0].Session, len(p.Placed))
		default:
			placed = append(placed, p.Placed...)
		}
	}
	return placed, nil
}

// updateRegistry sends the hosts registry (started if it is not running)
// the update name with arg and decodes its answer into out. An update lost
// with its workflow task (the registry continuing as new while a thousand
// sessions ask at once) is sent again: the registry's updates may be.
func updateRegistry(ctx context.Context, c client.Client, name string, arg, out any) error {
	return nidclient.Resend(ctx, func() error {
		start := c.NewWithStartWorkflowOperation(hostsStart(), workflows.HostsWorkflowName, workflows.HostsInput{})
		h, err := c.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
			StartWorkflowOperation: start,
			UpdateOptions: client.UpdateWorkflowOptions{
				WorkflowID:   workflows.HostsID,
				UpdateName:   name,
				Args:         []interface{}{arg},
				WaitForStage: client.WorkflowUpdateStageCompleted,
			},
		})
		if err == nil {
			err = h.Get(ctx, out)
		}
		return err
	})
}

// heartbeat beats for this host every w.Heartbeat until ctx ends. A beat
// that fails is tried again at the next one: the registry counts a host
// down only after several are missed. The first failure of a run of them is
// said once in words, and the rest kept at debug, since a server that is
// down fails every beat until it is back.
func heartbeat(ctx context.Context, c client.Client, b workflows.HostBeat, logger *slog.Logger) {
	failing := false
	every(ctx, b.Every, func() {
		bctx, cancel := context.WithTimeout(ctx, b.Every)
		err := Beat(bctx, c, b)
		cancel()
		switch {
		case ctx.Err() != nil:
		case err != nil && !failing:
			failing = true
			logger.Warn(fmt.Sprintf("host %s could not tell Temporal it is alive; it tries again every %s; if it cannot for long, its sessions wait as host-down", b.Host, spoken(b.Every)), "error", err)
		case err != nil:
			logger.Debug("heartbeat not delivered", "host", b.Host, "error", err)
		case failing:
			failing = false
			logger.Info(fmt.Sprintf("host %s reaches Temporal again", b.Host))
		}
	})
}

// every calls do every d until ctx ends, the first time d from now.
func every(ctx context.Context, d time.Duration, do func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			do()
		}
	}
}

// hostBeat is this node's heartbeat.
func hostBeat(w config.Worker, httpURL string) workflows.HostBeat {
	return workflows.HostBeat{Host: w.Host, MaxSessions: w.MaxSessions, Every: w.Heartbeat.D(), HTTP: httpURL}
}
