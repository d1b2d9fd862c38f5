package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"go.temporal.io/sdk/client"

	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/nidclient"
	"github.com/nid-dev/nid/worker"
	"github.com/nid-dev/nid/workflows"
)

type showOptions struct {
	Group, Name string
	JSON        bool
	Color       bool
	// Now is the time "ago" is measured to.
	Now time.Time
}

func newShowCommand(a *app) *cli.Command {
	return &cli.Command{
		Name:      "show",
		Usage:     "Show one session: its context and threshold, conversation, host, work and what it does next",
		ArgsUsage: "GROUP/SESSION",
		Flags:     []cli.Flag{jsonFlag()},
		Description: "Asks the session itself, so it is never behind (nid ls reads Temporal's listing,\n" +
			"which a session in back-to-back turns updates at most once a second): its\n" +
			"status and host, how full its context is and where it rotates, its turns and\n" +
			"rotations, its conversation, what comes next (a rotation asked for or running,\n" +
			"a handoff written, the policy halted), its queued messages, the task and locks it\n" +
			"holds, its worktree and branch, and its workflow's id in the Temporal Web UI.\n" +
			"--json prints the whole view, as the API's session.get answers it (without the\n" +
			"Web UI link). With no worker running to answer, it shows what nid ls keeps of\n" +
			"the session (status, host, context, turns, rotations) and says so on stderr.",
		Action: action(func(cCtx *cli.Context) error {
			args, err := commandArgs(cCtx)
			if err != nil {
				return err
			}
			if len(args) != 1 {
				return fmt.Errorf("nid show takes one GROUP/SESSION, e.g. nid show web/lead (got %d arguments)", len(args))
			}
			group, name, err := workflows.ParseSessionRef(args[0])
			if err != nil {
				return err
			}
			opts := showOptions{Group: group, Name: name, JSON: cCtx.Bool("json"), Color: a.color(a.Stdout), Now: time.Now()}
			return a.withClient(cCtx, func(ctx context.Context, c client.Client) error {
				return runShow(ctx, c, opts, a.Stdout, a.Stderr)
			})
		}),
	}
}

func runShow(ctx context.Context, c client.Client, opts showOptions, stdout, stderr io.Writer) error {
	v, err := nidclient.GetSession(ctx, c, opts.Group, opts.Name)
	if un := (*nidclient.UnavailableError)(nil); errors.As(err, &un) && un.NoWorker != "" && !opts.JSON {
		if shown, err := showListed(ctx, c, opts, un.NoWorker, stdout, stderr); shown {
			return err
		}
	}
	if err != nil {
		return err
	}
	id := workflows.SessionID(v.Group, v.Name)
	if opts.JSON {
		return writeJSON(stdout, worker.SessionAnswer{SessionView: v, WorkflowID: id})
	}
	cr := v.Context
	agent := v.Agent
	if cr.Model != "" {
		agent += ", model " + cr.Model
	}
	threshold := rotatesAt(v.Policy, cr)
	conversation := "none yet"
	switch {
	case v.Conversation == "":
	case v.Generation == 0:
		conversation = v.Conversation + " (the session's first)"
	default:
		conversation = fmt.Sprintf("%s (after %s)", v.Conversation, plural(v.Generation, "handoff"))
	}
	rows := [][]string{
		{"session", v.Group + "/" + v.Name},
		{"agent", agent},
		{"status", showStatus(v, opts.Now)},
		{"host", hostText(v.Host)},
		{"context", showContext(cr, opts.Color)},
		{"rotates at", threshold},
		{"turns", fmt.Sprintf("%d in all, %d since the last rotation", cr.TotalTurns, cr.Turns)},
		{"rotations", showRotations(cr, opts.Now)},
		{"conversation", conversation},
		{"next", showNext(v)},
		{"queued", showQueued(v)},
		{"task", showTask(v.Task)},
		{"locks", cmpOr(strings.Join(v.Locks, ", "), "none")},
		{"worktree", showWorktree(v)},
	}
	// Where the agent works sits beside the worktree it works in.
	if v.WorkDir != "" && v.WorkDir != v.Worktree {
		rows = append(rows, []string{"workdir", v.WorkDir})
	}
	rows = append(rows, []string{"workflow", id})
	if h := v.LastHandback; h != nil {
		rows = append(rows, []string{"last hand-back", h.Until.Local().Format(time.DateTime) + ": " + h.Text()})
	}
	if v.LastOutput != "" {
		rows = append(rows, []string{"last output", oneLine(v.LastOutput, 200)})
	}
	for _, row := range rows {
		// The context cell may carry the colour nid ls gives it; every
		// other cell is the session's, agent's or user's text.
		if row[0] != "context" {
			row[1] = printable(row[1], true)
		}
	}
	return writeTable(stdout, rows)
}

// showListed shows what a session's listing keeps of it, for when no
// worker runs it to answer: its status, host and context record as it
// last wrote them. shown is false when the listing has no such session.
func showListed(ctx context.Context, c client.Client, opts showOptions, noWorker string, stdout, stderr io.Writer) (shown bool, err error) {
	sessions, lerr := nidclient.ListSessions(ctx, c, opts.Group)
	i := slices.IndexFunc(sessions, func(s nidclient.Session) bool { return s.Name == opts.Name })
	if lerr != nil || i < 0 {
		return false, nil
	}
	s := sessions[i]
	ref := s.Ref()
	if err := printLine(stderr, "%s, so this is what %s last wrote (nid ls's record of it): start nid up or nid worker", noWorker, ref); err != nil {
		return true, err
	}
	cr := s.Context
	rows := [][]string{
		{"session", ref},
		{"agent", s.Agent},
		{"status", s.Status},
		{"host", hostText(s.Host)},
		{"context", showContext(cr, opts.Color)},
		{"turns", fmt.Sprintf("%d in all, %d since the last rotation", cr.TotalTurns, cr.Turns)},
		{"rotations", showRotations(cr, opts.Now)},
		{"workflow", workflows.SessionID(s.Group, s.Name)},
	}
	for _, row := range rows {
		if row[0] != "context" {
			row[1] = printable(row[1], true)
		}
	}
	return true, writeTable(stdout, rows)
}

// rotatesAt says when a session's policy rotates it: never by itself when
// the group's mode is off, whatever threshold its window gives.
func rotatesAt(p config.Rotate, cr workflows.ContextRecord) string {
	switch {
	case p.Mode == config.ModeOff:
		return rotateOff
	case cr.Threshold == nil:
		return "unknown until the agent reports its window"
	}
	return cr.Threshold.Text(cr.WindowTokens)
}

// rotateOff is what nid says of a session whose group's rotate mode is
// off.
const rotateOff = "never by the policy: rotate mode is off (nid rotate, the agent's handoff_write or a full window still rotate)"

func showStatus(v workflows.SessionView, now time.Time) string {
	s := v.Status
	if a := v.Attach; a != nil {
		s += fmt.Sprintf(" by %s since %s (%s ago)", a.Who, a.Since.Local().Format(time.TimeOnly), now.Sub(a.Since).Round(time.Second))
		switch {
		case a.WaitingForTurn > 0:
			s += fmt.Sprintf(", waiting for turn %d to end", a.WaitingForTurn)
		case !a.Ready:
			s += ", waiting for its agent to close"
		}
	}
	if v.HostDown {
		s += fmt.Sprintf(" (host %s is down: it waits for it)", v.Host)
	}
	if v.Moving != "" {
		s += ", moving to " + v.Moving
	}
	return s
}

func showContext(cr workflows.ContextRecord, color bool) string {
	if cr.Percent == nil {
		if cr.UsedTokens > 0 {
			return formatTokens(cr.UsedTokens) + " used of a window not known (" + cr.Source + ")"
		}
		return "— (the agent reports no numbers)"
	}
	return fmt.Sprintf("%s, %s used (%s)", percentText(cr, color), formatTokens(cr.UsedTokens), cr.Source)
}

func showRotations(cr workflows.ContextRecord, now time.Time) string {
	s := fmt.Sprint(cr.Rotations)
	if r := cr.LastRotation; r != nil {
		s += fmt.Sprintf("; the last %s at %s, %s ago", r.Text(), r.At.Local().Format(time.DateTime), now.Sub(r.At).Round(time.Second))
	}
	return s
}

// showNext says what the session does at its next turn boundary, other
// than taking a turn.
func showNext(v workflows.SessionView) string {
	var next []string
	if r := v.Rotating; r != nil {
		next = append(next, "rotating now: "+rotateText(r))
	}
	if r := v.PendingRotate; r != nil {
		next = append(next, "a rotation asked for: "+rotateText(r))
	}
	if v.HandoffPending {
		next = append(next, "the agent wrote its handoff: it hands off")
	}
	if v.ContextFull {
		next = append(next, "the vendor refused a turn as too long for its window: it hands off")
	}
	if v.HandoffNext {
		next = append(next, "the policy's next rotation is a handoff, a compaction having not helped")
	}
	if v.PolicyHalted != "" {
		next = append(next, "the policy no longer rotates it ("+v.PolicyHalted+"); nid rotate still does")
	}
	return cmpOr(strings.Join(next, "; "), "—")
}

func rotateText(r *workflows.RotateRequest) string {
	mode := cmpOr(r.Mode, "the group's mode")
	if r.Reason == "" {
		return mode
	}
	return mode + " (" + r.Reason + ")"
}

func showQueued(v workflows.SessionView) string {
	if v.QueuedMessages == 0 {
		return "no messages"
	}
	return fmt.Sprintf("%s (%d bytes)", plural(v.QueuedMessages, "message"), v.QueuedBytes)
}

func showTask(t *workflows.Task) string {
	if t == nil {
		return "none"
	}
	return t.ID + ": " + t.Title
}

func showWorktree(v workflows.SessionView) string {
	switch {
	case v.Worktree == "" && v.Context.TotalTurns == 0:
		return "none yet (made before its first turn when its group has a repo)"
	case v.Worktree == "":
		return "none (its group has no repo)"
	}
	if v.Branch == "" {
		return v.Worktree
	}
	return v.Worktree + " (branch " + v.Branch + ")"
}
