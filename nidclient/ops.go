package nidclient

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/workflows"
)

// The operations the command line and the HTTP API share. Each validates
// its input, reaches the workflow, and returns one of the error types in
// errors.go; the clients only print or map them.

// GetSession is a session's view, or a *NotFoundError naming the sessions
// that exist, or an *UnavailableError.
func GetSession(ctx context.Context, c client.Client, group, name string) (workflows.SessionView, error) {
	v, err := QuerySession(ctx, c, group, name)
	if err != nil {
		return v, sessionError(ctx, c, group, name, err)
	}
	return v, nil
}

// GetGroup is a group's view, or a *NotFoundError naming the groups that
// exist, or an *UnavailableError.
func GetGroup(ctx context.Context, c client.Client, group string) (workflows.GroupView, error) {
	v, err := QueryGroup(ctx, c, group)
	if err != nil {
		return v, groupError(ctx, c, group, err)
	}
	return v, nil
}

// Rotate asks a session to rotate by mode (empty: its group's) and says
// what the session will do, as the session itself decides it
// (workflows.DecideRotate). A request the session would ignore is a
// *RefusedError and is not sent.
func Rotate(ctx context.Context, c client.Client, group, name, mode string) (workflows.RotateAnswer, error) {
	if !workflows.ValidRotateMode(mode) {
		return workflows.RotateAnswer{}, &InvalidError{Field: "mode",
			Message: fmt.Sprintf("mode: %q is not a rotation mode: use auto, compact or handoff, or leave it out for the group's", mode)}
	}
	v, err := GetSession(ctx, c, group, name)
	if err != nil {
		return workflows.RotateAnswer{}, err
	}
	ref := group + "/" + name
	d := workflows.DecideRotate(mode, v)
	if err := d.Err(ref); err != nil {
		return workflows.RotateAnswer{}, &RefusedError{Message: err.Error()}
	}
	req := workflows.RotateRequest{Mode: mode, Reason: workflows.ReasonManual}
	if err := c.SignalWorkflow(ctx, workflows.SessionID(group, name), "", workflows.SignalRotate, req); err != nil {
		return workflows.RotateAnswer{}, sessionError(ctx, c, group, name, err)
	}
	return d.Answer(ref), nil
}

// Send queues text as a session's next prompt and says when it runs
// (workflows.QueuedText). A message the session would not queue
// (workflows.MessageRefusal) is refused here and not sent.
func Send(ctx context.Context, c client.Client, group, name, text string) (string, error) {
	ref := group + "/" + name
	switch {
	case strings.TrimSpace(text) == "":
		return "", &InvalidError{Field: "text", Message: "text: missing: the prompt for " + ref + "'s next turn"}
	case len(text) > workflows.MaxMessageBytes:
		return "", &InvalidError{Field: "text", Message: fmt.Sprintf("text: %d bytes; a message is at most %d", len(text), workflows.MaxMessageBytes)}
	}
	v, err := GetSession(ctx, c, group, name)
	if err != nil {
		return "", err
	}
	if refusal := workflows.MessageRefusal(text, v); refusal != "" {
		return "", &RefusedError{Message: ref + " " + refusal}
	}
	if err := c.SignalWorkflow(ctx, workflows.SessionID(group, name), "", workflows.SignalMessage, workflows.Message{Text: text}); err != nil {
		return "", sessionError(ctx, c, group, name, err)
	}
	return workflows.QueuedText(ref, v), nil
}

// GroupSettings are what SetGroup changes: each a JSON object of the fields
// to change, as typed after rotate= and budget= in `nid group set`; an
// empty one is left alone.
type GroupSettings struct {
	RotateJSON string
	BudgetJSON string
	// LearnedJSON sets or forgets the thresholds learned of vendors that
	// compact by themselves: {"kind/model": percent or null}.
	LearnedJSON string
}

// GroupSetResult is a group's policy and budget after SetGroup, and what it
// has spent.
type GroupSetResult struct {
	Rotate  config.Rotate
	Budget  config.Budget
	Spent   workflows.Spend
	Learned []workflows.LearnedPoint
}

// SetGroup changes a running group's settings. Both are validated before
// either is sent, so a bad one changes nothing; an *InvalidError names the
// setting at fault.
func SetGroup(ctx context.Context, c client.Client, group string, set GroupSettings) (GroupSetResult, error) {
	rotate, budget, learned := strings.TrimSpace(set.RotateJSON), strings.TrimSpace(set.BudgetJSON), strings.TrimSpace(set.LearnedJSON)
	if rotate == "" && budget == "" && learned == "" {
		return GroupSetResult{}, &InvalidError{Field: "rotate",
			Message: `nothing to set: give rotate, budget or learned, each a JSON object of what to change, e.g. {"mode": "handoff"}, {"turns": 500} or {"claude/claude-sonnet-4-5": 75}`}
	}
	v, err := GetGroup(ctx, c, group)
	if err != nil {
		return GroupSetResult{}, err
	}
	res := GroupSetResult{Rotate: v.Policy, Budget: v.Board.Budget, Spent: v.Board.Spent, Learned: v.Learned}
	// The group validates too; checking both here first names the setting
	// without a round trip through its history.
	if rotate != "" {
		p, err := config.ApplyRotateJSON(v.Policy, rotate)
		if err != nil {
			return res, settingError("rotate", err)
		}
		if err := compactForAll(ctx, c, group, p); err != nil {
			return res, err
		}
	}
	if budget != "" {
		if _, err := config.ApplyBudgetJSON(v.Board.Budget, budget); err != nil {
			return res, settingError("budget", err)
		}
	}
	if learned != "" {
		if _, err := workflows.ApplyLearnedJSON(v.Learned, learned); err != nil {
			return res, &InvalidError{Field: "learned", Message: err.Error()}
		}
	}
	// Each answer is decoded into a zero value, not over the old one: a
	// field set to 0 is left out of the JSON answer, and decoding over the
	// old value would keep what was replaced.
	if rotate != "" {
		var now config.Rotate
		if err := updateGroup(ctx, c, group, "rotate", workflows.UpdateSetPolicy, workflows.SetPolicy{RotateJSON: rotate}, &now); err != nil {
			return res, err
		}
		res.Rotate = now
	}
	if budget != "" {
		var now config.Budget
		if err := updateGroup(ctx, c, group, "budget", workflows.UpdateSetBudget, workflows.SetBudget{BudgetJSON: budget}, &now); err != nil {
			return res, err
		}
		res.Budget = now
	}
	if learned != "" {
		var now []workflows.LearnedPoint
		if err := updateGroup(ctx, c, group, "learned", workflows.UpdateSetLearned, workflows.SetLearned{LearnedJSON: learned}, &now); err != nil {
			return res, err
		}
		res.Learned = now
	}
	return res, nil
}

// compactForAll refuses a policy of mode compact for a group with a session
// whose agent kind cannot compact, as validation refuses it in nid.yaml:
// every rotation of that session would fail.
func compactForAll(ctx context.Context, c client.Client, group string, p config.Rotate) error {
	if p.Mode != config.ModeCompact {
		return nil
	}
	sessions, err := ListSessions(ctx, c, group)
	if err != nil {
		return &UnavailableError{Who: "Temporal", Err: err}
	}
	for _, s := range sessions {
		// A stopped session rotates no more, as one that left nid.yaml
		// does: the file's own check leaves it out, and so does this one.
		if s.Status == workflows.StatusStopped {
			continue
		}
		if !agents.KindOf(s.Agent).Compacts {
			return &InvalidError{Field: "rotate", Message: "rotate: mode: " + config.CompactNever(s.Name, s.Agent)}
		}
	}
	return nil
}

// settingError is a setting's validation error as an *InvalidError whose
// message names the setting once: config names it itself when the whole
// value is wrong (not JSON, not an object), not when one of its fields is.
func settingError(field string, err error) error {
	var shape *config.ShapeError
	msg := err.Error()
	if !strings.HasPrefix(msg, field+": ") {
		msg = field + ": " + msg
	}
	return &InvalidError{Field: field, Message: msg, Shape: errors.As(err, &shape)}
}

// updateGroup runs a settings update; a refusal is an *InvalidError of the
// setting it was about.
func updateGroup(ctx context.Context, c client.Client, group, field, update string, arg, out any) error {
	err := UpdateGroup(ctx, c, group, update, arg, out)
	if refused := (*RefusedError)(nil); errors.As(err, &refused) {
		return &InvalidError{Field: field, Message: field + ": " + refused.Message}
	}
	return err
}

// UpdateGroup runs update on the group workflow with arg, waits for its
// answer and decodes it into out. A refusal comes back as a *RefusedError;
// a group that is not running as a *NotFoundError; no answer as an
// *UnavailableError.
func UpdateGroup(ctx context.Context, c client.Client, group, update string, arg, out any) error {
	sent, err := updateWorkflow(ctx, c, workflows.GroupID(group), update, arg, out)
	switch {
	case err == nil:
		return nil
	case !sent:
		return groupError(ctx, c, group, err)
	}
	return &RefusedError{Message: workflows.ErrorText(err)}
}

// Resend runs update (an update sent and its answer awaited) again while
// the update is lost (updateLost), at most updateAttempts times in all.
func Resend(ctx context.Context, update func() error) error {
	for attempt := 1; ; attempt++ {
		err := update()
		if err == nil || !updateLost(err) || attempt == updateAttempts || ctx.Err() != nil {
			return err
		}
	}
}

// updateAttempts bounds how often a lost update is sent.
const updateAttempts = 5

// updateLost says an update never ran and may be sent again: its workflow
// continued as new (or ended) after taking it, or the workflow task that
// carried it failed, as one that tried to continue as new while more
// signals and updates arrived does. The server has no error type for the
// first, so its words tell it.
func updateLost(err error) bool {
	if _, notReady := errors.AsType[*serviceerror.WorkflowNotReady](err); notReady {
		return true
	}
	return strings.Contains(err.Error(), "Workflow completed before the Update completed")
}

// groupViews are the views of one group, or of every running group in name
// order when group is empty.
func groupViews(ctx context.Context, c client.Client, group string) ([]workflows.GroupView, error) {
	groups := []string{group}
	if group == "" {
		var err error
		if groups, err = ListGroups(ctx, c); err != nil {
			return nil, &UnavailableError{Who: "Temporal", Err: err}
		}
	}
	var views []workflows.GroupView
	for _, g := range groups {
		v, err := QueryGroup(ctx, c, g)
		if IsNotFound(err) && group == "" {
			continue // it ended between the list and the query
		}
		if err != nil {
			return nil, groupError(ctx, c, g, err)
		}
		views = append(views, v)
	}
	return views, nil
}

// Boards are the boards of one group, or of every running group in name
// order when group is empty.
func Boards(ctx context.Context, c client.Client, group string) ([]workflows.BoardView, error) {
	views, err := groupViews(ctx, c, group)
	if err != nil {
		return nil, err
	}
	boards := []workflows.BoardView{}
	for _, v := range views {
		boards = append(boards, v.Board)
	}
	return boards, nil
}

// Inbox gathers the inbox items of one group, or of every running group
// when group is empty, oldest first.
func Inbox(ctx context.Context, c client.Client, group string) ([]workflows.InboxItem, error) {
	views, err := groupViews(ctx, c, group)
	if err != nil {
		return nil, err
	}
	items := []workflows.InboxItem{}
	for _, v := range views {
		items = append(items, v.Inbox...)
	}
	slices.SortStableFunc(items, func(x, y workflows.InboxItem) int {
		return cmp.Or(x.At.Compare(y.At), cmp.Compare(x.Group, y.Group), cmp.Compare(x.Seq, y.Seq))
	})
	return items, nil
}

// AddTask puts a task on a group's board.
func AddTask(ctx context.Context, c client.Client, group, title, detail string) (workflows.Task, error) {
	var res workflows.BoardResult
	if err := UpdateGroup(ctx, c, group, workflows.UpdateTaskAdd, workflows.BoardRequest{Title: title, Detail: detail}, &res); err != nil {
		return workflows.Task{}, err
	}
	return *res.Task, nil
}

// Stopped is what Stop did: what the session let go of, and the status it
// was in (a busy session stops its agent when the step it is in ends).
type Stopped struct {
	Released []string
	Was      string
}

// Stop stops a session: its group releases its claims and locks and tells
// it to take no more turns. A session already stopped is a *RefusedError.
func Stop(ctx context.Context, c client.Client, group, name string) (Stopped, error) {
	return StopWhy(ctx, c, group, name, "")
}

// StopWhy stops a session as Stop does, nid saying why (it left nid.yaml)
// in the session's feed and the inbox.
func StopWhy(ctx context.Context, c client.Client, group, name, why string) (Stopped, error) {
	v, err := GetSession(ctx, c, group, name)
	if err != nil {
		return Stopped{}, err
	}
	if v.Status == workflows.StatusStopped {
		return Stopped{}, &RefusedError{Message: group + "/" + name + " is already stopped"}
	}
	var res workflows.BoardResult
	if err := UpdateGroup(ctx, c, group, workflows.UpdateStopSession, workflows.BoardRequest{Session: name, Why: why}, &res); err != nil {
		return Stopped{}, err
	}
	return Stopped{Released: res.Released, Was: v.Status}, nil
}

// ClearInbox removes the inbox items of one group (every running group when
// group is empty) that Inbox shows now; an item that arrives meanwhile
// stays. It returns how many it removed.
func ClearInbox(ctx context.Context, c client.Client, group string) (int, error) {
	items, err := Inbox(ctx, c, group)
	if err != nil {
		return 0, err
	}
	through := map[string]int64{}
	for _, it := range items {
		through[it.Group] = max(through[it.Group], it.Seq)
	}
	removed := 0
	for _, g := range slices.Sorted(maps.Keys(through)) {
		var n int
		if err := UpdateGroup(ctx, c, g, workflows.UpdateInboxClear, workflows.InboxClear{Through: through[g]}, &n); err != nil {
			return removed, err
		}
		removed += n
	}
	return removed, nil
}

// StopGroup stops every session of a group that is not stopped yet, in
// name order, and says what each let go of, by session name.
func StopGroup(ctx context.Context, c client.Client, group string) (map[string]Stopped, error) {
	v, err := GetGroup(ctx, c, group)
	if err != nil {
		return nil, err
	}
	out := map[string]Stopped{}
	for _, name := range v.Sessions {
		if slices.Contains(v.Stopped, name) {
			continue
		}
		res, err := Stop(ctx, c, group, name)
		var refused *RefusedError
		if errors.As(err, &refused) || IsNotFound(err) {
			continue // stopped meanwhile, or never started
		}
		if err != nil {
			return out, err
		}
		out[name] = res
	}
	if len(out) == 0 {
		return nil, &RefusedError{Message: "every session of group " + group + " is already stopped"}
	}
	return out, nil
}

// Start brings a stopped session back where it was: the same conversation,
// or with fresh a fresh one by handoff. A session that is not stopped is a
// *RefusedError.
func Start(ctx context.Context, c client.Client, group, name string, fresh bool) error {
	v, err := GetSession(ctx, c, group, name)
	if err != nil {
		return err
	}
	if v.Status != workflows.StatusStopped {
		return &RefusedError{Message: group + "/" + name + " is not stopped (it is " + v.Status + ")"}
	}
	return UpdateGroup(ctx, c, group, workflows.UpdateStartSession, workflows.SessionStart{Session: name, Fresh: fresh}, nil)
}

// StartGroup starts every stopped session of a group again, in name order,
// as Start does; it returns their names. A group with none stopped is a
// *RefusedError.
func StartGroup(ctx context.Context, c client.Client, group string, fresh bool) ([]string, error) {
	v, err := GetGroup(ctx, c, group)
	if err != nil {
		return nil, err
	}
	var started []string
	for _, name := range v.Sessions {
		if !slices.Contains(v.Stopped, name) {
			continue
		}
		err := Start(ctx, c, group, name, fresh)
		var refused *RefusedError
		if errors.As(err, &refused) || IsNotFound(err) {
			continue // started meanwhile, or never started at all
		}
		if err != nil {
			return started, err
		}
		started = append(started, name)
	}
	if len(started) == 0 {
		return nil, &RefusedError{Message: "no session of group " + group + " is stopped"}
	}
	return started, nil
}

// ForgetReason is why a forgotten group's workflows ended, as Temporal
// keeps it in their histories.
const ForgetReason = "forgotten with nid forget: the group left nid.yaml and every session was stopped"

// Forget ends the workflows of a group whose sessions are all stopped, so
// that it leaves nid ls, nid board and the group listings; their histories
// stay in Temporal, closed, for as long as its namespace keeps them. It
// needs no worker: what it checks is in visibility. A session that is not
// stopped is a *RefusedError naming it. It returns the sessions it ended.
func Forget(ctx context.Context, c client.Client, group string) ([]string, error) {
	groups, err := ListGroups(ctx, c)
	if err != nil {
		return nil, &UnavailableError{Who: "Temporal", Err: err}
	}
	if !slices.Contains(groups, group) {
		return nil, &NotFoundError{Kind: "group", Ref: group, Message: GroupMissing(group, groups).Error()}
	}
	sessions, err := ListSessions(ctx, c, group)
	if err != nil {
		return nil, &UnavailableError{Who: "Temporal", Err: err}
	}
	var running []string
	for _, s := range sessions {
		if s.Status != workflows.StatusStopped {
			running = append(running, s.Ref()+" ("+s.Status+")")
		}
	}
	if len(running) > 0 {
		return nil, &RefusedError{Message: fmt.Sprintf("group %s still runs %s: nid stop %s stops its sessions, then nid forget %s forgets it",
			group, strings.Join(running, ", "), group, group)}
	}
	var ended []string
	for _, s := range sessions {
		if err := c.TerminateWorkflow(ctx, workflows.SessionID(group, s.Name), "", ForgetReason); err != nil && !IsNotFound(err) {
			return ended, &UnavailableError{Who: "Temporal", Err: err}
		}
		ended = append(ended, s.Name)
	}
	if err := c.TerminateWorkflow(ctx, workflows.GroupID(group), "", ForgetReason); err != nil && !IsNotFound(err) {
		return ended, &UnavailableError{Who: "Temporal", Err: err}
	}
	return ended, nil
}

// updateWorkflow sends update to workflow id, resent while the server is
// unreachable, and decodes its answer into out; sent says whether the
// workflow took the update, so that an error is its refusal rather than
// why it could not be reached.
func updateWorkflow(ctx context.Context, c client.Client, id, update string, arg, out any) (sent bool, err error) {
	err = Resend(ctx, func() error {
		handle, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
			WorkflowID:   id,
			UpdateName:   update,
			Args:         []any{arg},
			WaitForStage: client.WorkflowUpdateStageCompleted,
		})
		if sent = err == nil; sent {
			err = handle.Get(ctx, out)
		}
		return err
	})
	return sent, err
}
