package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/internal/temporaltest"
	"github.com/nid-dev/nid/nidclient"
	"github.com/nid-dev/nid/worker"
	"github.com/nid-dev/nid/workflows"
)

// teamGroups are two groups whose sessions take a turn only when sent a
// message, so a test decides every turn: web/lead and web/worker report
// their context, api/exec reports none.
const teamGroups = `  web:
    rotate: {mode: off}
    sessions:
      - {agent: sim, name: lead, sim: {window: 200000, tokensPerTurn: 62000, turnDelay: 0s}}
      - {agent: sim, name: worker, sim: {window: 200000, tokensPerTurn: 80000, turnDelay: 0s}}
  api:
    rotate: {mode: off}
    sessions:
      - {agent: sim, name: exec, sim: {silent: true, turnDelay: 0s}}
`

// newTeam is teamGroups after some work: web/lead took two turns (62%),
// web/worker three with two compactions between them (44%, ↻2), api/exec
// one turn and one compaction (no percent, ↻1).
func newTeam(t *testing.T) *site {
	s := newSite(t, teamGroups)
	temporaltest.TakeTurns(t, s.c, "web", "lead", "l1", "l2")
	for i := range 3 {
		if i > 0 {
			temporaltest.Rotate(t, s.c, "web", "worker", config.ModeCompact)
		}
		temporaltest.TakeTurns(t, s.c, "web", "worker", fmt.Sprintf("w%d", i+1))
	}
	temporaltest.TakeTurns(t, s.c, "api", "exec", "e1")
	temporaltest.Rotate(t, s.c, "api", "exec", config.ModeCompact)
	temporaltest.Settle(t, s.c)
	return s
}

func TestLs(t *testing.T) {
	t.Parallel()
	s := newTeam(t)
	tests := []struct {
		name     string
		group    string
		pageSize int32
		wantOut  string
	}{
		{
			name: "every session, sorted",
			wantOut: "" +
				"SESSION     AGENT  STATUS  HOST      TURNS  CONTEXT\n" +
				"api/exec    sim    idle    testhost  1      — ↻1\n" +
				"web/lead    sim    idle    testhost  2      62% of 200k\n" +
				"web/worker  sim    idle    testhost  3      44% of 200k ↻2\n",
		},
		{
			name:     "pages are followed",
			pageSize: 1,
			wantOut: "" +
				"SESSION     AGENT  STATUS  HOST      TURNS  CONTEXT\n" +
				"api/exec    sim    idle    testhost  1      — ↻1\n" +
				"web/lead    sim    idle    testhost  2      62% of 200k\n" +
				"web/worker  sim    idle    testhost  3      44% of 200k ↻2\n",
		},
		{
			name:  "one group",
			group: "web",
			wantOut: "" +
				"SESSION     AGENT  STATUS  HOST      TURNS  CONTEXT\n" +
				"web/lead    sim    idle    testhost  2      62% of 200k\n" +
				"web/worker  sim    idle    testhost  3      44% of 200k ↻2\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &temporaltest.Counter{Client: s.c, PageSize: tt.pageSize}
			var out, errOut bytes.Buffer
			require.NoError(t, runLs(context.Background(), c, lsOptions{Group: tt.group, Now: time.Now()}, &out, &errOut))
			require.Equal(t, tt.wantOut, out.String())
			require.Empty(t, errOut.String())
			require.Zero(t, c.Queries(), "nid ls asks no session")
			if tt.pageSize == 0 {
				require.Equal(t, 1, c.Lists(), "nid ls is one visibility query")
			} else {
				require.Greater(t, c.Lists(), 3, "one page a session")
			}
		})
	}
}

// With no worker left, the listing still shows what the sessions last
// said, and nid ls says that nothing runs them, from the time of the last
// worker's last poll the server keeps. While a worker runs it says nothing
// (TestLs).
func TestLsSaysWhenNoWorkerRunsTheSessions(t *testing.T) {
	t.Parallel()
	s := newSite(t, teamGroups)
	temporaltest.TakeTurns(t, s.c, "web", "lead", "l1")
	temporaltest.Settle(t, s.c)
	stopped := time.Now()
	s.down()

	var out, errOut bytes.Buffer
	later := stopped.Add(nidclient.ServedWithin + time.Minute)
	require.NoError(t, runLs(context.Background(), s.c, lsOptions{Now: later}, &out, &errOut))
	require.Contains(t, out.String(), "web/lead    sim    idle    testhost  1      31% of 200k\n", "the listing as the sessions left it")
	require.Regexp(t, `^no worker is running \(the last one asked Temporal for nid's work at \d\d:\d\d:\d\d, \d+m\d+s ago\), so each STATUS is what the session last wrote: start nid up or nid worker\n$`, errOut.String())

	out.Reset()
	errOut.Reset()
	require.NoError(t, runLs(context.Background(), s.c, lsOptions{Group: "web", JSON: true, Now: later}, &out, &errOut))
	require.True(t, json.Valid(out.Bytes()), "the note stays off the JSON: %s", out.String())
	require.Contains(t, errOut.String(), "no worker is running")
}

// noPollers is a server that knows of no worker on the sessions' queue, as
// one does five minutes after the last stopped, or after its own restart.
type noPollers struct{ client.Client }

func (noPollers) DescribeTaskQueue(context.Context, string, enumspb.TaskQueueType) (*workflowservice.DescribeTaskQueueResponse, error) {
	return &workflowservice.DescribeTaskQueueResponse{}, nil
}

func TestUnservedNoteWithoutALastPoll(t *testing.T) {
	require.Equal(t, "no worker is running (Temporal knows of none asking for nid's work), so each STATUS is what the session last wrote: start nid up or nid worker",
		unservedNote(context.Background(), noPollers{}, time.Now()))
}

func TestLsJSON(t *testing.T) {
	t.Parallel()
	s := newTeam(t)
	var items []struct {
		Session string                  `json:"session"`
		Group   string                  `json:"group"`
		Name    string                  `json:"name"`
		Agent   string                  `json:"agent"`
		Status  string                  `json:"status"`
		Turns   int                     `json:"turns"`
		Context workflows.ContextRecord `json:"context"`
	}
	require.NoError(t, json.Unmarshal([]byte(s.mustNid("ls", "web", "--json")), &items))
	require.Len(t, items, 2)
	lead := temporaltest.Session(t, s.c, "web", "lead")
	require.Equal(t, "web/lead", items[0].Session)
	require.Equal(t, "web", items[0].Group)
	require.Equal(t, "lead", items[0].Name)
	require.Equal(t, "sim", items[0].Agent)
	require.Equal(t, "idle", items[0].Status)
	require.Equal(t, 2, items[0].Turns)
	require.Equal(t, lead.Context, items[0].Context, "the whole context record, as the session keeps it")
	require.Greater(t, items[0].Context.UsedTokens, int64(124_000))
	require.Equal(t, 2, items[1].Context.Rotations)

	empty := newSite(t, "")
	require.Equal(t, "[]\n", empty.mustNid("ls", "--json"), "no sessions is an empty array, not null")
}

func TestLsEmptyAndUnknown(t *testing.T) {
	t.Parallel()
	empty := newSite(t, "")
	out, errOut, err := empty.nid("ls")
	require.NoError(t, err)
	require.Equal(t, "SESSION  AGENT  STATUS  HOST  TURNS  CONTEXT\n", out)
	require.Equal(t, "no sessions (start some with nid up)\n", errOut)
	_, _, err = empty.nid("ls", "mobile")
	require.EqualError(t, err, `no group "mobile": no group is running (start them with nid up)`)

	s := newSite(t, teamGroups+`  docs:
    sessions:
      - {agent: sim, name: writer, sim: {turnDelay: 0s}}
`)
	// A session ended outside nid (terminated in the Web UI) leaves its
	// group running with none.
	require.NoError(t, s.c.TerminateWorkflow(context.Background(), workflows.SessionID("docs", "writer"), "", "test"))
	temporaltest.Settle(t, s.c)
	_, errOut, err = s.nid("ls", "docs")
	require.NoError(t, err)
	require.Equal(t, "no sessions running in docs\n", errOut)

	_, _, err = s.nid("ls", "mobile")
	require.EqualError(t, err, `no group "mobile"; running groups: api, docs, web`)
}

// nextDecision waits for the rotate decision a session records after the
// n it had, and returns it.
func nextDecision(t *testing.T, s *site, group, name string, n int) string {
	t.Helper()
	v := temporaltest.WaitSession(t, s.c, group, name, "to take the request", func(v workflows.SessionView) bool {
		return len(eventTexts(v, workflows.EventRotateQueued)) > n
	})
	return eventTexts(v, workflows.EventRotateQueued)[n]
}

// rotateGroups: web rotates by handoff, api says off, ops rotates by
// handoff after every turn. Each session of web is one case of TestRotate;
// the slow ones' turns last until the test ends, and web/stuck and ops/bot
// write no handoff when asked, so their handoffs wait.
const rotateGroups = `  web:
    rotate: {mode: handoff}
    sessions:
      - {agent: sim, name: lead, sim: {turnDelay: 0s}}
      - {agent: sim, name: stuck, sim: {turnDelay: 0s, noHandoff: true}}
      - {agent: sim, name: worker, sim: {turnDelay: 1h}}
      - {agent: sim, name: compactor, sim: {turnDelay: 1h}}
      - {agent: sim, name: limited, sim: {turnDelay: 1h}}
      - {agent: sim, name: pending, sim: {turnDelay: 1h}}
      - {agent: sim, name: writer, sim: {turnDelay: 1h}}
  api:
    rotate: {mode: off}
    sessions:
      - {agent: sim, name: exec, sim: {turnDelay: 0s}}
  ops:
    rotate: {mode: handoff, maxTurns: 1}
    sessions:
      - {agent: sim, name: bot, sim: {turnDelay: 0s, noHandoff: true}}
`

func working(t *testing.T, s *site, group, name string) {
	t.Helper()
	temporaltest.Signal(t, s.c, group, name, workflows.SignalMessage, workflows.Message{Text: "work"})
	temporaltest.WaitSession(t, s.c, group, name, "to work", func(v workflows.SessionView) bool { return v.Status == workflows.StatusWorking })
}

func TestRotate(t *testing.T) {
	t.Parallel()
	s := newSite(t, rotateGroups)
	tests := []struct {
		name    string
		session string
		mode    string
		prepare func(*testing.T, string, string)
		want    string
	}{
		{
			name:    "idle session rotates now with the group's mode",
			session: "web/lead",
			prepare: func(t *testing.T, group, name string) { temporaltest.TakeTurns(t, s.c, group, name, "l1") },
			want:    "rotating web/lead now (handoff)",
		},
		{
			name:    "working session rotates when its turn ends",
			session: "web/worker",
			prepare: func(t *testing.T, group, name string) { working(t, s, group, name) },
			want:    "web/worker is working: it rotates (handoff) when the current turn ends",
		},
		{
			name:    "group says off: auto",
			session: "api/exec",
			prepare: func(t *testing.T, group, name string) { temporaltest.TakeTurns(t, s.c, group, name, "e1") },
			want:    "rotating api/exec now (auto)",
		},
		{
			name:    "mode overrides the group's",
			session: "web/compactor",
			mode:    "compact",
			prepare: func(t *testing.T, group, name string) { working(t, s, group, name) },
			want:    "web/compactor is working: it rotates (compact) when the current turn ends",
		},
		{
			name:    "rate-limited waits too",
			session: "web/limited",
			prepare: func(t *testing.T, group, name string) {
				working(t, s, group, name)
				// What the agent's adapter signals when the vendor limits it.
				temporaltest.Signal(t, s.c, group, name, workflows.SignalRateLimit, workflows.RateLimit{Limited: true})
				temporaltest.WaitSession(t, s.c, group, name, "to be rate-limited", func(v workflows.SessionView) bool { return v.Status == workflows.StatusRateLimited })
			},
			want: "web/limited is rate-limited: it rotates (handoff) when the current turn ends",
		},
		{
			name:    "joins a pending request",
			session: "web/pending",
			prepare: func(t *testing.T, group, name string) {
				working(t, s, group, name)
				s.mustNid("rotate", "web/pending")
				temporaltest.WaitSession(t, s.c, group, name, "to hold the request", func(v workflows.SessionView) bool { return v.PendingRotate != nil })
			},
			want: "a rotation is already pending for web/pending: this request joins it (handoff); it runs when the current turn ends",
		},
		{
			name:    "joins the agent's own handoff",
			session: "web/writer",
			mode:    "compact",
			prepare: func(t *testing.T, group, name string) {
				working(t, s, group, name)
				// What nid's MCP endpoint signals when the agent calls
				// handoff_write.
				temporaltest.Signal(t, s.c, group, name, workflows.SignalHandoffWrite, workflows.HandoffWrite{Summary: "parser done"})
				temporaltest.WaitSession(t, s.c, group, name, "to hold the handoff", func(v workflows.SessionView) bool { return v.HandoffPending })
			},
			want: "web/writer wrote its own handoff and rotates (handoff) when the current turn ends: this request joins it",
		},
		{
			name:    "joins a running manual rotation",
			session: "web/stuck",
			prepare: func(t *testing.T, group, name string) {
				temporaltest.TakeTurns(t, s.c, group, name, "s1")
				s.mustNid("rotate", "web/stuck", "--mode", "handoff")
				temporaltest.WaitSession(t, s.c, group, name, "to rotate", func(v workflows.SessionView) bool { return v.Status == workflows.StatusRotating })
			},
			want: "web/stuck is rotating now (handoff): this request joins that rotation",
		},
		{
			name:    "waits for a running policy rotation",
			session: "ops/bot",
			mode:    "compact",
			prepare: func(t *testing.T, group, name string) {
				temporaltest.Signal(t, s.c, group, name, workflows.SignalMessage, workflows.Message{Text: "o1"})
				temporaltest.WaitSession(t, s.c, group, name, "to rotate by maxTurns", func(v workflows.SessionView) bool {
					return v.Rotating != nil && v.Rotating.Reason == workflows.ReasonMaxTurns
				})
			},
			want: "ops/bot is in another rotation now: it rotates (compact) when that one ends",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			group, name, _ := strings.Cut(tt.session, "/")
			tt.prepare(t, group, name)
			n := len(eventTexts(temporaltest.Session(t, s.c, group, name), workflows.EventRotateQueued))
			args := []string{"rotate", tt.session}
			if tt.mode != "" {
				args = append(args, "--mode", tt.mode)
			}
			require.Equal(t, tt.want+"\n", s.mustNid(args...))
			require.Equal(t, tt.want, nextDecision(t, s, group, name, n), "the session does what nid rotate said")
		})
	}
	v := temporaltest.WaitSession(t, s.c, "web", "lead", "to rotate", func(v workflows.SessionView) bool { return v.Context.Rotations == 1 })
	require.Equal(t, &workflows.RotationMark{Method: config.ModeHandoff, Reason: workflows.ReasonManual, At: v.Context.LastRotation.At, OK: true}, v.Context.LastRotation,
		"web/lead rotated as nid rotate said")
}

func TestRotateRefusesAStoppedSession(t *testing.T) {
	t.Parallel()
	s := newSite(t, rotateGroups)
	temporaltest.TakeTurns(t, s.c, "web", "lead", "l1")
	s.mustNid("stop", "web/lead")
	temporaltest.WaitSession(t, s.c, "web", "lead", "to stop", func(v workflows.SessionView) bool { return v.Status == workflows.StatusStopped })
	_, _, err := s.nid("rotate", "web/lead")
	require.EqualError(t, err, "web/lead is stopped (nid stop): it takes no more turns, messages or rotations")
	require.Empty(t, eventTexts(temporaltest.Session(t, s.c, "web", "lead"), workflows.EventRotateQueued), "nothing was signalled")
}

func TestRotateUnknown(t *testing.T) {
	t.Parallel()
	s := newSite(t, teamGroups)
	tests := []struct {
		name    string
		session string
		want    string
	}{
		{"unknown session lists the group's", "web/tester", `no session "web/tester"; sessions in web: lead, worker`},
		{"unknown group lists the groups", "mobile/lead", `no group "mobile"; running groups: api, web`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := s.nid("rotate", tt.session)
			require.EqualError(t, err, tt.want)
		})
	}
}

func TestRotateWithoutWorker(t *testing.T) {
	t.Parallel()
	s := newSite(t, teamGroups)
	temporaltest.TakeTurns(t, s.c, "web", "lead", "l1")
	s.down()
	_, _, err := s.nid("rotate", "web/lead")
	require.Regexp(t, `^web/lead did not answer: no worker is running \(the last one asked Temporal for nid's work at \d\d:\d\d:\d\d, \d+s ago\); start nid up or nid worker$`, err.Error(),
		"one sentence, with no gRPC words, though the worker stopped a moment ago")
	s.up(teamGroups)
	require.Empty(t, eventTexts(temporaltest.Session(t, s.c, "web", "lead"), workflows.EventRotateQueued), "nothing was signalled")
}

func TestGroupSet(t *testing.T) {
	t.Parallel()
	s := newSite(t, teamGroups)
	require.Equal(t, "web rotate: mode=handoff contextPercent=85 maxTurns=40 maxConcurrentRotations=unlimited\n",
		s.mustNid("group", "set", "web", `rotate={"mode":"handoff","maxTurns":40,"maxConcurrentRotations":0}`))
	want := config.Rotate{Mode: config.ModeHandoff, ContextPercent: 85, MaxTurns: 40}
	require.Equal(t, want, temporaltest.Group(t, s.c, "web").Policy)
	temporaltest.WaitSession(t, s.c, "web", "lead", "to get the policy", func(v workflows.SessionView) bool { return v.Policy == want })

	require.Equal(t, "web rotate: mode=handoff contextPercent=70 maxTurns=never maxConcurrentRotations=unlimited\n",
		s.mustNid("group", "set", "web", `rotate={"maxTurns":0,"contextPercent":70}`))
	require.Equal(t, "web rotate: mode=handoff contextPercent=70 contextTokens=150000 maxTurns=never maxConcurrentRotations=unlimited\n",
		s.mustNid("group", "set", "web", `rotate={"contextTokens":150000}`))
	require.EqualValues(t, 150_000, temporaltest.Group(t, s.c, "web").Policy.ContextTokens)
	_, _, err := s.nid("group", "set", "web", `rotate={"contextTokens":-1}`)
	require.ErrorContains(t, err, "contextTokens: -1 must be 0 (no token limit) or more")
	require.EqualValues(t, 150_000, temporaltest.Group(t, s.c, "web").Policy.ContextTokens, "a refused value changes nothing")

	// A field set to 0 is answered as it is now, not as it was.
	require.Equal(t, "web rotate: mode=handoff contextPercent=70 maxTurns=never maxConcurrentRotations=unlimited\n",
		s.mustNid("group", "set", "web", `rotate={"contextTokens":0}`))
	require.Equal(t, "web budget: turns 0 of 500 spent (500 left), tokens 0 spent (no limit), usd 0.00 spent (no limit)\n",
		s.mustNid("group", "set", "web", `budget={"turns":500}`))
	require.Equal(t, "web budget: turns 0 spent (no limit), tokens 0 spent (no limit), usd 0.00 spent (no limit)\n",
		s.mustNid("group", "set", "web", `budget={"turns":0}`))
	require.Equal(t, config.Rotate{Mode: config.ModeOff, ContextPercent: 85, MaxConcurrentRotations: config.DefaultMaxConcurrentRotations},
		temporaltest.Group(t, s.c, "api").Policy, "another group is left alone")
}

func TestGroupSetRejects(t *testing.T) {
	t.Parallel()
	s := newSite(t, teamGroups)
	tests := []struct {
		name    string
		group   string
		setting string
		want    string
	}{
		{"invalid policy is refused before it is sent", "web", `rotate={"mode":"sometimes"}`, "sometimes"},
		{"not JSON", "web", `rotate=mode=handoff`, "is not JSON"},
		{"unknown group", "mobile", `rotate={"mode":"handoff"}`, `no group "mobile"; running groups: api, web`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := s.nid("group", "set", tt.group, tt.setting)
			require.ErrorContains(t, err, tt.want)
			require.Equal(t, config.Rotate{Mode: config.ModeOff, ContextPercent: 85, MaxConcurrentRotations: config.DefaultMaxConcurrentRotations}, temporaltest.Group(t, s.c, "web").Policy, "the policy is unchanged")
		})
	}
}

func TestGroupShow(t *testing.T) {
	t.Parallel()
	s := newSite(t, `  web:
    rotate: {mode: handoff, maxTurns: 40}
    budget: {turns: 1}
    sessions:
      - {agent: sim, name: lead, sim: {window: 200000, tokensPerTurn: 62000, turnDelay: 0s}}
      - {agent: sim, name: worker, sim: {turnDelay: 0s}}
  api:
    rotate: {mode: off}
    sessions:
      - {agent: sim, name: exec, sim: {turnDelay: 0s}}
`)
	// web/lead takes the one turn the budget allows; web/worker is stopped
	// before it took any.
	temporaltest.Signal(t, s.c, "web", "lead", workflows.SignalMessage, workflows.Message{Text: "l1"})
	temporaltest.WaitSession(t, s.c, "web", "lead", "to take its turn and pause", func(v workflows.SessionView) bool {
		return v.Context.TotalTurns == 1 && v.Status == workflows.StatusPaused
	})
	s.mustNid("stop", "web/worker")
	s.mustNid("group", "set", "web", `learned={"claude/claude-sonnet-4-5": 75}`)
	// The sim's prompt is part of what a turn spends.
	spent := regexp.MustCompile(`tokens \d+ spent`)
	require.Equal(t, ""+
		"group       web\n"+
		"goal        —\n"+
		"rotate      mode=handoff contextPercent=85 maxTurns=40\n"+
		"thresholds  lead 85% = 170k of 200k (contextPercent); worker unknown until it reports its window\n"+
		"learned     claude/claude-sonnet-4-5 at 75% (set)\n"+
		"budget      turns 1 of 1 spent (0 left), tokens N spent (no limit), usd 0.00 spent (no limit) — exhausted (turns): sessions paused\n"+
		"            a manual nid rotate runs even when the budget is spent: it costs one turn, and the tokens and dollars its model calls spend; a tokens or usd limit is passed by the turns and rotations already running when it is reached\n"+
		"sessions    lead, worker (stopped)\n"+
		"tasks       0 todo, 0 claimed, 0 done\n"+
		"inbox       1 item\n",
		spent.ReplaceAllString(s.mustNid("group", "show", "web"), "tokens N spent"))

	out := s.mustNid("group", "show", "api")
	require.Contains(t, out, "thresholds  never by the policy: rotate mode is off (nid rotate, the agent's handoff_write or a full window still rotate)\n")
	require.Contains(t, out, "budget      turns 0 spent (no limit), tokens 0 spent (no limit), usd 0.00 spent (no limit)\n"+
		"            no limits: sessions run until stopped\n")
	require.Contains(t, out, "learned     none\n")
	require.Contains(t, out, "inbox       0 items\n")

	var view workflows.GroupView
	require.NoError(t, json.Unmarshal([]byte(s.mustNid("group", "show", "web", "--json")), &view))
	require.Equal(t, temporaltest.Group(t, s.c, "web"), view, "the group as its workflow answers")

	_, _, err := s.nid("group", "show", "mobile")
	require.EqualError(t, err, `no group "mobile"; running groups: api, web`)
}

func TestSend(t *testing.T) {
	t.Parallel()
	s := newSite(t, teamGroups)
	require.Equal(t, "queued for web/lead\n", s.mustNid("send", "web/lead", "run the tests"))
	v := temporaltest.WaitSession(t, s.c, "web", "lead", "to take the turn", func(v workflows.SessionView) bool { return v.Context.TotalTurns == 1 })
	require.Equal(t, []string{"message queued: run the tests"}, eventTexts(v, workflows.EventMessage))
	require.Contains(t, v.LastOutput, `worked on "run the tests"`, "the message was the turn's prompt")

	_, _, err := s.nid("send", "api/lead", "hi")
	require.EqualError(t, err, `no session "api/lead"; sessions in api: exec`)
}

func TestInbox(t *testing.T) {
	t.Parallel()
	s := newSite(t, `  web:
    rotate: {mode: off}
    sessions:
      - {agent: sim, name: lead, sim: {turnDelay: 0s, failCompact: true}}
  api:
    rotate: {mode: off}
    budget: {turns: 4}
    sessions:
      - {agent: exec, name: exec, command: "false", permissions: full}
`)
	empty := newSite(t, teamGroups)
	require.Equal(t, "inbox empty\n", empty.mustNid("inbox"))

	// Oldest first, whichever group: api/exec's command fails three
	// times, then web/lead's compaction fails twice, then api's budget is
	// spent by a fourth turn.
	for i := range 3 {
		// A new message ends the wait before a failed turn is retried; the
		// first goes first again.
		temporaltest.Signal(t, s.c, "api", "exec", workflows.SignalMessage, workflows.Message{Text: fmt.Sprint("e", i)})
		temporaltest.WaitSession(t, s.c, "api", "exec", "to fail", func(v workflows.SessionView) bool {
			return len(eventTexts(v, workflows.EventTurnFailed)) == i+1
		})
	}
	temporaltest.WaitGroup(t, s.c, "api", "to hear of the failures", func(g workflows.GroupView) bool { return len(g.Inbox) == 1 })
	temporaltest.TakeTurns(t, s.c, "web", "lead", "l1")
	for i := range 2 {
		temporaltest.Signal(t, s.c, "web", "lead", workflows.SignalRotate, workflows.RotateRequest{Mode: config.ModeCompact, Reason: workflows.ReasonManual})
		temporaltest.WaitGroup(t, s.c, "web", "to hear of the failure", func(g workflows.GroupView) bool {
			return len(g.Inbox) == 1 && max(g.Inbox[0].Count, 1) == i+1
		})
	}
	temporaltest.Signal(t, s.c, "api", "exec", workflows.SignalMessage, workflows.Message{Text: "e4"})
	temporaltest.WaitGroup(t, s.c, "api", "to spend its budget", func(g workflows.GroupView) bool { return len(g.Inbox) == 2 })

	out := s.mustNid("inbox")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Len(t, lines, 3, out)
	require.Regexp(t, `^\d\d:\d\d:\d\d  api/exec  turn-failed         3 turns failed in a row; last: exec exited with status 1; your message was not run: e0$`, lines[0])
	require.Regexp(t, `^\d\d:\d\d:\d\d  web/lead  rotation-failed ×2  compact rotation \(manual\) failed: the agent did not compact: sim: compaction refused \(failCompact\)$`, lines[1])
	require.Regexp(t, `^\d\d:\d\d:\d\d  api       budget-exhausted    budget exhausted \(turns\): `, lines[2])

	// An item from another day carries its date.
	var dated bytes.Buffer
	require.NoError(t, runInbox(context.Background(), s.c, inboxOptions{Group: "web", Now: time.Now().Add(48 * time.Hour)}, &dated))
	require.Regexp(t, `^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d  web/lead  rotation-failed ×2  `, dated.String())

	var items []workflows.InboxItem
	require.NoError(t, json.Unmarshal([]byte(s.mustNid("inbox", "web", "--json")), &items))
	require.Len(t, items, 1)
	require.Equal(t, "lead", items[0].Session)
	require.Equal(t, workflows.EventRotationFailed, items[0].Kind)
	require.Equal(t, 2, items[0].Count)

	_, _, err := s.nid("inbox", "mobile")
	require.EqualError(t, err, `no group "mobile"; running groups: api, web`)
}

// nid inbox clear removes what nid inbox showed, of one group or all.
func TestInboxClear(t *testing.T) {
	t.Parallel()
	s := newSite(t, `  web:
    rotate: {mode: off}
    sessions:
      - {agent: sim, name: lead, sim: {turnDelay: 0s, failCompact: true}}
      - {agent: sim, name: worker, sim: {turnDelay: 0s, failCompact: true}}
  api:
    rotate: {mode: off}
    sessions:
      - {agent: sim, name: exec, sim: {turnDelay: 0s, failCompact: true}}
`)
	failCompact := func(group, name string) {
		temporaltest.TakeTurns(t, s.c, group, name, "work")
		n := len(temporaltest.Group(t, s.c, group).Inbox)
		temporaltest.Signal(t, s.c, group, name, workflows.SignalRotate, workflows.RotateRequest{Mode: config.ModeCompact, Reason: workflows.ReasonManual})
		temporaltest.WaitGroup(t, s.c, group, "to hear of the failure", func(g workflows.GroupView) bool { return len(g.Inbox) == n+1 })
	}
	failCompact("web", "lead")
	failCompact("web", "worker")
	failCompact("api", "exec")

	require.Equal(t, "cleared 2 inbox items\n", s.mustNid("inbox", "clear", "web"))
	require.Empty(t, temporaltest.Group(t, s.c, "web").Inbox)
	require.Len(t, temporaltest.Group(t, s.c, "api").Inbox, 1, "another group's items stay")

	// A later failure is news again.
	failCompact("web", "lead")
	require.Equal(t, "cleared 2 inbox items\n", s.mustNid("inbox", "clear"))
	require.Equal(t, "inbox empty\n", s.mustNid("inbox"))
	require.Equal(t, "cleared 0 inbox items\n", s.mustNid("inbox", "clear"))

	_, _, err := s.nid("inbox", "clear", "mobile")
	require.EqualError(t, err, `no group "mobile"; running groups: api, web`)
}

// timeRE is the time of day a feed line starts with.
var timeRE = regexp.MustCompile(`(?m)^\d\d:\d\d:\d\d `)

// untimed is feed output without its times of day, which are the real
// clock's.
func untimed(out string) string { return timeRE.ReplaceAllString(out, "") }

// watch runs runWatch in the background until the test stops it.
type watch struct {
	out, errOut temporaltest.SyncBuffer
	cancel      func()
	done        chan error
}

func startWatch(t *testing.T, s *site, opts watchOptions) *watch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &watch{cancel: cancel, done: make(chan error, 1)}
	opts.Interval = 20 * time.Millisecond
	go func() { w.done <- runWatch(ctx, s.c, opts, &w.out, &w.errOut) }()
	t.Cleanup(w.stop)
	return w
}

// waitFor waits until the output holds n lines.
func (w *watch) waitFor(t *testing.T, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return strings.Count(w.out.String(), "\n") >= n }, time.Minute, 10*time.Millisecond,
		"%d lines, got:\n%s%s", n, w.out.String(), w.errOut.String())
}

// stop ends the watch the way Ctrl-C does, which is a clean end.
func (w *watch) stop() {
	if w.cancel != nil {
		w.cancel()
		w.cancel = nil
		if err := <-w.done; err != nil {
			panic(fmt.Sprintf("nid watch ended with %v", err))
		}
	}
}

func TestWatchShowsRecentEventsThenFollows(t *testing.T) {
	t.Parallel()
	s := newSite(t, teamGroups)
	temporaltest.TakeTurns(t, s.c, "web", "lead", "l1")
	for i := range 6 {
		temporaltest.TakeTurns(t, s.c, "web", "worker", fmt.Sprint("w", i+1))
	}
	temporaltest.Settle(t, s.c)
	w := startWatch(t, s, watchOptions{Group: "web", Backlog: 4})
	w.waitFor(t, 8) // the backlog, then the live marker
	temporaltest.Rotate(t, s.c, "web", "lead", config.ModeCompact)
	w.waitFor(t, 10)
	w.stop()
	require.Equal(t, ""+
		// web/lead's whole past is within the backlog.
		"web/lead    session started (sim)\n"+
		"web/lead    message queued: l1\n"+
		"web/lead    turn 1  31% of 200k\n"+
		// web/worker's last 4 of 13.
		"web/worker  message queued: w5\n"+
		"web/worker  turn 5  100% of 200k\n"+
		"web/worker  message queued: w6\n"+
		"web/worker  turn 6  100% of 200k\n"+
		// Then what happens next.
		"── live ──\n"+
		"web/lead    rotating web/lead now (compact)\n"+
		"web/lead    ↻ compact (manual) 62k → 6.2k\n",
		untimed(w.out.String()))
	require.Empty(t, w.errOut.String())
}

func TestWatchJSON(t *testing.T) {
	t.Parallel()
	s := newSite(t, teamGroups)
	temporaltest.TakeTurns(t, s.c, "web", "lead", "l1")
	w := startWatch(t, s, watchOptions{Group: "web", Name: "lead", JSON: true, Backlog: 10})
	w.waitFor(t, 3)
	w.stop()
	lines := strings.Split(strings.TrimSpace(w.out.String()), "\n")
	require.Len(t, lines, 3)
	var ev workflows.Event
	require.NoError(t, json.Unmarshal([]byte(lines[2]), &ev))
	require.Equal(t, int64(3), ev.Seq)
	require.Equal(t, workflows.EventTurn, ev.Kind)
	require.Equal(t, "turn 1", ev.Text)
	require.Equal(t, temporaltest.Session(t, s.c, "web", "lead").Events[2], ev, "the event as the session recorded it")
}

func TestWatchUnknown(t *testing.T) {
	t.Parallel()
	s := newSite(t, teamGroups)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"session", []string{"watch", "web/tester"}, `no session "web/tester"; sessions in web: lead, worker`},
		{"group", []string{"watch", "mobile"}, `no group "mobile"; running groups: api, web`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := s.nid(tt.args...)
			require.EqualError(t, err, tt.want)
		})
	}
}

func TestWatchKeepsGoingThroughErrors(t *testing.T) {
	t.Parallel()
	const groups = `  web:
    sessions:
      - {agent: sim, name: lead, sim: {turnDelay: 0s}}
`
	for _, persist := range []bool{false, true} {
		t.Run(fmt.Sprint("persist=", persist), func(t *testing.T) {
			t.Parallel()
			s := newSite(t, groups)
			temporaltest.Settle(t, s.c)
			// No worker answers at first: the feed waits for one rather
			// than ending.
			s.down()
			// A poll the stopping worker sent reaches a loaded server late,
			// and counts as a worker asking after the feed's first query:
			// that query is sent once none has come for a while.
			require.Eventually(t, func() bool {
				_, since, err := nidclient.Unserved(t.Context(), s.c, time.Now())
				return err == nil && time.Since(since) > 2*time.Second
			}, time.Minute, 100*time.Millisecond)
			w := startWatch(t, s, watchOptions{Backlog: 10, Persist: persist})
			require.Eventually(t, func() bool { return w.errOut.String() != "" }, time.Minute, 10*time.Millisecond)
			s.up(groups)
			w.waitFor(t, 1)
			w.stop()
			require.Equal(t, "web/lead  session started (sim)\n", untimed(w.out.String()))
			want := `^nid: web/lead did not answer: no worker is running \(the last one asked Temporal for nid's work at \d\d:\d\d:\d\d, \d+s ago\); start nid up or nid worker \(retrying\)\n$`
			if persist {
				// nid up's own feed does not ask whether nid up is running.
				want = `^nid: web/lead has not answered yet \(retrying\)\n$`
			}
			require.Regexp(t, want, w.errOut.String(), "a lasting failure is reported once")
		})
	}
}

func TestUp(t *testing.T) {
	t.Parallel()
	// nid up after an earlier one: web/lead has run before, and so has
	// group old, which has left nid.yaml since.
	const web = `  web:
    sessions:
      - {agent: sim, name: lead, sim: {turnDelay: 0s}}
`
	s := newSite(t, web)
	// A query waits for web/lead to have recorded its start, so old/bot's
	// comes after it.
	temporaltest.Session(t, s.c, "web", "lead")
	old := s.Config(t, `  old:
    sessions:
      - {agent: sim, name: bot, sim: {turnDelay: 0s}}
`)
	require.NoError(t, worker.StartGroups(context.Background(), s.c, old))
	temporaltest.Session(t, s.c, "old", "bot")
	temporaltest.Listed(t, s.c, old)
	temporaltest.Settle(t, s.c)
	s.down()

	cfg := s.Config(t, web)
	cfg.HTTP.Token = ""                           // nid makes one in the state directory
	cfg.Temporal.UI.URL = "http://127.0.0.1:8233" // nid server's, say
	embed := func(context.Context, worker.EmbeddedOptions) (worker.EmbeddedServer, error) {
		return nil, errors.New("not in this test")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got worker.Options
	var started node
	start := func(ctx context.Context, opts worker.Options) (node, error) {
		got = opts
		n, err := startWorkerNode(ctx, opts)
		// As a node with the embedded server's Web UI has.
		n.uiLogin = "http://127.0.0.1:8233/nid/login/SECRET"
		started = n
		return n, err
	}
	var out, errOut temporaltest.SyncBuffer
	opts := newUpOptions(cfg, temporaltest.Logger(), embed, true, "Ctrl-C stops nid.")
	opts.Feed.Interval = 20 * time.Millisecond
	done := make(chan error, 1)
	go func() { done <- runUp(ctx, opts, start, &out, &errOut) }()
	require.Eventually(t, func() bool {
		return strings.Contains(out.String(), liveMarker) && strings.Contains(out.String(), "left nid.yaml")
	}, time.Minute, 10*time.Millisecond, "%s", errOut.String())
	cancel()
	require.NoError(t, <-done)
	require.Regexp(t, `^http://127\.0\.0\.1:\d+/login/[A-Z2-7]{26}$`, started.login)
	head := "" +
		"Temporal frontend  " + s.Address + "\n" +
		"Temporal Web UI    http://127.0.0.1:8233\n" +
		"Web UI login       http://127.0.0.1:8233/nid/login/SECRET (a one-time login link for 10 minutes; then log in with the Temporal credential or the API token)\n" +
		"nid HTTP server    " + started.http + "\n" +
		"Dashboard          " + started.login + " (a one-time login link for 10 minutes; then log in with the API token)\n" +
		"API token          in " + filepath.Join(cfg.State, worker.TokenFile) + " (nid made it on its first start; set http.token to choose one)\n" +
		"web/lead  session started (sim)\n" +
		"old/bot   session started (sim)\n"
	// nid up stops old/bot as it starts; the feed's first poll may come
	// before or after old/bot records it.
	stop := "old/bot   stopped (it left nid.yaml): its claims and locks are released\n"
	require.Contains(t, []string{head + stop + liveMarker + "\n", head + liveMarker + "\n" + stop}, untimed(out.String()))
	require.Equal(t, "nid: stop old/bot: it left nid.yaml (its claims and locks go back to the board)\n"+
		"Ctrl-C stops nid.\n", errOut.String())
	require.NoFileExists(t, filepath.Join(cfg.State, runningFile), "the record of the running nid goes with it")
	require.True(t, got.StartGroups)
	require.NotNil(t, got.StartEmbedded)
	require.Same(t, cfg, got.Config)
	_, err := http.Get(started.http)
	require.ErrorContains(t, err, "connection refused", "Ctrl-C stopped the node")
}

func TestUpStartFailure(t *testing.T) {
	start := func(context.Context, worker.Options) (node, error) {
		return node{}, errors.New("port 7233 is in use")
	}
	err := runUp(context.Background(), newUpOptions(config.Default(), nil, nil, false, ""), start, &bytes.Buffer{}, &bytes.Buffer{})
	require.EqualError(t, err, "port 7233 is in use")
}

func TestStop(t *testing.T) {
	t.Parallel()
	s := newSite(t, `  web:
    tasks:
      - {title: write the parser}
    sessions:
      - {agent: sim, name: lead, sim: {turnDelay: 1h}}
  api:
    sessions:
      - {agent: sim, name: exec, sim: {turnDelay: 0s}}
`)
	// web/lead claims the task and works on it; it takes a lock as its
	// lock_acquire tool would.
	temporaltest.WaitSession(t, s.c, "web", "lead", "to work on its task", func(v workflows.SessionView) bool {
		return v.Status == workflows.StatusWorking && v.Task != nil
	})
	_, err := worker.UpdateBoard(context.Background(), s.c, "web", workflows.UpdateLockAcquire, workflows.BoardRequest{Session: "lead", Lock: "src/app.go"})
	require.NoError(t, err)

	require.Equal(t, "stopped web/lead; released task t1, lock src/app.go\nweb/lead is working: its agent stops when the current step ends\n",
		s.mustNid("stop", "web/lead"))
	g := temporaltest.Group(t, s.c, "web")
	require.Equal(t, []string{"lead"}, g.Stopped)
	require.Empty(t, g.Board.Locks)
	require.Equal(t, workflows.TaskTodo, g.Board.Tasks[0].Status, "the task is free for another session")
	// Listed as stopped from the moment the stop is taken, though its
	// agent's turn (an hour long) still runs.
	temporaltest.Settle(t, s.c)
	require.Regexp(t, `(?m)^web/lead\s+sim\s+stopped\s`, s.mustNid("ls", "web"))

	require.Equal(t, "stopped api/exec; it held no tasks or locks\n", s.mustNid("stop", "api/exec"))
	temporaltest.WaitSession(t, s.c, "api", "exec", "to stop", func(v workflows.SessionView) bool { return v.Status == workflows.StatusStopped })
}

// nid stop GROUP stops each session of the group that is not stopped yet.
func TestStopGroup(t *testing.T) {
	t.Parallel()
	s := newSite(t, `  web:
    sessions:
      - {agent: sim, name: lead, sim: {turnDelay: 1h}}
      - {agent: sim, name: old, sim: {turnDelay: 0s}}
      - {agent: sim, name: worker, sim: {turnDelay: 0s}}
  api:
    sessions:
      - {agent: sim, name: exec, sim: {turnDelay: 0s}}
`)
	// web/lead is mid-turn and holds a lock, web/old was stopped before,
	// web/worker is idle with nothing.
	working(t, s, "web", "lead")
	_, err := worker.UpdateBoard(context.Background(), s.c, "web", workflows.UpdateLockAcquire, workflows.BoardRequest{Session: "lead", Lock: "src/app.go"})
	require.NoError(t, err)
	s.mustNid("stop", "web/old")

	c := &temporaltest.Counter{Client: s.c}
	var out bytes.Buffer
	require.NoError(t, runStopGroup(context.Background(), c, "web", &out))
	require.Equal(t, "stopped web/lead; released lock src/app.go\n"+
		"web/lead is working: its agent stops when the current step ends\n"+
		"stopped web/worker; it held no tasks or locks\n", out.String())
	require.Equal(t, 2, c.Sent(), "the stopped one is left alone")
	g := temporaltest.Group(t, s.c, "web")
	require.ElementsMatch(t, []string{"lead", "old", "worker"}, g.Stopped)
	require.Empty(t, g.Board.Locks)
	for _, name := range []string{"lead", "worker"} {
		temporaltest.WaitSession(t, s.c, "web", name, "to stop", func(v workflows.SessionView) bool { return v.Status == workflows.StatusStopped })
	}
	require.Empty(t, temporaltest.Group(t, s.c, "api").Stopped, "another group is left alone")

	_, _, err = s.nid("stop", "web")
	require.EqualError(t, err, "every session of group web is already stopped")
}

// nid start brings a stopped session back, in its conversation or a fresh
// one.
func TestStart(t *testing.T) {
	t.Parallel()
	s := newSite(t, teamGroups)
	temporaltest.TakeTurns(t, s.c, "web", "lead", "l1")
	stop := func() {
		s.mustNid("stop", "web/lead")
		temporaltest.WaitSession(t, s.c, "web", "lead", "to stop", func(v workflows.SessionView) bool { return v.Status == workflows.StatusStopped })
	}
	stop()
	require.Equal(t, "started web/lead; it goes on in the same conversation\n", s.mustNid("start", "web/lead"))
	v := temporaltest.TakeTurns(t, s.c, "web", "lead", "l2")
	require.Equal(t, "sim-1", v.Conversation)
	require.Empty(t, temporaltest.Group(t, s.c, "web").Stopped)
	_, _, err := s.nid("start", "web/lead")
	require.EqualError(t, err, "web/lead is not stopped (it is idle)")

	stop()
	require.Equal(t, "started web/lead; it goes on after a handoff into a fresh conversation\n", s.mustNid("start", "web/lead", "--fresh"))
	v = temporaltest.WaitSession(t, s.c, "web", "lead", "to hand off", func(v workflows.SessionView) bool {
		return v.Context.Rotations == 1 && v.Status == workflows.StatusIdle
	})
	require.Equal(t, config.ModeHandoff, v.Context.LastRotation.Method)
	require.NotEqual(t, "sim-1", v.Conversation)

	_, _, err = s.nid("start", "web/nobody")
	require.EqualError(t, err, `no session "web/nobody"; sessions in web: lead, worker`)
}

func TestStopUnknown(t *testing.T) {
	t.Parallel()
	s := newSite(t, teamGroups)
	_, _, err := s.nid("stop", "web/nobody")
	require.ErrorContains(t, err, `no session "web/nobody"`)
	require.Empty(t, temporaltest.Group(t, s.c, "web").Stopped, "nothing is stopped")
}

// nid rotations lists each session's receipts and sums them up; --json
// gives what the sessions keep.
func TestRotations(t *testing.T) {
	t.Parallel()
	s := newSite(t, `  web:
    rotate: {mode: off}
    sessions:
      - {agent: sim, name: lead, sim: {window: 200000, tokensPerTurn: 62000, turnDelay: 0s, ack: wrong}}
      - {agent: sim, name: worker, sim: {window: 200000, tokensPerTurn: 80000, turnDelay: 0s, ack: none}}
      - {agent: sim, name: idle, sim: {turnDelay: 0s}}
`)
	temporaltest.TakeTurns(t, s.c, "web", "lead", "l1", "l2")
	temporaltest.Rotate(t, s.c, "web", "lead", config.ModeHandoff)
	temporaltest.TakeTurns(t, s.c, "web", "worker", "w1")
	temporaltest.Rotate(t, s.c, "web", "worker", config.ModeCompact)
	temporaltest.TakeTurns(t, s.c, "web", "worker", "w2")
	temporaltest.Rotate(t, s.c, "web", "worker", config.ModeHandoff)
	temporaltest.Settle(t, s.c)

	out := s.mustNid("rotations", "web")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Len(t, lines, 7, out)
	require.Regexp(t, `^SESSION\s+#\s+TIME\s+METHOD\s+REASON\s+TOKENS\s+COST\s+SUMMARY\s+FACTS\s+VERIFIED\s+NOTE$`, lines[0])
	facts := `(no repo|\d+ commits?, \d+ changed)`
	require.Regexp(t, `^web/lead\s+1\s+\d\d:\d\d:\d\d\s+handoff\s+manual\s+124k → [\d.]+k\s+[\d.]+k tok\s+agent \d+B\s+`+facts+
		`\s+false\s+web/lead's fresh conversation says it resumes task t999, but it holds no task$`, lines[1])
	require.Regexp(t, `^web/worker\s+1\s+\d\d:\d\d:\d\d\s+compact\s+manual\s+80k → 8k\s+80k tok\s+—\s+—\s+—$`, lines[2])
	require.Regexp(t, `^web/worker\s+2\s+\d\d:\d\d:\d\d\s+handoff\s+manual\s+88k → [\d.]+k\s+[\d.]+k tok\s+agent \d+B\s+`+facts+
		`\s+none\s+web/worker's fresh conversation did not acknowledge what it resumes \(handoff_ack\) in its first turn; it holds no task$`, lines[3])
	require.Regexp(t, `^web/idle: no rotations yet$`, lines[4])
	require.Regexp(t, `^web/lead: 1 rotation \(1 handoff\); 0 of 1 handoff verified; [\d.]+k tokens reclaimed per rotation$`, lines[5])
	require.Regexp(t, `^web/worker: 2 rotations \(1 compact, 1 handoff\); 0 of 1 handoff verified; [\d.]+k tokens reclaimed per rotation$`, lines[6])

	var got []nidclient.SessionRotations
	require.NoError(t, json.Unmarshal([]byte(s.mustNid("rotations", "web/worker", "--json")), &got))
	worker := temporaltest.Session(t, s.c, "web", "worker")
	require.Len(t, got, 1)
	require.Equal(t, "web/worker", got[0].Session)
	require.Equal(t, worker.Receipts, got[0].Receipts)
	require.Equal(t, 1, got[0].Stats.Compact)
	require.Equal(t, workflows.VerifiedNone, got[0].Receipts[1].Verified)

	// The sim's wrong and missing acknowledgements are the inbox's; the
	// right one (web/idle has none to give) is not.
	var items []workflows.InboxItem
	require.NoError(t, json.Unmarshal([]byte(s.mustNid("inbox", "web", "--json")), &items))
	var unverified []string
	for _, it := range items {
		if it.Kind == "handoff-unverified" {
			unverified = append(unverified, it.Session+": "+it.Text)
		}
	}
	require.ElementsMatch(t, []string{
		"lead: web/lead's fresh conversation says it resumes task t999, but it holds no task",
		"worker: web/worker's fresh conversation did not acknowledge what it resumes (handoff_ack) in its first turn; it holds no task",
	}, unverified)

	_, _, err := s.nid("rotations", "web/nobody")
	require.EqualError(t, err, `no session "web/nobody"; sessions in web: idle, lead, worker`)
	_, _, err = s.nid("rotations", "mobile")
	require.EqualError(t, err, `no group "mobile"; running groups: web`)
	_, _, err = s.nid("rotations")
	require.EqualError(t, err, "nid rotations takes one GROUP or GROUP/SESSION, e.g. web or web/lead")
}

// nid start GROUP starts each stopped session of the group, and says when
// none is.
func TestStartGroup(t *testing.T) {
	t.Parallel()
	s := newSite(t, teamGroups)
	_, _, err := s.nid("start", "web")
	require.EqualError(t, err, "no session of group web is stopped")
	s.mustNid("stop", "web")
	for _, name := range []string{"lead", "worker"} {
		temporaltest.WaitSession(t, s.c, "web", name, "to stop", func(v workflows.SessionView) bool { return v.Status == workflows.StatusStopped })
	}
	require.Equal(t, "started web/lead; it goes on in the same conversation\nstarted web/worker; it goes on in the same conversation\n",
		s.mustNid("start", "web"))
	require.Empty(t, temporaltest.Group(t, s.c, "web").Stopped)
	temporaltest.TakeTurns(t, s.c, "web", "lead", "l1")
}

// nid forget ends a stopped group that left nid.yaml: it leaves nid ls and
// the group listings, and its workflows' histories stay in Temporal.
func TestForget(t *testing.T) {
	t.Parallel()
	s := newSite(t, teamGroups)
	_, _, err := s.nid("forget", "web")
	require.EqualError(t, err, "group web still runs web/lead (idle), web/worker (idle): nid stop web stops its sessions, then nid forget web forgets it")

	s.mustNid("stop", "web")
	for _, name := range []string{"lead", "worker"} {
		temporaltest.WaitSession(t, s.c, "web", name, "to stop", func(v workflows.SessionView) bool { return v.Status == workflows.StatusStopped })
	}
	temporaltest.Settle(t, s.c)
	file := filepath.Join(t.TempDir(), "nid.yaml")
	require.NoError(t, os.WriteFile(file, []byte("groups:\n  web:\n    sessions:\n      - {agent: sim, name: lead}\n"), 0o600))
	_, _, err = s.nid("--config", file, "forget", "web")
	require.EqualError(t, err, "group web is still in nid.yaml: remove it from the file and run nid reload (which stops its sessions), then nid forget web")

	require.Equal(t, "forgot group web and its sessions lead, worker; their histories stay in Temporal\n", s.mustNid("forget", "web"))
	require.Eventually(t, func() bool { return !strings.Contains(s.mustNid("ls"), "web/") }, 10*time.Second, 100*time.Millisecond, "web leaves nid ls")
	require.Contains(t, s.mustNid("ls"), "api/exec")
	d, err := s.c.DescribeWorkflowExecution(context.Background(), workflows.SessionID("web", "lead"), "")
	require.NoError(t, err)
	require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED, d.GetWorkflowExecutionInfo().GetStatus(), "its history stays")
	_, _, err = s.nid("forget", "web")
	require.EqualError(t, err, `no group "web"; running groups: api`)
}

// A policy of mode compact is refused for the sessions that could rotate
// under it: a stopped one (as a session that left nid.yaml is) no longer
// can, and is not named.
func TestGroupSetCompactLeavesStoppedSessionsOut(t *testing.T) {
	t.Parallel()
	s := newSite(t, `  web:
    rotate: {mode: off}
    sessions:
      - {agent: sim, name: lead, sim: {turnDelay: 0s}}
      - {agent: exec, name: lint, command: "true", permissions: full}
`)
	_, _, err := s.nid("group", "set", "web", `rotate={"mode":"compact"}`)
	require.ErrorContains(t, err, "compact never works for session lint")
	s.mustNid("stop", "web/lint")
	temporaltest.WaitSession(t, s.c, "web", "lint", "to stop", func(v workflows.SessionView) bool { return v.Status == workflows.StatusStopped })
	temporaltest.Settle(t, s.c)
	require.Contains(t, s.mustNid("group", "set", "web", `rotate={"mode":"compact"}`), "web rotate: mode=compact")
}
