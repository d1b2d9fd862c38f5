package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/worker"
	"github.com/nid-dev/nid/workflows"
)

func team() *fakeClient {
	return &fakeClient{
		sessions: []workflows.SessionView{
			{Group: "web", Name: "worker", Agent: "codex", Status: workflows.StatusWorking, Policy: config.DefaultRotate(),
				Context: workflows.ContextRecord{Percent: pct(80.4), UsedTokens: 160_800, WindowTokens: 200_000, TotalTurns: 31, Rotations: 2}},
			{Group: "web", Name: "lead", Agent: "claude", Status: workflows.StatusIdle, Policy: config.Rotate{Mode: config.ModeHandoff, ContextPercent: 80},
				Context: workflows.ContextRecord{Percent: pct(62), UsedTokens: 124_000, WindowTokens: 200_000, TotalTurns: 12}},
			{Group: "api", Name: "exec", Agent: "exec", Status: workflows.StatusIdle, Policy: config.Rotate{Mode: config.ModeOff},
				Context: workflows.ContextRecord{Source: "unknown", TotalTurns: 4, Rotations: 1}},
		},
		groups: []workflows.GroupView{
			{Name: "web", Policy: config.DefaultRotate()},
			{Name: "api", Policy: config.Rotate{Mode: config.ModeOff, ContextPercent: 85}},
		},
	}
}

func TestLs(t *testing.T) {
	tests := []struct {
		name       string
		group      string
		pageSize   int
		noMemo     []string
		wantOut    string
		wantStderr string
	}{
		{
			name: "every session, sorted",
			wantOut: "" +
				"SESSION     AGENT   STATUS   TURNS  CONTEXT\n" +
				"api/exec    exec    idle     4      — ↻1\n" +
				"web/lead    claude  idle     12     62% of 200k\n" +
				"web/worker  codex   working  31     80% of 200k ↻2\n",
		},
		{
			name:     "pages are followed",
			pageSize: 1,
			wantOut: "" +
				"SESSION     AGENT   STATUS   TURNS  CONTEXT\n" +
				"api/exec    exec    idle     4      — ↻1\n" +
				"web/lead    claude  idle     12     62% of 200k\n" +
				"web/worker  codex   working  31     80% of 200k ↻2\n",
		},
		{
			name:  "one group",
			group: "web",
			wantOut: "" +
				"SESSION     AGENT   STATUS   TURNS  CONTEXT\n" +
				"web/lead    claude  idle     12     62% of 200k\n" +
				"web/worker  codex   working  31     80% of 200k ↻2\n",
		},
		{
			// Until the memo is visible the search attributes still give
			// the percent and the rotations, but no window or turns.
			name:   "no memo yet",
			group:  "web",
			noMemo: []string{"nid/web/worker"},
			wantOut: "" +
				"SESSION     AGENT   STATUS   TURNS  CONTEXT\n" +
				"web/lead    claude  idle     12     62% of 200k\n" +
				"web/worker  codex   working  0      80% ↻2\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := team()
			fake.pageSize = tt.pageSize
			fake.noMemo = map[string]bool{}
			for _, id := range tt.noMemo {
				fake.noMemo[id] = true
			}
			var out, errOut bytes.Buffer
			err := runLs(context.Background(), fake, lsOptions{Group: tt.group}, &out, &errOut)
			require.NoError(t, err)
			require.Equal(t, tt.wantOut, out.String())
			require.Empty(t, errOut.String())
			if tt.pageSize == 0 {
				require.Len(t, fake.lists, 1, "nid ls is one visibility query")
			}
		})
	}
}

func TestLsGroupFilterQuery(t *testing.T) {
	fake := team()
	require.NoError(t, runLs(context.Background(), fake, lsOptions{Group: "web"}, &bytes.Buffer{}, &bytes.Buffer{}))
	require.Equal(t, []string{"WorkflowType = 'nid.Session' AND ExecutionStatus = 'Running' AND NidGroup = 'web'"}, fake.lists)
}

func TestLsJSON(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, runLs(context.Background(), team(), lsOptions{Group: "web", JSON: true}, &out, &bytes.Buffer{}))
	var items []struct {
		Session string                  `json:"session"`
		Group   string                  `json:"group"`
		Name    string                  `json:"name"`
		Agent   string                  `json:"agent"`
		Status  string                  `json:"status"`
		Turns   int                     `json:"turns"`
		Context workflows.ContextRecord `json:"context"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &items))
	require.Len(t, items, 2)
	require.Equal(t, "web/lead", items[0].Session)
	require.Equal(t, "web", items[0].Group)
	require.Equal(t, "lead", items[0].Name)
	require.Equal(t, "claude", items[0].Agent)
	require.Equal(t, 12, items[0].Turns)
	require.Equal(t, int64(124_000), items[0].Context.UsedTokens)
	require.Equal(t, 2, items[1].Context.Rotations)

	out.Reset()
	require.NoError(t, runLs(context.Background(), &fakeClient{}, lsOptions{JSON: true}, &out, &bytes.Buffer{}))
	require.Equal(t, "[]\n", out.String(), "no sessions is an empty array, not null")
}

func TestLsEmptyAndUnknown(t *testing.T) {
	var out, errOut bytes.Buffer
	require.NoError(t, runLs(context.Background(), &fakeClient{}, lsOptions{}, &out, &errOut))
	require.Equal(t, "SESSION  AGENT  STATUS  TURNS  CONTEXT\n", out.String())
	require.Equal(t, "no sessions (start some with nid up)\n", errOut.String())

	fake := team()
	fake.groups = append(fake.groups, workflows.GroupView{Name: "docs"})
	out.Reset()
	errOut.Reset()
	require.NoError(t, runLs(context.Background(), fake, lsOptions{Group: "docs"}, &out, &errOut))
	require.Equal(t, "no sessions running in docs\n", errOut.String())

	err := runLs(context.Background(), team(), lsOptions{Group: "mobile"}, &out, &errOut)
	require.EqualError(t, err, `no group "mobile"; running groups: api, web`)

	err = runLs(context.Background(), &fakeClient{}, lsOptions{Group: "mobile"}, &out, &errOut)
	require.EqualError(t, err, `no group "mobile": no group is running (start them with nid up)`)
}

func TestRotate(t *testing.T) {
	tests := []struct {
		name    string
		opts    rotateOptions
		prepare func(*fakeClient)
		want    string
	}{
		{
			name: "idle session rotates now with the group's mode",
			opts: rotateOptions{Group: "web", Name: "lead"},
			want: "rotating web/lead now (handoff)\n",
		},
		{
			name: "working session rotates when its turn ends",
			opts: rotateOptions{Group: "web", Name: "worker"},
			want: "web/worker is working: it rotates (auto) when the current turn ends\n",
		},
		{
			name: "group says off: auto",
			opts: rotateOptions{Group: "api", Name: "exec"},
			want: "rotating api/exec now (auto)\n",
		},
		{
			name: "mode overrides the group's",
			opts: rotateOptions{Group: "web", Name: "worker", Mode: "compact"},
			want: "web/worker is working: it rotates (compact) when the current turn ends\n",
		},
		{
			name: "rate-limited waits too",
			opts: rotateOptions{Group: "web", Name: "lead"},
			prepare: func(f *fakeClient) {
				f.sessions[1].Status = workflows.StatusRateLimited
			},
			want: "web/lead is rate-limited: it rotates (handoff) when the current turn ends\n",
		},
		{
			name: "joins a pending request",
			opts: rotateOptions{Group: "web", Name: "worker"},
			prepare: func(f *fakeClient) {
				f.sessions[0].PendingRotate = &workflows.RotateRequest{Mode: "handoff", Reason: workflows.ReasonManual}
			},
			want: "a rotation is already pending for web/worker: this request joins it (handoff); it runs when the current turn ends\n",
		},
		{
			name: "joins the agent's own handoff",
			opts: rotateOptions{Group: "web", Name: "worker", Mode: "compact"},
			prepare: func(f *fakeClient) {
				f.sessions[0].HandoffPending = true
			},
			want: "web/worker wrote its own handoff and rotates (handoff) when the current turn ends: this request joins it\n",
		},
		{
			name: "joins a running manual rotation",
			opts: rotateOptions{Group: "web", Name: "lead"},
			prepare: func(f *fakeClient) {
				f.sessions[1].Status = workflows.StatusRotating
				f.sessions[1].Rotating = &workflows.RotateRequest{Mode: "handoff", Reason: workflows.ReasonManual}
			},
			want: "web/lead is rotating now (handoff): this request joins that rotation\n",
		},
		{
			name: "waits for a running policy rotation",
			opts: rotateOptions{Group: "web", Name: "lead", Mode: "handoff"},
			prepare: func(f *fakeClient) {
				f.sessions[1].Status = workflows.StatusRotating
				f.sessions[1].Rotating = &workflows.RotateRequest{Mode: "compact", Reason: workflows.ReasonContext}
			},
			want: "web/lead is in another rotation now: it rotates (handoff) when that one ends\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := team()
			if tt.prepare != nil {
				tt.prepare(fake)
			}
			var out bytes.Buffer
			require.NoError(t, runRotate(context.Background(), fake, tt.opts, &out))
			require.Equal(t, tt.want, out.String())
			require.Equal(t, []sentSignal{{
				WorkflowID: workflows.SessionID(tt.opts.Group, tt.opts.Name),
				Name:       workflows.SignalRotate,
				Arg:        workflows.RotateRequest{Mode: tt.opts.Mode, Reason: workflows.ReasonManual},
			}}, fake.signals)
		})
	}
}

func TestRotateRefusesAStoppedSession(t *testing.T) {
	fake := team()
	fake.sessions[1].Status = workflows.StatusStopped
	var out bytes.Buffer
	err := runRotate(context.Background(), fake, rotateOptions{Group: "web", Name: "lead"}, &out)
	require.EqualError(t, err, "web/lead is stopped (nid stop): it takes no more turns, messages or rotations")
	require.Empty(t, fake.signals, "nothing is signalled")
}

func TestRotateUnknown(t *testing.T) {
	tests := []struct {
		name string
		opts rotateOptions
		want string
	}{
		{"unknown session lists the group's", rotateOptions{Group: "web", Name: "tester"}, `no session "web/tester"; sessions in web: lead, worker`},
		{"unknown group lists the groups", rotateOptions{Group: "mobile", Name: "lead"}, `no group "mobile"; running groups: api, web`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := team()
			err := runRotate(context.Background(), fake, tt.opts, &bytes.Buffer{})
			require.EqualError(t, err, tt.want)
			require.Empty(t, fake.signals)
		})
	}
}

func TestRotateWithoutWorker(t *testing.T) {
	fake := team()
	fake.queryErr = map[string]error{"nid/web/lead": serviceerror.NewFailedPrecondition("no poller seen for task queue recently, worker may be down")}
	err := runRotate(context.Background(), fake, rotateOptions{Group: "web", Name: "lead"}, &bytes.Buffer{})
	require.ErrorContains(t, err, "web/lead did not answer (is nid up or nid worker running?): no poller seen")
	require.Empty(t, fake.signals)
}

func TestGroupSet(t *testing.T) {
	fake := team()
	fake.updateResult = config.Rotate{Mode: config.ModeHandoff, ContextPercent: 85, MaxTurns: 40}
	var out bytes.Buffer
	js := `{"mode":"handoff","maxTurns":40}`
	require.NoError(t, runGroupSet(context.Background(), fake, groupSetOptions{Group: "web", RotateJSON: js}, &out))
	require.Equal(t, "web rotate: mode=handoff contextPercent=85 maxTurns=40 maxConcurrentRotations=unlimited\n", out.String())
	require.Len(t, fake.updates, 1)
	u := fake.updates[0]
	require.Equal(t, "nid/web", u.WorkflowID)
	require.Equal(t, workflows.UpdateSetPolicy, u.UpdateName)
	require.Equal(t, []any{workflows.SetPolicy{RotateJSON: js}}, u.Args)
	require.Equal(t, client.WorkflowUpdateStageCompleted, u.WaitForStage)

	fake.updateResult = config.Rotate{Mode: config.ModeAuto, ContextPercent: 70}
	out.Reset()
	require.NoError(t, runGroupSet(context.Background(), fake, groupSetOptions{Group: "web", RotateJSON: `{"maxTurns":0,"contextPercent":70}`}, &out))
	require.Equal(t, "web rotate: mode=auto contextPercent=70 maxTurns=never maxConcurrentRotations=unlimited\n", out.String())
}

func TestGroupSetRejects(t *testing.T) {
	tests := []struct {
		name string
		opts groupSetOptions
		want string
	}{
		{"invalid policy is refused before it is sent", groupSetOptions{Group: "web", RotateJSON: `{"mode":"sometimes"}`}, "sometimes"},
		{"not JSON", groupSetOptions{Group: "web", RotateJSON: `mode=handoff`}, "is not JSON"},
		{"unknown group", groupSetOptions{Group: "mobile", RotateJSON: `{"mode":"handoff"}`}, `no group "mobile"; running groups: api, web`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := team()
			err := runGroupSet(context.Background(), fake, tt.opts, &bytes.Buffer{})
			require.ErrorContains(t, err, tt.want)
			require.Empty(t, fake.updates)
		})
	}
}

func TestSend(t *testing.T) {
	fake := team()
	var out bytes.Buffer
	require.NoError(t, runSend(context.Background(), fake, sendOptions{Group: "web", Name: "lead", Text: "run the tests"}, &out))
	require.Equal(t, "queued for web/lead\n", out.String())
	require.Equal(t, []sentSignal{{WorkflowID: "nid/web/lead", Name: workflows.SignalMessage, Arg: workflows.Message{Text: "run the tests"}}}, fake.signals)

	err := runSend(context.Background(), fake, sendOptions{Group: "api", Name: "lead", Text: "hi"}, &out)
	require.EqualError(t, err, `no session "api/lead"; sessions in api: exec`)
}

func TestInbox(t *testing.T) {
	now := time.Date(2025, 6, 2, 18, 0, 0, 0, time.UTC)
	fake := team()
	fake.groups[0].Inbox = []workflows.InboxItem{
		{Seq: 2, At: time.Date(2025, 6, 2, 15, 4, 5, 0, time.UTC), Group: "web", Session: "lead", Kind: workflows.EventRotationFailed, Text: "compact rotation (manual) failed: vendor refused"},
	}
	fake.groups[1].Inbox = []workflows.InboxItem{
		{Seq: 1, At: time.Date(2025, 6, 1, 9, 0, 0, 0, time.UTC), Group: "api", Session: "exec", Kind: workflows.EventTurnFailed, Text: "3 turns failed in a row"},
		{Seq: 2, At: time.Date(2025, 6, 2, 16, 0, 0, 0, time.UTC), Group: "api", Kind: "budget", Text: "budget exhausted"},
	}

	var out bytes.Buffer
	require.NoError(t, runInbox(context.Background(), fake, inboxOptions{Now: now}, &out))
	require.Equal(t, ""+
		"2025-06-01 09:00:00  api/exec  turn-failed      3 turns failed in a row\n"+
		"15:04:05             web/lead  rotation-failed  compact rotation (manual) failed: vendor refused\n"+
		"16:00:00             api       budget           budget exhausted\n",
		out.String())

	out.Reset()
	require.NoError(t, runInbox(context.Background(), fake, inboxOptions{Group: "web", JSON: true, Now: now}, &out))
	var items []workflows.InboxItem
	require.NoError(t, json.Unmarshal(out.Bytes(), &items))
	require.Len(t, items, 1)
	require.Equal(t, "lead", items[0].Session)

	out.Reset()
	require.NoError(t, runInbox(context.Background(), team(), inboxOptions{Now: now}, &out))
	require.Equal(t, "inbox empty\n", out.String())

	err := runInbox(context.Background(), fake, inboxOptions{Group: "mobile", Now: now}, &out)
	require.EqualError(t, err, `no group "mobile"; running groups: api, web`)
}

// feedEvents numbers n turn events of a session from seq 1, a second apart.
func feedEvents(group, name string, n int, start time.Time) []workflows.Event {
	var evs []workflows.Event
	for i := 1; i <= n; i++ {
		evs = append(evs, workflows.Event{
			Seq: int64(i), At: start.Add(time.Duration(i) * time.Second), Group: group, Session: name,
			Kind: workflows.EventTurn, Text: "turn " + strconv.Itoa(i),
		})
	}
	return evs
}

func TestWatchShowsRecentEventsThenFollows(t *testing.T) {
	start := time.Date(2025, 6, 1, 15, 0, 0, 0, time.Local)
	fake := team()
	fake.sessions = fake.sessions[:2] // web/worker and web/lead
	fake.events = map[string][]workflows.Event{
		"nid/web/worker": feedEvents("web", "worker", 12, start),
		"nid/web/lead":   feedEvents("web", "lead", 2, start.Add(500*time.Millisecond)),
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fake.onList = func(n int) {
		switch n {
		case 2:
			fake.mu.Lock()
			fake.events["nid/web/lead"] = append(fake.events["nid/web/lead"], workflows.Event{
				Seq: 3, At: start.Add(time.Minute), Group: "web", Session: "lead", Kind: workflows.EventRotation,
				Rotation: &workflows.RotationEvent{Method: "compact", Reason: "manual", OK: true, BeforeTokens: 150_000, AfterTokens: 15_000},
			})
			fake.mu.Unlock()
		case 3:
			cancel()
		}
	}
	var out, errOut bytes.Buffer
	err := runWatch(ctx, fake, watchOptions{Backlog: 10, Interval: time.Millisecond}, &out, &errOut)
	require.NoError(t, err, "Ctrl-C is a clean end")
	require.Equal(t, ""+
		"15:00:01 web/lead    turn 1\n"+
		"15:00:02 web/lead    turn 2\n"+
		"15:00:03 web/worker  turn 3\n"+
		"15:00:04 web/worker  turn 4\n"+
		"15:00:05 web/worker  turn 5\n"+
		"15:00:06 web/worker  turn 6\n"+
		"15:00:07 web/worker  turn 7\n"+
		"15:00:08 web/worker  turn 8\n"+
		"15:00:09 web/worker  turn 9\n"+
		"15:00:10 web/worker  turn 10\n"+
		"15:00:11 web/worker  turn 11\n"+
		"15:00:12 web/worker  turn 12\n"+
		"── live ──\n"+
		"15:01:00 web/lead    ↻ compact (manual) 150k → 15k\n",
		out.String())
	require.Empty(t, errOut.String())
}

func TestWatchJSON(t *testing.T) {
	start := time.Date(2025, 6, 1, 15, 0, 0, 0, time.UTC)
	fake := team()
	fake.events = map[string][]workflows.Event{"nid/web/lead": feedEvents("web", "lead", 3, start)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fake.onEvents = func(n int) {
		if n == 2 {
			cancel()
		}
	}
	var out bytes.Buffer
	require.NoError(t, runWatch(ctx, fake, watchOptions{Group: "web", Name: "lead", JSON: true, Backlog: 10, Interval: time.Millisecond}, &out, &bytes.Buffer{}))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 3)
	var ev workflows.Event
	require.NoError(t, json.Unmarshal([]byte(lines[2]), &ev))
	require.Equal(t, int64(3), ev.Seq)
	require.Equal(t, "turn 3", ev.Text)
	require.True(t, ev.At.Equal(start.Add(3*time.Second)))
}

func TestWatchUnknown(t *testing.T) {
	tests := []struct {
		name string
		opts watchOptions
		want string
	}{
		{"session", watchOptions{Group: "web", Name: "tester"}, `no session "web/tester"; sessions in web: lead, worker`},
		{"group", watchOptions{Group: "mobile"}, `no group "mobile"; running groups: api, web`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.Interval = time.Millisecond
			err := runWatch(context.Background(), team(), tt.opts, &bytes.Buffer{}, &bytes.Buffer{})
			require.EqualError(t, err, tt.want)
		})
	}
}

func TestWatchKeepsGoingThroughErrors(t *testing.T) {
	for _, persist := range []bool{false, true} {
		fake := team()
		fake.sessions = fake.sessions[1:2] // web/lead
		start := time.Date(2025, 6, 1, 15, 0, 0, 0, time.Local)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		// No worker answers at first: the feed waits for one rather than ending.
		fake.queryErr = map[string]error{"nid/web/lead": serviceerror.NewFailedPrecondition("no poller seen for task queue recently, worker may be down")}
		fake.onList = func(n int) {
			fake.mu.Lock()
			defer fake.mu.Unlock()
			switch n {
			case 3:
				fake.queryErr = nil
				fake.events = map[string][]workflows.Event{"nid/web/lead": feedEvents("web", "lead", 1, start)}
			case 4:
				cancel()
			}
		}
		var out, errOut bytes.Buffer
		require.NoError(t, runWatch(ctx, fake, watchOptions{Backlog: 10, Interval: time.Millisecond, Persist: persist}, &out, &errOut))
		require.Equal(t, "15:00:01 web/lead  turn 1\n", out.String())
		want := "nid: web/lead did not answer (is nid up or nid worker running?): no poller seen for task queue recently, worker may be down (retrying)\n"
		if persist {
			// nid up's own feed does not ask whether nid up is running.
			want = "nid: web/lead has not answered yet (retrying)\n"
		}
		require.Equal(t, want, errOut.String(), "a lasting failure is reported once")
	}
}

func TestUp(t *testing.T) {
	fake := team()
	fake.sessions = fake.sessions[1:2]
	fake.events = map[string][]workflows.Event{"nid/web/lead": feedEvents("web", "lead", 1, time.Date(2025, 6, 1, 15, 0, 0, 0, time.Local))}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fake.onList = func(n int) {
		if n == 2 {
			cancel()
		}
	}
	embed := func(context.Context, worker.EmbeddedOptions) (worker.EmbeddedServer, error) {
		return nil, errors.New("not in this test")
	}
	cfg := config.Default()
	cfg.State = t.TempDir()
	var got worker.Options
	stopped := 0
	start := func(_ context.Context, opts worker.Options) (node, error) {
		got = opts
		return node{client: fake, frontend: "127.0.0.1:7233", ui: "http://127.0.0.1:8233", http: "http://127.0.0.1:7777",
			tokenFile: ".nid/http-token", login: "http://127.0.0.1:7777/login/MFRGGZDFMZTWQ2LKNNWG23TPOA", stop: func() error { stopped++; return nil },
			applied: worker.Plan{Changes: []worker.Change{{Group: "old", Session: "lead", Stop: true, Text: "stop old/lead: it left nid.yaml (its claims and locks go back to the board)"}}}}, nil
	}
	var out, errOut bytes.Buffer
	opts := newUpOptions(cfg, nil, embed, true, "Ctrl-C stops nid.")
	opts.Feed.Interval = time.Millisecond
	require.NoError(t, runUp(ctx, opts, start, &out, &errOut))
	require.Equal(t, ""+
		"Temporal frontend  127.0.0.1:7233\n"+
		"Temporal Web UI    http://127.0.0.1:8233\n"+
		"nid HTTP server    http://127.0.0.1:7777\n"+
		"Dashboard          http://127.0.0.1:7777/login/MFRGGZDFMZTWQ2LKNNWG23TPOA (a one-time login link for 10 minutes; then log in with the API token)\n"+
		"API token          in .nid/http-token (nid made it on its first start; set http.token to choose one)\n"+
		"15:00:01 web/lead  turn 1\n"+
		"── live ──\n",
		out.String())
	require.Equal(t, 1, stopped, "Ctrl-C stops the node")
	require.NoFileExists(t, filepath.Join(cfg.State, runningFile), "the record of the running nid goes with it")
	require.Contains(t, errOut.String(), "nid: stop old/lead: it left nid.yaml (its claims and locks go back to the board)\n")
	require.True(t, got.StartGroups)
	require.NotNil(t, got.StartEmbedded)
	require.Same(t, cfg, got.Config)
}

func TestUpStartFailure(t *testing.T) {
	start := func(context.Context, worker.Options) (node, error) {
		return node{}, errors.New("port 7233 is in use")
	}
	err := runUp(context.Background(), newUpOptions(config.Default(), nil, nil, false, ""), start, &bytes.Buffer{}, &bytes.Buffer{})
	require.EqualError(t, err, "port 7233 is in use")
}

func TestStop(t *testing.T) {
	tests := []struct {
		name     string
		session  string
		released []string
		want     string
	}{
		{"idle, holding a task and a lock", "lead", []string{"task t1", "lock src/app.go"},
			"stopped web/lead; released task t1, lock src/app.go\n"},
		{"mid-turn, holding nothing", "worker", nil,
			"stopped web/worker; it held no tasks or locks\nweb/worker is working: its agent stops when the current step ends\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := team()
			fake.updateResult = workflows.BoardResult{Released: tt.released}
			var out bytes.Buffer
			require.NoError(t, runStop(context.Background(), fake, stopOptions{Group: "web", Name: tt.session}, &out))
			require.Equal(t, tt.want, out.String())
			require.Len(t, fake.updates, 1)
			require.Equal(t, workflows.UpdateStopSession, fake.updates[0].UpdateName)
			require.Equal(t, []any{workflows.BoardRequest{Session: tt.session}}, fake.updates[0].Args)
		})
	}
}

// nid stop GROUP stops each session of the group that is not stopped yet.
func TestStopGroup(t *testing.T) {
	fake := team()
	fake.groups[0].Sessions = []string{"lead", "old", "worker"}
	fake.groups[0].Stopped = []string{"old"}
	fake.updateResult = workflows.BoardResult{Released: []string{"task t1"}}
	var out bytes.Buffer
	require.NoError(t, runStopGroup(context.Background(), fake, "web", &out))
	require.Equal(t, "stopped web/lead; released task t1\n"+
		"stopped web/worker; released task t1\nweb/worker is working: its agent stops when the current step ends\n", out.String())
	require.Len(t, fake.updates, 2, "the stopped one is left alone")
}

func TestStopUnknown(t *testing.T) {
	fake := team()
	err := runStop(context.Background(), fake, stopOptions{Group: "web", Name: "nobody"}, &bytes.Buffer{})
	require.ErrorContains(t, err, `no session "web/nobody"`)
	require.Empty(t, fake.updates, "nothing is stopped")
}
