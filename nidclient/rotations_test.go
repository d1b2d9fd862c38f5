package nidclient

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/workflows"
)

// The stats count rotations by method, the vendor's own compactions apart;
// a failed rotation reclaims nothing; only checked handoffs count towards
// the share verified.
func TestStatsOf(t *testing.T) {
	handoff := func(verified string, before, after int64) workflows.RotationEvent {
		return workflows.RotationEvent{Method: config.ModeHandoff, Reason: workflows.ReasonManual, OK: true, Verified: verified, BeforeTokens: before, AfterTokens: after}
	}
	got := StatsOf([]workflows.RotationEvent{
		handoff(workflows.VerifiedTrue, 90_000, 10_000),
		handoff(workflows.VerifiedFalse, 80_000, 20_000),
		handoff(workflows.VerifiedNone, 70_000, 10_000),
		// A session on an older rung checked nothing.
		handoff("", 60_000, 20_000),
		{Method: config.ModeCompact, Reason: workflows.ReasonContext, OK: true, BeforeTokens: 100_000, AfterTokens: 10_000},
		{Method: config.ModeCompact, Reason: workflows.ReasonVendor, OK: true, BeforeTokens: 170_000, AfterTokens: 20_000},
		{Method: config.ModeCompact, Reason: workflows.ReasonManual, OK: false, BeforeTokens: 50_000, Error: "the agent did not compact"},
		// A fresh conversation that starts bigger reclaims nothing, not less.
		handoff(workflows.VerifiedTrue, 10_000, 12_000),
	})
	require.Equal(t, RotationStats{Compact: 1, Handoff: 5, Vendor: 1, Failed: 1, Checked: 4, Verified: 2,
		ReclaimedPerRotation: (80_000 + 60_000 + 60_000 + 40_000 + 90_000 + 150_000 + 0) / 7}, got)
	require.Equal(t, 7, got.Rotations())
	require.Equal(t, RotationStats{}, StatsOf(nil))
}

// A handoff nothing asked to acknowledge (an agent that calls no tools) is
// not one that went unverified, and a rotation nid stop cancelled is not a
// failure: both are counted apart, so "0 of 5 verified" says nothing false.
func TestStatsCountNotAskedAndCancelledApart(t *testing.T) {
	exec := workflows.RotationEvent{Method: config.ModeHandoff, Reason: workflows.ReasonManual, OK: true, Verified: workflows.VerifiedNone, BeforeTokens: 9, AfterTokens: 1}
	cancelled := workflows.RotationEvent{Method: config.ModeHandoff, Reason: workflows.ReasonManual, Cancelled: true, Error: "cancelled: the session was stopped"}
	receipts := notAsked([]workflows.RotationEvent{exec, exec, cancelled}, "exec")
	require.Equal(t, workflows.VerifiedNone, exec.Verified, "the session's own receipts are left as they are")
	got := StatsOf(receipts)
	require.Equal(t, RotationStats{Handoff: 2, NotAsked: 2, Cancelled: 1, ReclaimedPerRotation: 8}, got)
	require.Equal(t, workflows.VerifiedNone, notAsked([]workflows.RotationEvent{exec}, "claude")[0].Verified, "a kind that calls tools was asked")
}
