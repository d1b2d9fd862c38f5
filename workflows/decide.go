package workflows

import (
	"fmt"
	"slices"

	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/config"
)

// This file holds the one decision of what a manual rotate request does. The
// session workflow acts on it when the signal arrives (session.onRotate);
// `nid rotate`, the dashboard and the HTTP API show the same decision, made
// on the session's view, as their answer. Change it here and both follow.

// RotateModes are the methods a manual rotation may ask for.
func RotateModes() []string { return []string{config.ModeAuto, config.ModeCompact, config.ModeHandoff} }

// ValidRotateMode reports whether mode may be asked of a manual rotation;
// the empty mode means the group's.
func ValidRotateMode(mode string) bool { return mode == "" || slices.Contains(RotateModes(), mode) }

// When a manual rotation runs.
const (
	// RotateNow: the session is idle and rotates at once.
	RotateNow = "now"
	// RotateAfterTurn: the session is busy (or in another rotation) and
	// rotates when that ends.
	RotateAfterTurn = "after-turn"
	// RotateJoined: a rotation is running and the request joins it.
	RotateJoined = "joined"
	// RotateWhenHostBack: the session's host is down; it rotates when the
	// host is back (a move hands it off at once instead).
	RotateWhenHostBack = "when-host-back"
	// RotateAfterHandback: a person holds the session with nid attach; it
	// rotates when they hand it back.
	RotateAfterHandback = "after-handback"
)

// What a request joins, if anything.
const (
	joinNothing = iota // a new pending request
	joinRunning        // the manual rotation running now, same method
	joinHandoff        // the handoff the agent wrote (or a context-full one), waiting for the turn to end
	joinPending        // the manual request already pending
)

// RotateDecision is what a manual rotate request does. Refused, when not
// empty, says why the session ignores it.
type RotateDecision struct {
	When    string
	Mode    string
	Refused string
	join    int
	status  string
	// full: the handoff joined is the one a full context forces.
	full bool
	// agentHandoff: the request rotates by handoff with the summary the
	// agent wrote, which waits while the session's policy rotations are
	// stopped (VersionRotateWhileHalted).
	agentHandoff bool
	// host is the session's host, down, that the rotation waits for.
	host string
	// holder is who holds the session with nid attach.
	holder string
}

// DecideRotate decides a manual request for mode (empty: the group's) made of
// the session whose view is v, by the rules of the rung the view says the
// session follows: a run recorded before VersionOneRotateDecision never
// joined a handoff and rotated a session with no conversation yet. It is
// pure: the session calls it on its own view when the request arrives, and
// the CLI and the API on the view they queried.
func DecideRotate(mode string, v SessionView) RotateDecision {
	d := RotateDecision{status: v.Status}
	if v.Attach != nil {
		d.holder = v.Attach.Who
	}
	ladder := v.ladder()
	rules := ladder.has(VersionOneRotateDecision)
	// While the policy is stopped the agent's handoff does not run by
	// itself: a request joining it would wait forever, so it rotates with
	// it instead.
	waiting := ladder.has(VersionRotateWhileHalted) && v.HandoffPending && !v.ContextFull && v.PolicyHalted != ""
	if waiting && mode == "" {
		mode, d.agentHandoff = config.ModeHandoff, true
	}
	switch {
	case v.Status == StatusStopped:
		d.Refused = stoppedRefusal
	case rules && v.Context.TotalTurns == 0 && v.Conversation == "" && v.Status != StatusWorking &&
		v.Status != StatusRateLimited && v.Status != StatusRotating:
		// During its first turn a session is about to have a conversation.
		d.Refused = "has taken no turn yet: there is no conversation to rotate"
	case v.Rotating != nil && v.Rotating.Reason == ReasonManual && (mode == "" || mode == v.Rotating.Mode):
		d.When, d.Mode, d.join = RotateJoined, v.Rotating.Mode, joinRunning
	case rules && (v.HandoffPending || v.ContextFull) && !waiting:
		d.When, d.Mode, d.join, d.full = RotateAfterTurn, config.ModeHandoff, joinHandoff, !v.HandoffPending
	case v.PendingRotate != nil:
		if mode == "" {
			mode = v.PendingRotate.Mode
		}
		d.When, d.Mode, d.join = RotateAfterTurn, EffectiveMode(mode, v.Policy), joinPending
	case v.Attach != nil:
		// Nothing rotates while a person holds it.
		d.When, d.Mode = RotateAfterHandback, EffectiveMode(mode, v.Policy)
	case v.Status == StatusWorking || v.Status == StatusRateLimited || v.Status == StatusRotating:
		d.When, d.Mode = RotateAfterTurn, EffectiveMode(mode, v.Policy)
	case v.Status == StatusHostDown:
		// Nothing runs while its host is down: the rotation waits for it.
		d.When, d.Mode, d.host = RotateWhenHostBack, EffectiveMode(mode, v.Policy), v.Host
	default:
		d.When, d.Mode = RotateNow, EffectiveMode(mode, v.Policy)
	}
	if v.ladder().has(VersionFailuresSettle) && d.Refused == "" && d.join != joinRunning && d.join != joinHandoff &&
		d.Mode == config.ModeCompact && !agents.KindOf(v.Agent).Compacts {
		d = RotateDecision{status: v.Status, holder: d.holder, Refused: fmt.Sprintf("runs agent kind %s, which cannot compact: rotate it by handoff or auto", v.Agent)}
	}
	return d
}

// Err is the refusal as an error naming the session ref, or nil.
func (d RotateDecision) Err(ref string) error {
	if d.Refused == "" {
		return nil
	}
	return fmt.Errorf("%s %s", ref, d.Refused)
}

// Answer is the decision as `nid rotate` and session.rotate say it, the
// session named ref.
func (d RotateDecision) Answer(ref string) RotateAnswer {
	return RotateAnswer{When: d.When, Mode: d.Mode, Text: d.sentence(ref)}
}

// sentence says the decision of a request for ref: the session's name in
// answers, "the session" in its own feed.
func (d RotateDecision) sentence(ref string) string {
	switch {
	case d.Refused != "":
		return fmt.Sprintf("rotate request ignored: %s %s", ref, d.Refused)
	case d.join == joinRunning:
		return fmt.Sprintf("%s is rotating now (%s): this request joins that rotation", ref, d.Mode)
	case d.join == joinHandoff && d.full:
		return fmt.Sprintf("%s's conversation no longer fits its window and rotates (handoff) next: this request joins it", ref)
	case d.join == joinHandoff:
		return fmt.Sprintf("%s wrote its own handoff and rotates (handoff) when the current turn ends: this request joins it", ref)
	case d.join == joinPending:
		return fmt.Sprintf("a rotation is already pending for %s: this request joins it (%s); it runs %s", ref, d.Mode, d.whenText())
	case d.When == RotateAfterHandback:
		return fmt.Sprintf("%s is attached by %s (nid attach): it rotates (%s) when they hand it back%s", ref, d.holder, d.Mode, d.withText())
	case d.status == StatusRotating:
		return fmt.Sprintf("%s is in another rotation now: it rotates (%s) when that one ends%s", ref, d.Mode, d.withText())
	case d.When == RotateWhenHostBack:
		return fmt.Sprintf("%s's host %s is down, so nothing runs: it rotates (%s) when the host is back; nid move %s HOST hands it off onto another host at once",
			ref, d.host, d.Mode, ref)
	case d.When == RotateAfterTurn:
		return fmt.Sprintf("%s is %s: it rotates (%s) when the current turn ends%s", ref, d.status, d.Mode, d.withText())
	default:
		return fmt.Sprintf("rotating %s now (%s)%s", ref, d.Mode, d.withText())
	}
}

// withText says what a request that rotates with the agent's waiting
// handoff rotates with.
func (d RotateDecision) withText() string {
	if !d.agentHandoff {
		return ""
	}
	return ", with the handoff its agent wrote (it waited: policy rotations are stopped)"
}

// modeAsked is the mode a pending request keeps: the one asked for, or the
// handoff the decision rotates with.
func (d RotateDecision) modeAsked(mode string) string {
	if d.agentHandoff {
		return d.Mode
	}
	return mode
}

func (d RotateDecision) whenText() string {
	if d.holder != "" {
		return "when " + d.holder + " hands it back (nid attach)"
	}
	switch d.status {
	case StatusWorking, StatusRateLimited:
		return "when the current turn ends"
	case StatusRotating:
		return "when the running rotation ends"
	}
	return "now"
}

// RotateAnswer is what a manual rotate request will do: when it runs, by
// which method, and a sentence saying so. `nid rotate`, the HTTP API and the
// dashboard all show it.
type RotateAnswer struct {
	When string `json:"when"`
	Mode string `json:"mode"`
	Text string `json:"message"`
}

// EffectiveMode is the method a manual rotation runs: the one asked for,
// else the group's, else auto when the group says off.
func EffectiveMode(mode string, policy config.Rotate) string {
	switch {
	case mode != "":
		return mode
	case policy.Mode == "" || policy.Mode == config.ModeOff:
		return config.ModeAuto
	default:
		return policy.Mode
	}
}

// ladder is the rung whose rules decide for the session viewed.
func (v SessionView) ladder() ladder {
	if v.Rung == 0 {
		return ladder{versionLatest}
	}
	return ladder{v.Rung}
}

// stoppedRefusal is what a stopped session says to a rotate request and a
// message alike.
const stoppedRefusal = "is stopped (nid stop): it takes no more turns, messages or rotations"

// Caps on what the human queues for a session: each message travels in the
// session's history and state until its turn takes it.
const (
	MaxMessageBytes   = 64 << 10
	MaxQueuedMessages = 20
	MaxQueuedBytes    = 256 << 10
)

// MessageRefusal says why the session whose view is v does not queue a
// message of text, or "" when it does. The session applies it to every
// message signal; `nid send` and session.send show it before signalling. A
// session on a rung before VersionBoundedQueue queues every message.
func MessageRefusal(text string, v SessionView) string {
	switch {
	case !v.ladder().has(VersionBoundedQueue):
		return ""
	case v.Status == StatusStopped:
		return stoppedRefusal
	case len(text) > MaxMessageBytes:
		return fmt.Sprintf("does not take a message of %d bytes: the limit is %d", len(text), MaxMessageBytes)
	case v.QueuedMessages >= MaxQueuedMessages:
		return fmt.Sprintf("has %d messages queued, the most it holds: send more once its turns have taken some", v.QueuedMessages)
	case v.QueuedBytes+len(text) > MaxQueuedBytes:
		return fmt.Sprintf("has %d bytes of messages queued; with this one it would hold more than %d: send it once its turns have taken some", v.QueuedBytes, MaxQueuedBytes)
	}
	return ""
}

// QueuedText is what `nid send` and session.send say of a message queued
// for ref, the session whose view is v: a session a person holds with nid
// attach takes it once they hand it back.
func QueuedText(ref string, v SessionView) string {
	if v.Attach != nil {
		return fmt.Sprintf("queued for %s: it is attached by %s (nid attach), and its next turn takes the message once they hand it back", ref, v.Attach.Who)
	}
	return "queued for " + ref
}
