package nidclient

import (
	"context"
	"slices"

	"go.temporal.io/sdk/client"

	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/workflows"
)

// SessionRotations is one session's rotation receipts, oldest first, and
// what they add up to.
type SessionRotations struct {
	Session  string                    `json:"session"`
	Receipts []workflows.RotationEvent `json:"receipts"`
	Stats    RotationStats             `json:"stats"`
}

// RotationStats adds up a session's receipts, as `nid rotations` and the
// dashboard's group page show them.
type RotationStats struct {
	// Compact, Handoff and Vendor count the rotations that went through:
	// nid's compactions, handoffs, and the compactions the agent's CLI did
	// by itself. Failed counts those that did not.
	Compact int `json:"compact"`
	Handoff int `json:"handoff"`
	Vendor  int `json:"vendor"`
	Failed  int `json:"failed"`
	// Checked counts the handoffs whose fresh conversation nid asked to
	// acknowledge what it resumes (verified true, false or none); Verified
	// those it found true. NotAsked counts the handoffs of agents that
	// call no tools, which nothing asks. Cancelled counts the rotations
	// nid stop cancelled, whose numbers are taken.
	Checked   int `json:"checked"`
	Verified  int `json:"verified"`
	NotAsked  int `json:"notAsked"`
	Cancelled int `json:"cancelled"`
	// ReclaimedPerRotation is the context the rotations that went through
	// freed, tokens before less after, on average.
	ReclaimedPerRotation int64 `json:"reclaimedPerRotation"`
}

// Rotations is the sum of the rotations among the receipts that went
// through.
func (s RotationStats) Rotations() int { return s.Compact + s.Handoff + s.Vendor }

// StatsOf adds up receipts.
func StatsOf(receipts []workflows.RotationEvent) RotationStats {
	var s RotationStats
	var reclaimed int64
	for _, r := range receipts {
		if r.Cancelled {
			s.Cancelled++
			continue
		}
		if !r.OK {
			s.Failed++
			continue
		}
		switch {
		case r.Reason == workflows.ReasonVendor:
			s.Vendor++
		case r.Method == config.ModeCompact:
			s.Compact++
		default:
			s.Handoff++
		}
		reclaimed += max(0, r.BeforeTokens-r.AfterTokens)
		if r.Verified == workflows.VerifiedNotAsked {
			s.NotAsked++
		} else if r.Verified != "" {
			s.Checked++
			if r.Verified == workflows.VerifiedTrue {
				s.Verified++
			}
		}
	}
	if n := s.Rotations(); n > 0 {
		s.ReclaimedPerRotation = reclaimed / int64(n)
	}
	return s
}

// Rotations is the rotation receipts of one session, or of every session of
// group when name is empty, sorted by session. A session or group that is
// not running is a *NotFoundError naming what is.
func Rotations(ctx context.Context, c client.Client, group, name string) ([]SessionRotations, error) {
	names := []string{name}
	if name == "" {
		sessions, err := ListSessions(ctx, c, group)
		if err != nil {
			return nil, &UnavailableError{Who: "Temporal", Err: err}
		}
		if len(sessions) == 0 {
			if _, err := GetGroup(ctx, c, group); err != nil {
				return nil, err
			}
		}
		names = names[:0]
		for _, s := range sessions {
			names = append(names, s.Name)
		}
	}
	out := []SessionRotations{}
	for _, n := range names {
		v, err := GetSession(ctx, c, group, n)
		if IsNotFound(err) && name == "" {
			continue // it ended between the list and the query
		}
		if err != nil {
			return nil, err
		}
		receipts := notAsked(v.Receipts, v.Agent)
		if receipts == nil {
			receipts = []workflows.RotationEvent{}
		}
		out = append(out, SessionRotations{Session: group + "/" + n, Receipts: receipts, Stats: StatsOf(receipts)})
	}
	return out, nil
}

// notAsked marks the handoffs of an agent kind that calls no tools as not
// asked to acknowledge: sessions before workflows.VersionLostTurns said
// none of them, as if the agent had been asked and had not answered.
func notAsked(receipts []workflows.RotationEvent, kind string) []workflows.RotationEvent {
	if agents.KindOf(kind).Tools {
		return receipts
	}
	out := slices.Clone(receipts)
	for i := range out {
		if out[i].Verified == workflows.VerifiedNone {
			out[i].Verified = workflows.VerifiedNotAsked
		}
	}
	return out
}
