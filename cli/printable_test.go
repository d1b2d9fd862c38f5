package cli

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/transcript"
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

func hostileTeam() *fakeClient {
	at := time.Date(2026, 1, 2, 15, 0, 0, 0, time.Local)
	return &fakeClient{
		sessions: []workflows.SessionView{{Group: "web", Name: "lead", Agent: "claude" + hostile, Status: workflows.StatusWorking, Policy: config.DefaultRotate()}},
		groups: []workflows.GroupView{{Name: "web", Goal: hostile, Policy: config.DefaultRotate(), Sessions: []string{"lead"},
			Board: workflows.BoardView{Group: "web", Goal: hostile,
				Tasks: []workflows.Task{{ID: "t1", Title: hostile, Status: workflows.TaskClaimed, Holder: "lead"}},
				Locks: []workflows.Lock{{Name: hostile, Holder: "lead"}}},
			Inbox: []workflows.InboxItem{{Seq: 1, At: at, Group: "web", Session: "lead", Kind: workflows.EventTurnFailed, Text: hostile}}}},
		events: map[string][]workflows.Event{"nid/web/lead": {
			{Seq: 1, At: at, Group: "web", Session: "lead", Kind: workflows.EventTurn, Text: hostile},
			{Seq: 2, At: at, Group: "web", Session: "lead", Kind: workflows.EventRotation,
				Rotation: &workflows.RotationEvent{Method: "handoff", Reason: "manual", OldConversation: hostile, NewConversation: "c2", Summary: hostile}},
			{Seq: 3, At: at, Group: "web", Session: "lead", Kind: workflows.EventRotationFailed,
				Rotation: &workflows.RotationEvent{Method: "compact", Reason: "context", Error: hostile}},
		}},
		updateResult: workflows.BoardResult{Task: &workflows.Task{ID: "t2", Title: hostile}, Released: []string{"lock " + hostile}},
	}
}

// runHostile runs a command against hostileTeam and returns its output; a
// command that follows (watch) stops after its first poll.
func runHostile(t *testing.T, deps Deps, args ...string) string {
	t.Helper()
	fake := hostileTeam()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fake.onEvents = func(n int) {
		if n > 1 {
			cancel()
		}
	}
	out, errOut, err := runAppContext(t, ctx, fake, deps, args...)
	require.NoError(t, err, errOut)
	return out
}

// Text from agents and workflows reaches the terminal inert through every
// command that prints it, and whole through --json.
func TestCommandsPrintAgentTextInert(t *testing.T) {
	state := t.TempDir()
	require.NoError(t, transcript.New(state).Append("web", "lead",
		transcript.Entry{Kind: transcript.KindOutput, Conversation: hostile, Text: hostile + "\r\nsecond line"},
		transcript.Entry{Kind: transcript.KindRotation, Method: "handoff", Text: hostile}))
	deps := Deps{Environ: []string{"NID_STATE=" + state}}

	for _, args := range [][]string{
		{"ls"}, {"inbox"}, {"board"}, {"group", "show", "web"}, {"stop", "web/lead"},
		{"board", "add", "web", "a task"}, {"transcript", "web/lead"}, {"watch", "web/lead"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			out := runHostile(t, deps, args...)
			requireInert(t, "nid "+strings.Join(args, " "), out)
		})
	}

	for _, args := range [][]string{{"ls", "--json"}, {"inbox", "--json"}, {"board", "--json"}, {"transcript", "web/lead", "--json"}, {"watch", "web/lead", "--json"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			out := runHostile(t, deps, args...)
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
		fake := hostileTeam()
		fake.queryErr = map[string]error{"nid/web/lead": errors.New(hostile)}
		_, _, err := runApp(t, fake, Deps{}, "rotate", "web/lead")
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
