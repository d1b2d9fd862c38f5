package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
