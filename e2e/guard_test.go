package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/nid-dev/nid/workflows"
)

// Anything that can reach Temporal can signal a session's config with a
// spec naming a command, as older nids obeyed. The worker runs only what its
// own nid.yaml says: a spec that keeps the kind runs the file's command,
// and one that switches the kind is refused, with the reason in the
// session's events.
func TestASignalCannotChooseWhatRuns(t *testing.T) {
	dir := t.TempDir()
	agent := filepath.Join(dir, "agent.sh")
	require.NoError(t, os.WriteFile(agent, []byte("#!/bin/sh\ncat >/dev/null\necho \"the configured agent answered\"\n"), 0o755))
	s := newSite(t, `  web:
    rotate: {mode: off}
    sessions:
      - agent: sim
        name: lead
        sim: {window: 200000, tokensPerTurn: 1000, turnDelay: 10ms}
      - agent: exec
        name: lint
        command: `+agent+`
        permissions: full
`)
	s.up()
	s.eventually("both sessions listed", time.Minute, func() bool { return len(s.ls()) == 2 })
	c := s.client()

	// The payload is what an attacker would send: plain JSON, "command"
	// included, as the spec's old shape had it.
	evil := map[string]any{"spec": map[string]any{"kind": "exec", "command": "/bin/sh", "model": "evil"}}
	for _, name := range []string{"lead", "lint"} {
		require.NoError(t, c.SignalWorkflow(context.Background(), workflows.SessionID("web", name), "", workflows.SignalConfig, evil))
		s.eventually("web/"+name+" to take the config", time.Minute, func() bool { return hasEvent(s.session(c, "web", name), workflows.EventConfig, "") })
	}

	// /bin/sh reads its script from stdin, where an exec agent gets the
	// prompt: had it run, these files would exist.
	leadMarker, lintMarker := filepath.Join(dir, "lead-ran-sh"), filepath.Join(dir, "lint-ran-sh")
	s.mustNid("send", "web/lead", "touch "+leadMarker)
	s.mustNid("send", "web/lint", "touch "+lintMarker)

	for _, name := range []string{"lead", "lint"} {
		s.eventually("web/"+name+" to take the message", time.Minute, func() bool {
			v := s.session(c, "web", name)
			return v.Context.TotalTurns > 0 || hasEvent(v, workflows.EventTurnFailed, "")
		})
	}
	require.NoFileExists(t, leadMarker, "no shell ran web/lead's message")
	require.NoFileExists(t, lintMarker, "no shell ran web/lint's message")

	lead := s.session(c, "web", "lead")
	require.True(t, hasEvent(lead, workflows.EventTurnFailed,
		`session web/lead asks for agent kind "exec", but this worker's nid.yaml gives it "sim"`), "events: %+v", lead.Events)
	require.Zero(t, lead.Context.TotalTurns, "no turn ran for web/lead")
	lint := s.session(c, "web", "lint")
	require.Equal(t, 1, lint.Context.TotalTurns)
	require.Equal(t, "the configured agent answered", lint.LastOutput, "the file's command ran, not the signal's")
}

// Where an agent works is what its sandbox lets it write. Anything that
// reaches Temporal can start a session's workflow again with an input of its
// own, naming another working directory ($HOME, say) and another
// repository: the worker's nid.yaml still decides where the agent works.
func TestAStartedWorkflowCannotChooseWhereAnAgentWorks(t *testing.T) {
	dir := t.TempDir()
	team, elsewhere := filepath.Join(dir, "team"), filepath.Join(dir, "elsewhere")
	for _, d := range []string{team, elsewhere} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	agent := filepath.Join(dir, "agent.sh")
	require.NoError(t, os.WriteFile(agent, []byte("#!/bin/sh\ncat >/dev/null\necho \"worked in $(pwd)\"\n"), 0o755))
	s := newSite(t, `  web:
    rotate: {mode: off}
    workdir: `+team+`
    sessions:
      - agent: exec
        name: lint
        command: `+agent+`
        permissions: full
`)
	s.up()
	s.eventually("the session listed", time.Minute, func() bool { return len(s.ls()) == 1 })
	c := s.client()
	id := workflows.SessionID("web", "lint")

	// The input nid gave it, with the attacker's directories.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	in := startedWith(ctx, t, c, id)
	require.Equal(t, team, in.WorkDir)
	in.WorkDir = elsewhere
	require.NoError(t, c.TerminateWorkflow(ctx, id, "", "started again with an input of another's"))
	_, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: workflows.TaskQueue}, workflows.SessionWorkflowName, in)
	require.NoError(t, err)

	s.mustNid("send", "web/lint", "where are you?")
	s.eventually("web/lint to take the message", time.Minute, func() bool {
		v := s.session(c, "web", "lint")
		return v.Context.TotalTurns > 0 || hasEvent(v, workflows.EventTurnFailed, "")
	})
	lint := s.session(c, "web", "lint")
	require.Equal(t, "worked in "+team, lint.LastOutput, "events: %+v", lint.Events)
}

// startedWith is the input the session workflow id was started with.
func startedWith(ctx context.Context, t *testing.T, c client.Client, id string) workflows.SessionInput {
	t.Helper()
	it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	first, err := it.Next()
	require.NoError(t, err)
	var in workflows.SessionInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(first.GetWorkflowExecutionStartedEventAttributes().GetInput(), &in))
	return in
}

// hasEvent reports whether v recorded an event of kind whose text contains
// text.
func hasEvent(v workflows.SessionView, kind, text string) bool {
	for _, e := range v.Events {
		if e.Kind == kind && strings.Contains(e.Text, text) {
			return true
		}
	}
	return false
}

// What a client of Temporal's own once did with nid up: it started a
// session whose group climbed out of the state directory with a repo of
// its own, a file:// repository with an fsmonitor planted, and the worker
// cloned it into the user's git configuration directory and ran the
// fsmonitor at its next git call; a repo that began with --upload-pack=
// ran a command too. With the host's own credential (a trusted user's
// mistake, or a stolen one) neither runs anything or writes outside nid's
// directories: the name is refused, and a listed session works in the
// repository its nid.yaml names.
func TestAStartedWorkflowCannotMakeTheWorkerWriteOrRun(t *testing.T) {
	dir := t.TempDir()
	proj, marks, evil := filepath.Join(dir, "proj"), filepath.Join(dir, "marks"), filepath.Join(dir, "evil.git")
	require.NoError(t, os.MkdirAll(marks, 0o755))
	for _, args := range [][]string{
		{"init", "-q", "-b", "main", proj},
		{"-C", proj, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "start"},
		{"init", "-q", "--bare", evil},
		{"-C", evil, "config", "core.fsmonitor", "touch " + filepath.Join(marks, "fsmonitor") + "; true"},
	} {
		out, err := exec.Command("git", args...).CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	s := newSite(t, `  web:
    rotate: {mode: off}
    repo: `+proj+`
    sessions:
      - {agent: sim, name: lead, sim: {turnDelay: 10ms}}
`)
	s.up()
	s.eventually("the session listed", time.Minute, func() bool { return len(s.ls()) == 1 })
	c := s.client()
	id := workflows.SessionID("web", "lead")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	in := startedWith(ctx, t, c, id)

	climb := in
	climb.Group, climb.Repo = "../../home/.config/git", "file://"+evil
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "nid/" + climb.Group + "/lead", TaskQueue: workflows.TaskQueue}, workflows.SessionWorkflowName, climb)
	require.NoError(t, err)
	err = run.Get(ctx, nil)
	require.ErrorContains(t, err, `group "../../home/.config/git" is not a name`)

	option := in
	option.Repo = "--upload-pack=touch " + filepath.Join(marks, "upload-pack") + ";:"
	require.NoError(t, c.TerminateWorkflow(ctx, id, "", "started again with an input of another's"))
	_, err = c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: workflows.TaskQueue}, workflows.SessionWorkflowName, option)
	require.NoError(t, err)
	s.mustNid("send", "web/lead", "go on")
	s.eventually("web/lead to take the message", time.Minute, func() bool {
		v := s.session(c, "web", "lead")
		return v.Context.TotalTurns > 0 || hasEvent(v, workflows.EventTurnFailed, "")
	})
	lead := s.session(c, "web", "lead")
	require.Positive(t, lead.Context.TotalTurns, "events: %+v", lead.Events)
	require.Equal(t, filepath.Join(s.dir, ".nid", "worktrees", "web", "lead"), lead.Worktree)

	entries, err := os.ReadDir(marks)
	require.NoError(t, err)
	require.Empty(t, entries, "nothing planted ran")
	for _, climbed := range []string{filepath.Join(s.dir, "home"), filepath.Join(dir, "home"), filepath.Join(s.dir, ".nid", "repos")} {
		require.NoDirExists(t, climbed)
	}
}
