package workflows

import (
	"go.temporal.io/sdk/workflow"
)

// What a session shows: its view and events (queries), its feed, its inbox
// items, and its status. The search attributes and memo are in search.go.

func (s *session) view() (SessionView, error) {
	return sessionView(s.in, s.st, s.version, s.running, s.workDir()), nil
}

// sessionView is the one place a SessionView is made from a session's
// input and state: each part of the state shows its own fields, and the
// run adds its rung, the rotation it runs and where its agent works.
func sessionView(in *SessionInput, st *SessionState, rung Version, rotating *RotateRequest, workDir string) SessionView {
	v := SessionView{
		Group:    in.Group,
		Name:     in.Name,
		Agent:    in.Spec.Kind,
		Spec:     in.Spec,
		Status:   st.Status,
		Rotating: rotating,
		Rung:     rung,
		WorkDir:  workDir,
		Events:   orEmpty(st.Events),
	}
	st.ConversationState.show(&v)
	st.RotationState.show(&v)
	st.PlacementState.show(&v)
	st.AttachState.show(&v)
	if st.Stopped {
		// Stopped from the moment the stop is taken, though its agent
		// stops when the step it is in ends. A stopped session's claims
		// and locks went back to the board.
		v.Status = StatusStopped
	} else {
		st.SeatState.show(&v, in.Name)
	}
	if !st.Stopped && st.HostDown {
		v.Status = StatusHostDown
	}
	if !st.Stopped && st.Attach != nil {
		// Held from the moment it is taken, though a turn running then
		// ends first.
		v.Status = StatusAttached
	}
	return v
}

// show fills in the hold's part of a view.
func (a *AttachState) show(v *SessionView) {
	v.LastHandback = a.LastHandback
	if h := a.Attach; h != nil {
		v.Attach = &AttachView{Who: h.Who, Host: h.Host, Since: h.Since, Ready: h.Ready, WaitingForTurn: h.WaitingForTurn}
	}
}

// orEmpty is s, or an empty slice for nil: a view's lists are never null.
func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// show fills in the conversation's part of a view.
func (c *ConversationState) show(v *SessionView) {
	v.Conversation, v.Context, v.LastOutput = c.Conversation, c.Context, c.LastOutput
	v.ContextFull, v.Generation = c.ContextFull, c.Generation
	v.Receipts, v.Points = orEmpty(c.Receipts), orEmpty(c.Points)
	v.QueuedMessages = len(c.Messages)
	for _, m := range c.Messages {
		v.QueuedBytes += len(m)
	}
}

// show fills in the rotation state's part of a view.
func (r *RotationState) show(v *SessionView) {
	v.Policy, v.PendingRotate, v.HandoffPending = r.Policy, r.PendingRotate, r.HandoffPending
	v.PolicyHalted, v.HandoffNext = r.PolicyHalted, r.HandoffNext
}

// show fills in the placement's part of a view.
func (p *PlacementState) show(v *SessionView) {
	v.Worktree, v.Branch = p.Worktree, p.Branch
	v.Host, v.HostDown, v.Moving = p.Host, p.HostDown, p.PendingMove
}

// show fills in what the seat holds on the board, as name: its task and
// its locks.
func (p *SeatState) show(v *SessionView, name string) {
	b := p.Board
	if b == nil {
		return
	}
	v.Task = b.HeldBy(name)
	for _, l := range b.Locks {
		if l.Holder == name {
			v.Locks = append(v.Locks, l.Name)
		}
	}
}

func (s *session) record(ctx workflow.Context, e Event) {
	e.At = workflow.Now(ctx)
	e.Group, e.Session = s.in.Group, s.in.Name
	s.st.add(e)
}

func (s *groupLink) toInbox(ctx workflow.Context, kind, text string) {
	item := InboxItem{At: workflow.Now(ctx), Group: s.in.Group, Session: s.in.Name, Kind: kind, Text: text}
	// The group may be gone (removed from the file); the event is recorded
	// here either way, so a failed delivery loses nothing.
	_ = workflow.SignalExternalWorkflow(ctx, GroupID(s.in.Group), "", SignalInbox, item).Get(ctx, nil)
}

// status is the status the session publishes: since VersionStopAtOnce,
// stopped from the moment the stop is taken, as its view says.
func (s *rules) status() string {
	if s.st.Stopped && s.has(VersionStopAtOnce) {
		return StatusStopped
	}
	if s.st.Attach != nil && !s.st.Stopped {
		return StatusAttached
	}
	if s.st.HostDown {
		// Whatever it was doing waits for the host; it resumes as it was.
		return StatusHostDown
	}
	return s.st.Status
}

// setStatus publishes a busy status at once, before the turn or rotation
// starts; an idle one is published only if the session then actually waits
// (see awaitWork), so back-to-back turns cost one upsert, not two. A turn
// that follows a turn writes its predecessor's context at the pace of
// publishPaced.
func (s *session) setStatus(ctx workflow.Context, status string) {
	s.st.Status = status
	switch status {
	case StatusWorking:
		s.publishPaced(ctx)
	case StatusRotating:
		s.publish(ctx)
	}
}
