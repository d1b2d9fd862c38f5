package agents_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/activities"
	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/internal/agenttest"
	"github.com/nid-dev/nid/internal/fakemodel"
)

// trustWorkDir sets, in the rig's HOME, what a person's own settings say
// once they have used the CLI in the session's working directory.
func (r *agentRig) trustWorkDir() {
	agenttest.TrustWorkDir(r.t, r.kind.Name, r.home, r.set.Env["CODEX_HOME"], r.workDir, r.set.Env["ANTHROPIC_API_KEY"])
}

// attach runs a turn of the session, closes its process as the hold does,
// and opens the session's interactive CLI on its conversation in a
// terminal, showing the earlier answer.
func (r *agentRig) attach() (term *agenttest.Terminal, conv string, since time.Time, mark int) {
	r.t.Helper()
	r.trustWorkDir()
	r.model.Script(fakemodel.Reply{Text: "first answer", Input: 5000, Cached: 3000, Output: 20})
	rep, err := r.turn("", "remember the word pelican", agents.TurnWork)
	require.NoError(r.t, err)
	require.NoError(r.t, r.stop(rep.Conversation))
	since = time.Now()
	cmd, err := r.acts.AttachCommand(context.Background(), r.ref, r.spec, rep.Conversation, r.generation, "")
	require.NoError(r.t, err)
	term = agenttest.StartTerminal(r.t, cmd)
	// The person sees the conversation the agent had.
	mark = term.WaitFor(0, "first answer")
	return term, rep.Conversation, since, mark
}

func (r *agentRig) handback(conv string, since time.Time) agents.Handback {
	r.t.Helper()
	res, err := r.acts.Handback(context.Background(), activities.HandbackInput{Session: r.ref, Spec: r.spec, Conversation: conv, Since: since})
	require.NoError(r.t, err)
	return res.Handback
}

// attachKinds are the kinds with an interactive CLI of a vendor's own.
var attachKinds = []string{agents.KindClaude, agents.KindCodex}

// A person attached to a session works in its agent's own CLI on the
// session's conversation: the model is sent the conversation's earlier
// messages with what they typed, and when they exit the hand-back reads
// from the vendor's own files the conversation, the turn they took and
// the context the model reported.
func TestAttachResumesTheConversationAndHandsBack(t *testing.T) {
	for _, name := range attachKinds {
		t.Run(name, func(t *testing.T) {
			r := newRig(t, agents.KindOf(name))
			term, conv, since, mark := r.attach()
			typed := fakemodel.Reply{Text: "typed answer", Input: 7000, Cached: 1000, Output: 30}
			r.model.Script(typed)
			mark = term.TypeLine(mark, "hello from a person")
			mark = term.WaitFor(mark, "typed answer")
			last := lastRequest(t, r.model).Body
			require.Contains(t, last, "pelican", "the model was sent the conversation's earlier messages")
			require.Contains(t, last, "hello from a person")
			term.Exit(mark, 30*time.Second)

			h := r.handback(conv, since)
			require.True(t, h.Found, h.Note)
			require.Equal(t, conv, h.Conversation)
			require.Equal(t, 1, h.HandTurns)
			require.Empty(t, h.Compactions)
			require.Equal(t, r.usage(r.vendor.used(typed), r.vendor.window), h.Usage)
		})
	}
}

// A person who attaches and leaves without a word hands back nothing new:
// the context stays as the last turn left it.
func TestHandbackOfNothingDoneFindsNothing(t *testing.T) {
	for _, name := range attachKinds {
		t.Run(name, func(t *testing.T) {
			r := newRig(t, agents.KindOf(name))
			r.model.Script(fakemodel.Reply{Text: "first answer", Input: 5000, Output: 20})
			rep, err := r.turn("", "remember the word pelican", agents.TurnWork)
			require.NoError(t, err)
			time.Sleep(50 * time.Millisecond)
			h := r.handback(rep.Conversation, time.Now())
			require.False(t, h.Found)
			require.Contains(t, h.Note, "the context is as its last turn reported it")
		})
	}
}

// A conversation the person started afresh (Claude Code's /clear, Codex's
// /new) becomes the session's: the hand-back names it, with its turns and
// context only.
func TestAttachNewConversationIsHandedBack(t *testing.T) {
	for _, name := range attachKinds {
		t.Run(name, func(t *testing.T) {
			r := newRig(t, agents.KindOf(name))
			term, conv, since, mark := r.attach()
			r.model.Script(fakemodel.Reply{Text: "typed answer", Input: 7000, Output: 30})
			mark = term.TypeLine(mark, "hello from a person")
			mark = term.WaitFor(mark, "typed answer")
			fresh := map[string]string{agents.KindClaude: "/clear", agents.KindCodex: "/new"}[name]
			mark = term.TypeLine(mark, fresh)
			time.Sleep(2 * time.Second)
			afresh := fakemodel.Reply{Text: "fresh answer", Input: 2500, Output: 15}
			r.model.Script(afresh)
			mark = term.TypeLine(mark, "start over please")
			mark = term.WaitFor(mark, "fresh answer")
			require.NotContains(t, lastRequest(t, r.model).Body, "pelican", "the new conversation has none of the old")
			term.Exit(mark, 30*time.Second)

			h := r.handback(conv, since)
			require.True(t, h.Found, h.Note)
			require.NotEqual(t, conv, h.Conversation)
			require.NotEmpty(t, h.Conversation)
			require.Equal(t, 1, h.HandTurns)
			require.Equal(t, r.usage(r.vendor.used(afresh), r.vendor.window), h.Usage)
		})
	}
}

// A compaction the person runs (/compact) counts as one, with the context
// before it and after it (the next answer's for Claude Code, Codex's own
// estimate for Codex, as a turn's), and the conversation stays.
func TestAttachCompactionIsHandedBack(t *testing.T) {
	for _, name := range attachKinds {
		t.Run(name, func(t *testing.T) {
			r := newRig(t, agents.KindOf(name))
			term, conv, since, mark := r.attach()
			r.model.Script(fakemodel.Reply{Text: "Summary: we worked.", Input: 5100, Output: 300})
			mark = term.TypeLine(mark, "/compact")
			require.Eventually(t, func() bool {
				last := lastRequest(t, r.model)
				return strings.Contains(last.Body, "summary of the conversation") || strings.Contains(last.Headers.Get("x-codex-turn-metadata"), "compaction")
			}, 30*time.Second, 100*time.Millisecond, "the CLI never asked the model for a summary")
			time.Sleep(2 * time.Second)
			after := fakemodel.Reply{Text: "after the compaction", Input: 900, Output: 10}
			r.model.Script(after)
			mark = term.TypeLine(mark, "go on")
			mark = term.WaitFor(mark, "after the compaction")
			term.Exit(mark, 30*time.Second)

			h := r.handback(conv, since)
			require.True(t, h.Found, h.Note)
			require.Equal(t, conv, h.Conversation)
			require.Len(t, h.Compactions, 1)
			require.Positive(t, h.Compactions[0].BeforeTokens)
			if name == agents.KindClaude {
				require.Equal(t, r.vendor.used(after), h.Compactions[0].AfterTokens, "after: the next answer's context")
			} else {
				// Codex counts its own estimate of the context right after,
				// as a turn's compaction reports.
				require.Positive(t, h.Compactions[0].AfterTokens)
			}
			require.Equal(t, 1, h.HandTurns, "a slash command is not a turn")
			require.Equal(t, r.usage(r.vendor.used(after), r.vendor.window), h.Usage)
		})
	}
}

// What a person does in the attached CLI is what the session's agent could
// do: its commands write in the session's working directory, cannot read
// nid's state directory (its credentials), and nid's MCP tools answer.
func TestAttachedCLIHasTheSessionsPermissions(t *testing.T) {
	for _, name := range attachKinds {
		t.Run(name, func(t *testing.T) {
			r := newRig(t, agents.KindOf(name))
			secret := filepath.Join(r.state, "mcp.key")
			require.NoError(t, os.WriteFile(secret, []byte("SECRET-KEY"), 0o600))
			term, _, _, mark := r.attach()
			inside, stolen := filepath.Join(r.workDir, "inside.txt"), filepath.Join(r.workDir, "stolen.txt")
			r.model.Script(
				fakemodel.Reply{Shell: "echo person > " + inside, Input: 100, Output: 5},
				fakemodel.Reply{Shell: "cat " + secret + " > " + stolen, Input: 100, Output: 5},
				fakemodel.Reply{Tool: agents.ToolBoardRead, ToolInput: map[string]any{}, Input: 100, Output: 5},
				fakemodel.Reply{Text: "all done", Input: 100, Output: 5},
			)
			mark = term.TypeLine(mark, "do the three things")
			mark = term.WaitFor(mark, "all done")
			term.Exit(mark, 30*time.Second)

			b, err := os.ReadFile(inside)
			require.NoError(t, err, "a command wrote in the working directory")
			require.Equal(t, "person\n", string(b))
			b, err = os.ReadFile(stolen)
			require.NoError(t, err, "the command that tried to read the state directory ran")
			require.NotContains(t, string(b), "SECRET-KEY", "no command read nid's state directory")
			require.Contains(t, lastRequest(t, r.model).Body, testBoard, "nid's MCP server answered")
		})
	}
}

// An exec agent attaches with the command given (or the person's $SHELL)
// in the session's working directory with the variables its turns get, and
// its hand-back finds nothing: a command keeps no records nid reads.
func TestAttachExecRunsTheCommandInTheWorkDir(t *testing.T) {
	r := newRig(t, agents.KindOf(agents.KindExec))
	out := filepath.Join(t.TempDir(), "seen")
	script := filepath.Join(t.TempDir(), "person-shell")
	require.NoError(t, os.WriteFile(script, []byte("#!/bin/sh\n{ pwd; echo \"$NIDAGENT_SESSION\"; echo \"$NIDAGENT_CONVERSATION\"; echo \"$NIDAGENT_MCP_URL\"; } > "+out+"\n"), 0o755))
	since := time.Now()
	cmd, err := r.acts.AttachCommand(context.Background(), r.ref, r.spec, "conv-1", r.generation, script)
	require.NoError(t, err)
	term := agenttest.StartTerminal(t, cmd)
	select {
	case <-term.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the command did not end")
	}
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	require.Len(t, lines, 4)
	require.Equal(t, r.workDir, lines[0])
	require.Equal(t, "web/lead", lines[1])
	require.Equal(t, "conv-1", lines[2])
	require.Equal(t, r.access(r.generation).TokenURL(), lines[3])

	h := r.handback("conv-1", since)
	require.False(t, h.Found)
	require.Contains(t, h.Note, "keeps no records")
}

// The vendor's records are the agent's writing: a hand-back reads the
// files the vendor writes for the session's working directory and nothing
// a symlink there points to, skips lines it cannot read or that are too
// long, and takes no path from the conversation it is given.
func TestHandbackReadsOnlyTheSessionsRecords(t *testing.T) {
	outside := t.TempDir()
	assistant := func(input int64) string {
		return fmt.Sprintf(`{"type":"assistant","timestamp":%q,"message":{"model":"claude-sonnet-4-5","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":%d}}}`,
			time.Now().UTC().Format(time.RFC3339Nano), input)
	}
	t.Run(agents.KindClaude, func(t *testing.T) {
		r := newRig(t, agents.KindOf(agents.KindClaude))
		project := filepath.Join(r.home, ".claude", "projects", regexp.MustCompile(`[^a-zA-Z0-9]`).ReplaceAllString(r.workDir, "-"))
		require.NoError(t, os.MkdirAll(project, 0o700))
		planted := filepath.Join(outside, "planted.jsonl")
		require.NoError(t, os.WriteFile(planted, []byte(assistant(4242)+"\n"), 0o600))
		since := time.Now().Add(-time.Second)
		require.NoError(t, os.Symlink(planted, filepath.Join(project, "11111111-1111-4111-8111-111111111111.jsonl")))
		h := r.handback("../../../../"+outside+"/planted", since)
		require.False(t, h.Found, "a symlinked transcript is not read")

		huge := strings.Repeat("x", 9<<20)
		user := func(source, content string) string {
			return fmt.Sprintf(`{"type":"user","promptSource":%q,"timestamp":%q,"message":{"content":%s}}`, source, time.Now().UTC().Format(time.RFC3339Nano), content)
		}
		lines := []string{
			// The end of a turn of nid's own, then what the person did.
			user("sdk", `[{"type":"text","text":"a turn of nid's"}]`),
			user("typed", `"a prompt typed by hand"`),
			user("", `[{"type":"tool_result","content":"x"}]`),
			user("", `"<command-name>/compact</command-name>"`),
			assistant(1000), `{"type":"assistant","message":{"usage":{"input_tokens":` + huge + `}}}`, "not json",
			`{"type":"assistant","message":{"model":"<synthetic>","content":[{"type":"text","text":"No response requested."}],"usage":{"input_tokens":0}}}`,
		}
		own := filepath.Join(project, "22222222-2222-4222-8222-222222222222.jsonl")
		require.NoError(t, os.WriteFile(own, []byte(strings.Join(lines, "\n")+"\n"), 0o600))
		h = r.handback("", since)
		require.True(t, h.Found, h.Note)
		require.Equal(t, "22222222-2222-4222-8222-222222222222", h.Conversation)
		require.Equal(t, int64(1000), h.Usage.UsedTokens, "the long line and the bad one were skipped")
		require.Equal(t, 1, h.HandTurns, "nid's own prompt, a tool's result and a slash command are no turns by hand")

		// A working directory too long for Claude Code to name its
		// project by is found by the cut name, and a transcript there
		// counts only if it names the directory.
		r.workDir = filepath.Join(t.TempDir(), strings.Repeat("w", 120), strings.Repeat("v", 120))
		require.NoError(t, os.MkdirAll(r.workDir, 0o700))
		r.restart()
		cutName := regexp.MustCompile(`[^a-zA-Z0-9]`).ReplaceAllString(r.workDir, "-")[:200]
		for _, c := range []struct{ dir, cwd string }{{"-own", r.workDir}, {"-other", r.workDir + "-other"}} {
			dir, cwd := c.dir, c.cwd
			d := filepath.Join(r.home, ".claude", "projects", cutName+dir)
			require.NoError(t, os.MkdirAll(d, 0o700))
			line := fmt.Sprintf(`{"type":"user","promptSource":"typed","cwd":%q,"timestamp":%q,"message":{"content":"hi"}}`, cwd, time.Now().UTC().Format(time.RFC3339Nano))
			require.NoError(t, os.WriteFile(filepath.Join(d, "conv"+dir+".jsonl"), []byte(line+"\n"+assistant(3000)+"\n"), 0o600))
			time.Sleep(20 * time.Millisecond)
		}
		h = r.handback("", since)
		require.True(t, h.Found, h.Note)
		require.Equal(t, "conv-own", h.Conversation, "the newer transcript is another directory's")
	})
	t.Run(agents.KindCodex, func(t *testing.T) {
		r := newRig(t, agents.KindOf(agents.KindCodex))
		day := filepath.Join(r.set.Env["CODEX_HOME"], "sessions", time.Now().Format("2006/01/02"))
		require.NoError(t, os.MkdirAll(day, 0o700))
		rollout := func(cwd string, used int64) string {
			now := time.Now().UTC().Format(time.RFC3339Nano)
			return fmt.Sprintf(`{"timestamp":%q,"type":"session_meta","payload":{"id":"t-%d","cwd":%q}}`+"\n"+
				`{"timestamp":%q,"type":"event_msg","payload":{"type":"token_count","info":{"last_token_usage":{"total_tokens":%d},"model_context_window":1000000}}}`+"\n", now, used, cwd, now, used)
		}
		since := time.Now().Add(-time.Second)
		planted := filepath.Join(outside, "rollout.jsonl")
		require.NoError(t, os.WriteFile(planted, []byte(rollout(r.workDir, 4242)), 0o600))
		require.NoError(t, os.Symlink(planted, filepath.Join(day, "rollout-2026-01-01T00-00-00-planted.jsonl")))
		require.NoError(t, os.WriteFile(filepath.Join(day, "rollout-2026-01-01T00-00-01-other.jsonl"), []byte(rollout(outside, 777)), 0o600))
		h := r.handback("../../../../"+outside+"/rollout", since)
		require.False(t, h.Found, "neither a symlinked rollout nor another directory's thread is the session's: %+v", h)

		require.NoError(t, os.WriteFile(filepath.Join(day, "rollout-2026-01-01T00-00-02-own.jsonl"), []byte(rollout(r.workDir, 1000)), 0o600))
		h = r.handback("", since)
		require.True(t, h.Found, h.Note)
		require.Equal(t, "t-1000", h.Conversation)
		require.Equal(t, agents.Usage{UsedTokens: 1000, WindowTokens: 1000000, Source: agents.SourceReported}, h.Usage)
	})
}

// A session that has no conversation yet (attached before its first turn)
// gets a new one, which the hand-back makes the session's.
func TestAttachWithoutConversationStartsOne(t *testing.T) {
	for _, name := range attachKinds {
		t.Run(name, func(t *testing.T) {
			r := newRig(t, agents.KindOf(name))
			r.trustWorkDir()
			since := time.Now()
			cmd, err := r.acts.AttachCommand(context.Background(), r.ref, r.spec, "", r.generation, "")
			require.NoError(t, err)
			term := agenttest.StartTerminal(t, cmd)
			mark := term.WaitFor(0, map[string]string{agents.KindClaude: "accept edits on", agents.KindCodex: "Ask Codex to do anything"}[name])
			first := fakemodel.Reply{Text: "a first answer", Input: 3000, Output: 12}
			r.model.Script(first)
			mark = term.TypeLine(mark, "hello from a person")
			mark = term.WaitFor(mark, "a first answer")
			term.Exit(mark, 30*time.Second)

			h := r.handback("", since)
			require.True(t, h.Found, h.Note)
			require.NotEmpty(t, h.Conversation)
			require.Equal(t, 1, h.HandTurns)
			require.Equal(t, agents.SourceReported, h.Usage.Source)
			require.Equal(t, r.vendor.used(first), h.Usage.UsedTokens)

			// nid's next turn goes on with it.
			r.model.Script(fakemodel.Reply{Text: "nid's turn", Input: 3500, Output: 10})
			rep, err := r.turn(h.Conversation, "go on", agents.TurnWork)
			require.NoError(t, err)
			require.Equal(t, h.Conversation, rep.Conversation)
			require.Contains(t, lastRequest(t, r.model).Body, "hello from a person")
		})
	}
}

// Sessions of a group without a repo share its working directory, and so
// the directory's vendor records: a hand-back takes the conversation nid
// gave the person, or one the person's own CLI started, never another
// session's that its own turns kept writing meanwhile.
func TestHandbackLeavesOtherSessionsConversations(t *testing.T) {
	stamp := func() string { return time.Now().UTC().Format(time.RFC3339Nano) }
	t.Run(agents.KindClaude, func(t *testing.T) {
		r := newRig(t, agents.KindOf(agents.KindClaude))
		project := filepath.Join(r.home, ".claude", "projects", regexp.MustCompile(`[^a-zA-Z0-9]`).ReplaceAllString(r.workDir, "-"))
		require.NoError(t, os.MkdirAll(project, 0o700))
		transcript := func(id string, used int64) {
			lines := fmt.Sprintf(`{"type":"user","promptSource":"sdk","cwd":%q,"timestamp":%q,"message":{"content":[{"type":"text","text":"a turn of nid's"}]}}`+"\n"+
				`{"type":"assistant","timestamp":%q,"message":{"model":"claude-sonnet-4-5","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":%d}}}`+"\n",
				r.workDir, stamp(), stamp(), used)
			require.NoError(t, os.WriteFile(filepath.Join(project, id+".jsonl"), []byte(lines), 0o600))
		}
		own, other := "11111111-1111-4111-8111-111111111111", "99999999-9999-4999-8999-999999999999"
		transcript(own, 1000)
		time.Sleep(20 * time.Millisecond)
		since := time.Now()
		time.Sleep(20 * time.Millisecond)
		transcript(other, 7777)
		h := r.handback(own, since)
		require.NotEqual(t, other, h.Conversation, "another session's conversation became this one's: %+v", h)
		require.False(t, h.Found, "the person did nothing: %+v", h)

		// The person resumed (/resume) a conversation that began before
		// they attached, another session's maybe, and typed in it: it is
		// not taken, and the note says so.
		typed := fmt.Sprintf(`{"type":"user","promptSource":"typed","cwd":%q,"timestamp":%q,"message":{"content":"hello"}}`+"\n", r.workDir, stamp())
		f, err := os.OpenFile(filepath.Join(project, other+".jsonl"), os.O_APPEND|os.O_WRONLY, 0)
		require.NoError(t, err)
		_, err = f.WriteString(typed)
		require.NoError(t, err)
		require.NoError(t, f.Close())
		since = time.Now()
		time.Sleep(20 * time.Millisecond)
		f, err = os.OpenFile(filepath.Join(project, other+".jsonl"), os.O_APPEND|os.O_WRONLY, 0)
		require.NoError(t, err)
		_, err = f.WriteString(fmt.Sprintf(`{"type":"user","promptSource":"typed","cwd":%q,"timestamp":%q,"message":{"content":"hello again"}}`+"\n", r.workDir, stamp()))
		require.NoError(t, err)
		require.NoError(t, f.Close())
		h = r.handback(own, since)
		require.False(t, h.Found, "a conversation that began before the hold is not taken: %+v", h)
		require.Contains(t, h.Note, "conversation "+other+", which you typed in, is not taken")
		require.Contains(t, h.Note, "the session goes on with "+own)
	})
	t.Run(agents.KindCodex, func(t *testing.T) {
		r := newRig(t, agents.KindOf(agents.KindCodex))
		day := filepath.Join(r.set.Env["CODEX_HOME"], "sessions", time.Now().Format("2006/01/02"))
		require.NoError(t, os.MkdirAll(day, 0o700))
		rollout := func(id string, used int64) {
			lines := fmt.Sprintf(`{"timestamp":%q,"type":"session_meta","payload":{"id":%q,"cwd":%q,"originator":"nid","source":"vscode"}}`+"\n"+
				`{"timestamp":%q,"type":"event_msg","payload":{"type":"user_message"}}`+"\n"+
				`{"timestamp":%q,"type":"event_msg","payload":{"type":"token_count","info":{"last_token_usage":{"total_tokens":%d},"model_context_window":1000000}}}`+"\n",
				stamp(), id, r.workDir, stamp(), stamp(), used)
			require.NoError(t, os.WriteFile(filepath.Join(day, "rollout-"+id+".jsonl"), []byte(lines), 0o600))
		}
		rollout("own", 1000)
		time.Sleep(20 * time.Millisecond)
		since := time.Now()
		time.Sleep(20 * time.Millisecond)
		rollout("other", 7777)
		h := r.handback("own", since)
		require.NotEqual(t, "other", h.Conversation, "another session's thread became this one's: %+v", h)
		require.False(t, h.Found, "the person did nothing: %+v", h)
	})
}

// A conversation id is the vendor's, and reaches its CLI's command line:
// one that reads as an option (from a hostile client's workflow input, or
// a record planted where a hand-back reads) is refused before anything
// runs, or Claude Code would start the MCP server it names, outside any
// sandbox.
func TestConversationThatIsAnOptionIsRefused(t *testing.T) {
	mark := filepath.Join(t.TempDir(), "ran")
	planted := `--mcp-config={"mcpServers":{"x":{"type":"stdio","command":"/bin/sh","args":["-c","touch ` + mark + `"]}}}`
	for _, name := range attachKinds {
		t.Run(name, func(t *testing.T) {
			r := newRig(t, agents.KindOf(name))
			for _, conv := range []string{planted, "--version", "-r", "a b", "a/../b"} {
				_, err := r.acts.AttachCommand(context.Background(), r.ref, r.spec, conv, r.generation, "")
				require.Error(t, err, "attach on conversation %q", conv)
				require.Contains(t, err.Error(), "is not a conversation id")
				if name == agents.KindClaude {
					_, err = r.turn(conv, "hello", agents.TurnWork)
					require.Error(t, err, "a turn on conversation %q", conv)
					require.Contains(t, err.Error(), "is not a conversation id")
				}
			}
			require.NoFileExists(t, mark)
		})
	}
}
