package cli

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/nidclient"
	"github.com/nid-dev/nid/workflows"
)

// An exec agent's handoffs were never asked to acknowledge: the line says
// so instead of "0 of 5 handoffs verified", and a rotation nid stop
// cancelled is named, so the gap in the numbers has its reason.
func TestRotationsSayNotAskedAndCancelled(t *testing.T) {
	require.Equal(t, "5 rotations (5 handoff), 1 cancelled by nid stop; 5 handoffs not asked to acknowledge (the agent calls no tools); 1k tokens reclaimed per rotation",
		statsText(nidclient.RotationStats{Handoff: 5, NotAsked: 5, Cancelled: 1, ReclaimedPerRotation: 1000}))
	require.Equal(t, "1 rotation (1 handoff); 1 of 1 handoff verified; 1k tokens reclaimed per rotation",
		statsText(nidclient.RotationStats{Handoff: 1, Checked: 1, Verified: 1, NotAsked: 0, ReclaimedPerRotation: 1000}))

	row := receiptRow("web/lead", workflows.RotationEvent{Number: 3, Method: config.ModeHandoff, Reason: workflows.ReasonManual,
		Cancelled: true, Error: "cancelled: the session was stopped"}, time.Now())
	require.Equal(t, "handoff cancelled", row[3])
	require.Equal(t, "cancelled: the session was stopped", row[10])
	row = receiptRow("web/lead", workflows.RotationEvent{Number: 4, Method: config.ModeHandoff, OK: true, Verified: workflows.VerifiedNotAsked}, time.Now())
	require.Equal(t, "not asked", row[9])
}
