package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/nid-dev/nid/activities"
	"github.com/nid-dev/nid/internal/temporaltest"
	"github.com/nid-dev/nid/workflows"
)

// TestSplitProcessesWorkerKilledMidTurn runs the server and the worker as
// separate processes, kills the worker while a turn is in flight, and starts
// another: the turn is run again to completion exactly once, in the same
// conversation.
func TestSplitProcessesWorkerKilledMidTurn(t *testing.T) {
	// No goal: the session takes a turn only for a message, so every turn
	// the test counts is one it asked for.
	groups := `  web:
    rotate: {mode: off}
    sessions:
      - agent: sim
        name: lead
        sim: {window: 1000000, tokensPerTurn: 100, turnDelay: 3s}
`
	host := newSite(t, groups)
	server := host.serveNid("server")
	require.Contains(t, server.out.String(), fmt.Sprintf("http://127.0.0.1:%d", host.ui), "nid server says where its Web UI is")

	guest := newSite(t, groups)
	guest.join(host)
	up := guest.up()
	require.Contains(t, up.out.String(), "not started here", "nid up against nid server starts no server of its own")

	c := guest.client()
	lead := func() workflows.SessionView { return guest.session(c, "web", "lead") }
	guest.mustNid("send", "web/lead", "Write the parser")
	guest.eventually("the first turn", time.Minute, func() bool {
		v := lead()
		return v.Context.TotalTurns == 1 && v.Status == workflows.StatusIdle
	})
	conversation := lead().Conversation
	require.NotEmpty(t, conversation)

	guest.mustNid("send", "web/lead", "Write the printer")
	guest.eventually("the second turn to reach the worker", time.Minute, func() bool { return turnInFlight(t, c, "web", "lead") })
	up.kill()
	require.Equal(t, 1, simTurns(t, guest, conversation), "the killed turn saved nothing")

	w := guest.serveNid("worker")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("nid worker:\n%s", w.out.String())
		}
	})
	// Within the API's own limit: the server no longer waits on the killed
	// worker's queue.
	_, err := querySessionViewWithin(c, "web", "lead", 5*time.Second)
	require.NoError(t, err, "the new worker answers for the session as soon as it serves")
	// The killed turn's activity is retried once its heartbeat times out.
	guest.eventually("the second turn on the new worker", 2*time.Minute, func() bool {
		v, err := querySessionView(c, "web", "lead")
		return err == nil && v.Context.TotalTurns >= 2 && v.Status == workflows.StatusIdle
	})
	v := lead()
	require.Equal(t, 2, v.Context.TotalTurns, "the retried turn counts once")
	require.Equal(t, conversation, v.Conversation, "the conversation survives the worker")
	require.Equal(t, 2, simTurns(t, guest, conversation), "the agent ran the turn to completion once")
	require.Contains(t, v.LastOutput, fmt.Sprintf("sim turn 2 of conversation %s", conversation))
	require.Equal(t, 2, countTurnEvents(v))
	require.Len(t, simFiles(t, guest), 1, "no second conversation was started")

	tries := turnTries(t, c, "web", "lead")
	require.Len(t, tries, 3, "the killed turn completed on its second try: %v", tries)
	require.Equal(t, "completed", tries[0])
	require.NotEqual(t, "completed", tries[1], "the killed try")
	require.Equal(t, "completed", tries[2])

	require.NoError(t, w.interrupt(t), "Ctrl-C stops nid worker cleanly:\n%s", w.out.String())
	require.NoError(t, server.interrupt(t), "Ctrl-C stops nid server cleanly:\n%s", server.out.String())
}

// serveNid starts a long-running nid command in the site and waits until it
// prints the Temporal address it serves or uses.
func (s *site) serveNid(args ...string) *upProcess {
	s.t.Helper()
	p := &upProcess{out: &temporaltest.SyncBuffer{}, done: make(chan error, 1)}
	p.cmd = exec.Command(temporaltest.Binary(s.t), args...)
	p.cmd.Dir = s.dir
	p.cmd.Env = append(os.Environ(), "NO_COLOR=1")
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	require.NoError(s.t, p.cmd.Start())
	go func() { p.done <- p.cmd.Wait() }()
	s.t.Cleanup(func() { p.kill() })
	s.eventually("nid "+strings.Join(args, " ")+" to serve", 2*time.Minute, func() bool {
		select {
		case err := <-p.done:
			p.done <- err
			s.t.Fatalf("nid %s exited (%v):\n%s", strings.Join(args, " "), err, p.out.String())
		default:
		}
		return strings.Contains(p.out.String(), s.address())
	})
	return p
}

// querySessionView is site.session returning its error, for polls that
// wait out a worker taking over.
func querySessionView(c client.Client, group, name string) (workflows.SessionView, error) {
	return querySessionViewWithin(c, group, name, 10*time.Second)
}

func querySessionViewWithin(c client.Client, group, name string, limit time.Duration) (workflows.SessionView, error) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	var view workflows.SessionView
	v, err := c.QueryWorkflow(ctx, workflows.SessionID(group, name), "", workflows.QuerySession)
	if err == nil {
		err = v.Get(&view)
	}
	return view, err
}

// turnInFlight says whether a worker has started the session's turn and
// not finished it.
func turnInFlight(t *testing.T, c client.Client, group, name string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := c.DescribeWorkflowExecution(ctx, workflows.SessionID(group, name), "")
	require.NoError(t, err)
	for _, a := range d.GetPendingActivities() {
		if a.GetActivityType().GetName() == activities.RunTurnName && a.GetState() == enumspb.PENDING_ACTIVITY_STATE_STARTED {
			return true
		}
	}
	return false
}

// simTurns is the number of turns the sim agent saved in a conversation of
// web/lead.
func simTurns(t *testing.T, s *site, conversation string) int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(s.dir, ".nid", "sim", "web", "lead", conversation+".json"))
	require.NoError(t, err)
	var st struct {
		Turns int `json:"turns"`
	}
	require.NoError(t, json.Unmarshal(data, &st))
	return st.Turns
}

// simFiles lists web/lead's sim conversation files.
func simFiles(t *testing.T, s *site) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(s.dir, ".nid", "sim", "web", "lead", "*.json"))
	require.NoError(t, err)
	return files
}

// countTurnEvents counts the turns the session's event log recorded.
func countTurnEvents(v workflows.SessionView) int {
	n := 0
	for _, e := range v.Events {
		if e.Kind == workflows.EventTurn {
			n++
		}
	}
	return n
}
