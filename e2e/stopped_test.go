package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/workflows"
)

// nid stop during a long exec turn, then kill -9 of nid up and a start
// again: the next start fails the attempt the killed worker left, and the
// stopped session does not run it again. Its agent ran once, its turns
// did not go up, and the feed says why.
func TestAStoppedSessionRunsNoCutTurnAfterAKill(t *testing.T) {
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	agent := filepath.Join(dir, "agent.sh")
	require.NoError(t, os.WriteFile(agent, []byte(`#!/bin/sh
cat >/dev/null
echo run >> `+runs+`
sleep 30
echo "answered"
`), 0o755))
	s := newSite(t, `  web:
    rotate: {mode: off}
    sessions:
      - agent: exec
        name: lead
        command: `+agent+`
        permissions: full
`)
	ran := func() int {
		b, _ := os.ReadFile(runs)
		return strings.Count(string(b), "run")
	}
	up := s.up()
	s.mustNid("send", "web/lead", "Write the parser")
	s.eventually("the agent to start", time.Minute, func() bool { return ran() == 1 })
	require.Contains(t, s.mustNid("stop", "web/lead"), "stopped web/lead")
	up.kill()

	s.up()
	c := s.client()
	s.eventually("the cut attempt to be failed and not run again", 2*time.Minute, func() bool {
		v, err := querySessionView(c, "web", "lead")
		if err != nil {
			return false
		}
		for _, e := range v.Events {
			if strings.Contains(e.Text, "did not finish") {
				return true
			}
		}
		return false
	})
	time.Sleep(3 * time.Second) // a retried attempt would have started by now
	require.Equal(t, 1, ran(), "the stopped session ran its cut turn no more")
	row := s.ls()["web/lead"]
	require.Equal(t, workflows.StatusStopped, row.Status)
	require.Equal(t, 0, row.Turns, "no turn ran after the stop")
	var stops []string
	for _, e := range s.session(c, "web", "lead").Events {
		if e.Kind == workflows.EventStopped {
			stops = append(stops, e.Text)
		}
	}
	// Why it did not finish depends on which came first: the stop's
	// cancellation reaching the turn at its next heartbeat ("canceled"), or
	// the kill, whose attempt the next start fails ("the worker running
	// this attempt…"). Either way the turn is not run again.
	require.Regexp(t, `the turn running when it was stopped did not finish \((canceled|the worker running this attempt)`, strings.Join(stops, "\n"))
	require.Contains(t, strings.Join(stops, "\n"), "a stopped session does not run it again")
}

// A session whose agent's CLI is missing, with nothing to do yet, is
// listed as needing attention as soon as nid up says it waits there, not
// idle until a message makes a turn fail.
func TestASessionThatCannotStartIsListedAsNeedingAttention(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "claude")
	s := newSite(t, `  web:
    rotate: {mode: off}
    sessions:
      - {agent: claude, name: lead, command: `+missing+`}
      - {agent: sim, name: sim, sim: {turnDelay: 200ms}}
`)
	s.top = "agents:\n  claude: {env: {ANTHROPIC_API_KEY: sk-ant-e2e-secret, HOME: " + t.TempDir() + "}}\n"
	s.writeConfig()
	up := s.up()
	require.Contains(t, up.out.String(), "nid: web/lead cannot start: ")
	s.eventually("web/lead listed in needs-attention", 20*time.Second, func() bool {
		return s.ls()["web/lead"].Status == workflows.StatusNeedsAttention
	})
	require.Equal(t, workflows.StatusIdle, s.ls()["web/sim"].Status, "the sim beside it is fine")
	inbox := s.mustNid("inbox", "web")
	require.Contains(t, inbox, "web/lead cannot run its agent: claude: command \""+missing+"\" not found")
}

// A Claude Code session removed from nid.yaml and reloaded: nid stops it
// in words (no raw log line at the default level), its long-lived process
// is closed though the worker's file no longer lists it, and no turn is
// said after the stop.
func TestARemovedClaudeSessionIsStoppedInWords(t *testing.T) {
	m := handoffModel(t)
	claude := sessionYAML(t, agents.KindClaude, m)
	repo := gitRepo(t)
	s := newSite(t, `  real:
    repo: `+repo+`
    rotate: {mode: off}
    sessions:
`+claude+`      - {agent: sim, name: sim, sim: {turnDelay: 200ms}}
`)
	up := s.up()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("nid up:\n%s", up.out.String())
		}
	})
	c := s.client()
	s.mustNid("send", "real/lead", "Write the toggle")
	s.eventually("the first turn", 3*time.Minute, func() bool { return s.session(c, "real", "lead").Context.TotalTurns >= 1 })
	s.eventually("Claude Code's process kept for the next turn", time.Minute, func() bool { return len(s.recordedAgents()) == 1 })

	s.groups = `  real:
    repo: ` + repo + `
    rotate: {mode: off}
    sessions:
      - {agent: sim, name: sim, sim: {turnDelay: 200ms}}
`
	s.writeConfig()
	require.Contains(t, s.mustNid("reload"), "stop real/lead: it left nid.yaml")
	var v workflows.SessionView
	s.eventually("its agent stopped", time.Minute, func() bool {
		v = s.session(c, "real", "lead")
		return slices.ContainsFunc(v.Events, func(e workflows.Event) bool { return e.Text == "its agent is stopped" })
	})
	s.eventually("Claude Code's process closed", 30*time.Second, func() bool { return len(s.recordedAgents()) == 0 })
	stopped := slices.IndexFunc(v.Events, func(e workflows.Event) bool { return strings.HasPrefix(e.Text, "stopped (it left nid.yaml)") })
	require.GreaterOrEqual(t, stopped, 0)
	for _, e := range v.Events[stopped:] {
		require.NotEqual(t, workflows.EventTurn, e.Kind, "no turn after the stop: %s", e.Text)
	}
	require.NotContains(t, up.out.String(), "agent did not stop")
	require.NotContains(t, up.out.String(), "level=WARN")
	require.Equal(t, workflows.StatusStopped, s.ls()["real/lead"].Status)
}
