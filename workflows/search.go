package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

var (
	groupKey     = temporal.NewSearchAttributeKeyKeyword(SearchGroup)
	sessionKey   = temporal.NewSearchAttributeKeyKeyword(SearchSession)
	agentKey     = temporal.NewSearchAttributeKeyKeyword(SearchAgent)
	statusKey    = temporal.NewSearchAttributeKeyKeyword(SearchStatus)
	percentKey   = temporal.NewSearchAttributeKeyFloat64(SearchContextPercent)
	rotationsKey = temporal.NewSearchAttributeKeyInt64(SearchRotations)
	hostKey      = temporal.NewSearchAttributeKeyKeyword(SearchHost)
	listedAtKey  = temporal.NewSearchAttributeKeyTime(SearchListedAt)
)

// SessionSearchAttributes are the attributes a session workflow starts with,
// so it is listed before its first task runs; host is where it was placed
// (empty: none yet).
func SessionSearchAttributes(group, name, agent, host string) temporal.SearchAttributes {
	attrs := []temporal.SearchAttributeUpdate{
		groupKey.ValueSet(group), sessionKey.ValueSet(name), agentKey.ValueSet(agent),
		statusKey.ValueSet(StatusIdle), rotationsKey.ValueSet(0),
	}
	if host != "" {
		attrs = append(attrs, hostKey.ValueSet(host))
	}
	return temporal.NewSearchAttributes(attrs...)
}

// SessionSummary is a session workflow's one-line summary in the Temporal
// Web UI.
func SessionSummary(group, name, agent string) string {
	return fmt.Sprintf("nid session %s/%s (%s agent)", group, name, agent)
}

// GroupSummary is a group workflow's one-line summary in the Temporal Web UI.
func GroupSummary(group, goal string) string {
	if goal == "" {
		return "nid group " + group
	}
	return fmt.Sprintf("nid group %s: %s", group, goal)
}

// GroupSearchAttributes are a group workflow's attributes.
func GroupSearchAttributes(group string) temporal.SearchAttributes {
	return temporal.NewSearchAttributes(groupKey.ValueSet(group))
}

// listingPace is how often, at most, a session in back-to-back turns writes
// a change of its context alone to its listing (since VersionPacedListing).
// Turns of a real agent take longer, so each of them is still listed; the
// session's own view (nid show, the dashboard's session page) is a query
// and never lags.
const listingPace = time.Second

// published is what a session's search attributes and memo last said.
type published struct {
	status    string
	percent   *float64
	rotations int
	context   ContextRecord
	host      string
	valid     bool
	// contextAt is when the context was last written.
	contextAt time.Time
	// events is the newest event's sequence number the memo holds (since
	// VersionListedEvents).
	events int64
}

// publishPaced is publish for a session about to take another turn: a
// change of the context alone waits until listingPace has passed since it
// was last written, and is written then, so that a long turn after a short
// one does not list the context from before the short one the whole time.
func (s *listingRun) publishPaced(ctx workflow.Context) {
	if s.listingDirty {
		// A write is on its way, and takes everything along.
		return
	}
	p, c := s.published, s.st.Context
	wait := listingPace - workflow.Now(ctx).Sub(p.contextAt)
	paced := !(samePercent(p.percent, c.Percent) && sameContext(p.context, c)) || s.eventsUnlisted()
	onlyPaced := p.valid && p.status == s.status() && p.rotations == c.Rotations && p.host == s.st.Host && paced
	if !s.has(VersionPacedListing) || !onlyPaced || wait <= 0 {
		s.publish(ctx)
		return
	}
	workflow.SetCurrentDetails(ctx, s.details())
	s.publishAfter(ctx, wait)
}

// publishAfter publishes once d has passed, unless a write is already on
// its way.
func (s *listingRun) publishAfter(ctx workflow.Context, d time.Duration) {
	if s.publishDue {
		return
	}
	s.publishDue = true
	workflow.Go(ctx, func(ctx workflow.Context) {
		if err := workflow.Sleep(ctx, d); err != nil {
			return
		}
		s.publishDue = false
		s.publish(ctx)
	})
}

// eventsUnlisted says the session recorded events its memo does not name
// yet (always false before VersionListedEvents).
func (s *listingRun) eventsUnlisted() bool {
	return s.has(VersionListedEvents) && (!s.published.valid || s.published.events != s.st.NextSeq)
}

// listEvents lists, within listingPace, the events a signal just
// recorded: the loop may not publish for a long while (a turn runs, or the
// session waits), and a feed asks a session for its events only when its
// memo says it has new ones. Whatever the loop publishes meanwhile takes
// them along.
func (s *listingRun) listEvents(ctx workflow.Context) {
	if s.eventsUnlisted() && !s.listingDirty {
		s.publishAfter(ctx, listingPace)
	}
}

// publish keeps the search attributes and the memo in step with the state.
// Since VersionQuietStart it writes them once the workflow task's code has
// run (flushListing), so that the changes of one task are one write.
func (s *listingRun) publish(ctx workflow.Context) {
	if !s.has(VersionQuietStart) {
		s.write(ctx)
		return
	}
	s.listingDirty = true
	if !s.flushing {
		s.flushing = true
		workflow.Go(ctx, s.flushListing)
	}
}

// flushListing is the coroutine that writes the listing publish asked
// for. The SDK runs it in its turn among the coroutines, after the one
// that asked has blocked, so the changes made until then go in one write
// with the task's other commands; one asked for by a coroutine after it
// in the order is written in another pass of the same task, with only
// what changed. A run about to continue as new has it written first: the
// SDK runs every coroutine before it closes the run.
func (s *listingRun) flushListing(ctx workflow.Context) {
	for {
		if err := workflow.Await(ctx, func() bool { return s.listingDirty }); err != nil {
			return
		}
		s.listingDirty = false
		s.write(ctx)
	}
}

// write writes what changed since the listing was last written: each
// upsert is a history event, and a visibility write on the server.
func (s *listingRun) write(ctx workflow.Context) {
	c := s.st.Context
	p := s.published
	contextAt := p.contextAt
	var updates []temporal.SearchAttributeUpdate
	if !p.valid {
		updates = append(updates, groupKey.ValueSet(s.in.Group), sessionKey.ValueSet(s.in.Name), agentKey.ValueSet(s.in.Spec.Kind))
	}
	if !p.valid || p.status != s.status() {
		updates = append(updates, statusKey.ValueSet(s.status()))
	}
	if !p.valid || !samePercent(p.percent, c.Percent) {
		contextAt = workflow.Now(ctx)
		if c.Percent == nil {
			updates = append(updates, percentKey.ValueUnset())
		} else {
			updates = append(updates, percentKey.ValueSet(*c.Percent))
		}
	}
	if !p.valid || p.rotations != c.Rotations {
		updates = append(updates, rotationsKey.ValueSet(int64(c.Rotations)))
	}
	if s.st.Host != "" && (!p.valid || p.host != s.st.Host) {
		updates = append(updates, hostKey.ValueSet(s.st.Host))
	}
	memo := map[string]interface{}{}
	if !p.valid || !sameContext(p.context, c) {
		contextAt = workflow.Now(ctx)
		memo[MemoContext] = c
	}
	if s.eventsUnlisted() {
		memo[MemoEvents] = s.st.NextSeq
	}
	if !p.valid && s.has(VersionPublishesRung) {
		memo[MemoRung] = s.version
	}
	if s.has(VersionListedAt) && (len(updates) > 0 || len(memo) > 0) {
		// Every change of the listing carries when it was made, so that a
		// listing kept by a running nid up can ask visibility for the
		// sessions changed since rather than for all of them.
		updates = append(updates, listedAtKey.ValueSet(workflow.Now(ctx)))
	}
	if len(updates) > 0 {
		if err := workflow.UpsertTypedSearchAttributes(ctx, updates...); err != nil {
			workflow.GetLogger(ctx).Warn("search attributes not updated", "error", err)
		}
	}
	if len(memo) > 0 {
		if err := workflow.UpsertMemo(ctx, memo); err != nil {
			workflow.GetLogger(ctx).Warn("memo not updated", "error", err)
		}
	}
	s.published = published{status: s.status(), percent: c.Percent, rotations: c.Rotations, context: c, host: s.st.Host, valid: true,
		contextAt: contextAt, events: s.st.NextSeq}
	// Current details cost no history: the Web UI reads them by query.
	workflow.SetCurrentDetails(ctx, s.details())
}

func samePercent(a, b *float64) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

func sameContext(a, b ContextRecord) bool {
	if !samePercent(a.Percent, b.Percent) {
		return false
	}
	a.Percent, b.Percent = nil, nil
	la, lb := a.LastRotation, b.LastRotation
	a.LastRotation, b.LastRotation = nil, nil
	if (la == nil) != (lb == nil) || (la != nil && *la != *lb) {
		return false
	}
	return a == b
}

// details says in words where the session stands, for the Web UI.
func (s *rules) details() string {
	c := s.st.Context
	ctx := "context unknown (the agent reports no numbers)"
	if c.Percent != nil {
		ctx = fmt.Sprintf("context %.0f%% of %d tokens (%s)", *c.Percent, c.WindowTokens, c.Source)
	}
	d := fmt.Sprintf("%s; %s; %d turns (%d since the last rotation), %d rotations", s.status(), ctx, c.TotalTurns, c.Turns, c.Rotations)
	if s.st.Host != "" {
		d += "; on host " + s.st.Host
	}
	if r := c.LastRotation; r != nil {
		d += "; last rotation " + r.Text()
	}
	if b := s.st.Board; b != nil {
		if t := b.HeldBy(s.in.Name); t != nil {
			d += fmt.Sprintf("; working on task %s: %s", t.ID, t.Title)
		}
	}
	return d
}
