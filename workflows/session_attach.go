package workflows

import (
	"cmp"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/nid-dev/nid/activities"
	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/internal/clip"
)

// A person's hold on the session (VersionAttach): nid attach takes it with
// UpdateAttach, renews its lease with SignalAttachRenew and hands the
// session back with UpdateAttachRelease; a lease that runs out hands it
// back by itself. While held no turn starts and the policy does not
// rotate: triggers and turnReady ask held.
//
// Who runs what: the hold's two activities (closing the agent's process,
// reading the vendor's records back) run in the update that asks for them
// when nothing else runs, and in the loop otherwise (after the turn the
// hold waited for; when the lease ran out). An update never waits for the
// loop, which may itself be waiting for every update to finish before it
// continues as new.

// Caps on what nid attach sends.
const (
	// MaxAttachWho bounds who attaches (user@host), in characters.
	MaxAttachWho = 128
	// MaxLeaseBytes bounds a lease id: nid attach makes a short random one.
	MaxLeaseBytes = 64
)

// attachRun is what the run does for the hold now.
type attachRun struct {
	// closing is true while the agent's process is being closed for the
	// hold; handingBack while the hand-back runs.
	closing     bool
	handingBack bool
}

// held says a person holds the session: no turn and no rotation starts.
func (s *rules) held() bool { return s.has(VersionAttach) && s.st.Attach != nil }

// holdDue says the loop has the hold's work to do: close the agent once
// the turn the hold waited for ended, or hand back a lease that ran out.
func (s *session) holdDue() bool {
	h := s.st.Attach
	if !s.held() || s.closing || s.handingBack {
		return false
	}
	return h.Expired || !h.Ready
}

// holdStep does the hold's work the loop has (see holdDue).
func (s *session) holdStep(ctx workflow.Context) {
	if s.st.Attach.Expired {
		s.handBack(ctx)
		return
	}
	s.readyHold(ctx)
}

// attachSetup registers the hold's update handlers and, for a run that
// continued as new while held, watches the lease again.
func (s *session) attachSetup(ctx workflow.Context) error {
	if !s.has(VersionAttach) {
		return nil
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateAttach, s.attach,
		workflow.UpdateHandlerOptions{Validator: s.validateAttach}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateAttachRelease, s.release,
		workflow.UpdateHandlerOptions{Validator: s.validateRelease}); err != nil {
		return err
	}
	if s.st.Attach != nil {
		s.watchLease(ctx)
	}
	return nil
}

func (s *rules) sessionRef() string { return s.in.Group + "/" + s.in.Name }

// attachRefusal says why a person may not attach as req, if they may not.
func (s *rules) attachRefusal(now time.Time, req AttachRequest) string {
	ref := s.sessionRef()
	switch {
	case req.Who == "" || len([]rune(req.Who)) > MaxAttachWho:
		return fmt.Sprintf("who attaches is empty or longer than %d characters: nid attach sends user@host", MaxAttachWho)
	case req.Lease == "" || len(req.Lease) > MaxLeaseBytes:
		return fmt.Sprintf("the lease id is empty or longer than %d bytes: nid attach makes a random one", MaxLeaseBytes)
	case len(req.Host) > MaxKindBytes:
		return fmt.Sprintf("the host name is longer than %d bytes", MaxKindBytes)
	case s.st.Stopped:
		return ref + " is stopped (nid stop): nid start it, then attach"
	case s.st.Attach != nil && s.st.Attach.Lease != req.Lease:
		return ref + " " + holderText(s.st.Attach, now)
	case !agents.KindOf(s.in.Spec.Kind).Attaches:
		return agents.KindOf(s.in.Spec.Kind).NoInteractiveCLI()
	case s.st.PendingMove != "":
		return fmt.Sprintf("%s is moving to host %s: attach there once it has moved", ref, s.st.PendingMove)
	case s.st.Host != "" && req.Host != s.st.Host:
		return fmt.Sprintf("%s runs on host %s: run nid attach there, or nid move it here first", ref, s.st.Host)
	case s.st.HostDown:
		// Taking the hold closes the agent on the host: with no worker
		// there the update would wait for it, and nid attach say nothing.
		return fmt.Sprintf("%s's host %s is down (its nid up does not answer): start nid up there, then attach", ref, s.st.Host)
	}
	return ""
}

// holderText says who holds a session, since when and when they last
// renewed the hold, and what to do.
func holderText(h *AttachHold, now time.Time) string {
	ago := now.Sub(h.RenewedAt).Round(time.Second)
	return fmt.Sprintf("is attached by %s since %s (lease renewed %s ago); wait for them to hand it back",
		h.Who, h.Since.UTC().Format("15:04"), ago)
}

func (s *session) validateAttach(ctx workflow.Context, req AttachRequest) error {
	if why := s.attachRefusal(workflow.Now(ctx), req); why != "" {
		return errors.New(why)
	}
	if s.moving != nil && s.st.Attach == nil {
		// The move's rotation runs: the hold would be ready on the host
		// it arrives on, while the person's CLI runs on this one.
		return fmt.Errorf("%s is moving to host %s: attach there once it has moved", s.sessionRef(), s.moving.To)
	}
	return nil
}

// attach takes the hold for req. With nothing running the agent's process
// is closed at once and the answer is Ready; while a turn (or a rotation)
// runs, the answer says which turn the hold waits for, and the loop closes
// the agent when it ends.
func (s *session) attach(ctx workflow.Context, req AttachRequest) (AttachAnswer, error) {
	if s.st.Attach == nil {
		now := workflow.Now(ctx)
		h := &AttachHold{Who: req.Who, Host: req.Host, Lease: req.Lease, Since: now, RenewedAt: now, Before: s.st.Context}
		if s.st.Status == StatusWorking || s.st.Status == StatusRateLimited {
			h.WaitingForTurn = s.st.Context.TotalTurns + 1
		}
		s.st.Attach = h
		text := "attached by " + h.Who + ": no turn starts until they hand it back"
		switch {
		case h.WaitingForTurn > 0:
			text = fmt.Sprintf("attached by %s: it waits for turn %d to end", h.Who, h.WaitingForTurn)
		case s.st.Status == StatusRotating:
			text = "attached by " + h.Who + ": it waits for the running rotation to end"
		}
		s.record(ctx, Event{Kind: EventAttach, Text: text})
		s.publish(ctx)
		s.watchLease(ctx)
		if !s.busy() && !s.closing && !s.handingBack {
			s.readyHold(ctx)
		}
	}
	return s.attachAnswer(), nil
}

func (s *session) attachAnswer() AttachAnswer {
	a := AttachAnswer{Conversation: s.st.Conversation, Generation: s.st.Generation, Context: s.st.Context}
	if h := s.st.Attach; h != nil {
		a.Ready, a.WaitingForTurn = h.Ready, h.WaitingForTurn
	}
	return a
}

// readyHold closes the session's agent process, so the person's CLI is the
// only one on the conversation, and makes the hold ready.
func (s *session) readyHold(ctx workflow.Context) {
	h := s.st.Attach
	s.closing = true
	defer func() { s.closing = false }()
	if s.st.Conversation != "" {
		actx := workflow.WithActivityOptions(ctx, activityOptions(s.queue(), time.Minute))
		if err := workflow.ExecuteActivity(actx, activities.StopAgentName, activities.StopInput{
			Session: s.ref(), Spec: s.in.Spec, Conversation: s.st.Conversation,
		}).Get(ctx, nil); err != nil {
			s.record(ctx, Event{Kind: EventAttach, Text: "its agent's process may still run: nid could not close it (" + ErrorText(err) + ")"})
		}
	}
	if s.st.Attach != h {
		return // handed back meanwhile
	}
	h.Ready, h.WaitingForTurn, h.ReadyAt = true, 0, workflow.Now(ctx)
	// The turn waited for moved the context: what the hand-back compares
	// with is what the person found, not what the agent had when they asked.
	h.Before = s.st.Context
	s.record(ctx, Event{Kind: EventAttach, Text: "ready for " + h.Who + ": its agent's process is closed"})
}

// onAttachRenew renews the lease it names; one naming another lease (an
// old nid attach, or one that lost the hold) is refused.
func (s *session) onAttachRenew(ctx workflow.Context, r AttachRenewal) {
	if !s.has(VersionAttach) {
		return
	}
	h := s.st.Attach
	if h == nil || h.Lease != r.Lease || h.Expired {
		s.record(ctx, Event{Kind: EventAttach, Text: "attach renewal not taken: lease " + clip.Runes(r.Lease, MaxLeaseBytes) + " does not hold the session"})
		return
	}
	h.RenewedAt = workflow.Now(ctx)
}

// watchLease hands the session back when its lease runs out: a timer in
// the run, checked again at each expiry against the last renewal, so a
// renewal costs no timer of its own.
func (s *session) watchLease(ctx workflow.Context) {
	lease := s.st.Attach.Lease
	mine := func() *AttachHold {
		if h := s.st.Attach; h != nil && h.Lease == lease && !h.Expired {
			return h
		}
		return nil
	}
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			h := mine()
			if h == nil {
				return
			}
			left := h.RenewedAt.Add(AttachLease).Sub(workflow.Now(ctx))
			if left <= 0 {
				h.Expired = true
				return
			}
			if _, err := awaitWithin(ctx, s.ladder, left, func() bool { return mine() == nil }); err != nil {
				return
			}
		}
	})
}

func (s *session) validateRelease(ctx workflow.Context, r AttachRelease) error {
	h := s.st.Attach
	switch {
	case r.Lease != "" && r.Lease == s.st.LastLease && (h == nil || h.Lease != r.Lease):
		return nil // handed back already: the same answer again
	case h == nil:
		return errors.New(s.sessionRef() + " is not attached: there is nothing to hand back")
	case h.Lease != r.Lease:
		return errors.New("lease " + clip.Runes(r.Lease, MaxLeaseBytes) + " does not hold " + s.sessionRef() + ": it " + holderText(h, workflow.Now(ctx)))
	}
	return nil
}

// release hands the session back and answers what the hand-back found.
func (s *session) release(ctx workflow.Context, r AttachRelease) (Handback, error) {
	if err := workflow.Await(ctx, func() bool { return !s.closing }); err != nil {
		return Handback{}, err
	}
	if h := s.st.Attach; h != nil && h.Lease == r.Lease {
		if s.handingBack {
			// The lease ran out just before: that hand-back answers.
			if err := workflow.Await(ctx, func() bool { return s.st.Attach != h }); err != nil {
				return Handback{}, err
			}
		} else {
			s.handBack(ctx)
		}
	}
	if s.st.LastHandback == nil || s.st.LastLease != r.Lease {
		return Handback{}, errors.New(s.sessionRef() + " is not attached: there is nothing to hand back")
	}
	return *s.st.LastHandback, nil
}

// handBack reads what the person did from the vendor's records on the
// session's host, folds it into the context record as after a turn, and
// lets go of the hold. A hand-back that could not read the records still
// lets go: the context record stays as it was, and the note says why.
func (s *session) handBack(ctx workflow.Context) {
	h := s.st.Attach
	s.handingBack = true
	defer func() { s.handingBack = false }()
	hb := Handback{Who: h.Who, Since: h.Since, Before: h.Before, Expired: h.Expired}
	if h.Ready {
		var res activities.HandbackResult
		actx := workflow.WithActivityOptions(ctx, activityOptions(s.queue(), 2*time.Minute))
		err := workflow.ExecuteActivity(actx, activities.HandbackName, activities.HandbackInput{
			Session: s.ref(), Spec: s.in.Spec, Conversation: s.st.Conversation, Since: cmp.Or(h.ReadyAt, h.Since),
		}).Get(ctx, &res)
		if err != nil {
			hb.Note = "the vendor's records could not be read (" + ErrorText(err) + "): the context is as the last turn reported it"
		} else {
			s.foldHandback(ctx, res.Handback, &hb)
		}
	} else {
		hb.Note = "handed back before its turn ended: nothing was done by hand"
	}
	hb.Until = workflow.Now(ctx)
	hb.After = s.st.Context
	hb.Conversation = s.st.Conversation
	s.st.Attach, s.st.LastHandback, s.st.LastLease = nil, &hb, h.Lease
	rec := s.st.Context
	s.record(ctx, Event{Kind: EventAttach, Text: hb.Text(), Context: &rec})
	s.publish(ctx)
}

// foldHandback folds what the vendor's records say into the context
// record, as a turn's report is: the conversation the person ended in,
// the turns they took, each compaction they ran, then the usage.
func (s *session) foldHandback(ctx workflow.Context, res agents.Handback, hb *Handback) {
	hb.Note = res.Note
	if !res.Found {
		return
	}
	if res.Conversation != "" && res.Conversation != s.st.Conversation {
		// The person ended in a conversation of their own (a /clear, a new
		// thread): the turns since the last rotation are theirs there, so
		// maxTurns counts from it as it does from a rotation.
		s.st.Conversation = res.Conversation
		s.st.Context.Turns = 0
	}
	s.st.Context.Turns += res.HandTurns
	s.st.Context.TotalTurns += res.HandTurns
	if res.HandTurns > 0 {
		// The person's turns spend the group's model as the agent's do: a
		// budget of turns counts them, even past its end, as it counts a
		// manual rotation.
		s.charge(ctx, Charge{Turns: int64(res.HandTurns)})
	}
	hb.HandTurns, hb.Compactions = res.HandTurns, len(res.Compactions)
	for _, c := range res.Compactions {
		s.vendorCompacted(ctx, c, res.Usage)
	}
	if res.Usage.Source != "" && res.Usage.Source != agents.SourceUnknown {
		if res.Usage.WindowTokens == 0 && res.Usage.Model == s.st.Context.Model {
			// Claude Code's transcripts do not say the window: the same
			// model's window is the one the session's turns reported.
			res.Usage.WindowTokens = s.st.Context.WindowTokens
		}
		s.st.applyUsage(res.Usage, s.in.Spec.Kind, s.has(VersionThresholds))
	}
	s.st.plot("", "")
}

// Text is the hand-back as the feed and nid show say it.
func (hb Handback) Text() string {
	how := "handed back by " + hb.Who
	if hb.Expired {
		how = "taken back from " + hb.Who + " (nid attach stopped renewing its lease)"
	}
	text := fmt.Sprintf("%s: context %s → %s, %s by hand", how, percentText(hb.Before), percentText(hb.After), count(hb.HandTurns, "turn"))
	if hb.Compactions > 0 {
		text += ", " + count(hb.Compactions, "compaction")
	}
	if hb.Note != "" {
		text += " (" + hb.Note + ")"
	}
	return text
}

// count is n nouns, the noun singular for one: "1 turn", "3 turns".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// percentText is a context record's percent, or "unknown".
func percentText(c ContextRecord) string {
	if c.Percent == nil {
		return "unknown"
	}
	return fmt.Sprintf("%.0f%%", *c.Percent)
}
