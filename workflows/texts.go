package workflows

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"go.temporal.io/sdk/temporal"

	"github.com/nid-dev/nid/activities"
	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/config"
)

// Every text nid's workflows write for agents and humans: prompts, the fresh
// conversation's first message, the policy, budget and board as printed,
// and errors as a human should read them.

// PolicyText renders a rotate policy the way nid prints it everywhere.
func PolicyText(r config.Rotate) string {
	turns := "never"
	if r.MaxTurns > 0 {
		turns = fmt.Sprint(r.MaxTurns)
	}
	s := fmt.Sprintf("mode=%s contextPercent=%d", r.Mode, r.ContextPercent)
	if r.ContextTokens > 0 {
		s += fmt.Sprintf(" contextTokens=%d", r.ContextTokens)
	}
	s += " maxTurns=" + turns
	if r.MaxConcurrentRotations != config.DefaultMaxConcurrentRotations {
		concurrent := "unlimited"
		if r.MaxConcurrentRotations > 0 {
			concurrent = fmt.Sprint(r.MaxConcurrentRotations)
		}
		s += " maxConcurrentRotations=" + concurrent
	}
	return s
}

// briefing is the first prompt of a session from before VersionTeam; later
// ones take the group's prompt templates (config.Prompts).
func briefing(group, name, goal string) string {
	return fmt.Sprintf("You are session %s/%s of the nid group %q.\nGoal: %s\nWork toward the goal. When your context feels cluttered, call the handoff_write tool with a self-contained handoff.", group, name, group, goal)
}

func continuePrompt(goal string) string {
	return "Continue working toward the goal: " + goal
}

// TokensText writes a token count the way people say it: 999, 1.5k, 200k,
// 258.4k, 1M.
func TokensText(n int64) string {
	if n < 1000 {
		return strconv.FormatInt(n, 10)
	}
	// Rounded to tenths of a thousand, in integers so 1250 is always 1.3k.
	if tenths := (n + 50) / 100; tenths < 10_000 {
		return tenthsText(tenths) + "k"
	}
	return tenthsText((n+50_000)/100_000) + "M"
}

func tenthsText(tenths int64) string {
	if tenths%10 == 0 {
		return strconv.FormatInt(tenths/10, 10)
	}
	return fmt.Sprintf("%d.%d", tenths/10, tenths%10)
}

// ErrorText is an error's own message, without the wrapping an activity,
// child workflow or refused update adds on its way: what a human should read.
func ErrorText(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.Message()
	}
	return err.Error()
}

// HandoffRequestPrompt is the turn that asks an agent for its handoff.
const HandoffRequestPrompt = "nid is rotating your conversation: you will continue in a fresh one. " +
	"Call the handoff_write tool now with a self-contained handoff: the tasks you hold, what is done, " +
	"the next steps, decisions made and gotchas. Your fresh conversation starts from it and nothing else."

// FreshMessage is the first message of a conversation started by a handoff
// from summary, as a session before VersionVouchedHandoff wrote it: the
// handoff (or, said plainly, the last output standing in for one) and the
// board.
func FreshMessage(ref agents.SessionRef, reason, summary, source, board string) string {
	return Fresh{Ref: ref, Reason: reason, Summary: summary, Source: source, Board: board}.Text()
}

// Fresh is what the first message of a conversation started by a handoff
// says: the handoff and where it came from, what nid reads of the work
// itself, what the session holds, the board, and (Ack) the request to
// acknowledge what it resumes.
type Fresh struct {
	Ref                     agents.SessionRef
	Reason, Summary, Source string
	Board                   string
	Facts                   *activities.Facts
	Tasks, Locks            []string
	Ack                     bool
}

// Text is the message.
func (f Fresh) Text() string {
	var b strings.Builder
	b.WriteString(fmt.Sprintf("You are session %s/%s. nid rotated your conversation (handoff, reason: %s); you keep the same session, worktree, branch, tasks and locks.\n\n", f.Ref.Group, f.Ref.Name, f.Reason))
	switch f.Source {
	case SummaryFromLastOutput:
		b.WriteString("Your previous conversation wrote no handoff. Its last output stands in for one:\n")
	case SummaryFromNid:
		b.WriteString("Your previous conversation could not write a handoff. nid wrote this one from its transcript:\n")
	default:
		b.WriteString("Handoff from your previous conversation:\n")
	}
	summary := f.Summary
	if strings.TrimSpace(summary) == "" {
		summary = "(nothing: the previous conversation produced no output)"
	}
	b.WriteString(summary)
	if f.Facts != nil {
		b.WriteString("\n\nWhat nid reads of your work now (facts, not the handoff's words):\n")
		b.WriteString(f.Facts.Text())
	}
	if f.Tasks != nil || f.Locks != nil || f.Ack {
		b.WriteString(fmt.Sprintf("\n\nYou hold %s and %s.", heldText(f.Tasks), locksText(f.Locks)))
	}
	b.WriteString("\n\nThe board (what board_read shows):\n")
	b.WriteString(f.Board)
	if f.Ack {
		b.WriteString("\n" + agents.AckRequest(f.Tasks))
	}
	return b.String()
}

func locksText(locks []string) string {
	if len(locks) == 0 {
		return "no lock"
	}
	return "the locks " + strings.Join(locks, ", ")
}

// BudgetText renders a budget's limits and what is spent and left:
// "turns 40 of 60 spent (20 left), tokens 512000 spent (no limit), ...".
func BudgetText(b config.Budget, s Spend) string {
	part := func(name string, limit, spent float64, format string) string {
		if limit <= 0 {
			return fmt.Sprintf("%s "+format+" spent (no limit)", name, spent)
		}
		return fmt.Sprintf("%s "+format+" of "+format+" spent (%s left)", name, spent, limit, fmt.Sprintf(format, max(limit-spent, 0)))
	}
	return strings.Join([]string{
		part("turns", float64(b.Turns), float64(s.Turns), "%.0f"),
		part("tokens", float64(b.Tokens), float64(s.Tokens), "%.0f"),
		part("usd", b.USD, s.USD, "%.2f"),
	}, ", ")
}

// BoardText is what board_read shows and what a fresh conversation's first
// message carries: the goal, each task with its status and holder, the
// locks, and which of them are session's ("" for nobody's view).
func BoardText(v BoardView, session string) string {
	var b strings.Builder
	b.WriteString("Board of group " + v.Group + "\n")
	if v.Goal != "" {
		b.WriteString("Goal: " + v.Goal + "\n")
	}
	switch {
	case len(v.Tasks) == 0 && v.Open > 0:
		b.WriteString("Tasks: none yours.\n")
	case len(v.Tasks) == 0 && v.Others > 0:
		b.WriteString("Tasks: none open.\n")
	case len(v.Tasks) == 0:
		b.WriteString("Tasks: none on the board.\n")
	default:
		b.WriteString("Tasks:\n")
		for _, t := range v.Tasks {
			line := fmt.Sprintf("  %s [%s] %s", t.ID, t.Status, t.Title)
			if t.Holder != "" && t.Status == TaskClaimed {
				line += " (claimed by " + t.Holder + ")"
			}
			if session != "" && t.Holder == session && t.Status == TaskClaimed {
				line += " <- yours"
			}
			b.WriteString(line + "\n")
		}
	}
	if v.Others > 0 {
		b.WriteString(fmt.Sprintf("  (and %d claimed or done by other sessions: board_read lists them)\n", v.Others))
	}
	if v.Open > 0 {
		b.WriteString(fmt.Sprintf("  (and %d open: board_read lists them)\n", v.Open))
	}
	if len(v.Locks) == 0 {
		b.WriteString("Locks: none held.\n")
	} else {
		b.WriteString("Locks:\n")
		for _, l := range v.Locks {
			line := fmt.Sprintf("  %s (held by %s)", l.Name, l.Holder)
			if session != "" && l.Holder == session {
				line += " <- yours"
			}
			b.WriteString(line + "\n")
		}
	}
	if v.Exhausted != "" {
		b.WriteString("Budget: exhausted (" + v.Exhausted + "); no new turns until it is raised.\n")
	}
	return b.String()
}
