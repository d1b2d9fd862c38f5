package workflows

import (
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"
)

// Version is a rung of nid's workflow version ladder. Every behaviour change
// to a workflow that running histories could observe adds a rung here,
// newest last, with what it changed; code branches on s.has(VersionX). A
// recorded history under testdata/ covers each rung, and TestReplay replays
// them all, so sessions that have been running for weeks survive an
// upgrade.
//
// Each fixture is named after the rung it was recorded at (rungN-*, and
// initial-* for VersionInitial), which its history's version marker
// records; TestFixturesNamedAfterTheirRung keeps the two in step. Rungs 2
// to 8 were released together: the histories recorded for them,
// testdata/rung8-*, are recorded at rung 8 and so cover every one.
// Likewise rungs 11 to 14, whose testdata/rung14-* are recorded at 14.
//
// A run reads its rung once, when it starts (versionOf): a history keeps
// the rung it recorded, and a new run (a new workflow, or a continue-as-new)
// takes the newest. So an old session upgrades at its next continue-as-new,
// carrying its state.
type Version int

const (
	// VersionInitial is the first release; its histories
	// (testdata/initial-*.json) must keep replaying.
	VersionInitial Version = Version(workflow.DefaultVersion)

	// VersionTeam: the board, claims, locks and budget. Groups push their
	// board to sessions; sessions prepare a worktree, ask for tasks, charge
	// every turn to the group and pause while the budget is exhausted.
	// Histories: testdata/rung1-*.json, and rung1-rec-compact-can.json.gz
	// (a whole session run ending in continue-as-new) with
	// rung1-rec-compact-run-2.json.gz (the run that took its state over).
	VersionTeam Version = 1

	// VersionOneRotateDecision: a manual rotate request is decided by one
	// function, DecideRotate, which `nid rotate` and the HTTP API show too.
	// A request made while the agent's own handoff (or a context-full
	// handoff) waits for its turn to end joins that handoff, and that
	// handoff takes a request already pending, instead of a second
	// rotation running on the fresh conversation. A session that never
	// took a turn has nothing to rotate and says so. Histories:
	// testdata/rung8-*.
	VersionOneRotateDecision Version = 2

	// VersionBoundedQueue: a message to a stopped session, or past the
	// caps of MessageRefusal (size, count, bytes queued), is not queued;
	// the feed says why. Histories: testdata/rung8-*.
	VersionBoundedQueue Version = 3

	// VersionFailuresSettle: failures settle instead of looping. A turn
	// that fails because the agent cannot run here at all (no sandbox, an
	// agent kind this host lacks) needs the human at once; a session
	// waiting to retry a failed turn shows retrying; failed rotations back
	// off (a policy rotation waits 2^(n-1) turns after n failures in a
	// row) and after rotationFailuresBeforeAttention in a row the session
	// needs attention with what to change. A rotation of a kind that
	// cannot compact goes straight to a handoff, and one whose kind calls
	// no tools is not waited on for handoff_write (see RotationWorkflow).
	// Histories: testdata/rung8-*.
	VersionFailuresSettle Version = 4

	// VersionStopAtOnce: a stopped session says so at once (its status
	// search attribute is stopped when the stop is taken, not when its
	// agent has stopped), and a rotation running when it is stopped is
	// cancelled, so no fresh conversation starts after the stop.
	// Histories: testdata/rung8-*.
	VersionStopAtOnce Version = 5

	// VersionRotationBudget: a rotation costs one turn of the group's
	// budget (the seed's "they cost a turn"), whatever model calls it
	// makes. Every rotation but a manual one waits while the budget is
	// spent and reserves its turn with the group first, as a work turn
	// does, so a turns budget is never overspent by them; a manual
	// rotation runs anyway and is charged its turn. A session waiting when
	// the budget runs out (its reservation refused) shows paused, not
	// idle. Histories: testdata/rung8-*.
	VersionRotationBudget Version = 6

	// VersionThresholds: the policy's threshold is the least of
	// contextPercent, contextTokens and a margin below where the session's
	// agent kind and model were seen to compact by themselves (learned
	// from the session's own vendor compactions, and pushed by the group to
	// every session). Rotations are judged: one that leaves the context
	// above the threshold less a margin is ineffective (after a compaction
	// the next policy rotation is a handoff; after a handoff the policy
	// stops for the session, which keeps working), and a session that
	// rotates by itself more than breakerRotations times in breakerTurns
	// turns stops its policy rotations; either says so in the inbox.
	// Histories: testdata/rung8-*.
	VersionThresholds Version = 7

	// VersionSettledContinueAsNew: a session or group continues as new only
	// once no signal is left and every handler has finished after the
	// last drain (see continueAsNew), so an update accepted while a signal
	// handler was blocked is never cut off by the new run. Histories:
	// testdata/rung8-*.
	VersionSettledContinueAsNew Version = 8

	// VersionGovernor: at most the policy's maxConcurrentRotations
	// sessions of a group rotate by themselves at once. A session due asks
	// its group for a slot (SignalSlot) and waits, shown as
	// waiting-to-rotate; the group grants the fullest first and takes the
	// slot back when the rotation ends. A manual rotation never waits.
	// Histories: testdata/rung9-*.json.gz.
	VersionGovernor Version = 9

	// VersionVouchedHandoff: a handoff nid can vouch for. When the agent
	// gives none, nid builds one from the transcript (RescueHandoff; the
	// last output is the last resort); the fresh conversation's first
	// message carries what nid reads itself (GatherFacts: branch, HEAD,
	// commits, uncommitted changes) and the tasks and locks held, and asks
	// the agent to acknowledge them with handoff_ack, which nid checks
	// against the board. Every rotation keeps a receipt (cost, the
	// summary's source and size, the facts, verified), and every turn a
	// point of the context chart. Histories: testdata/rung10-*.json.gz.
	VersionVouchedHandoff Version = 10

	// VersionRotateWhileHalted: while a session's policy rotations are
	// stopped (the breaker, a fresh conversation too full for its
	// threshold), the agent's own handoff waits for the human instead of
	// being joined by a manual request that then never ran: nid rotate
	// runs, by handoff with that summary unless another mode is asked for,
	// and a conversation past its window hands off with it too. A handoff
	// of any reason drops a summary the agent wrote for the conversation
	// it replaced. Histories: testdata/rung14-*.json.gz.
	VersionRotateWhileHalted Version = 11

	// VersionSpentBudgetStartsNothing: a turn or rotation the group granted
	// before a tokens or usd limit was reached, and not started when the
	// session hears the limit is reached, does not start: its reserved turn
	// goes back to the group, so once "budget exhausted" is in the feed only
	// the steps already running (and a manual rotation) spend, and the
	// feed says when the session pauses: at once, or when the step it runs
	// ends. A turns limit is unchanged: the turn it granted last is within
	// it. Histories: testdata/rung14-*.json.gz.
	VersionSpentBudgetStartsNothing Version = 12

	// VersionStopDropsHandoffs: a stopped session keeps no handoff of its
	// agent, neither one written before the stop nor one written after it
	// (a handoff request the stop cut off), so nid start goes on in the
	// same conversation as it says, and the feed no longer promises a
	// rotation a stopped session will not run. Histories:
	// testdata/rung14-*.json.gz.
	VersionStopDropsHandoffs Version = 13

	// VersionHosts: sessions run on hosts. A session's host is decided
	// once, by the hosts registry (nid/hosts) or nid.yaml's host:, and kept
	// in its state; its turns, rotations and git work go to that host's
	// queue. The registry tells it when its host goes down or comes back:
	// while down it waits (status host-down, an inbox item after
	// hostDownInboxAfter), then resumes where it was. nid move hands a
	// session off onto another host (RotationInput.Move: the work saved on
	// the old host, a fresh worktree with the salvage on the new one); a
	// task done pushes the branch of a URL repo; a stopped session gives
	// its host's capacity back. The host is a search attribute (NidHost).
	// The registry workflow itself starts at this rung. Histories:
	// testdata/rung14-*.json.gz, rung14-hosts.json.gz the registry's.
	VersionHosts Version = 14

	// VersionPacedListing: while a session takes turn after turn, a change
	// of its context alone (the percent search attribute and the memo) is
	// written at most once every listingPace, by a timer when it has to
	// wait; a new status, rotation count or host is written at once with
	// whatever waits, and so is everything when the session is about to
	// wait. Each upsert is a visibility write, the dearest one the server
	// makes, and sub-second turns made two a turn. Histories:
	// testdata/rung15-*.json.gz; rung15-pace-fast.json.gz holds the paced writes.
	VersionPacedListing Version = 15

	// VersionListedEvents: the memo also holds the sequence number of the
	// session's newest event (MemoEvents), written with the rest of the
	// listing, and an event a signal records is listed within listingPace
	// (by a timer) even when nothing else is written: a feed (nid watch,
	// nid up's, each dashboard's) then asks only the sessions with news for
	// their events, not every session every half second. Histories:
	// testdata/rung16-*.json.gz.
	VersionListedEvents Version = 16

	// VersionCheckedInput: the workflows check what they are handed where
	// it enters, as the HTTP API and the MCP endpoint do before sending
	// it. A session, group or rotation whose input names a group or
	// session that is not a name (config.ValidName: no "..", "/", NUL, at
	// most 63 characters) fails at once with a non-retryable BadInput
	// error naming the field, having scheduled nothing. Every signal
	// handler caps what it takes (a handoff summary at MaxSummaryBytes, an
	// acknowledgement's ids, a board push at the board's own caps, a
	// policy at nid group set's rules, a stop's reason, an inbox item's
	// text, learned thresholds, hosts and their sessions, a charge to the
	// budget: only from the group's sessions, never giving back more than
	// a reserved turn, never larger than a batch of turns): a session says a
	// refusal in its feed, the group and the hosts registry in the
	// worker's log, and nothing already stored is lost. A rotation whose
	// git facts could not be read (the worker refuses a worktree whose
	// .git file or commondir an agent pointed elsewhere) says why in its
	// receipt (RotationEvent.FactsNote) and the session's inbox. Histories:
	// testdata/rung17-*.json.gz.
	VersionCheckedInput Version = 17

	// VersionLostTurns: a turn's attempts are the session's to retry, not
	// the server's (the turn's activity has one attempt; the session tries
	// it again as the retry policy did, at most turnAttempts times), so a
	// stopped session runs nothing more: an attempt cut by a worker that
	// died (failed at its next start, or timed out) is not run again once
	// the session is stopped. A move off a host that is down cuts the turn
	// running there, which is lost with the host, and hands off at once
	// with what the session last said; a rotation running there is
	// cancelled likewise. A turn that ends after the stop is said as the
	// stop's, not as a turn; an agent that did not stop is said in the
	// feed. A session the worker finds cannot start (SignalCannotStart:
	// its agent's CLI is missing) needs attention at once. A rotation the
	// stop cancelled keeps its receipt, marked cancelled, so the receipts'
	// numbers have no gap, and a kind that calls no tools is not asked to
	// acknowledge its handoff (VerifiedNotAsked). Histories:
	// testdata/rung18-*.json.gz.
	VersionLostTurns Version = 18

	// VersionPublishesRung: a session, a group and the hosts registry write
	// the rung their run follows to their memo (MemoRung) when the run
	// starts, so nid doctor tells which rungs running workflows still need
	// from a listing alone; a session writes it with the rest of its first
	// listing. Histories: testdata/rung19-*.json.gz.
	VersionPublishesRung Version = 19

	// VersionAttach: a person can hold a session with nid attach
	// (UpdateAttach) and work in its agent's own CLI. While held (status
	// attached) no turn starts and the policy does not rotate; messages,
	// rotate requests and moves wait and say so. The hold waits for a
	// running turn, closes the agent's process, and lasts while nid attach
	// renews its lease (SignalAttachRenew); the hand-back
	// (UpdateAttachRelease, or the lease running out) reads the vendor's
	// records (activities.HandbackName) into the context record, and the
	// session goes on as after a turn. Histories: testdata/rung20-*.json.gz.
	VersionAttach Version = 20

	// Rung 21 was never released: no history holds it.

	// VersionBatchedPlacement: the hosts registry places many new sessions
	// in one update (UpdatePlaceAll), each as UpdatePlace would and in
	// order, and says whether each one's host is alive (Placement.Alive);
	// a new session placed so on a live host (SessionInput.Placed) does
	// not tell the registry where it is when its first run starts, as the
	// registry knows. nid up starting a fleet then waits on one round trip
	// through the registry, not one per session, and the registry is not
	// sent a signal by every new session nor sends one back. Histories:
	// testdata/rung22-*.json.gz; rung22-hosts.json.gz holds the batch,
	// the sessions' the first run that tells the registry nothing.
	VersionBatchedPlacement Version = 22

	// VersionTargetedBoard: a group sends its board only to the sessions
	// a change concerns, so a group of a thousand sessions is not a
	// thousand signals a claim. A claim, a task done, a lock taken or
	// released, a task given by claim_next go to the session that made
	// them; a task added, or given back by a stopped session, to the
	// sessions that hold none; the budget spent or raised, a sync from
	// nid up and a new group's first board to every session, and a run
	// that continues as new sends none. Each session gets its seat's
	// board (BoardView.seat): its own tasks, the open ones, a count of the
	// others' (Others, which BoardText says, and which keeps a board whose
	// tasks are all taken from reading as a board without tasks), its own
	// grant; a session's board update is answered with the same. The
	// sessions owed a board (GroupState.Owed) are sent it by
	// one coroutine, a batch of at most pushBatchBytes at a time, so
	// changes made while a batch is under way go in one push, and an
	// update is answered, and the next signal taken, without waiting on a
	// session's workflow task; the group continues as new between
	// batches, carrying who is still owed. A session's copy of the board
	// is then exact in what concerns it; board_read, nid board and the
	// group's query read the group itself. Histories:
	// testdata/rung23-*.json.gz.
	VersionTargetedBoard Version = 23

	// VersionListedAt: every change a session makes to its listing (its
	// search attributes or its memo) also sets SearchListedAt to the
	// workflow's time, so that a running nid up keeps the listing of every
	// session by asking visibility only for those changed since it last
	// asked (nidclient.Listing). A memo-only change now comes with a search
	// attribute upsert. Histories: testdata/rung24-*.json.gz.
	VersionListedAt Version = 24

	// VersionLeanBoard: a group's board updates are answered with what
	// they name (the task, the lock, what a stop released) and no board,
	// and a session is sent the open tasks counted (BoardView.Open) rather
	// than listed. A group of a thousand sessions wrote a megabyte of
	// history a second, two thirds of it boards in answers no client read,
	// the rest open titles in every grant; each megabyte is replayed at
	// every continue-as-new the server refuses while signals arrive.
	// Histories: testdata/rung25-*.json.gz.
	VersionLeanBoard Version = 25

	// VersionContinueFromCache: a group whose run (of 256 KB or more) was
	// rebuilt by replay in the workflow task that would continue it as new
	// waits for its next task first (continueAsNewWhen). A refused
	// continue-as-new replays the whole run, and attempted again straight
	// from that replay it was refused again while signals kept coming: a
	// group of a thousand sessions was refused forty times in a row and
	// answered nothing meanwhile. Sessions and the hosts registry are sent
	// few signals (their updates do not refuse a continue-as-new), and
	// the registry, tried with it, did no better in the benchmark.
	// Histories: testdata/rung26-*.json.gz.
	VersionContinueFromCache Version = 26

	// VersionBoardAtStart: a new session given its group's board
	// (SessionInput.Board, which nid up makes with StartingBoard for a
	// group it starts, SeatOf for one running) takes it as its first, and
	// asks the group for its
	// board and a task without waiting for the answer (startWithBoard).
	// A session whose group has no open task then works at once; one whose
	// group has some still waits for its claim. Every new session waited
	// for its group's answer, one signal into the one group workflow and
	// one back: a fleet of a thousand started at once had its boards 50 s
	// after nid up began, the median, where the sessions had asked at 16.
	// Histories: testdata/rung27-*.json.gz.
	VersionBoardAtStart Version = 27

	// VersionRegistryAtScale: the hosts registry keeps one timer for the
	// first live host's deadline, set again only when that deadline comes
	// sooner than the timer or the timer has fired (deadlineTimer). It
	// waited on a new timer of its own at every workflow task, and the SDK
	// leaves such a timer running once the wait is over: every beat,
	// placement and move left one behind, each fired 30 s later into a
	// workflow task of its own. And it tells sessions of their hosts'
	// changes tellBatch signals at a time, awaiting each batch, and no more
	// once its history is full (the rest go to its next run): a hundred
	// hosts of a hundred sessions going down together were ten thousand
	// signals in one workflow task, which the server refuses past 2,000
	// pending, and the registry failed that task for as long as it tried.
	// It continues as new once a run grew by 1 MB (registryRunBytes),
	// woken by updates as well as signals: a failed workflow task replays
	// the whole run, and runs of megabytes of placement batches took
	// seconds to replay. It finds a session's host through an index.
	// A run about to continue as new (any workflow's) takes the signals
	// that arrive while its handlers finish (continueAsNewWhen): the
	// registry's placeAll waits for the beats sent before it, so a beat
	// and a batch that came while the registry told its sessions, in a run
	// whose history was then full, left the handler and the continue-as-new
	// each waiting for the other.
	// Histories: testdata/rung28-*.json.gz.
	VersionRegistryAtScale Version = 28

	// VersionBeatUpdate: the hosts registry takes heartbeats as an update
	// (UpdateHeartbeat) as well as the signal, and nid's workers send them
	// so. A signal that arrives while the workflow task continuing the
	// registry as new runs makes the server refuse that task, and the
	// worker then replays the whole run: a hundred hosts beating every 10 s
	// had 17 to 53 continue-as-new refused a run, and placements waited
	// seconds behind each replay. An update arriving then is turned away
	// and sent again by its client, to the next run. The loop wakes on a
	// beat taken by the update (beaten) as it did on the signal, and a run
	// rebuilt by replay in the task that would continue it as new waits for
	// its next task first, as a group's does since VersionContinueFromCache,
	// for the moves that are still signals.
	// Histories: testdata/rung29-*.json.gz.
	VersionBeatUpdate Version = 29

	// VersionCancelledWaits: a session's two waits with a deadline (the
	// pause after a failed turn, which a message or a rotation ends early,
	// and an attach lease's watch, which its release ends) cancel their
	// timer when they end before it (awaitWithin). They waited with
	// workflow.AwaitWithTimeout, whose timer the SDK leaves running (its
	// flag to cancel it is off by default): each fired later into a
	// workflow task of its own, as the registry's did before
	// VersionRegistryAtScale.
	// Histories: testdata/rung30-*.json.gz.
	VersionCancelledWaits Version = 30

	// VersionQuietStart: a session writes its listing once per workflow
	// task, with everything the task changed (publish), where it wrote it
	// at each change: a new session's first task listed it three times,
	// and every listing is a visibility write. A session started with its
	// group's board (VersionBoardAtStart) asks the group for nothing at
	// start; the loop asks for a task when the board has an open one. A
	// group nid up starts with BoardsAtStart pushes its first board only
	// to the sessions it found running (GroupInput.Running): those it
	// starts are given the board. A push that finds no session yet is kept
	// (GroupState.Unreached) and sent again when nid up says the session
	// started (SignalStarted). A fleet of a thousand sent each group's
	// every session a board that mostly failed or arrived after the one
	// it was started with, and every session's claim was answered with one
	// more: a group was still sending them after every session worked.
	// Histories: testdata/rung31-*.json.gz.
	VersionQuietStart Version = 31

	// VersionHostQueue: a session continues as new onto its host's queue
	// (SessionQueue), where nid up now starts new sessions, so that the
	// host's worker runs its workflow tasks beside its activities and the
	// server hands each turn's activity over with the task that schedules
	// it. Before, the next run took the queue of the one before it: the
	// shared queue for a session started before (which so moves at its
	// second continue-as-new after the upgrade), the old host's for one
	// that moved.
	// Histories: testdata/rung32-*.json.gz.
	VersionHostQueue Version = 32

	// versionLatest is the rung new runs take.
	versionLatest = VersionHostQueue
)

// versionChangeID is the change id the ladder is recorded under. It is
// named after the ladder's first rung, which was recorded before the ladder
// existed; histories carry it, so it never changes.
const versionChangeID = "team"

// Latest is the rung a run that starts now takes: the newest this build of
// nid knows.
const Latest = versionLatest

// MemoRung is the memo key holding the rung a run follows, as a Version's
// number (since VersionPublishesRung).
const MemoRung = "rung"

// publishRung writes the rung the run follows to its memo.
func publishRung(ctx workflow.Context, l ladder) {
	if !l.has(VersionPublishesRung) {
		return
	}
	if err := workflow.UpsertMemo(ctx, map[string]interface{}{MemoRung: l.version}); err != nil {
		workflow.GetLogger(ctx).Warn("memo not updated", "error", err)
	}
}

// versionMarker is the marker the SDK records for workflow.GetVersion, with
// its details' keys.
const (
	versionMarker         = "Version"
	versionMarkerChangeID = "change-id"
	versionMarkerVersion  = "version"
)

// RecordedRung reads the rung a run follows from the start of its history
// (its first page is enough); whole says events are all the run has
// recorded so far. Every workflow reads its rung (versionOf) before it does
// anything that records a command, so a run with a rung records its
// version marker as the first command of its first completed workflow
// task; a run whose first commands hold no marker is VersionInitial. ok is
// false while the run's first workflow task has not completed (the run
// takes the newest rung of the worker that runs it), or when events end
// with that task's completion and are not whole.
func RecordedRung(events []*historypb.HistoryEvent, whole bool) (v Version, ok bool, err error) {
	for i, e := range events {
		if e.GetEventType() != enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
			continue
		}
		if i+1 == len(events) {
			// The marker would have been recorded with the completion.
			return VersionInitial, whole, nil
		}
		m := events[i+1].GetMarkerRecordedEventAttributes()
		if m.GetMarkerName() != versionMarker {
			return VersionInitial, true, nil
		}
		dc := converter.GetDefaultDataConverter()
		var id string
		if err := dc.FromPayloads(m.GetDetails()[versionMarkerChangeID], &id); err != nil {
			return 0, false, fmt.Errorf("version marker of event %d: change id: %w", events[i+1].GetEventId(), err)
		}
		if id != versionChangeID {
			return VersionInitial, true, nil
		}
		var n workflow.Version
		if err := dc.FromPayloads(m.GetDetails()[versionMarkerVersion], &n); err != nil {
			return 0, false, fmt.Errorf("version marker of event %d: version: %w", events[i+1].GetEventId(), err)
		}
		return Version(n), true, nil
	}
	return 0, false, nil
}

// ladder is the rung a run follows, for the workflows to embed: they branch
// on has.
type ladder struct{ version Version }

// has says this run follows rung v of the version ladder.
func (l ladder) has(v Version) bool { return l.version >= v }

// versionOf reads the run's rung: the one its history recorded, or the
// newest for a run that starts now.
func versionOf(ctx workflow.Context) Version {
	return Version(workflow.GetVersion(ctx, versionChangeID, workflow.DefaultVersion, workflow.Version(versionLatest)))
}

// Changes that needed no rung, and why.
//
// Real agents (claude, codex, exec): every change they brought runs only on
// input a v1 history never holds. The rate_limit signal (the rate-limited
// status), the ContextFull error type (a forced handoff with reason
// context-full, which skips the handoff request) and AgentSpec.TurnTimeout
// (the activity's start-to-close timeout, which replay does not compare)
// leave the commands of every recorded path as they were.
//
// Board revisions: a group numbers its pushes (BoardView.Rev) and a session
// ignores a board older than its own, and it decides whether a turn was
// reserved when the turn starts rather than when it ends. Histories before
// them carry no Rev, which is always taken, and the charge a session sends
// differs only in its payload, which replay does not compare.
//
// A new session's start (SessionInput.Learned, and the group's policy rather
// than the file's as SessionInput.Policy): the input of a run that starts
// now, which no recorded history's run reads differently.
//
// Starting a stopped session (start_session on the group, the start signal
// on the session) and the reason a stop carries (StopRequest.Why): both run
// only on an update and a signal that no earlier history holds, and the
// stop signal's payload of a history before them, {}, decodes as a
// StopRequest without a reason.
//
// Receipts without the summary's text, stamped with when the session took
// them (RotationEvent.At): they change only what a rung-10 session keeps in
// its state, which reaches history only as the payload of a
// continue-as-new, and replay does not compare payloads.
//
// Activity inputs that name nothing the worker acts on: a turn, a
// compaction, the git facts, a worktree, a move's save and a push name the
// session (and the salvage ref and move number) only; the working
// directory, repository and worktree they carried before are what the
// worker now takes from its own nid.yaml and records. Only the payloads
// of the commands changed, which replay does not compare, and the
// activities ignore those fields in the histories that still carry them.
