package worker

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/nidclient"
	"github.com/nid-dev/nid/workflows"
)

// nid.yaml is the truth for who is in a team: applying it to running groups
// (nid up, a running nid on SIGHUP or nid reload) starts what is new,
// changes what changed and stops the sessions that left it. PlanGroups says
// what that changes without changing anything, so nid up --dry-run and nid
// reload can print it; StartGroups and StopRemoved carry it out.

// Change is one thing applying a configuration does to running groups.
type Change struct {
	Group   string `json:"group"`
	Session string `json:"session,omitempty"`
	Text    string `json:"text"`
	// Stop says the change stops the session (it left the file).
	Stop bool `json:"stop,omitempty"`
}

// Plan is what applying a configuration changes, in group and session
// order.
type Plan struct {
	Changes []Change `json:"changes"`
	// Attention are the checks of the file's sessions that failed when it
	// was applied (see SessionChecks): each such session's first turn
	// stops there, and it waits in needs-attention with the check's words
	// in the inbox.
	Attention []agents.Check `json:"attention,omitempty"`
}

// Lines are the plan's changes as sentences, then what needs attention.
func (p Plan) Lines() []string {
	var out []string
	for _, c := range p.Changes {
		out = append(out, c.Text)
	}
	if len(out) == 0 {
		out = append(out, "nothing to change: the running groups are as the file says")
	}
	return append(out, p.AttentionLines()...)
}

// AttentionLines say which sessions cannot start, and why.
func (p Plan) AttentionLines() []string {
	var out []string
	for _, c := range p.Attention {
		out = append(out, c.Session+" cannot start: "+c.Text+"; it waits in needs-attention (nid doctor checks this host)")
	}
	return out
}

// leftTheFile is why nid stops a session that left nid.yaml.
const leftTheFile = "it left nid.yaml"

// PlanGroups compares cfg with the running groups and sessions and says
// what applying it changes. prev is the configuration the worker runs now,
// for the agent settings only it holds (nil: unknown). With keepRemoved a
// session that left the file is left running, and the plan says so.
func PlanGroups(ctx context.Context, c client.Client, cfg, prev *config.Config, keepRemoved bool) (Plan, error) {
	var p Plan
	add := func(group, session, format string, args ...any) {
		p.Changes = append(p.Changes, Change{Group: group, Session: session, Text: fmt.Sprintf(format, args...)})
	}
	running, err := nidclient.ListGroups(ctx, c)
	if err != nil {
		return p, err
	}
	for _, name := range cfg.GroupNames() {
		g := cfg.Groups[name]
		if !slices.Contains(running, name) {
			add(name, "", "%s", startText(name, g))
			continue
		}
		view, err := patiently(ctx, func(ctx context.Context) (workflows.GroupView, error) { return nidclient.GetGroup(ctx, c, name) })
		if err != nil {
			return p, err
		}
		if view.Goal != g.Goal {
			add(name, "", "%s: goal %q → %q", name, view.Goal, g.Goal)
		}
		if line := settingChange(name, "rotate", rotateFields(view.Policy), rotateFields(view.FilePolicy), rotateFields(g.Rotate)); line != "" {
			add(name, "", "%s", line)
		}
		if line := settingChange(name, "budget", budgetFields(view.Board.Budget), budgetFields(view.FileBudget), budgetFields(g.Budget)); line != "" {
			add(name, "", "%s", line)
		}
		if g.Prompts.WithDefaults() != view.Board.Prompts {
			add(name, "", "%s: prompts changed", name)
		}
		for _, t := range g.Tasks {
			if !slices.ContainsFunc(view.Board.Tasks, func(have workflows.Task) bool { return have.Title == t.Title }) {
				add(name, "", "%s: add task %q", name, t.Title)
			}
		}
		for _, s := range g.Sessions {
			ref := name + "/" + s.Name
			if !slices.Contains(view.Sessions, s.Name) {
				add(name, s.Name, "start session %s (%s)", ref, s.Agent)
				continue
			}
			if slices.Contains(view.Stopped, s.Name) {
				continue // stopped by hand: nid start brings it back
			}
			sv, err := patiently(ctx, func(ctx context.Context) (workflows.SessionView, error) {
				return nidclient.GetSession(ctx, c, name, s.Name)
			})
			if err != nil {
				continue // not started yet: StartGroups starts it
			}
			if want := AgentSpec(cfg, name, s); want != sv.Spec {
				add(name, s.Name, "%s: agent %s → %s", ref, specText(sv.Spec), specText(want))
			} else if prev != nil && !sameAgent(prev, cfg, name, s.Name) {
				add(name, s.Name, "%s: agent settings changed (command, arguments, environment, model or permissions): from its next turn", ref)
			}
		}
		for _, s := range view.Sessions {
			if _, ok := cfg.Session(name, s); !ok && !slices.Contains(view.Stopped, s) {
				p.removed(name, s, keepRemoved)
			}
		}
	}
	for _, name := range running {
		if _, ok := cfg.Groups[name]; ok {
			continue
		}
		view, err := nidclient.GetGroup(ctx, c, name)
		if err != nil {
			continue // it ended meanwhile
		}
		for _, s := range view.Sessions {
			if !slices.Contains(view.Stopped, s) {
				p.removed(name, s, keepRemoved)
			}
		}
	}
	return p, nil
}

// field is one setting of a group's rotate policy or budget, as the plan
// names it.
type field struct{ name, value string }

func rotateFields(r config.Rotate) []field {
	turns, tokens, concurrent := "never", "none", "unlimited"
	if r.MaxTurns > 0 {
		turns = fmt.Sprint(r.MaxTurns)
	}
	if r.ContextTokens > 0 {
		tokens = fmt.Sprint(r.ContextTokens)
	}
	if r.MaxConcurrentRotations > 0 {
		concurrent = fmt.Sprint(r.MaxConcurrentRotations)
	}
	return []field{{"mode", r.Mode}, {"contextPercent", fmt.Sprint(r.ContextPercent)}, {"contextTokens", tokens},
		{"maxTurns", turns}, {"maxConcurrentRotations", concurrent}}
}

func budgetFields(b config.Budget) []field {
	limit := func(v float64, format string) string {
		if v <= 0 {
			return "no limit"
		}
		return fmt.Sprintf(format, v)
	}
	return []field{{"turns", limit(float64(b.Turns), "%.0f")}, {"tokens", limit(float64(b.Tokens), "%.0f")}, {"usd", limit(b.USD, "%.2f")}}
}

// settingChange says what applying the file does to one setting of a
// running group (rotate or budget), field by field from what runs to what
// the file says: the group takes the file's value only when the file
// changed it since it was last applied (lastFile), so that a nid group set
// survives restarts; a value set that way is named, whether the file
// replaces it or leaves it. "" when nothing differs.
func settingChange(group, setting string, running, lastFile, file []field) string {
	applies := !slices.Equal(file, lastFile)
	var changes, replaced, kept []string
	for i, f := range file {
		run := running[i]
		bySet := run.value != lastFile[i].value // nid group set made it differ from the file
		switch {
		case run.value == f.value:
		case applies:
			changes = append(changes, fmt.Sprintf("%s %s → %s", f.name, run.value, f.value))
			if bySet {
				replaced = append(replaced, f.name+" "+run.value)
			}
		case bySet:
			kept = append(kept, fmt.Sprintf("%s %s (the file says %s)", f.name, run.value, f.value))
		}
	}
	var line string
	if len(changes) > 0 {
		line = fmt.Sprintf("%s: %s %s", group, setting, strings.Join(changes, ", "))
		if len(replaced) > 0 {
			line += "; replaces what nid group set set: " + strings.Join(replaced, ", ")
		}
	}
	if len(kept) > 0 {
		if line != "" {
			line += "; "
		} else {
			line = group + ": "
		}
		line += fmt.Sprintf("%s keeps what nid group set set: %s; the file's %s applies when the file changes it",
			setting, strings.Join(kept, ", "), setting)
	}
	return line
}

// answerPatience is how long applying the file waits for a running workflow
// to answer. After a kill -9 a workflow whose task the killed worker had
// taken answers only once that task times out and this worker has replayed
// its history: on a busy host, longer than one query may take.
const answerPatience = 2 * time.Minute

// patiently runs get until the workflow answers, it is not found, or
// answerPatience has passed.
func patiently[V any](ctx context.Context, get func(context.Context) (V, error)) (V, error) {
	deadline := time.Now().Add(answerPatience)
	for {
		v, err := get(ctx)
		var silent *nidclient.UnavailableError
		if err == nil || !errors.As(err, &silent) || !time.Now().Before(deadline) {
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, err
		case <-time.After(time.Second):
		}
	}
}

// removed plans what happens to a session that left the file.
func (p *Plan) removed(group, session string, keep bool) {
	ref := group + "/" + session
	if keep {
		p.Changes = append(p.Changes, Change{Group: group, Session: session,
			Text: ref + " left nid.yaml and keeps running (--keep-removed); nid stop " + ref + " stops it"})
		return
	}
	p.Changes = append(p.Changes, Change{Group: group, Session: session, Stop: true,
		Text: "stop " + ref + ": " + leftTheFile + " (its claims and locks go back to the board)"})
}

// StopRemoved stops the sessions the plan stops, saying why in their feed
// and the inbox.
func StopRemoved(ctx context.Context, c client.Client, p Plan) error {
	for _, ch := range p.Changes {
		if !ch.Stop {
			continue
		}
		// Right after a restart the session may not answer yet: the
		// workflow task the stopped worker had taken holds its queries
		// until that task times out.
		_, err := patiently(ctx, func(ctx context.Context) (nidclient.Stopped, error) {
			return nidclient.StopWhy(ctx, c, ch.Group, ch.Session, leftTheFile)
		})
		if err != nil && !nidclient.IsNotFound(err) && !stoppedBy(ctx, c, ch, err) {
			return fmt.Errorf("stopping %s/%s: %w", ch.Group, ch.Session, err)
		}
	}
	return nil
}

// stoppedBy says err is a refusal because the session is stopped already:
// an earlier attempt whose answer did not come back stopped it, or someone
// did by hand meanwhile. Either way it is what the plan wanted.
func stoppedBy(ctx context.Context, c client.Client, ch Change, err error) bool {
	var refused *nidclient.RefusedError
	if !errors.As(err, &refused) {
		return false
	}
	v, qerr := nidclient.GetSession(ctx, c, ch.Group, ch.Session)
	return qerr == nil && v.Status == workflows.StatusStopped
}

// PlanStart is what nid up would start when nothing runs yet: every group
// of cfg.
func PlanStart(cfg *config.Config) Plan {
	var p Plan
	for _, name := range cfg.GroupNames() {
		p.Changes = append(p.Changes, Change{Group: name, Text: startText(name, cfg.Groups[name])})
	}
	return p
}

func startText(name string, g config.Group) string {
	return fmt.Sprintf("start group %s with sessions %s", name, strings.Join(sessionNames(g), ", "))
}

func sessionNames(g config.Group) []string {
	names := make([]string, len(g.Sessions))
	for i, s := range g.Sessions {
		names[i] = s.Name
	}
	return names
}

// specText says what a session's workflow carries of its agent.
func specText(s agents.AgentSpec) string {
	text := s.Kind
	if s.Kind == agents.KindSim {
		text += fmt.Sprintf(" (window %s, %s a turn, %s per turn)", workflows.TokensText(s.Sim.Window), workflows.TokensText(s.Sim.TokensPerTurn), s.Sim.TurnDelay.D())
	}
	if s.TurnTimeout > 0 {
		text += fmt.Sprintf(" (turns time out after %s)", s.TurnTimeout.D())
	}
	return text
}

// sameAgent says a session's agent runs the same under both
// configurations.
func sameAgent(a, b *config.Config, group, session string) bool {
	sa, oka := a.AgentFor(group, session)
	sb, okb := b.AgentFor(group, session)
	if oka != okb {
		return false
	}
	return reflect.DeepEqual(sa, sb)
}
