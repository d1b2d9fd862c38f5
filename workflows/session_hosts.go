package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/nid-dev/nid/activities"
	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/internal/clip"
)

// A session's place among the hosts (VersionHosts): which host it runs on,
// and waiting while that host is down.

// hostDownInboxAfter is how long a session waits for its host before the
// inbox hears of it: a worker restarting is no news, one gone for minutes
// is.
const hostDownInboxAfter = 2 * time.Minute

// queue is the task queue the session's activities go to: its host's.
func (s *rules) queue() string {
	if s.st.Host != "" {
		return HostQueue(s.st.Host)
	}
	return s.in.ActivityQueue
}

// hostStart decides the session's host once, the first time a run at
// VersionHosts starts: the one the registry placed it on, or, for a session
// that ran before hosts, the host whose queue it ran on. Each run then tells
// the registry where the session is, which answers whether that host is up;
// but a new session the registry placed on a live host just before it
// started (SessionInput.Placed, VersionBatchedPlacement) has nothing to tell
// it: a thousand sessions starting at once kept the one registry busy for
// minutes with their telling and its answers, each a signal written to its
// history, and every session's first turn waited for its answer. Such a
// session misses only a host counted down in the moment between its
// placement and its start: it then waits for its turn as one whose host
// is up, until the host comes back or is next counted down.
func (s *session) hostStart(ctx workflow.Context) {
	if !s.st.settleHost(s.in.Host, s.in.ActivityQueue) {
		return
	}
	if s.has(VersionBatchedPlacement) && s.in.Placed {
		return
	}
	s.tellRegistry(ctx)
	if s.st.HostDown && !s.st.HostDownTold {
		s.watchHostDown(ctx)
	}
}

// tellRegistry says where the session is, and whether it is stopped
// there, to the hosts registry, which answers with that host's state. A
// registry that is not there (a worker of before hosts runs it) is no
// reason to stop: the session runs on its host's queue regardless.
func (s *session) tellRegistry(ctx workflow.Context) {
	if !s.has(VersionHosts) || s.st.Host == "" {
		return
	}
	_ = workflow.SignalExternalWorkflow(ctx, HostsID, "", SignalHostAssign,
		HostAssign{Session: s.in.Group + "/" + s.in.Name, Host: s.st.Host, Stopped: s.st.Stopped}).Get(ctx, nil)
}

// onHost takes the registry's word on the session's host.
func (s *session) onHost(ctx workflow.Context, h HostState) {
	if !s.has(VersionHosts) || h.Host != s.st.Host || h.Alive != s.st.HostDown {
		return
	}
	if !h.Alive {
		s.st.hostWentDown(workflow.Now(ctx))
		s.record(ctx, Event{Kind: EventHost, Text: fmt.Sprintf("host %s is down: waiting for it", h.Host)})
		s.watchHostDown(ctx)
		if s.st.PendingMove != "" {
			// Asked to move while the host was up: the step it waited
			// for will not end now.
			s.cutLostStep(ctx)
		}
	} else {
		s.st.HostDown = false
		if s.stopWatchingHost != nil {
			s.stopWatchingHost()
			s.stopWatchingHost = nil
		}
		s.record(ctx, Event{Kind: EventHost, Text: fmt.Sprintf("host %s is back: resuming", h.Host)})
	}
	s.publish(ctx)
}

// watchHostDown tells the inbox once the host has been down for
// hostDownInboxAfter.
func (s *session) watchHostDown(ctx workflow.Context) {
	wctx, cancel := workflow.WithCancel(ctx)
	s.stopWatchingHost = cancel
	since := s.st.HostDownSince
	workflow.Go(wctx, func(ctx workflow.Context) {
		if wait := since.Add(hostDownInboxAfter).Sub(workflow.Now(ctx)); wait > 0 {
			if err := workflow.Sleep(ctx, wait); err != nil {
				return
			}
		}
		if !s.st.HostDown || !s.st.HostDownSince.Equal(since) || s.st.HostDownTold {
			return
		}
		s.st.HostDownTold = true
		ref := s.in.Group + "/" + s.in.Name
		s.toInbox(ctx, EventHost, fmt.Sprintf("%s waits for host %s, down since %s: start nid worker --host %s again, or move the session with nid move %s HOST",
			ref, s.st.Host, since.UTC().Format(time.RFC3339), s.st.Host, ref))
	})
}

// onMove takes nid move's request: the session hands off onto the host at
// its next turn boundary. nidclient.Move has refused what makes no sense
// already; the checks here keep a stray signal from doing harm.
func (s *session) onMove(ctx workflow.Context, m MoveRequest) {
	ref := s.in.Group + "/" + s.in.Name
	switch {
	case !s.has(VersionHosts) || s.st.Host == "":
		s.record(ctx, Event{Kind: EventHost, Text: "move refused: " + ref + " runs before hosts; it can move once it has continued as new"})
	case !config.ValidHost(m.Host):
		s.record(ctx, Event{Kind: EventHost, Text: fmt.Sprintf("move refused: %q is not a host name", clip.Runes(m.Host, 80))})
	case s.st.Stopped:
		s.record(ctx, Event{Kind: EventHost, Text: "move refused: " + ref + " is stopped; start it first"})
	case m.Host == s.st.Host:
		s.st.PendingMove = ""
		s.record(ctx, Event{Kind: EventHost, Text: fmt.Sprintf("%s is on host %s already", ref, m.Host)})
	case s.has(VersionLostTurns) && s.st.HostDown:
		s.st.PendingMove = m.Host
		s.record(ctx, Event{Kind: EventHost, Text: fmt.Sprintf("moving from host %s, which is down, to host %s: it hands off at once with what it last said", s.st.Host, m.Host)})
		s.cutLostStep(ctx)
	case s.held():
		s.st.PendingMove = m.Host
		s.record(ctx, Event{Kind: EventHost, Text: fmt.Sprintf("moving from host %s to host %s: it hands off once %s hands it back (nid attach)", s.st.Host, m.Host, s.st.Attach.Who)})
	default:
		s.st.PendingMove = m.Host
		s.record(ctx, Event{Kind: EventHost, Text: fmt.Sprintf("moving from host %s to host %s: it hands off when its current turn ends", s.st.Host, m.Host)})
	}
}

// cutLostStep cancels the turn or rotation running on the session's host
// while it is down and a move waits (VersionLostTurns): no answer will
// come from that host, and the move is the way on. Its work there is lost
// with the host; the move hands off with what the session last said.
func (s *session) cutLostStep(ctx workflow.Context) {
	if !s.has(VersionLostTurns) || !s.st.HostDown || s.st.PendingMove == "" {
		return
	}
	lost := fmt.Sprintf("the turn running on host %s is lost with it: the move hands off with what the session last said", s.st.Host)
	if s.cutTurn(lost) {
		return
	}
	if s.cancelRotation != nil && s.moving == nil {
		s.rotationLost = fmt.Sprintf("the rotation running on host %s is lost with it: the move hands off instead", s.st.Host)
		s.cancelRotation()
	}
}

// move hands the session off onto the host nid move named: a handoff
// rotation that saves the work on the old host and starts the fresh
// conversation on the new one, in a fresh worktree of the same branch.
func (s *session) move(ctx workflow.Context) {
	m := s.st.startMove(s.in.Repo)
	s.moving = &m
	defer func() { s.moving = nil }()
	s.rotate(ctx, RotateRequest{Mode: config.ModeHandoff, Reason: ReasonMove}, "")
}

// arrive makes the host a move reached the session's host, with the
// worktree made there; a move that left the old worktree behind it has no
// other.
func (s *session) arrive(ctx workflow.Context, res RotationResult) {
	if res.ToHost == "" || !(res.OK || res.Stuck) {
		return
	}
	s.st.arrived(res, s.in.Repo != "")
	if s.stopWatchingHost != nil {
		s.stopWatchingHost()
		s.stopWatchingHost = nil
	}
	s.tellRegistry(ctx)
	s.record(ctx, Event{Kind: EventHost, Text: fmt.Sprintf("moved from host %s to host %s", res.FromHost, res.ToHost)})
	s.publish(ctx)
}

// taskFinished says the task the session held on the board before is done
// on the board now.
func (s *rules) taskFinished(before, now BoardView) bool {
	held := before.HeldBy(s.in.Name)
	if held == nil {
		return false
	}
	for _, t := range now.Tasks {
		if t.ID == held.ID {
			return t.Status == TaskDone
		}
	}
	return false
}

// pushBranch pushes the session's branch to its repository's remote, from
// its host. A push that fails is said in the feed and the inbox; the work
// is still in the host's clone, and the next task done or move pushes it.
func (s *session) pushBranch(ctx workflow.Context) {
	s.st.PushPending = false
	actx := workflow.WithActivityOptions(ctx, activityOptions(s.queue(), 5*time.Minute))
	var remote string
	err := workflow.ExecuteActivity(actx, activities.PushBranchName, activities.PushBranchInput{
		Session: s.ref(),
	}).Get(ctx, &remote)
	branch := activities.WorkspaceBranch(s.ref())
	if err != nil {
		text := fmt.Sprintf("branch %s not pushed: %s", branch, ErrorText(err))
		s.record(ctx, Event{Kind: EventTask, Text: text})
		s.toInbox(ctx, EventTask, s.in.Group+"/"+s.in.Name+": "+text)
		return
	}
	if remote != "" {
		s.record(ctx, Event{Kind: EventTask, Text: fmt.Sprintf("task done: branch %s pushed to %s", branch, remote)})
	}
}
