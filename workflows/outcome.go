package workflows

import (
	"fmt"
	"slices"

	"github.com/nid-dev/nid/config"
)

// RotateModes are the methods a manual rotation may ask for.
func RotateModes() []string { return []string{config.ModeAuto, config.ModeCompact, config.ModeHandoff} }

// ValidRotateMode reports whether mode may be asked of a manual rotation;
// the empty mode means the group's.
func ValidRotateMode(mode string) bool { return mode == "" || slices.Contains(RotateModes(), mode) }

// When a manual rotation runs, as RotateOutcome predicts it.
const (
	// RotateNow: the session is idle and rotates at once.
	RotateNow = "now"
	// RotateAfterTurn: the session is busy (or a rotation is already
	// pending) and rotates when its current turn ends.
	RotateAfterTurn = "after-turn"
	// RotateJoined: a rotation is running and the request joins it.
	RotateJoined = "joined"
)

// RotateAnswer is what a manual rotate request will do: when it runs, by
// which method, and a sentence saying so. `nid rotate`, the HTTP API and the
// dashboard all show it.
type RotateAnswer struct {
	When string `json:"when"`
	Mode string `json:"mode"`
	Text string `json:"message"`
}

// RotateOutcome says what the session whose view is v will do with a
// manual request for mode, as its workflow decides it (see
// session.onRotate): a request made while one is pending or running joins
// it; an idle session rotates at once; a busy one when its turn ends. ref
// names the session in the sentence.
func RotateOutcome(ref, mode string, v SessionView) RotateAnswer {
	switch {
	case v.Status == StatusRotating && v.Rotating != nil && v.Rotating.Reason == ReasonManual &&
		(mode == "" || mode == v.Rotating.Mode):
		return RotateAnswer{RotateJoined, v.Rotating.Mode,
			fmt.Sprintf("%s is rotating now (%s): this request joins that rotation", ref, v.Rotating.Mode)}
	case v.Status == StatusRotating:
		m := EffectiveMode(mode, v.Policy)
		return RotateAnswer{RotateAfterTurn, m,
			fmt.Sprintf("%s is in another rotation now: it rotates (%s) when that one ends", ref, m)}
	case v.HandoffPending:
		return RotateAnswer{RotateAfterTurn, config.ModeHandoff,
			fmt.Sprintf("%s wrote its own handoff and rotates (handoff) when the current turn ends: this request joins it", ref)}
	case v.PendingRotate != nil:
		if mode == "" {
			mode = v.PendingRotate.Mode
		}
		m := EffectiveMode(mode, v.Policy)
		return RotateAnswer{RotateAfterTurn, m,
			fmt.Sprintf("a rotation is already pending for %s: this request joins it (%s); it runs when the current turn ends", ref, m)}
	case v.Status == StatusWorking || v.Status == StatusRateLimited:
		m := EffectiveMode(mode, v.Policy)
		return RotateAnswer{RotateAfterTurn, m, fmt.Sprintf("%s is %s: it rotates (%s) when the current turn ends", ref, v.Status, m)}
	default:
		m := EffectiveMode(mode, v.Policy)
		return RotateAnswer{RotateNow, m, fmt.Sprintf("rotating %s now (%s)", ref, m)}
	}
}

// CheckRotatable refuses a manual rotation the session would ignore.
func CheckRotatable(ref string, v SessionView) error {
	if v.Status == StatusStopped {
		return fmt.Errorf("%s is stopped (nid stop): it takes no rotations", ref)
	}
	return nil
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
