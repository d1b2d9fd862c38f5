package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/internal/fakemodel"
	"github.com/nid-dev/nid/nidclient"
	"github.com/nid-dev/nid/workflows"
)

// agentCLI returns the pinned CLI the adapter suite runs, or fails the test
// saying how to install it.
func agentCLI(t testing.TB, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "agents", "testdata", "agents", "node_modules", ".bin", name))
	require.NoError(t, err)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("the %s CLI is not installed: run `npm ci` in agents/testdata/agents (make deps does)", name)
	}
	return p
}

// lastAsk reads a model call the way the fake model's route needs it: the
// text of the last user message, and whether the call only hands back the
// result of a tool the model asked for (Claude Code's tool_result, Codex's
// function or custom tool output).
func lastAsk(body string) (text string, toolResult bool) {
	var req struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Input []struct {
			Type    string          `json:"type"`
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"input"`
	}
	if json.Unmarshal([]byte(body), &req) != nil {
		return "", false
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if n := len(req.Messages); n > 0 {
		last := req.Messages[n-1]
		var s string
		if json.Unmarshal(last.Content, &s) == nil {
			return s, false
		}
		_ = json.Unmarshal(last.Content, &parts)
		var texts []string
		for _, p := range parts {
			if p.Type == "tool_result" {
				return "", true
			}
			texts = append(texts, p.Text)
		}
		return strings.Join(texts, "\n"), false
	}
	if n := len(req.Input); n > 0 && strings.HasSuffix(req.Input[n-1].Type, "_output") {
		return "", true
	}
	for i := len(req.Input) - 1; i >= 0; i-- {
		if in := req.Input[i]; in.Type == "message" && in.Role == "user" {
			_ = json.Unmarshal(in.Content, &parts)
			var texts []string
			for _, p := range parts {
				texts = append(texts, p.Text)
			}
			return strings.Join(texts, "\n"), false
		}
	}
	return "", false
}

// handoffModel answers a session the way the test needs, whichever call
// comes when: the first work turn writes a file in the worktree with the
// CLI's own shell; nid's handoff request gets an answer but no
// handoff_write; a fresh conversation calls handoff_ack with the tasks its
// first message names; everything else is a short answer.
func handoffModel(t *testing.T) *fakemodel.Model {
	m := fakemodel.Start(t)
	var mu sync.Mutex
	wrote := false
	m.Route(func(r fakemodel.Request) (fakemodel.Reply, bool) {
		text, toolResult := lastAsk(r.Body)
		mu.Lock()
		defer mu.Unlock()
		switch tasks, asked := agents.AckRequested(text); {
		case toolResult:
			return fakemodel.Reply{Text: "done", Input: 3000, Output: 10}, true
		case asked:
			return fakemodel.Reply{Tool: agents.ToolHandoffAck, ToolInput: map[string]any{"tasks": tasks}, Input: 2000, Output: 10}, true
		case strings.Contains(text, workflows.HandoffRequestPrompt):
			return fakemodel.Reply{Text: "The toggle is half done; the stylesheet is next.", Input: 5000, Output: 20}, true
		case !wrote:
			wrote = true
			return fakemodel.Reply{Shell: "echo 'body { color: white }' > dark-mode.css", Input: 4000, Output: 20}, true
		default:
			return fakemodel.Reply{Text: "working on the toggle", Input: 4500, Output: 10}, true
		}
	})
	return m
}

// sessionYAML is a session of kind in nid.yaml, run against the fake model
// the way the adapter suite runs it, with agentEnv's environment.
func sessionYAML(t *testing.T, kind string, m *fakemodel.Model) string {
	return sessionYAMLWith(t, kind, agentEnv(t, kind, m))
}

// agentEnv is the environment of a session of kind run against the fake
// model: a home and temp directory of its own, and for Codex a CODEX_HOME
// whose config.toml names the fake model as its provider. Claude Code keeps
// its sandbox's sockets in its temp directory, whose path must stay short:
// t.TempDir() holds the test's long name.
func agentEnv(t *testing.T, kind string, m *fakemodel.Model) map[string]string {
	home := t.TempDir()
	tmp, err := os.MkdirTemp("", "nid-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(tmp) })
	env := map[string]string{"HOME": home, "TMPDIR": tmp}
	switch kind {
	case agents.KindClaude:
		maps.Copy(env, m.ClaudeEnv())
		env["CLAUDE_CODE_TMPDIR"] = tmp
	case agents.KindCodex:
		codexHome := filepath.Join(home, ".codex")
		require.NoError(t, os.MkdirAll(codexHome, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(m.CodexProvider()), 0o644))
		env["CODEX_HOME"], env[fakemodel.CodexAPIKeyEnv] = codexHome, "test-key"
	}
	return env
}

// sessionYAMLWith is the session web/lead of kind in nid.yaml, its pinned
// CLI run with env.
func sessionYAMLWith(t *testing.T, kind string, env map[string]string) string {
	b, err := json.Marshal(env)
	require.NoError(t, err)
	y := fmt.Sprintf("      - agent: %s\n        name: lead\n        command: %s\n        turnTimeout: 2m\n        env: %s\n", kind, agentCLI(t, kind), b)
	if kind == agents.KindClaude {
		y += "        model: claude-sonnet-4-5\n"
	}
	return y
}

// A Claude Code or Codex session whose handoff request is answered without
// handoff_write gets a handoff nid builds from the transcript; its fresh
// conversation's first message names the file changed in the worktree, and
// the fresh conversation's handoff_ack with the task it holds makes the
// rotation verified: true.
func TestRealAgentsHandoffNidVouchesFor(t *testing.T) {
	for _, kind := range []string{agents.KindClaude, agents.KindCodex} {
		t.Run(kind, func(t *testing.T) {
			m := handoffModel(t)
			s := newSite(t, fmt.Sprintf(`  real:
    repo: %s
    rotate: {mode: off}
    budget: {turns: 3}
    tasks:
      - title: Dark mode toggle
    sessions:
%s`, gitRepo(t), sessionYAML(t, kind, m)))
			s.up()
			c := s.client()
			s.eventually("the first turn", 3*time.Minute, func() bool { return s.session(c, "real", "lead").Context.TotalTurns >= 1 })
			s.mustNid("rotate", "real/lead", "--mode", "handoff")
			var v workflows.SessionView
			s.eventually("the handoff", 3*time.Minute, func() bool {
				v = s.session(c, "real", "lead")
				return slices.ContainsFunc(v.Receipts, func(r workflows.RotationEvent) bool { return r.Method == "handoff" })
			})
			r := v.Receipts[slices.IndexFunc(v.Receipts, func(r workflows.RotationEvent) bool { return r.Method == "handoff" })]
			require.True(t, r.OK, r.Error)
			require.Equal(t, workflows.SummaryFromNid, r.SummarySource, "the agent wrote no handoff: nid built one")
			require.NotNil(t, r.Facts)
			require.True(t, r.Facts.Repo)
			require.Equal(t, "nid/real/lead", r.Facts.Branch)
			require.Positive(t, r.Facts.Changed, "the file the agent wrote is uncommitted")
			require.Equal(t, workflows.VerifiedTrue, r.Verified, r.VerifyNote)
			require.Positive(t, r.CostTokens, "the handoff request and the fresh turn cost tokens")
			if kind == agents.KindClaude {
				require.Positive(t, r.CostUSD, "Claude Code reports what its turns cost")
			}
			require.Positive(t, r.SummaryBytes)

			var fresh []string
			for _, req := range m.Requests() {
				if text, _ := lastAsk(req.Body); strings.Contains(text, "nid rotated your conversation") {
					fresh = append(fresh, text)
				}
			}
			require.NotEmpty(t, fresh, "the fresh conversation's first message reached the model")
			require.Contains(t, fresh[0], "Your previous conversation could not write a handoff. nid wrote this one from its transcript:")
			require.Contains(t, fresh[0], "?? dark-mode.css", "the first message names the file changed in the worktree")
			require.Contains(t, fresh[0], "You hold task t1")

			var sums []nidclient.SessionRotations
			require.NoError(t, json.Unmarshal([]byte(s.mustNid("rotations", "real/lead", "--json")), &sums))
			require.Equal(t, 1, sums[0].Stats.Verified)
			var items []workflows.InboxItem
			require.NoError(t, json.Unmarshal([]byte(s.mustNid("inbox", "real", "--json")), &items))
			for _, it := range items {
				require.NotEqual(t, "handoff-unverified", it.Kind, it.Text)
			}
			require.Contains(t, s.mustNid("transcript", "real/lead"), "?? dark-mode.css", "the facts are in the transcript")
		})
	}
}
