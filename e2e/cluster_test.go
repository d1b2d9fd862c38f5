package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/nid-dev/nid/internal/clustertest"
	"github.com/nid-dev/nid/workflows"
)

// hostRow is one object of nid hosts --json.
type hostRow struct {
	Name        string   `json:"name"`
	Alive       bool     `json:"alive"`
	MaxSessions int      `json:"maxSessions"`
	Sessions    []string `json:"sessions"`
	Free        int      `json:"free"`
}

// newHost is a site that runs only nid worker, as host name, against the
// cluster at address.
func newHost(t *testing.T, address, name, groups string) *site {
	h := newSite(t, groups)
	h.cluster = address
	h.worker = fmt.Sprintf("  host: %s\n  maxSessions: 4\n  heartbeat: 1s\n", name)
	h.writeConfig()
	return h
}

// TestClusterTwoHosts runs nid on a real Temporal cluster (the server built
// from the module nid uses, on PostgreSQL) with two worker hosts and a
// nid up that takes no sessions itself: sessions are placed on both hosts
// and run only there; a host killed with -9 leaves its sessions waiting
// while the other host's keep working, and they resume with their counters
// when it comes back; nid ls, nid hosts, nid rotate, the API and the search
// attributes work as on the embedded server.
func TestClusterTwoHosts(t *testing.T) {
	cl := clustertest.Start(t)
	repo := gitRepo(t)
	groups := `  api:
    repo: ` + repo + `
    rotate: {mode: off}
    tasks: [{title: Write the parser}]
    sessions:
      - {agent: sim, name: dev, host: host-a, sim: {window: 10000000, tokensPerTurn: 100, turnDelay: 300ms, taskTurns: 100000}}
  web:
    goal: Build the parser
    rotate: {mode: off}
    sessions:
      - {agent: sim, name: s1, sim: {window: 10000000, tokensPerTurn: 100, turnDelay: 300ms}}
      - {agent: sim, name: s2, sim: {window: 10000000, tokensPerTurn: 100, turnDelay: 300ms}}
      - {agent: sim, name: s3, sim: {window: 10000000, tokensPerTurn: 100, turnDelay: 300ms}}
      - {agent: sim, name: s4, sim: {window: 10000000, tokensPerTurn: 100, turnDelay: 300ms}}
`
	// Each host's nid.yaml lists the sessions it may run, as the README
	// says: the worker takes where a session works from its own file.
	hostA, hostB := newHost(t, cl.Address, "host-a", groups), newHost(t, cl.Address, "host-b", groups)
	workerA := hostA.serveNid("worker")
	workerB := hostB.serveNid("worker")
	coord := newSite(t, groups)
	coord.cluster = cl.Address
	coord.worker = "  maxSessions: 0\n"
	coord.writeConfig()
	up := coord.up()

	// Placement: api/dev where nid.yaml pins it (groups start in order of
	// name), then the most room first, the first by name among equals.
	want := map[string]string{"api/dev": "host-a", "web/s1": "host-b", "web/s2": "host-a", "web/s3": "host-b", "web/s4": "host-a"}
	coord.eventually("every session to take turns", 3*time.Minute, func() bool {
		rows := coord.ls()
		for ref := range want {
			if rows[ref].Turns < 2 {
				return false
			}
		}
		return true
	})
	for ref, host := range want {
		require.Equal(t, host, coord.ls()[ref].Host, "%s's host in nid ls --json", ref)
	}
	text := coord.mustNid("ls")
	require.Regexp(t, `(?m)^web/s1\s+sim\s+\S+\s+host-b\s`, text, "nid ls shows the HOST column")

	// Each session's turns ran on its own host: the sim keeps its
	// conversations in that host's state directory, and only there.
	for ref, host := range want {
		group, name, _ := strings.Cut(ref, "/")
		own, other := hostA, hostB
		if host == "host-b" {
			own, other = hostB, hostA
		}
		require.NotEmpty(t, simConversations(t, own, group, name), "%s ran on %s", ref, host)
		require.Empty(t, simConversations(t, other, group, name), "%s never ran on the other host", ref)
	}

	hosts := coord.hosts()
	require.Len(t, hosts, 2, "nid up with maxSessions 0 registers no host")
	require.Equal(t, hostRow{Name: "host-a", Alive: true, MaxSessions: 4, Sessions: []string{"api/dev", "web/s2", "web/s4"}, Free: 1}, hosts["host-a"])
	require.Equal(t, hostRow{Name: "host-b", Alive: true, MaxSessions: 4, Sessions: []string{"web/s1", "web/s3"}, Free: 2}, hosts["host-b"])
	require.Regexp(t, `(?m)^host-b\s+yes\s+.*2/4\s+2\s+web/s1 web/s3$`, coord.mustNid("hosts"))

	// kill -9 host-b's worker: its sessions wait, host-a's keep working.
	workerB.kill()
	coord.eventually("host-b's sessions to wait for it", 2*time.Minute, func() bool {
		rows := coord.ls()
		return rows["web/s1"].Status == workflows.StatusHostDown && rows["web/s3"].Status == workflows.StatusHostDown
	})
	require.False(t, coord.hosts()["host-b"].Alive)
	down := coord.ls()
	coord.eventually("host-a's sessions to keep working", 2*time.Minute, func() bool {
		rows := coord.ls()
		return rows["web/s2"].Turns >= down["web/s2"].Turns+3 && rows["web/s4"].Turns >= down["web/s4"].Turns+3
	})
	still := coord.ls()
	for _, ref := range []string{"web/s1", "web/s3"} {
		require.Equal(t, workflows.StatusHostDown, still[ref].Status, "%s waits while host-b is down", ref)
		require.Equal(t, down[ref].Turns, still[ref].Turns, "%s takes no turn while host-b is down", ref)
	}
	_, errOut, code := coord.nid("move", "api/dev", "host-b")
	require.NotEqual(t, 0, code)
	require.Contains(t, errOut, "host host-b is down: start nid worker --host host-b there first")

	// host-b comes back: its sessions resume where they were.
	workerB = hostB.serveNid("worker")
	coord.eventually("host-b's sessions to resume", 3*time.Minute, func() bool {
		rows := coord.ls()
		return rows["web/s1"].Turns > still["web/s1"].Turns+1 && rows["web/s3"].Turns > still["web/s3"].Turns+1
	})
	c := coord.client()
	for _, name := range []string{"s1", "s3"} {
		v := coord.session(c, "web", name)
		require.Equal(t, "host-b", v.Host)
		require.GreaterOrEqual(t, countTurnEvents(v), 3)
		require.Equal(t, []string{"host host-b is down: waiting for it", "host host-b is back: resuming"}, hostEvents(v))
	}

	// nid rotate reaches a session on host-b and its rotation runs there.
	coord.mustNid("rotate", "web/s1", "--mode", "compact")
	coord.eventually("web/s1's rotation", 2*time.Minute, func() bool { return coord.ls()["web/s1"].Context.Rotations == 1 })

	// nid move: api/dev holds its task and a lock, has committed and
	// uncommitted work on host-a; all of it arrives on host-b.
	oldTree := filepath.Join(hostA.dir, ".nid", "worktrees", "api", "dev")
	coord.eventually("api/dev's task and worktree", 2*time.Minute, func() bool {
		v := coord.session(c, "api", "dev")
		return v.Task != nil && v.Worktree == oldTree
	})
	hostA.mcpCall("api", "dev", "lock_acquire", map[string]any{"name": "src/parser.go"})
	gitIn(t, oldTree, "-c", "user.email=agent@example.com", "-c", "user.name=agent", "commit", "-q", "--allow-empty", "-m", "Parser skeleton")
	require.NoError(t, os.WriteFile(filepath.Join(oldTree, "parser.go"), []byte("package parser\n"), 0o644))
	before := coord.session(c, "api", "dev")
	out := coord.mustNid("move", "api/dev", "host-b")
	require.Contains(t, out, "api/dev moves from host host-a to host host-b")
	coord.eventually("api/dev on host-b", 3*time.Minute, func() bool {
		v := coord.session(c, "api", "dev")
		return v.Host == "host-b" && v.Context.TotalTurns > before.Context.TotalTurns+1
	})
	moved := coord.session(c, "api", "dev")
	newTree := filepath.Join(hostB.dir, ".nid", "worktrees", "api", "dev")
	require.Equal(t, newTree, moved.Worktree, "a fresh worktree on host-b")
	require.Equal(t, before.Task.ID, moved.Task.ID, "the claim is kept")
	require.Equal(t, []string{"src/parser.go"}, moved.Locks, "the lock is kept")
	require.Equal(t, "Parser skeleton", gitIn(t, newTree, "log", "-1", "--format=%s"), "the branch arrived")
	require.Equal(t, "?? parser.go", gitIn(t, newTree, "status", "--porcelain"), "the uncommitted work arrived, uncommitted")
	_, err := os.Stat(oldTree)
	require.True(t, os.IsNotExist(err), "the worktree on host-a is gone")
	var move *workflows.RotationEvent
	for _, r := range rotationEvents(moved) {
		if r.Reason == workflows.ReasonMove {
			move = &r
		}
	}
	require.NotNil(t, move, "the move is a rotation event")
	require.Equal(t, "host-a", move.FromHost)
	require.Equal(t, "host-b", move.ToHost)
	require.Equal(t, "refs/nid/salvage/api/dev/1", move.Salvage)
	require.NotEmpty(t, simConversations(t, hostB, "api", "dev"), "the fresh conversation runs on host-b")
	// The listing comes from visibility, which the cluster writes after
	// the history: it may lag the session's own view by a moment.
	coord.eventually("nid ls to list api/dev on host-b", time.Minute, func() bool { return coord.ls()["api/dev"].Host == "host-b" })
	require.Contains(t, coord.hosts()["host-b"].Sessions, "api/dev")
	hostB.mcpCall("api", "dev", "lock_release", map[string]any{"name": "src/parser.go"})
	coord.eventually("the lock released through host-b's MCP endpoint", time.Minute, func() bool {
		return len(coord.session(c, "api", "dev").Locks) == 0
	})

	// The host is a search attribute on the cluster's SQL visibility too.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		Query: fmt.Sprintf("%s = 'host-b' AND ExecutionStatus = 'Running' AND WorkflowType = '%s'", workflows.SearchHost, workflows.SessionWorkflowName),
	})
	require.NoError(t, err)
	var onB []string
	for _, e := range resp.GetExecutions() {
		onB = append(onB, e.GetExecution().GetWorkflowId())
	}
	slices.Sort(onB)
	require.Equal(t, []string{workflows.SessionID("api", "dev"), workflows.SessionID("web", "s1"), workflows.SessionID("web", "s3")}, slices.Compact(onB))

	// The coordinator's API lists the sessions with their hosts, and the
	// hosts.
	var list struct {
		Sessions []struct {
			Group, Name, Host string
		} `json:"sessions"`
	}
	coord.api(t, "session.list", `{"group":"web"}`, &list)
	require.Len(t, list.Sessions, 4)
	for _, s := range list.Sessions {
		require.Equal(t, want["web/"+s.Name], s.Host)
	}
	var answer struct{ Text string }
	coord.api(t, "session.move", `{"session":"web/s2","host":"host-b"}`, &answer)
	require.Contains(t, answer.Text, "web/s2 moves from host host-a to host host-b")
	coord.eventually("web/s2 on host-b", 3*time.Minute, func() bool {
		r := coord.ls()["web/s2"]
		return r.Host == "host-b" && r.Status != workflows.StatusRotating
	})
	var hl struct {
		Hosts []hostRow `json:"hosts"`
	}
	coord.api(t, "host.list", `{}`, &hl)
	require.Len(t, hl.Hosts, 2)

	require.NoError(t, up.interrupt(t), "Ctrl-C stops nid up:\n%s", up.out.String())
	require.NoError(t, workerB.interrupt(t), "Ctrl-C stops nid worker:\n%s", workerB.out.String())
	require.NoError(t, workerA.interrupt(t), "Ctrl-C stops nid worker:\n%s", workerA.out.String())
}

// hosts is nid hosts --json, by host name.
func (s *site) hosts() map[string]hostRow {
	return listBy(s, func(r hostRow) string { return r.Name }, "hosts", "--json")
}

// api calls the site's JSON API with the token nid made in its state
// directory.
func (s *site) api(t *testing.T, method, body string, out any) {
	t.Helper()
	token, err := os.ReadFile(filepath.Join(s.dir, ".nid", "http-token"))
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, fmt.Sprintf("http://127.0.0.1:%d/api/%s", s.http, method), bytes.NewBufferString(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", method, b)
	require.NoError(t, json.Unmarshal(b, out))
}

// simConversations lists the sim's conversation files of group/name in a
// host's state directory.
func simConversations(t *testing.T, s *site, group, name string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(s.dir, ".nid", "sim", group, name, "*.json"))
	require.NoError(t, err)
	return files
}

func hostEvents(v workflows.SessionView) []string {
	var out []string
	for _, e := range v.Events {
		if e.Kind == workflows.EventHost {
			out = append(out, e.Text)
		}
	}
	return out
}

func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	require.NoError(t, err, "git %s: %s", strings.Join(args, " "), out)
	return strings.TrimSpace(string(out))
}

// On a cluster that has never seen nid, the search attributes its first
// worker adds are stored at once but used by the server's services only
// from their next namespace cache refresh (here made slow, so that the
// window cannot be missed): nid up waits for that rather than failing to
// start its first group with "no mapping defined for search attribute".
func TestNidUpOnAFreshClusterWaitsForItsSearchAttributes(t *testing.T) {
	cl := clustertest.StartWith(t, clustertest.Options{DynamicConfig: "system.namespaceCacheRefreshInterval:\n  - value: 15s\n"})
	s := newSite(t, "  web:\n    goal: Keep going\n    rotate: {mode: off}\n    sessions:\n      - {agent: sim, name: lead, sim: {turnDelay: 200ms}}\n")
	s.cluster = cl.Address
	s.writeConfig()
	s.up()
	s.eventually("web/lead taking turns", 2*time.Minute, func() bool { return s.ls()["web/lead"].Turns > 0 })
}
