package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/config"
)

func TestTheGovernorGrantsTheFullestFirst(t *testing.T) {
	var b BoardState
	require.True(t, b.askSlot(SlotRequest{Session: "a", Seq: 1, Fullness: 81}, 2))
	require.True(t, b.askSlot(SlotRequest{Session: "b", Seq: 1, Fullness: 82}, 2))
	require.False(t, b.askSlot(SlotRequest{Session: "c", Seq: 1, Fullness: 85}, 2), "both slots taken")
	require.False(t, b.askSlot(SlotRequest{Session: "d", Seq: 1, Fullness: 97}, 2))
	require.False(t, b.askSlot(SlotRequest{Session: "e", Seq: 1, Fullness: 90}, 2))
	b.releaseSlot("a")
	require.Equal(t, []string{"d"}, b.grantWaiting(2), "the fullest waiting")
	b.releaseSlot("e") // it rotated by hand meanwhile, and no longer waits
	b.releaseSlot("b")
	b.releaseSlot("d")
	require.Equal(t, []string{"c"}, b.grantWaiting(2))
	require.Empty(t, b.Queue)
	require.True(t, b.askSlot(SlotRequest{Session: "f", Seq: 4}, 0), "0 is no limit")
	view := b.view("web", "")
	require.True(t, view.holds(SlotRequest{Session: "c", Seq: 1}))
	require.False(t, view.holds(SlotRequest{Session: "c", Seq: 2}), "a grant of an older request is not this one's")
}

// A session due to rotate while the group's slots are taken waits, shown as
// waiting-to-rotate, and rotates once granted; it gives the slot back after.
func TestASessionWaitsForARotationSlot(t *testing.T) {
	h := newHarness(t)
	h.group.maxSlots = 1
	h.group.board.Slots = []SlotRequest{{Session: "other", Seq: 1, Fullness: 99}}
	h.agent.perTurn = 30_000
	h.send(time.Minute, 4) // 90% after three turns
	var waiting SessionView
	h.at(20*time.Minute, func() { waiting = h.view() })
	h.at(30*time.Minute, func() {
		// The other session's rotation ends: the group frees its slot.
		h.group.slot(SlotRequest{Session: "other", Seq: 1})
	})
	in := sessionInput(config.Rotate{Mode: config.ModeCompact, ContextPercent: 80, MaxConcurrentRotations: 1})
	v := h.run(in, time.Hour)

	require.Equal(t, StatusWaitingToRotate, waiting.Status)
	require.Empty(t, rotations(waiting), "no rotation without a slot")
	require.Equal(t, 3, waiting.Context.TotalTurns, "it waits at its turn boundary")
	rots := rotations(v)
	require.Len(t, rots, 1)
	require.Equal(t, 4, v.Context.TotalTurns, "the last message runs after the rotation")
	require.Equal(t, []SlotRequest{
		{Session: "lead", Seq: 1, Want: true, Fullness: 90.009},
		{Session: "other", Seq: 1},
		{Session: "lead", Seq: 1},
	}, h.group.slotRequests)
	require.Empty(t, h.group.board.Slots, "the slot is given back")
}

// A manual rotation skips the queue, and a session that no longer needs its
// place gives it back.
func TestAManualRotationSkipsTheQueue(t *testing.T) {
	h := newHarness(t)
	h.group.maxSlots = 1
	h.group.board.Slots = []SlotRequest{{Session: "other", Seq: 1, Fullness: 99}}
	h.agent.perTurn = 30_000
	h.send(time.Minute, 3)
	h.at(20*time.Minute, func() { h.env.SignalWorkflow(SignalRotate, RotateRequest{Mode: config.ModeCompact}) })
	in := sessionInput(config.Rotate{Mode: config.ModeCompact, ContextPercent: 80, MaxConcurrentRotations: 1})
	v := h.run(in, time.Hour)

	rots := rotations(v)
	require.Len(t, rots, 1)
	require.Equal(t, ReasonManual, rots[0].Reason)
	require.Equal(t, StatusIdle, v.Status)
	require.Empty(t, h.group.board.Queue, "its place in the queue was given back")
	require.Len(t, h.agent.turnsOfKind(agents.TurnWork), 3)
}
