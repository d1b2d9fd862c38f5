package workflows

import (
	"fmt"
	"slices"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/nid-dev/nid/activities"
	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/internal/clip"
)

// Anything that reaches Temporal can start a workflow or send a signal, so
// the workflows check what they are handed where it enters, with the same
// caps the HTTP API and the MCP endpoint apply before they send it
// (VersionCheckedInput). A workflow whose input names no valid group or
// session fails at once; a signal past a cap is refused, said in the
// session's feed (or the worker's log for the group and the hosts
// registry), and nothing already stored is lost.

// More caps on what signals carry, beside MaxSummaryBytes, MaxMessageBytes
// and the board's.
const (
	// MaxTaskIDBytes bounds one task id in a handoff acknowledgement: the
	// board's ids are short (t1, t2, ...).
	MaxTaskIDBytes = 64
	// MaxWhyChars bounds the reason a stop carries, in characters.
	MaxWhyChars = 200
	// MaxInboxText bounds one inbox item's text.
	MaxInboxText = 4 << 10
	// MaxLearned bounds the learned thresholds a group keeps, and
	// MaxKindBytes the agent kind and model names they are kept by.
	MaxLearned   = 64
	MaxKindBytes = 128
	// MaxHosts bounds the hosts the registry keeps, and MaxHostHTTP the
	// HTTP address a heartbeat gives.
	MaxHosts    = 256
	MaxHostHTTP = 512
	// MaxPlaceBatch bounds the sessions one UpdatePlaceAll places: a
	// batch of them is one event of the registry's history, and this
	// many stays far below the server's limit on a payload.
	MaxPlaceBatch = 1000
	// MaxChargeTurns, MaxChargeTokens and MaxChargeUSD bound one charge
	// to the group's budget: a turn or a rotation, with every model call
	// it made, is far below them.
	MaxChargeTurns  = 1 << 10
	MaxChargeTokens = 1 << 40
	MaxChargeUSD    = 1e6
)

// badInput is the failure of a workflow whose input names something that
// is not a name: not retried, for the same input fails the same way.
func badInput(field, value, allowed string) error {
	return temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("%s %q is not a name: %s", field, clip.Runes(value, 80), allowed), activities.ErrBadInput, nil)
}

// checkNames refuses a group and session name that are not names: they
// become paths, branches and queue names on the worker.
func checkNames(groupField, group, nameField, name string) error {
	if !config.ValidName(group) {
		return badInput(groupField, group, config.NameRule)
	}
	if nameField != "" && !config.ValidName(name) {
		return badInput(nameField, name, config.NameRule)
	}
	return nil
}

// summaryRefusal says why a handoff summary is not taken, if it is not.
func summaryRefusal(summary string) string {
	switch {
	case summary == "":
		return "the summary is empty"
	case len(summary) > MaxSummaryBytes:
		return fmt.Sprintf("the summary is %d bytes; the limit is %d", len(summary), MaxSummaryBytes)
	}
	return ""
}

// ackRefusal says why a handoff acknowledgement is not taken, if it is not.
func ackRefusal(ack HandoffAck) string {
	if len(ack.Tasks) > MaxTasks {
		return fmt.Sprintf("it names %d task ids; a board holds at most %d tasks", len(ack.Tasks), MaxTasks)
	}
	for _, id := range ack.Tasks {
		if len(id) > MaxTaskIDBytes {
			return fmt.Sprintf("a task id is %d bytes; the limit is %d", len(id), MaxTaskIDBytes)
		}
	}
	return ""
}

// boardRefusal says why a board push is not taken, if it is not: a group
// never pushes one past its own caps.
func boardRefusal(b BoardView) string {
	switch {
	case len(b.Tasks) > MaxTasks:
		return fmt.Sprintf("it holds %d tasks; a board keeps at most %d", len(b.Tasks), MaxTasks)
	case len(b.Locks) > MaxLocks:
		return fmt.Sprintf("it holds %d locks; a group holds at most %d", len(b.Locks), MaxLocks)
	case len(b.Goal) > config.MaxGoalBytes:
		return fmt.Sprintf("its goal is %d bytes; the limit is %d", len(b.Goal), config.MaxGoalBytes)
	}
	for _, t := range b.Tasks {
		if len(t.Title) > MaxTaskTitle || len(t.Detail) > MaxTaskDetail || len(t.ID) > MaxTaskIDBytes || (t.Holder != "" && !config.ValidName(t.Holder)) {
			return fmt.Sprintf("task %q is past the caps (title %d bytes, detail %d)", clip.Runes(t.ID, 20), MaxTaskTitle, MaxTaskDetail)
		}
	}
	for _, l := range b.Locks {
		if len(l.Name) > MaxLockName || !config.ValidName(l.Holder) {
			return fmt.Sprintf("a lock's name is past %d bytes or its holder is no session name", MaxLockName)
		}
	}
	return ""
}

// configRefusal says why a configuration push is not taken, if it is not.
func configRefusal(c SessionConfig) string {
	switch {
	case len(c.Goal) > config.MaxGoalBytes:
		return fmt.Sprintf("its goal is %d bytes; the limit is %d", len(c.Goal), config.MaxGoalBytes)
	case len(c.Spec.Kind) > MaxKindBytes:
		return fmt.Sprintf("its agent kind is %d bytes; the limit is %d", len(c.Spec.Kind), MaxKindBytes)
	}
	return ""
}

// policyRefusal says why a policy push is not taken, if it is not: the
// rules nid group set applies, and the group's caps on what it learned.
func policyRefusal(p PolicyChange) string {
	if err := p.Rotate.Validate(); err != nil {
		return "its rotate policy is not one nid takes: " + clip.Runes(err.Error(), 200)
	}
	if len(p.Learned) > MaxLearned {
		return fmt.Sprintf("it carries %d learned thresholds; a group keeps at most %d", len(p.Learned), MaxLearned)
	}
	for _, l := range p.Learned {
		if len(l.Kind) > MaxKindBytes || len(l.Model) > MaxKindBytes {
			return fmt.Sprintf("a learned threshold's kind or model is past %d bytes", MaxKindBytes)
		}
	}
	return ""
}

// warnRefused logs a signal the group or the hosts registry did not take:
// they keep no feed of their own.
// chargeRefusal says why a charge is not taken, if it is not: only the
// group's own sessions spend its budget, and a charge gives back no more
// than a turn reserved and not started (a negative spend raises what is
// left), nor is larger than a batch of turns could be.
func chargeRefusal(c Charge, sessions []string) string {
	switch {
	case c.Session != "" && !slices.Contains(sessions, c.Session):
		return fmt.Sprintf("%q is not one of the group's sessions", clip.Runes(c.Session, 80))
	case c.Turns < -1 || c.Tokens < 0 || c.USD < 0:
		// -1 turn is a session giving back the turn it reserved and did
		// not start.
		return "a charge gives back at most the one turn a session reserved, and never tokens or dollars"
	case c.Turns > MaxChargeTurns || c.Tokens > MaxChargeTokens || c.USD > MaxChargeUSD:
		return fmt.Sprintf("a charge is at most %d turns, %d tokens and %g USD", MaxChargeTurns, MaxChargeTokens, MaxChargeUSD)
	}
	return ""
}

func warnRefused(ctx workflow.Context, signal, why string) {
	workflow.GetLogger(ctx).Warn("signal refused", "signal", signal, "why", why)
}
