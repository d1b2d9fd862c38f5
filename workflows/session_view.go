package workflows

import (
	"go.temporal.io/sdk/workflow"
)

// What a session shows: its view and events (queries), its feed, its inbox
// items, and its status. The search attributes and memo are in search.go.

func (s *session) view() (SessionView, error) {
	v := SessionView{
		Group:          s.in.Group,
		Name:           s.in.Name,
		Agent:          s.in.Spec.Kind,
		Spec:           s.in.Spec,
		Status:         s.st.Status,
		Conversation:   s.st.Conversation,
		Context:        s.st.Context,
		Policy:         s.st.Policy,
		PendingRotate:  s.st.PendingRotate,
		Rotating:       s.running,
		HandoffPending: s.st.HandoffPending,
		ContextFull:    s.st.ContextFull,
		PolicyHalted:   s.st.PolicyHalted,
		HandoffNext:    s.st.HandoffNext,
		Generation:     s.st.Generation,
		Receipts:       s.st.Receipts,
		Points:         s.st.Points,
		QueuedMessages: len(s.st.Messages),
		LastOutput:     s.st.LastOutput,
		Events:         s.st.Events,
		Worktree:       s.st.Worktree,
		Branch:         s.st.Branch,
		WorkDir:        s.workDir(),
		Rung:           s.version,
		Host:           s.st.Host,
		HostDown:       s.st.HostDown,
		Moving:         s.st.PendingMove,
	}
	for _, m := range s.st.Messages {
		v.QueuedBytes += len(m)
	}
	if s.st.Stopped {
		// Stopped from the moment the stop is taken, though its agent
		// stops when the step it is in ends.
		v.Status = StatusStopped
	} else if s.st.HostDown {
		v.Status = StatusHostDown
	}
	if b := s.st.Board; b != nil && !s.st.Stopped {
		// A stopped session's claims and locks went back to the board.
		v.Task = b.HeldBy(s.in.Name)
		for _, l := range b.Locks {
			if l.Holder == s.in.Name {
				v.Locks = append(v.Locks, l.Name)
			}
		}
	}
	if v.Events == nil {
		v.Events = []Event{}
	}
	if v.Receipts == nil {
		v.Receipts = []RotationEvent{}
	}
	if v.Points == nil {
		v.Points = []ContextPoint{}
	}
	return v, nil
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
