package nidclient_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"

	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/internal/temporaltest"
	"github.com/nid-dev/nid/nidclient"
	"github.com/nid-dev/nid/worker"
	"github.com/nid-dev/nid/workflows"
)

// groups: web rotates by handoff; web/stuck writes no handoff when asked,
// web/worker's and web/busy's turns last until the test ends; api says off.
// Sessions take a turn only when sent a message.
const groups = `  web:
    rotate: {mode: handoff}
    sessions:
      - {agent: sim, name: lead, sim: {turnDelay: 0s}}
      - {agent: sim, name: stuck, sim: {turnDelay: 0s, noHandoff: true}}
      - {agent: sim, name: worker, sim: {turnDelay: 1h}}
      - {agent: sim, name: busy, sim: {turnDelay: 1h}}
  api:
    rotate: {mode: off}
    sessions:
      - {agent: sim, name: exec, sim: {turnDelay: 0s}}
`

func TestRotate(t *testing.T) {
	t.Parallel()
	c := start(t, groups)
	ctx := context.Background()
	temporaltest.TakeTurns(t, c, "web", "lead", "l1")
	temporaltest.TakeTurns(t, c, "web", "stuck", "s1")
	working(t, c, "web", "worker")

	tests := []struct {
		name          string
		group, target string
		mode          string
		prepare       func(t *testing.T)
		want          workflows.RotateAnswer
	}{
		{
			name: "idle: now, by the group's mode", group: "web", target: "lead",
			want: workflows.RotateAnswer{When: workflows.RotateNow, Mode: config.ModeHandoff, Text: "rotating web/lead now (handoff)"},
		},
		{
			name: "working: after the turn, by the mode asked", group: "web", target: "worker", mode: config.ModeCompact,
			want: workflows.RotateAnswer{When: workflows.RotateAfterTurn, Mode: config.ModeCompact, Text: "web/worker is working: it rotates (compact) when the current turn ends"},
		},
		{
			name: "rotating by hand: joined", group: "web", target: "stuck",
			prepare: func(t *testing.T) {
				_, err := nidclient.Rotate(ctx, c, "web", "stuck", config.ModeHandoff)
				require.NoError(t, err)
				temporaltest.WaitSession(t, c, "web", "stuck", "to rotate", func(v workflows.SessionView) bool { return v.Rotating != nil })
			},
			want: workflows.RotateAnswer{When: workflows.RotateJoined, Mode: config.ModeHandoff, Text: "web/stuck is rotating now (handoff): this request joins that rotation"},
		},
		{
			name: "group says off: auto", group: "api", target: "exec",
			prepare: func(t *testing.T) { temporaltest.TakeTurns(t, c, "api", "exec", "e1") },
			want:    workflows.RotateAnswer{When: workflows.RotateNow, Mode: config.ModeAuto, Text: "rotating api/exec now (auto)"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.prepare != nil {
				tt.prepare(t)
			}
			n := len(decided(temporaltest.Session(t, c, tt.group, tt.target)))
			got, err := nidclient.Rotate(ctx, c, tt.group, tt.target, tt.mode)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
			v := temporaltest.WaitSession(t, c, tt.group, tt.target, "to take the request", func(v workflows.SessionView) bool { return len(decided(v)) > n })
			require.Equal(t, tt.want.Text, decided(v)[n], "the session decided what the client answered")
		})
	}
	v := temporaltest.WaitSession(t, c, "web", "lead", "to rotate", func(v workflows.SessionView) bool { return v.Context.Rotations == 1 })
	require.Equal(t, &workflows.RotationMark{Method: config.ModeHandoff, Reason: workflows.ReasonManual, At: v.Context.LastRotation.At, OK: true}, v.Context.LastRotation)
}

func TestRotateRefuses(t *testing.T) {
	t.Parallel()
	c := start(t, groups)
	ctx := context.Background()
	temporaltest.TakeTurns(t, c, "api", "exec", "e1")
	_, err := nidclient.Stop(ctx, c, "api", "exec")
	require.NoError(t, err)
	temporaltest.WaitSession(t, c, "api", "exec", "to stop", func(v workflows.SessionView) bool { return v.Status == workflows.StatusStopped })

	_, err = nidclient.Rotate(ctx, c, "api", "exec", "")
	requireError[*nidclient.RefusedError](t, err, "api/exec is stopped (nid stop): it takes no more turns, messages or rotations")
	_, err = nidclient.Rotate(ctx, c, "web", "lead", "")
	requireError[*nidclient.RefusedError](t, err, "web/lead has taken no turn yet: there is no conversation to rotate")
	_, err = nidclient.Rotate(ctx, c, "web", "lead", "fast")
	bad := requireError[*nidclient.InvalidError](t, err, `mode: "fast" is not a rotation mode: use auto, compact or handoff, or leave it out for the group's`)
	require.Equal(t, "mode", bad.Field)
	_, err = nidclient.Rotate(ctx, c, "web", "nobody", "")
	nf := requireError[*nidclient.NotFoundError](t, err, `no session "web/nobody"; sessions in web: busy, lead, stuck, worker`)
	require.Equal(t, "session", nf.Kind)
	require.Equal(t, "web/nobody", nf.Ref)
	_, err = nidclient.Rotate(ctx, c, "mobile", "lead", "")
	requireError[*nidclient.NotFoundError](t, err, `no group "mobile"; running groups: api, web`)

	for _, s := range []struct{ group, name string }{{"api", "exec"}, {"web", "lead"}} {
		require.Empty(t, decided(temporaltest.Session(t, c, s.group, s.name)), "a refused request is not sent")
	}
}

func TestSend(t *testing.T) {
	t.Parallel()
	c := start(t, groups)
	ctx := context.Background()

	require.NoError(t, sendErr(nidclient.Send(ctx, c, "web", "lead", "run the tests")))
	v := temporaltest.WaitSession(t, c, "web", "lead", "to take the turn", func(v workflows.SessionView) bool { return v.Context.TotalTurns == 1 })
	require.Contains(t, v.LastOutput, `worked on "run the tests"`, "the message was the turn's prompt")

	_, err := nidclient.Send(ctx, c, "web", "lead", " \n ")
	bad := requireError[*nidclient.InvalidError](t, err, "text: missing: the prompt for web/lead's next turn")
	require.Equal(t, "text", bad.Field)
	_, err = nidclient.Send(ctx, c, "web", "lead", strings.Repeat("x", workflows.MaxMessageBytes+1))
	requireError[*nidclient.InvalidError](t, err, "text: 65537 bytes; a message is at most 65536")
	_, err = nidclient.Send(ctx, c, "web", "nobody", "hi")
	requireError[*nidclient.NotFoundError](t, err, `no session "web/nobody"; sessions in web: busy, lead, stuck, worker`)

	// A busy session queues at most MaxQueuedMessages, and at most
	// MaxQueuedBytes of them.
	working(t, c, "web", "worker")
	for i := range workflows.MaxQueuedMessages {
		require.NoError(t, sendErr(nidclient.Send(ctx, c, "web", "worker", fmt.Sprint("m", i))))
	}
	temporaltest.WaitSession(t, c, "web", "worker", "to queue them", func(v workflows.SessionView) bool { return v.QueuedMessages == workflows.MaxQueuedMessages })
	_, err = nidclient.Send(ctx, c, "web", "worker", "one more")
	requireError[*nidclient.RefusedError](t, err, "web/worker has 20 messages queued, the most it holds: send more once its turns have taken some")

	working(t, c, "web", "busy")
	for range workflows.MaxQueuedBytes / workflows.MaxMessageBytes {
		require.NoError(t, sendErr(nidclient.Send(ctx, c, "web", "busy", strings.Repeat("x", workflows.MaxMessageBytes))))
	}
	temporaltest.WaitSession(t, c, "web", "busy", "to queue them", func(v workflows.SessionView) bool { return v.QueuedBytes == workflows.MaxQueuedBytes })
	_, err = nidclient.Send(ctx, c, "web", "busy", "x")
	requireError[*nidclient.RefusedError](t, err, "web/busy has 262144 bytes of messages queued; with this one it would hold more than 262144: send it once its turns have taken some")

	_, err = nidclient.Stop(ctx, c, "api", "exec")
	require.NoError(t, err)
	temporaltest.WaitSession(t, c, "api", "exec", "to stop", func(v workflows.SessionView) bool { return v.Status == workflows.StatusStopped })
	_, err = nidclient.Send(ctx, c, "api", "exec", "hi")
	requireError[*nidclient.RefusedError](t, err, "api/exec is stopped (nid stop): it takes no more turns, messages or rotations")

	messages := func(v workflows.SessionView) int {
		n := 0
		for _, e := range v.Events {
			if e.Kind == workflows.EventMessage {
				n++
			}
		}
		return n
	}
	require.Equal(t, workflows.MaxQueuedMessages+1, messages(temporaltest.Session(t, c, "web", "worker")), "the refused message was not sent")
	require.Zero(t, messages(temporaltest.Session(t, c, "api", "exec")), "the refused message was not sent")
}

func TestSetGroup(t *testing.T) {
	t.Parallel()
	c := start(t, groups)
	ctx := context.Background()

	res, err := nidclient.SetGroup(ctx, c, "web", nidclient.GroupSettings{RotateJSON: `{"mode": "compact", "maxTurns": 30}`, BudgetJSON: `{"turns": 500}`})
	require.NoError(t, err)
	want := config.Rotate{Mode: config.ModeCompact, ContextPercent: config.DefaultContextPercent, MaxTurns: 30, MaxConcurrentRotations: config.DefaultMaxConcurrentRotations}
	require.Equal(t, want, res.Rotate)
	require.Equal(t, config.Budget{Turns: 500}, res.Budget)
	g := temporaltest.Group(t, c, "web")
	require.Equal(t, want, g.Policy)
	require.Equal(t, config.Budget{Turns: 500}, g.Board.Budget)
	temporaltest.WaitSession(t, c, "web", "lead", "to get the policy", func(v workflows.SessionView) bool { return v.Policy == want })

	tests := []struct {
		name  string
		set   nidclient.GroupSettings
		field string
		want  string
		// shape: the value is not an object of the setting's fields.
		shape bool
	}{
		{"a rotate that is not an object",
			nidclient.GroupSettings{RotateJSON: `"handoff"`},
			"rotate", `rotate: "handoff" is not a JSON object; write one such as {"mode":"handoff","maxTurns":40}`, true},
		{"a budget that is not JSON",
			nidclient.GroupSettings{BudgetJSON: `turns=5`},
			"budget", `budget: "turns=5" is not JSON (invalid character 'u' in literal true (expecting 'r')); write an object such as {"turns":500,"usd":20}`, true},
		{"a number in quotes",
			nidclient.GroupSettings{RotateJSON: `{"contextPercent": "80"}`},
			"rotate", `rotate: contextPercent: "80" is a string: write a number without quotes`, true},
		{"a bad budget with a good rotate changes neither",
			nidclient.GroupSettings{RotateJSON: `{"mode": "handoff"}`, BudgetJSON: `{"tokens": -1}`},
			"budget", "budget: tokens: -1 must be 0 (no limit) or more", false},
		{"a bad rotate with a good budget changes neither",
			nidclient.GroupSettings{RotateJSON: `{"contextPercent": 150}`, BudgetJSON: `{"turns": 10}`},
			"rotate", "rotate: contextPercent: 150 is outside 1..100", false},
		{"nothing to set",
			nidclient.GroupSettings{RotateJSON: " "},
			"rotate", `nothing to set: give rotate, budget or learned, each a JSON object of what to change, e.g. {"mode": "handoff"}, {"turns": 500} or {"claude/claude-sonnet-4-5": 75}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := nidclient.SetGroup(ctx, c, "web", tt.set)
			bad := requireError[*nidclient.InvalidError](t, err, tt.want)
			require.Equal(t, tt.field, bad.Field)
			require.Equal(t, tt.shape, bad.Shape)
			g := temporaltest.Group(t, c, "web")
			require.Equal(t, want, g.Policy, "the policy is unchanged")
			require.Equal(t, config.Budget{Turns: 500}, g.Board.Budget, "the budget is unchanged")
		})
	}

	_, err = nidclient.SetGroup(ctx, c, "mobile", nidclient.GroupSettings{RotateJSON: `{"mode": "handoff"}`})
	nf := requireError[*nidclient.NotFoundError](t, err, `no group "mobile"; running groups: api, web`)
	require.Equal(t, "group", nf.Kind)
}

// A group with a session of a kind that cannot compact (exec) refuses
// compact mode, as validation of nid.yaml does: every rotation of that
// session would fail.
func TestSetGroupRefusesCompactWhereASessionCannotCompact(t *testing.T) {
	t.Parallel()
	c := start(t, `  web:
    rotate: {mode: auto}
    sessions:
      - {agent: sim, name: lead, sim: {turnDelay: 0s}}
      - {agent: exec, name: lint, command: /bin/true, permissions: full}
`)
	ctx := context.Background()
	_, err := nidclient.SetGroup(ctx, c, "web", nidclient.GroupSettings{RotateJSON: `{"mode": "compact"}`})
	bad := requireError[*nidclient.InvalidError](t, err,
		"rotate: mode: compact never works for session lint: exec agents cannot compact; use handoff, or auto (which hands them off)")
	require.Equal(t, "rotate", bad.Field)
	require.Equal(t, config.ModeAuto, temporaltest.Group(t, c, "web").Policy.Mode, "the policy is unchanged")

	res, err := nidclient.SetGroup(ctx, c, "web", nidclient.GroupSettings{RotateJSON: `{"mode": "handoff"}`})
	require.NoError(t, err)
	require.Equal(t, config.ModeHandoff, res.Rotate.Mode)
}

func TestInboxAndClear(t *testing.T) {
	t.Parallel()
	c := start(t, `  web:
    rotate: {mode: off}
    sessions:
      - {agent: sim, name: lead, sim: {turnDelay: 0s, failCompact: true}}
  api:
    rotate: {mode: off}
    sessions:
      - {agent: sim, name: exec, sim: {turnDelay: 0s, failCompact: true}}
      - {agent: sim, name: bot, sim: {turnDelay: 0s, failCompact: true}}
`)
	ctx := context.Background()
	items, err := nidclient.Inbox(ctx, c, "")
	require.NoError(t, err)
	require.Equal(t, []workflows.InboxItem{}, items, "an empty inbox is empty, not nil")

	// Each compaction fails and tells its group's inbox: api, web, api.
	temporaltest.TakeTurns(t, c, "web", "lead", "l1")
	temporaltest.TakeTurns(t, c, "api", "exec", "e1")
	temporaltest.TakeTurns(t, c, "api", "bot", "b1")
	fail := func(group, name string, n int) {
		temporaltest.Signal(t, c, group, name, workflows.SignalRotate, workflows.RotateRequest{Mode: config.ModeCompact, Reason: workflows.ReasonManual})
		temporaltest.WaitGroup(t, c, group, "to hear of it", func(g workflows.GroupView) bool { return len(g.Inbox) == n })
	}
	fail("api", "exec", 1)
	fail("web", "lead", 1)
	fail("api", "bot", 2)

	items, err = nidclient.Inbox(ctx, c, "")
	require.NoError(t, err)
	var who []string
	for _, it := range items {
		who = append(who, it.Group+"/"+it.Session)
	}
	require.Equal(t, []string{"api/exec", "web/lead", "api/bot"}, who, "oldest first, whichever group")
	require.True(t, items[0].At.Before(items[1].At) && items[1].At.Before(items[2].At))
	require.Equal(t, "compact rotation (manual) failed: the agent did not compact: sim: compaction refused (failCompact)", items[1].Text)

	items, err = nidclient.Inbox(ctx, c, "web")
	require.NoError(t, err)
	require.Equal(t, temporaltest.Group(t, c, "web").Inbox, items)

	_, err = nidclient.Inbox(ctx, c, "mobile")
	requireError[*nidclient.NotFoundError](t, err, `no group "mobile"; running groups: api, web`)

	n, err := nidclient.ClearInbox(ctx, c, "web")
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Empty(t, temporaltest.Group(t, c, "web").Inbox)
	require.Len(t, temporaltest.Group(t, c, "api").Inbox, 2, "another group's items stay")
	n, err = nidclient.ClearInbox(ctx, c, "")
	require.NoError(t, err)
	require.Equal(t, 2, n)
	_, err = nidclient.ClearInbox(ctx, c, "mobile")
	requireError[*nidclient.NotFoundError](t, err, `no group "mobile"; running groups: api, web`)
}

func TestStop(t *testing.T) {
	t.Parallel()
	c := start(t, groups)
	ctx := context.Background()
	working(t, c, "web", "worker")
	_, err := worker.UpdateBoard(ctx, c, "web", workflows.UpdateLockAcquire, workflows.BoardRequest{Session: "worker", Lock: "src/app.go"})
	require.NoError(t, err)

	got, err := nidclient.Stop(ctx, c, "web", "worker")
	require.NoError(t, err)
	require.Equal(t, nidclient.Stopped{Released: []string{"lock src/app.go"}, Was: workflows.StatusWorking}, got)
	g := temporaltest.Group(t, c, "web")
	require.Equal(t, []string{"worker"}, g.Stopped)
	require.Empty(t, g.Board.Locks)

	got, err = nidclient.Stop(ctx, c, "api", "exec")
	require.NoError(t, err)
	require.Equal(t, nidclient.Stopped{Was: workflows.StatusIdle}, got)
	temporaltest.WaitSession(t, c, "api", "exec", "to stop", func(v workflows.SessionView) bool { return v.Status == workflows.StatusStopped })
	_, err = nidclient.Stop(ctx, c, "api", "exec")
	requireError[*nidclient.RefusedError](t, err, "api/exec is already stopped")

	_, err = nidclient.Stop(ctx, c, "web", "nobody")
	requireError[*nidclient.NotFoundError](t, err, `no session "web/nobody"; sessions in web: busy, lead, stuck, worker`)
	require.Equal(t, []string{"exec"}, temporaltest.Group(t, c, "api").Stopped, "stopping twice changes nothing")

	_, err = nidclient.StopGroup(ctx, c, "api")
	requireError[*nidclient.RefusedError](t, err, "every session of group api is already stopped")
	_, err = nidclient.StopGroup(ctx, c, "mobile")
	requireError[*nidclient.NotFoundError](t, err, `no group "mobile"; running groups: api, web`)
}

func TestAddTask(t *testing.T) {
	t.Parallel()
	c := start(t, `  web:
    sessions:
      - {agent: sim, name: lead, sim: {turnDelay: 1h}}
`)
	ctx := context.Background()
	task, err := nidclient.AddTask(ctx, c, "web", "write the parser", "tokens first")
	require.NoError(t, err)
	require.Equal(t, workflows.Task{ID: "t1", Title: "write the parser", Detail: "tokens first", Status: workflows.TaskTodo}, task)
	g := temporaltest.WaitGroup(t, c, "web", "to give it out", func(g workflows.GroupView) bool { return g.Board.Tasks[0].Holder == "lead" })
	require.Len(t, g.Board.Tasks, 1)

	_, err = nidclient.AddTask(ctx, c, "web", strings.Repeat("x", workflows.MaxTaskTitle+1), "")
	requireError[*nidclient.RefusedError](t, err, "task title is 201 bytes; the limit is 200")
	_, err = nidclient.AddTask(ctx, c, "mobile", "write the parser", "")
	requireError[*nidclient.NotFoundError](t, err, `no group "mobile"; running groups: web`)
	require.Len(t, temporaltest.Group(t, c, "web").Board.Tasks, 1, "a refused task is not added")
}

func TestBoards(t *testing.T) {
	t.Parallel()
	c := start(t, groups)
	ctx := context.Background()
	_, err := nidclient.AddTask(ctx, c, "web", "write the parser", "")
	require.NoError(t, err)

	all, err := nidclient.Boards(ctx, c, "")
	require.NoError(t, err)
	require.Len(t, all, 2)
	require.Equal(t, []string{"api", "web"}, []string{all[0].Group, all[1].Group}, "every running group, in name order")
	require.Empty(t, all[0].Tasks)
	require.Equal(t, "write the parser", all[1].Tasks[0].Title)

	web, err := nidclient.Boards(ctx, c, "web")
	require.NoError(t, err)
	require.Len(t, web, 1)
	require.Equal(t, "web", web[0].Group)
	require.Equal(t, "write the parser", web[0].Tasks[0].Title)

	_, err = nidclient.Boards(ctx, c, "mobile")
	requireError[*nidclient.NotFoundError](t, err, `no group "mobile"; running groups: api, web`)
}

func TestSessions(t *testing.T) {
	t.Parallel()
	c := start(t, groups)
	ctx := context.Background()
	temporaltest.Settle(t, c)
	all, err := nidclient.Sessions(ctx, c, "")
	require.NoError(t, err)
	var refs []string
	for _, s := range all {
		refs = append(refs, s.Ref())
	}
	require.Equal(t, []string{"api/exec", "web/busy", "web/lead", "web/stuck", "web/worker"}, refs)

	api, err := nidclient.Sessions(ctx, c, "api")
	require.NoError(t, err)
	exec := temporaltest.Session(t, c, "api", "exec")
	require.Equal(t, []nidclient.Session{{Group: "api", Name: "exec", Agent: "sim", Status: workflows.StatusIdle,
		Context: exec.Context, Host: temporaltest.Host, LastEvent: exec.Events[len(exec.Events)-1].Seq}}, api)

	_, err = nidclient.Sessions(ctx, c, "mobile")
	nf := requireError[*nidclient.NotFoundError](t, err, `no group "mobile"; running groups: api, web`)
	require.Equal(t, "group", nf.Kind)
	require.Equal(t, "mobile", nf.Ref)

	empty := temporaltest.New(t).Client(t)
	_, err = nidclient.Sessions(ctx, empty, "web")
	requireError[*nidclient.NotFoundError](t, err, `no group "web": no group is running (start them with nid up)`)
	none, err := nidclient.Sessions(ctx, empty, "")
	require.NoError(t, err)
	require.Empty(t, none)
}

// An update lost to its workflow continuing as new, or to a failed workflow
// task, is sent again, up to five times in all; any other answer is final.
func TestResendSendsALostUpdateAgain(t *testing.T) {
	t.Parallel()
	lostToContinueAsNew := fmt.Errorf("update: %w", errors.New("Workflow completed before the Update completed"))
	lostToATaskFailure := serviceerror.NewWorkflowNotReady("Unable to perform workflow execution update due to unexpected workflow task failure.")
	refused := errors.New("the board has no task t9")
	for _, tt := range []struct {
		name    string
		answers []error
		calls   int
		want    error
	}{
		{"answered", []error{nil}, 1, nil},
		{"lost twice, then answered", []error{lostToContinueAsNew, lostToATaskFailure, nil}, 3, nil},
		{"refused", []error{refused, nil}, 1, refused},
		{"lost, then refused", []error{lostToATaskFailure, refused, nil}, 2, refused},
		{"always lost", []error{lostToATaskFailure, lostToATaskFailure, lostToATaskFailure, lostToATaskFailure, lostToATaskFailure, nil}, 5, lostToATaskFailure},
	} {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			err := nidclient.Resend(context.Background(), func() error {
				calls++
				return tt.answers[calls-1]
			})
			require.Equal(t, tt.calls, calls)
			require.Equal(t, tt.want, err)
		})
	}

	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	err := nidclient.Resend(ctx, func() error {
		calls++
		cancel()
		return lostToATaskFailure
	})
	require.Equal(t, 1, calls, "a caller that gave up is not sent again")
	require.Equal(t, lostToATaskFailure, err)
}

// sendErr is the error of a Send, for tests that only check it was queued.
func sendErr(_ string, err error) error { return err }
