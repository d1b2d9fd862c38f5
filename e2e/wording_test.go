package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/internal/temporaltest"
	"github.com/nid-dev/nid/workflows"
)

// nidWith runs one CLI command in the site with extra environment
// variables, and returns its combined output and exit code.
func (s *site) nidWith(env []string, args ...string) (string, int) {
	s.t.Helper()
	cmd := exec.Command(temporaltest.Binary(s.t), args...)
	cmd.Dir = s.dir
	cmd.Env = append(append(os.Environ(), "NO_COLOR=1"), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if exit, ok := err.(*exec.ExitError); ok {
		return out.String(), exit.ExitCode()
	}
	require.NoError(s.t, err)
	return out.String(), 0
}

// An error names what the user wrote: the variable that set a bad value,
// not nid.yaml; the line a YAML mistake is on, not where its block
// starts. A refused start leaves no state directory behind.
func TestErrorsNameWhatTheUserWrote(t *testing.T) {
	t.Parallel()
	s := newSite(t, "  web:\n    sessions:\n      - {agent: sim, name: lead}\n")
	for _, tt := range []struct {
		env  string
		want string
	}{
		{"NID_TEMPORAL_PORT=abc", `nid: environment: NID_TEMPORAL_PORT (temporal.port): "abc" is not a number` + "\n"},
		{"NID_TEMPORAL_PROT=7300", "nid: environment: NID_TEMPORAL_PROT: unknown environment variable; did you mean NID_TEMPORAL_PORT?\n"},
	} {
		out, code := s.nidWith([]string{tt.env}, "ls")
		require.Equal(t, 1, code, out)
		require.Equal(t, tt.want, out, tt.env)
	}

	bad := filepath.Join(s.dir, "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("state: .nid\ngroups:\n  web:\n    goal: ship it\n    sessions:\n      - agent: sim\n        name: lead\n     - agent: sim\n"), 0o644))
	out, code := s.nidWith(nil, "ls", "--config", bad)
	require.Equal(t, 1, code, out)
	require.Equal(t, "nid: "+bad+": line 8: did not find expected key\n", out)

	exposed := filepath.Join(s.dir, "exposed.yaml")
	require.NoError(t, os.WriteFile(exposed, []byte("state: exposed-state\nhttp: {listen: 0.0.0.0:7777}\ngroups:\n  web:\n    sessions: [{agent: sim}]\n"), 0o644))
	out, code = s.nidWith(nil, "up", "--config", exposed)
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "http.listen 0.0.0.0:7777 is not a loopback address: set http.token")
	require.NoDirExists(t, filepath.Join(s.dir, "exposed-state"), "a refused nid up writes nothing")
}

// Help lists what a command takes, each default once.
func TestHelpListsWhatACommandTakes(t *testing.T) {
	t.Parallel()
	s := newSite(t, "  web:\n    sessions:\n      - {agent: sim, name: lead}\n")
	for _, command := range []string{"version", "completion"} {
		out := s.mustNid(command, "--help")
		require.NotContains(t, out, "--config", "nid %s reads no configuration", command)
		require.NotContains(t, out, "--log-level", "nid %s logs nothing", command)
	}
	out := s.mustNid("worker", "--help")
	line := regexp.MustCompile(`(?m)^\s+--max-sessions N.*$`).FindString(out)
	require.Equal(t, 1, strings.Count(line, "(default:"), line)
}

// What a team's sessions do reads as sentences: the inbox counts a
// repeated item beside its kind, a learned point starts lower-case after
// its label, the transcript's first header comes before the first prompt,
// and nid show puts the workdir beside the worktree.
func TestTeamOutputReads(t *testing.T) {
	t.Parallel()
	workdir := t.TempDir()
	s := newSite(t, `  web:
    rotate: {mode: compact, contextPercent: 85}
    sessions:
      - {agent: sim, name: lead, sim: {failCompact: true, turnDelay: 0s}}
      - {agent: sim, name: learner, sim: {window: 100000, tokensPerTurn: 8300, compactAt: 83, turnDelay: 0s}}
  docs:
    workdir: `+workdir+`
    sessions:
      - {agent: sim, name: writer, sim: {turnDelay: 0s}}
`)
	up := s.up()
	c := s.client()
	turns := func(name string, n int) {
		for i := 1; i <= n; i++ {
			s.mustNid("send", "web/"+name, fmt.Sprint("step ", i))
			s.eventually(fmt.Sprintf("%s's turn %d", name, i), time.Minute, func() bool {
				v := s.session(c, "web", name)
				return v.Context.TotalTurns == i && v.Status == workflows.StatusIdle
			})
		}
	}

	turns("lead", 1)
	for i := 1; i <= 3; i++ {
		s.mustNid("rotate", "web/lead", "--mode", "compact")
		s.eventually(fmt.Sprintf("failure %d in the inbox", i), time.Minute, func() bool {
			var items []workflows.InboxItem
			require.NoError(t, json.Unmarshal([]byte(s.mustNid("inbox", "web", "--json")), &items))
			return len(items) == 1 && max(items[0].Count, 1) == i
		})
	}
	inbox := s.mustNid("inbox", "web")
	require.Regexp(t, `web/lead  rotation-failed ×3  3 rotations failed in a row`, inbox)
	require.NotContains(t, inbox, "×3 3")

	// Ten turns reach 83%; the eleventh starts with the sim's compaction.
	turns("learner", 11)
	s.eventually("the learned point in the feed", time.Minute, func() bool {
		return strings.Contains(up.out.String(), "learned: the sim agent compacted itself at 83% of 100k")
	})
	require.NotContains(t, up.out.String(), "The sim agent")

	lines := strings.Split(s.mustNid("transcript", "web/learner"), "\n")
	require.Equal(t, "── conversation sim-1", lines[0], "the header comes before the conversation's first prompt")
	require.Regexp(t, `^\d\d:\d\d:\d\d > `, lines[1])

	show := s.mustNid("show", "docs/writer")
	require.Regexp(t, `(?m)^worktree +.*\nworkdir +`+regexp.QuoteMeta(workdir)+`\nworkflow +nid/docs/writer$`, show)
	require.NoError(t, up.interrupt(t))
}

// A Temporal server that stops is one line in words from each worker, not
// a raw SDK line per poller and per heartbeat.
func TestWorkerSaysOnceThatItsServerStopped(t *testing.T) {
	t.Parallel()
	groups := "  web:\n    sessions:\n      - {agent: sim, name: lead}\n"
	host := newSite(t, groups)
	server := host.serveNid("server")
	guest := newSite(t, groups)
	guest.worker = "  host: box-b\n  heartbeat: 1s\n"
	guest.join(host)
	w := guest.serveNid("worker")
	require.NoError(t, server.interrupt(t))

	said := fmt.Sprintf("this worker cannot take work from Temporal at %s: it does not answer; it keeps trying", host.address())
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(w.out.String(), said) || !strings.Contains(w.out.String(), "host box-b could not tell Temporal it is alive") {
		require.True(t, time.Now().Before(deadline), "the worker did not say its server is gone:\n%s", w.out.String())
		time.Sleep(200 * time.Millisecond)
	}
	// Long enough for every poller to have failed and several beats.
	time.Sleep(10 * time.Second)
	out := w.out.String()
	require.Equal(t, 1, strings.Count(out, said), out)
	require.Equal(t, 1, strings.Count(out, "could not tell Temporal it is alive"), out)
	for _, raw := range []string{"Failed to poll for task", "RecordActivityHeartbeat with error", "Heartbeat not delivered"} {
		require.NotContains(t, out, raw)
	}
}
