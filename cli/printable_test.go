package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/internal/temporaltest"
	"github.com/nid-dev/nid/nidclient"
	"github.com/nid-dev/nid/transcript"
	"github.com/nid-dev/nid/worker"
	"github.com/nid-dev/nid/workflows"
)

// hostile is what an agent could write to take over a terminal: clear the
// screen and home the cursor, write the clipboard (OSC 52), set the window
// title, return to the start of the line to forge one, an 8-bit CSI, a
// right-to-left override, DEL and NUL.
const hostile = "done\x1b[2J\x1b[H\x1b]52;c;cm0gLXJmIH4K\x07\x1b]0;pwned\x1b\\\r15:04:05 web/lead  ↻ handoff\u009b31m\u202eevil\x7f\x00."

// requireInert fails when out holds anything a terminal would act on
// rather than show, and checks that the hostile text still shows.
func requireInert(t *testing.T, what, out string) {
	t.Helper()
	for i, r := range out {
		if r != '\n' && actsOnTerminal(r) {
			t.Fatalf("%s prints %U at byte %d:\n%q", what, r, i, out)
		}
	}
	require.Contains(t, out, "done␛[2J␛[H␛]52;c;cm0gLXJmIH4K␇", "%s shows what the agent wrote", what)
}

// hostileSite is a team whose every text nid shows is hostile: web's goal
// (nid.yaml's), and everything web/lead's agent writes: its output, its
// handoff (taken from its last output), its error when it fails, the task
// it adds and the lock it takes through its board tools. A session that
// another client of the namespace started is listed with a hostile name and
// agent. It returns the site and the state directory of its transcripts.
func hostileSite(t *testing.T) (*site, string) {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "hostile"), []byte(hostile), 0o600))
	s := newSite(t, "")
	// The agent prints the hostile text as its output, or once told to
	// fail, as its error. A budget of one turn stops it after its first.
	cfg := s.Config(t, `  web:
    rotate: {mode: off}
    budget: {turns: 1}
    sessions:
      - agent: exec
        name: lead
        permissions: full
        command: sh
        args: ["-c", 'if [ -e "$D/fail" ]; then cat "$D/hostile" >&2; exit 1; fi; cat "$D/hostile"']
        env: {D: `+dir+`}
`)
	web := cfg.Groups["web"]
	web.Goal = hostile
	cfg.Groups["web"] = web
	s.upConfig(cfg)
	temporaltest.WaitSession(t, s.c, "web", "lead", "to spend the budget", func(v workflows.SessionView) bool { return v.Status == workflows.StatusPaused })

	// A manual rotation runs even so.
	temporaltest.Signal(t, s.c, "web", "lead", workflows.SignalRotate, workflows.RotateRequest{Mode: config.ModeHandoff, Reason: workflows.ReasonManual})
	temporaltest.WaitSession(t, s.c, "web", "lead", "to hand off", func(v workflows.SessionView) bool {
		return v.Context.Rotations == 1 && v.Status == workflows.StatusPaused
	})
	require.NoError(t, os.WriteFile(filepath.Join(dir, "fail"), nil, 0o600))
	temporaltest.Signal(t, s.c, "web", "lead", workflows.SignalRotate, workflows.RotateRequest{Mode: config.ModeHandoff, Reason: workflows.ReasonManual})
	temporaltest.WaitGroup(t, s.c, "web", "to hear of the failed rotation", func(g workflows.GroupView) bool {
		return slices.ContainsFunc(g.Inbox, func(it workflows.InboxItem) bool { return it.Kind == workflows.EventRotationFailed })
	})
	for _, u := range []struct {
		name string
		req  workflows.BoardRequest
	}{
		{workflows.UpdateTaskAdd, workflows.BoardRequest{Session: "lead", Title: hostile}},
		{workflows.UpdateLockAcquire, workflows.BoardRequest{Session: "lead", Lock: hostile}},
	} {
		_, err := worker.UpdateBoard(context.Background(), s.c, "web", u.name, u.req)
		require.NoError(t, err)
	}
	temporaltest.Settle(t, s.c)

	// What nid lists comes from Temporal's visibility, where any client
	// of the namespace can start a workflow and say who it is; no worker
	// runs this one.
	_, err := s.c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
		ID: workflows.SessionID("ext", "bot"), TaskQueue: "elsewhere",
		TypedSearchAttributes: workflows.SessionSearchAttributes("ext", hostile, "claude"+hostile, ""),
	}, workflows.SessionWorkflowName, workflows.SessionInput{Group: "ext", Name: "bot"})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		listed, err := nidclient.ListSessions(context.Background(), s.c, "ext")
		return err == nil && len(listed) == 1
	}, time.Minute, 10*time.Millisecond, "visibility lists the session")
	return s, cfg.State
}

// Text from agents and workflows reaches the terminal inert through every
// command that prints it, and whole through --json.
func TestCommandsPrintAgentTextInert(t *testing.T) {
	t.Parallel()
	s, state := hostileSite(t)
	// A conversation id is the vendor's, and a rotation's text the agent's.
	require.NoError(t, transcript.New(state).Append("web", "lead",
		transcript.Entry{Kind: transcript.KindOutput, Conversation: hostile, Text: hostile + "\r\nsecond line"},
		transcript.Entry{Kind: transcript.KindRotation, Method: "handoff", Text: hostile}))
	environ := []string{"NID_STATE=" + state}
	nid := func(t *testing.T, args ...string) string {
		t.Helper()
		if args[0] == "watch" {
			// nid watch follows: stop it once it has shown the backlog.
			n := min(watchBacklog, len(temporaltest.Session(t, s.c, "web", "lead").Events))
			return s.follow(environ, func(out string) bool { return strings.Count(out, "\n") >= n }, args...)
		}
		out, errOut, err := runApp(t, Deps{Environ: append(s.Environ(), environ...), Dial: worker.Dial}, args...)
		require.NoError(t, err, errOut)
		return out
	}

	for _, args := range [][]string{
		{"ls"}, {"show", "web/lead"}, {"inbox"}, {"board"}, {"group", "show", "web"}, {"stop", "web/lead"},
		{"board", "add", "web", hostile}, {"transcript", "web/lead"}, {"watch", "web/lead"},
	} {
		t.Run(strings.ReplaceAll(strings.Join(args, " "), hostile, "TITLE"), func(t *testing.T) {
			out := nid(t, args...)
			requireInert(t, "nid "+strings.Join(args, " "), out)
		})
	}

	for _, args := range [][]string{{"ls", "--json"}, {"show", "web/lead", "--json"}, {"inbox", "--json"}, {"board", "--json"}, {"transcript", "web/lead", "--json"}, {"watch", "web/lead", "--json"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			out := nid(t, args...)
			for i, r := range out {
				if r != '\n' && actsOnTerminal(r) {
					t.Fatalf("%U at byte %d:\n%q", r, i, out)
				}
			}
			// The same JSON: a program reading it gets the text as written.
			dec := json.NewDecoder(strings.NewReader(out))
			found := false
			for dec.More() {
				var v any
				require.NoError(t, dec.Decode(&v))
				found = found || holds(v, hostile)
			}
			require.True(t, found, "the text is whole in:\n%s", out)
		})
	}

	t.Run("an error quoting a workflow", func(t *testing.T) {
		_, _, err := runApp(t, Deps{Environ: s.Environ(), Dial: worker.Dial}, "rotate", "ext/nobody")
		require.Error(t, err)
		requireInert(t, "the error", err.Error())
	})
}

// holds says whether decoded JSON v holds a string containing s.
func holds(v any, s string) bool {
	switch v := v.(type) {
	case string:
		return strings.Contains(v, s)
	case []any:
		return slices.ContainsFunc(v, func(x any) bool { return holds(x, s) })
	case map[string]any:
		for _, x := range v {
			if holds(x, s) {
				return true
			}
		}
	}
	return false
}
