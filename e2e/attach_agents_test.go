package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/internal/agenttest"
	"github.com/nid-dev/nid/internal/fakemodel"
	"github.com/nid-dev/nid/internal/temporaltest"
	"github.com/nid-dev/nid/statedir"
	"github.com/nid-dev/nid/workflows"
)

// attachAgent is what the test needs to know of a kind's CLI: the replies
// whose usage makes the context 25% after the first turn, 30% after the
// second and 42% after the person's, as the kind counts a reply's usage
// against its window.
type attachAgent struct {
	kind                 string
	first, second, typed fakemodel.Reply
	used, window         int64
}

var attachAgents = []attachAgent{
	{
		kind: agents.KindClaude,
		// Claude Code counts the context it sent, cached or not, of 200k.
		first:  fakemodel.Reply{Text: "first answer", Input: 50_000, Cached: 3000, Output: 20},
		second: fakemodel.Reply{Text: "second answer", Input: 60_000, Output: 20},
		typed:  fakemodel.Reply{Text: "typed answer", Input: 84_000, Cached: 1000, Output: 30},
		used:   84_000,
		window: 200_000,
	},
	{
		kind: agents.KindCodex,
		// Codex counts the whole last response, its output included, of
		// 95% of gpt-5.5's 272k.
		first:  fakemodel.Reply{Text: "first answer", Input: 64_570, Output: 30},
		second: fakemodel.Reply{Text: "second answer", Input: 77_490, Output: 30},
		typed:  fakemodel.Reply{Text: "typed answer", Input: 108_498, Output: 30},
		used:   108_528,
		window: 258_400,
	},
}

// A person attaches to a Claude Code or Codex session, run with nid's
// default settings in a git repo, the way they would, while a turn runs:
// nid attach waits for it to end, then opens the vendor's own CLI on the
// session's conversation, showing that turn's answer; the model is sent the
// earlier messages with what they type, the commands the model runs for
// them write in the worktree but cannot read nid's state directory, and
// when they exit nid attach says what it found, nid ls shows the context
// the model reported for their turn, and a message sent while they were
// attached is delivered in the conversation they ended in.
func TestAttachToARealAgentAndHandItBack(t *testing.T) {
	for _, a := range attachAgents {
		t.Run(a.kind, func(t *testing.T) {
			m := fakemodel.Start(t)
			s := newSite(t, "")
			secret := filepath.Join(s.dir, ".nid", "mcp.key")
			var mu sync.Mutex
			personTools := 0
			m.Route(func(r fakemodel.Request) (fakemodel.Reply, bool) {
				text, toolResult := lastAsk(r.Body)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case toolResult && personTools == 0:
					personTools++
					return fakemodel.Reply{Shell: "cat " + secret + " > stolen.txt", Input: 1000, Output: 5}, true
				case toolResult && personTools == 1:
					personTools++
					return a.typed, true
				case strings.Contains(text, "do the two things"):
					return fakemodel.Reply{Shell: "echo person > inside.txt", Input: 1000, Output: 5}, true
				case strings.Contains(text, "remember the word pelican"):
					return a.first, true
				case strings.Contains(text, "and the word heron"):
					return a.second, true
				}
				return fakemodel.Reply{}, false
			})
			env := agentEnv(t, a.kind, m)
			s.groups = `  web:
    repo: ` + gitRepo(t) + `
    rotate: {mode: off}
    sessions:
` + sessionYAMLWith(t, a.kind, env)
			s.writeConfig()
			// The person has used the CLI in the session's worktree before:
			// its first-run screens are behind them. Written before nid up,
			// ahead of the session's own CLI, which writes the same files.
			workDir := filepath.Join(s.dir, ".nid", statedir.Worktrees, "web", "lead")
			agenttest.TrustWorkDir(t, a.kind, env["HOME"], env["CODEX_HOME"], workDir, env["ANTHROPIC_API_KEY"])
			up := s.up()
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("nid up:\n%s", up.out.String())
				}
			})
			c := s.client()
			s.mustNid("send", "web/lead", "remember the word pelican")
			s.eventually("the first turn", 3*time.Minute, func() bool { return s.ls()["web/lead"].Turns == 1 })
			v := s.session(c, "web", "lead")
			require.Equal(t, workDir, v.WorkDir, "the worktree the CLI was told to trust")

			// The second turn's answer waits until nid attach waits for it.
			answer := make(chan struct{})
			var answered sync.Once
			letAnswer := func() { answered.Do(func() { close(answer) }) }
			t.Cleanup(letAnswer)
			m.OnRequest(func() { <-answer })
			s.mustNid("send", "web/lead", "and the word heron")
			s.eventually("the second turn to start", time.Minute, func() bool { return s.ls()["web/lead"].Status == workflows.StatusWorking })
			cmd := exec.Command(temporaltest.Binary(t), "attach", "web/lead")
			cmd.Dir = s.dir
			cmd.Env = append(os.Environ(), "TERM=xterm-256color")
			term := agenttest.StartTerminal(t, cmd)
			mark := term.WaitFor(0, "waiting for turn 2 of web/lead to end")
			m.OnRequest(nil)
			letAnswer()
			mark = term.WaitFor(mark, "attached to web/lead")
			// The person sees the conversation the agent had, up to the
			// turn nid attach waited for.
			mark = term.WaitFor(mark, "second answer")
			require.Equal(t, workflows.StatusAttached, s.ls()["web/lead"].Status)
			out, errOut, code := s.nid("send", "web/lead", "Carry on after the hand-back")
			require.Equal(t, 0, code, errOut)
			require.Contains(t, out+errOut, "attached", "nid send says the message waits for the hand-back")

			mark = term.TypeLine(mark, "do the two things")
			mark = term.WaitFor(mark, "typed answer")
			var typed fakemodel.Request
			for _, r := range m.Requests() {
				if text, toolResult := lastAsk(r.Body); !toolResult && strings.Contains(text, "do the two things") {
					typed = r
					break
				}
			}
			require.Contains(t, typed.Body, "remember the word pelican", "the model was sent the conversation's earlier messages")
			b, err := os.ReadFile(filepath.Join(v.WorkDir, "inside.txt"))
			require.NoError(t, err, "the CLI's command wrote in the worktree")
			require.Equal(t, "person\n", string(b))
			key, err := os.ReadFile(secret)
			require.NoError(t, err)
			b, _ = os.ReadFile(filepath.Join(v.WorkDir, "stolen.txt"))
			require.NotContains(t, string(b), string(key), "the CLI's command could not read nid's state directory")

			// The queued message's turn waits for the test to have read
			// the hand-back's numbers, which its own answer would change.
			release := make(chan struct{})
			var once sync.Once
			let := func() { once.Do(func() { close(release) }) }
			t.Cleanup(let)
			m.OnRequest(func() { <-release })
			term.Exit(mark, 2*time.Minute)
			mark = term.WaitFor(mark, "handed back: context 30%")
			mark = term.WaitFor(mark, "→ 42%")
			term.WaitFor(mark, ", 1 turn by hand")
			row := s.ls()["web/lead"]
			require.Equal(t, a.used, row.Context.UsedTokens, "nid ls shows the context the model reported for the typed turn")
			require.Equal(t, a.window, row.Context.WindowTokens)
			require.Equal(t, 3, row.Context.TotalTurns, "the turn by hand counts")
			let()

			var queued fakemodel.Request
			s.eventually("the queued message delivered after the hand-back", 3*time.Minute, func() bool {
				for _, r := range m.Requests() {
					if text, _ := lastAsk(r.Body); strings.Contains(text, "Carry on after the hand-back") {
						queued = r
						return true
					}
				}
				return false
			})
			require.Contains(t, queued.Body, "do the two things", "the next turn goes on in the conversation the person ended in")
			s.eventually("the turn after the hand-back", 3*time.Minute, func() bool { return s.ls()["web/lead"].Context.TotalTurns == 4 })

			// A nid attach killed with -9 in the person's shell takes the
			// CLI it started with it, and the session takes the hold back
			// within the lease.
			shell := exec.Command("sh", "-c", `"$0" attach web/lead; echo back in the shell; sleep 300`, temporaltest.Binary(t))
			shell.Dir = s.dir
			shell.Env = cmd.Env
			term = agenttest.StartTerminal(t, shell)
			mark = term.WaitFor(0, "attached to web/lead")
			term.WaitFor(mark, "typed answer")
			nidAttach := childrenOf(t, shell.Process.Pid)
			require.Len(t, nidAttach, 1)
			cli := childrenOf(t, nidAttach[0])
			require.Len(t, cli, 1, "nid attach runs the CLI")
			require.NoError(t, syscall.Kill(nidAttach[0], syscall.SIGKILL))
			killed := time.Now()
			term.WaitFor(mark, "back in the shell")
			s.eventually("the CLI to end with nid attach", 10*time.Second, func() bool { return !running(cli[0]) })
			s.eventually("the lease to run out", workflows.AttachLease+30*time.Second, func() bool {
				return s.ls()["web/lead"].Status != workflows.StatusAttached
			})
			require.Less(t, time.Since(killed), workflows.AttachLease+30*time.Second)
			require.True(t, s.session(c, "web", "lead").LastHandback.Expired, "taken back when the lease ran out")
		})
	}
}

// childrenOf is the pids of the processes pid started.
func childrenOf(t *testing.T, pid int) []int {
	t.Helper()
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	require.NoError(t, err)
	var kids []int
	for _, task := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, task.Name()))
		require.NoError(t, err)
		for _, f := range strings.Fields(string(b)) {
			kid, err := strconv.Atoi(f)
			require.NoError(t, err)
			kids = append(kids, kid)
		}
	}
	return kids
}
