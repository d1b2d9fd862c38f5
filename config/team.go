package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
)

// Task is a task on a group's board, as nid.yaml seeds it.
type Task struct {
	Title  string `koanf:"title" json:"title"`
	Detail string `koanf:"detail" json:"detail,omitempty"`
}

// Budget limits what a group may spend; a zero limit is no limit. Every
// turn, a rotation's turns included, is charged to the group.
type Budget struct {
	Turns  int64   `koanf:"turns" json:"turns,omitempty"`
	Tokens int64   `koanf:"tokens" json:"tokens,omitempty"`
	USD    float64 `koanf:"usd" json:"usd,omitempty"`
}

// Prompts are the templates of what a session is told. Placeholders:
// {{group}}, {{session}}, {{goal}}, {{task.id}}, {{task.title}},
// {{task.detail}}, {{board}}.
type Prompts struct {
	// Task starts work on a task the session just claimed.
	Task string `koanf:"task" json:"task,omitempty"`
	// Continue is each later turn while the task is open.
	Continue string `koanf:"continue" json:"continue,omitempty"`
	// Goal briefs a session of a group whose board has no tasks.
	Goal string `koanf:"goal" json:"goal,omitempty"`
	// GoalContinue is each later turn on such a group.
	GoalContinue string `koanf:"goalContinue" json:"goalContinue,omitempty"`
}

// WithDefaults fills each empty template with its default.
func (p Prompts) WithDefaults() Prompts {
	d := DefaultPrompts()
	for _, f := range []struct {
		v   *string
		def string
	}{
		{&p.Task, d.Task}, {&p.Continue, d.Continue}, {&p.Goal, d.Goal}, {&p.GoalContinue, d.GoalContinue},
	} {
		if strings.TrimSpace(*f.v) == "" {
			*f.v = f.def
		}
	}
	return p
}

// PromptPlaceholders lists what a prompt template may contain.
func PromptPlaceholders() []string {
	return []string{"{{group}}", "{{session}}", "{{goal}}", "{{task.id}}", "{{task.title}}", "{{task.detail}}", "{{board}}"}
}

// DefaultPrompts are the templates of a group that sets none. The sim
// agent finds its task id in "task <id>".
func DefaultPrompts() Prompts {
	return Prompts{
		Task: "You are session {{group}}/{{session}} of the nid group {{group}}.\nGoal: {{goal}}\n\n" +
			"Your task: task {{task.id}}: {{task.title}}\n{{task.detail}}\n\n{{board}}\n" +
			"Work on your task. When it is done, call task_done with id {{task.id}}. " +
			"Take a lock (lock_acquire) before changing what others might change. " +
			"When your context feels cluttered, call handoff_write with a self-contained handoff; " +
			"context_status shows how full your context is and when nid rotates it.",
		Continue: "Continue with task {{task.id}}: {{task.title}}. When it is done, call task_done with id {{task.id}}.",
		Goal: "You are session {{group}}/{{session}} of the nid group {{group}}.\nGoal: {{goal}}\n" +
			"Work toward the goal. When your context feels cluttered, call the handoff_write tool with a self-contained handoff; " +
			"context_status shows how full your context is and when nid rotates it.",
		GoalContinue: "Continue working toward the goal: {{goal}}",
	}
}

// RenderPrompt fills a template's placeholders from key, value pairs (keys
// without the braces, e.g. "task.id", "t3"). It is deterministic, so
// workflows may call it.
func RenderPrompt(template string, pairs ...string) string {
	replace := make([]string, 0, len(pairs))
	for i := 0; i+1 < len(pairs); i += 2 {
		replace = append(replace, "{{"+pairs[i]+"}}", pairs[i+1])
	}
	return strings.TrimSpace(strings.NewReplacer(replace...).Replace(template))
}

func (p Prompts) problems(path string) []problem {
	var ps []problem
	for _, f := range []struct{ key, text string }{
		{"task", p.Task}, {"continue", p.Continue}, {"goal", p.Goal}, {"goalContinue", p.GoalContinue},
	} {
		if strings.TrimSpace(f.text) == "" {
			continue // the default
		}
		rest := f.text
		for _, ph := range PromptPlaceholders() {
			rest = strings.ReplaceAll(rest, ph, "")
		}
		if i := strings.Index(rest, "{{"); i >= 0 {
			end := strings.Index(rest[i:], "}}")
			bad := rest[i:]
			if end >= 0 {
				bad = rest[i : i+end+2]
			}
			ps = append(ps, problem{path + "." + f.key, fmt.Sprintf("%s is not a placeholder (allowed: %s)", bad, strings.Join(PromptPlaceholders(), ", "))})
		}
	}
	return ps
}

func (b Budget) problems(path string) []problem {
	var ps []problem
	if b.Turns < 0 {
		ps = append(ps, problem{join(path, "turns"), fmt.Sprintf("%d must be 0 (no limit) or more", b.Turns)})
	}
	if b.Tokens < 0 {
		ps = append(ps, problem{join(path, "tokens"), fmt.Sprintf("%d must be 0 (no limit) or more", b.Tokens)})
	}
	switch {
	case math.IsNaN(b.USD) || math.IsInf(b.USD, 0):
		// YAML's .nan and .inf parse as floats, but no budget is spent
		// against them and JSON, which carries the budget to the group,
		// cannot encode them.
		ps = append(ps, problem{join(path, "usd"), fmt.Sprintf("%g is not an amount of dollars (0: no limit)", b.USD)})
	case b.USD < 0:
		ps = append(ps, problem{join(path, "usd"), fmt.Sprintf("%g must be 0 (no limit) or more", b.USD)})
	}
	return ps
}

// Validate reports what is wrong with b.
func (b Budget) Validate() error { return joinLines(b.problems("")) }

// teamProblems checks what a group says about its repository, working
// directory and board.
func (g Group) teamProblems(path string) []problem {
	var ps []problem
	if g.Repo != "" {
		if msg := RepoProblem(g.Repo); msg != "" {
			ps = append(ps, problem{path + ".repo", msg})
		}
		if g.WorkDir != "" {
			ps = append(ps, problem{path + ".workdir", "not allowed with repo: each session works in its own worktree of the repo"})
		}
	}
	for i, t := range g.Tasks {
		if strings.TrimSpace(t.Title) == "" {
			ps = append(ps, problem{fmt.Sprintf("%s.tasks[%d].title", path, i), "must not be empty"})
		}
	}
	ps = append(ps, g.Budget.problems(path+".budget")...)
	ps = append(ps, g.Prompts.problems(path+".prompts")...)
	return ps
}

// sharedDirProblems refuses a sandboxed session that can write where an
// agent CLI of another kind works. Each vendor's sandbox keeps its own
// configuration in the working directory read-only (Claude Code's
// .claude/ and .mcp.json, Codex's .codex/), not the other's, and each CLI
// reads its own there and runs the hooks and MCP servers it names outside
// any sandbox. Sessions of a group with a repo work in worktrees of their
// own; the others share their group's workdir, or without one the
// directory nid runs in.
func (c *Config) sharedDirProblems(ks kinds) []problem {
	type seat struct {
		path, kind, dir string
		writes          bool
	}
	var seats []seat
	for _, name := range c.GroupNames() {
		g := c.Groups[name]
		if g.Repo != "" {
			continue
		}
		for i := range g.Sessions {
			s := &g.Sessions[i]
			// Kinds that can be sandboxed are vendor CLIs; an exec
			// command runs with no sandbox to escape.
			k, ok := ks.named(s.Agent)
			if !ok || !k.Process || !slices.Contains(k.Permissions, PermissionsWorkspace) {
				continue
			}
			perm, _ := c.permissions(name, s)
			seats = append(seats, seat{c.sessionPath(name, s), s.Agent, g.WorkDir, perm == PermissionsWorkspace})
		}
	}
	var ps []problem
	for _, w := range seats {
		if !w.writes {
			continue
		}
		for _, r := range seats {
			if r.kind == w.kind || !(nestedDirs(w.dir, r.dir)) {
				continue
			}
			where := "the directory nid runs in"
			if w.dir != "" {
				where = w.dir
			}
			ps = append(ps, problem{w.path, fmt.Sprintf("this %s session could write, in %s, the configuration the %s session %s reads there "+
				"(.claude/ and .mcp.json for Claude Code, .codex/ for Codex), and that CLI runs the hooks and MCP servers it names outside any sandbox: "+
				"give the group a repo, so that each session works in a worktree of its own, or keep their workdirs apart, "+
				"or set permissions: readonly or full for this session", w.kind, where, r.kind, r.path)})
			break
		}
	}
	return ps
}

// nestedDirs reports whether one of the working directories a and b is, or
// holds, the other; empty is the directory nid runs in.
func nestedDirs(a, b string) bool {
	if a == "" || b == "" {
		return a == b
	}
	return Within(a, b) || Within(b, a)
}

// Within reports whether path is dir or inside it, symbolic links resolved
// where they can be.
func Within(path, dir string) bool {
	resolve := func(p string) string {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return r
		}
		abs, _ := filepath.Abs(p)
		return abs
	}
	rel, err := filepath.Rel(resolve(dir), resolve(path))
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// repoProblems says which groups' repos are not git repositories on this
// host. Only a process that runs sessions needs them (LoadOptions.Worker).
func (c *Config) repoProblems() []problem {
	var ps []problem
	for _, name := range c.GroupNames() {
		// A URL is cloned by each host when a session first needs it.
		if repo := c.Groups[name].Repo; repo != "" && !IsRepoURL(repo) {
			if msg := GitRepoProblem(repo); msg != "" {
				ps = append(ps, problem{"groups." + name + ".repo", msg})
			}
		}
	}
	return ps
}

// GitRepoProblem says why repo is not a git repository on this host, or
// "" when it is one: a work tree (repo or a directory above it has .git)
// or a bare repository. It runs no git: git would read the repository's
// configuration, and every git command nid runs goes through the worker's
// one runner, which reads it with every program it names switched off.
func GitRepoProblem(repo string) string {
	fi, err := os.Stat(repo)
	if err != nil || !fi.IsDir() {
		return fmt.Sprintf("%q is not a git repository (it is not a directory)", repo)
	}
	for dir := filepath.Clean(repo); ; dir = filepath.Dir(dir) {
		if _, err := os.Lstat(filepath.Join(dir, ".git")); err == nil {
			return ""
		}
		if dir == filepath.Dir(dir) {
			break
		}
	}
	if isBareRepo(repo) {
		return ""
	}
	return fmt.Sprintf("%q is not a git repository (neither it nor a directory above it has .git, and it is not a bare repository)", repo)
}

// isBareRepo reports whether dir is laid out as a bare git repository.
func isBareRepo(dir string) bool {
	for _, name := range []string{"objects", "refs"} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || !fi.IsDir() {
			return false
		}
	}
	fi, err := os.Stat(filepath.Join(dir, "HEAD"))
	return err == nil && fi.Mode().IsRegular()
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// budgetExample is what a budget looks like on the command line.
const budgetExample = `{"turns":500,"usd":20}`

// ApplyBudgetJSON lays the JSON object js over base and validates the result,
// as ApplyRotateJSON does for a rotate policy.
func ApplyBudgetJSON(base Budget, js string) (Budget, error) {
	b := base
	if err := applyJSON("budget", budgetExample, js, &b, func() []problem { return b.problems("") }); err != nil {
		return base, err
	}
	return b, nil
}

// ShapeError is JSON that does not have the shape of the setting: not an
// object, an unknown key, a value of the wrong type (the API's bad_json),
// as opposed to a well-formed value that is not allowed.
type ShapeError struct{ err error }

func (e *ShapeError) Error() string { return e.err.Error() }

// applyJSON decodes the JSON object js onto *v (only the fields it names),
// then checks the result; every problem comes back at once, named under
// what.
func applyJSON(what, example, js string, v any, check func() []problem) error {
	dec := json.NewDecoder(strings.NewReader(js))
	dec.UseNumber()
	var raw any
	if err := dec.Decode(&raw); err != nil {
		return &ShapeError{fmt.Errorf("%s: %q is not JSON (%v); write an object such as %s", what, js, err, example)}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return &ShapeError{fmt.Errorf("%s: %q has more after its JSON object; write one object such as %s", what, js, example)}
	}
	if _, ok := raw.(map[string]any); !ok {
		return &ShapeError{fmt.Errorf("%s: %s is not a JSON object; write one such as %s", what, describe(raw), example)}
	}
	d := decoder{strict: true}
	d.decode("", raw, reflect.ValueOf(v).Elem())
	err := joinLines(merge(d.problems, check()))
	if len(d.problems) > 0 {
		return &ShapeError{err: err}
	}
	return err
}
