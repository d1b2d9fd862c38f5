package worker

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/internal/temporaltest"
	"github.com/nid-dev/nid/transcript"
	"github.com/nid-dev/nid/workflows"
)

// webGroups is one group whose sessions take a turn only when sent a
// message: web/lead fills 31% of its window a turn, web/worker 40%.
const webGroups = `  web:
    sessions:
      - {agent: sim, name: lead, sim: {window: 200000, tokensPerTurn: 62000, turnDelay: 0s}}
      - {agent: sim, name: worker, sim: {window: 200000, tokensPerTurn: 80000, turnDelay: 0s, failCompact: true}}
`

// call posts body to /api/method with the token and returns the status and
// the decoded answer.
func (s *apiSite) call(t *testing.T, method, body, token string) (int, map[string]any) {
	t.Helper()
	resp := temporaltest.Do(t, http.MethodPost, s.srv.URL+"/api/"+method, strings.NewReader(body), token)
	defer resp.Body.Close()
	var out map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return resp.StatusCode, out
}

// ok calls a method that must succeed and returns its answer.
func (s *apiSite) ok(t *testing.T, method, body string) map[string]any {
	t.Helper()
	status, got := s.call(t, method, body, testToken)
	require.Equal(t, http.StatusOK, status, "%v", got)
	return got
}

// asJSON is v as the API's JSON decodes into a map.
func asJSON(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	var out any
	require.NoError(t, json.Unmarshal(b, &out))
	return out
}

// decided is the last rotate decision a session recorded in its feed.
func decided(v workflows.SessionView) string {
	last := ""
	for _, e := range v.Events {
		if e.Kind == workflows.EventRotateQueued {
			last = e.Text
		}
	}
	return last
}

func TestAPIReads(t *testing.T) {
	t.Parallel()
	s := newAPISite(t, webGroups)
	temporaltest.TakeTurns(t, s.c, "web", "lead", "l1", "l2")
	temporaltest.TakeTurns(t, s.c, "web", "worker", "w1")
	var g workflows.GroupView
	for n := range 2 {
		temporaltest.Signal(t, s.c, "web", "worker", workflows.SignalRotate, workflows.RotateRequest{Mode: config.ModeCompact, Reason: workflows.ReasonManual})
		g = temporaltest.WaitGroup(t, s.c, "web", "to hear of the failed rotation", func(g workflows.GroupView) bool {
			return len(g.Inbox) == 1 && max(g.Inbox[0].Count, 1) == n+1
		})
	}
	temporaltest.Settle(t, s.c)
	lead, worker := temporaltest.Session(t, s.c, "web", "lead"), temporaltest.Session(t, s.c, "web", "worker")

	got := s.ok(t, MethodSessionList, `{}`)
	require.Equal(t, map[string]any{"sessions": []any{
		map[string]any{"group": "web", "name": "lead", "agent": "sim", "status": "idle", "host": temporaltest.Host, "context": asJSON(t, lead.Context)},
		map[string]any{"group": "web", "name": "worker", "agent": "sim", "status": "idle", "host": temporaltest.Host, "context": asJSON(t, worker.Context)},
	}, "namespace": s.Namespace, "temporal": s.Address}, got, "each session with its context record as the session keeps it, and where they run")
	ctx := got["sessions"].([]any)[0].(map[string]any)["context"].(map[string]any)
	require.Equal(t, "reported", ctx["source"])
	require.Equal(t, 2.0, ctx["totalTurns"])
	require.InDelta(t, 62.0, ctx["percent"], 0.01)

	require.Equal(t, map[string]any{"groups": []any{"web"}}, s.ok(t, MethodGroupList, ``))

	got = s.ok(t, MethodInboxList, `{}`)
	require.Equal(t, map[string]any{"items": asJSON(t, g.Inbox)}, got)
	item := got["items"].([]any)[0].(map[string]any)
	require.Equal(t, "worker", item["session"])
	require.Equal(t, workflows.EventRotationFailed, item["kind"])
	require.Equal(t, "compact rotation (manual) failed: the agent did not compact: sim: compaction refused (failCompact)", item["text"])
	require.Equal(t, 2.0, item["count"], "a failure that repeats is one item")

	require.Equal(t, map[string]any{"cleared": 1.0}, s.ok(t, MethodInboxClear, `{"group": "web"}`))
	require.Empty(t, temporaltest.Group(t, s.c, "web").Inbox)
	require.Equal(t, map[string]any{"items": []any{}}, s.ok(t, MethodInboxList, `{}`))
	require.Equal(t, map[string]any{"cleared": 0.0}, s.ok(t, MethodInboxClear, `{}`))
}

func TestAPIRotate(t *testing.T) {
	t.Parallel()
	s := newAPISite(t, `  web:
    sessions:
      - {agent: sim, name: lead, sim: {turnDelay: 0s}}
      - {agent: sim, name: worker, sim: {turnDelay: 1h}}
`)
	temporaltest.TakeTurns(t, s.c, "web", "lead", "l1")
	temporaltest.Signal(t, s.c, "web", "worker", workflows.SignalMessage, workflows.Message{Text: "w1"})
	temporaltest.WaitSession(t, s.c, "web", "worker", "to work", func(v workflows.SessionView) bool { return v.Status == workflows.StatusWorking })

	tests := []struct {
		body, session string
		want          map[string]any
	}{
		{`{"session": "web/lead"}`, "lead",
			map[string]any{"session": "web/lead", "when": "now", "mode": "auto", "message": "rotating web/lead now (auto)"}},
		{`{"session": "web/worker", "mode": "handoff"}`, "worker",
			map[string]any{"session": "web/worker", "when": "after-turn", "mode": "handoff", "message": "web/worker is working: it rotates (handoff) when the current turn ends"}},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, s.ok(t, MethodSessionRotate, tt.body))
		v := temporaltest.WaitSession(t, s.c, "web", tt.session, "to take the request", func(v workflows.SessionView) bool { return decided(v) != "" })
		require.Equal(t, tt.want["message"], decided(v), "the session does what the API answered")
	}
	v := temporaltest.WaitSession(t, s.c, "web", "lead", "to rotate", func(v workflows.SessionView) bool { return v.Context.Rotations == 1 })
	require.Equal(t, workflows.ReasonManual, v.Context.LastRotation.Reason)
}

func TestAPISend(t *testing.T) {
	t.Parallel()
	s := newAPISite(t, webGroups)
	require.Equal(t, map[string]any{"session": "web/lead", "queued": true, "message": "queued for web/lead"},
		s.ok(t, MethodSessionSend, `{"session": "web/lead", "text": "run the tests"}`))
	v := temporaltest.WaitSession(t, s.c, "web", "lead", "to take the turn", func(v workflows.SessionView) bool { return v.Context.TotalTurns == 1 })
	require.Contains(t, v.LastOutput, `worked on "run the tests"`, "the message was the turn's prompt")
}

func TestAPIStopStart(t *testing.T) {
	t.Parallel()
	s := newAPISite(t, webGroups)
	temporaltest.TakeTurns(t, s.c, "web", "lead", "l1")
	require.Equal(t, map[string]any{"session": "web/lead", "released": []any{}, "was": "idle"}, s.ok(t, MethodSessionStop, `{"session": "web/lead"}`))
	temporaltest.WaitSession(t, s.c, "web", "lead", "to stop", func(v workflows.SessionView) bool { return v.Status == workflows.StatusStopped })
	status, got := s.call(t, MethodSessionStop, `{"session": "web/lead"}`, testToken)
	require.Equal(t, http.StatusConflict, status)
	require.Equal(t, "web/lead is already stopped", got["message"])

	require.Equal(t, map[string]any{"session": "web/lead", "fresh": true}, s.ok(t, MethodSessionStart, `{"session": "web/lead", "fresh": true}`))
	v := temporaltest.WaitSession(t, s.c, "web", "lead", "to hand off", func(v workflows.SessionView) bool {
		return v.Context.Rotations == 1 && v.Status == workflows.StatusIdle
	})
	require.Equal(t, config.ModeHandoff, v.Context.LastRotation.Method)
	status, got = s.call(t, MethodSessionStart, `{"session": "web/lead"}`, testToken)
	require.Equal(t, http.StatusConflict, status)
	require.Equal(t, "web/lead is not stopped (it is idle)", got["message"])
	status, _ = s.call(t, MethodSessionStart, `{"session": "web/nobody"}`, testToken)
	require.Equal(t, http.StatusNotFound, status)
}

func TestAPIGroupSet(t *testing.T) {
	t.Parallel()
	s := newAPISite(t, webGroups)
	require.Equal(t, map[string]any{"group": "web", "rotate": map[string]any{"mode": "handoff", "contextPercent": 80.0, "maxTurns": 0.0, "maxConcurrentRotations": 2.0}, "budget": map[string]any{}, "learned": []any{}},
		s.ok(t, MethodGroupSet, `{"group": "web", "rotate": {"mode": "handoff", "contextPercent": 80}}`))
	require.Equal(t, map[string]any{"group": "web", "rotate": map[string]any{"mode": "handoff", "contextPercent": 80.0, "maxTurns": 0.0, "maxConcurrentRotations": 2.0}, "budget": map[string]any{"turns": 500.0, "usd": 20.0}, "learned": []any{}},
		s.ok(t, MethodGroupSet, `{"group": "web", "budget": {"turns": 500, "usd": 20}}`))
	s.ok(t, MethodGroupSet, `{"group": "web", "rotate": {"maxTurns": 30}}`)
	g := temporaltest.Group(t, s.c, "web")
	require.Equal(t, config.Rotate{Mode: config.ModeHandoff, ContextPercent: 80, MaxTurns: 30, MaxConcurrentRotations: config.DefaultMaxConcurrentRotations}, g.Policy)
	require.Equal(t, config.Budget{Turns: 500, USD: 20}, g.Board.Budget)
}

func TestAPIGroupGet(t *testing.T) {
	t.Parallel()
	s := newAPISite(t, `  web:
    goal: ship the site
    rotate: {mode: auto, maxConcurrentRotations: 1}
    sessions:
      - {agent: sim, name: lead, sim: {turnDelay: 0s}}
`)
	s.ok(t, MethodGroupSet, `{"group": "web", "learned": {"claude/claude-sonnet-4-5": 75}}`)
	got := s.ok(t, MethodGroupGet, `{"group": "web"}`)
	g := temporaltest.Group(t, s.c, "web")
	require.Equal(t, "ship the site", got["goal"])
	require.Equal(t, asJSON(t, g.Policy), got["policy"])
	require.Equal(t, "mode=auto contextPercent=85 maxTurns=never maxConcurrentRotations=1", got["policyText"], "as nid group show words it")
	require.Equal(t, "claude/claude-sonnet-4-5 at 75% (set)", got["learnedText"])
}

func TestAPIBoardRead(t *testing.T) {
	t.Parallel()
	s := newAPISite(t, `  web:
    goal: ship the site
    tasks:
      - {title: write the parser}
    sessions:
      - {agent: sim, name: lead, sim: {turnDelay: 1h}}
`)
	g := temporaltest.WaitGroup(t, s.c, "web", "to give out its task", func(g workflows.GroupView) bool { return g.Board.Tasks[0].Status == workflows.TaskClaimed })
	got := s.ok(t, MethodBoardRead, `{"group": "web"}`)
	require.Equal(t, workflows.BoardText(g.Board, ""), got["text"], "the text agents' board_read shows")
	require.Contains(t, got["text"], "Goal: ship the site")
	require.Contains(t, got["text"], "t1 [claimed] write the parser (claimed by lead)")
	board := got["board"].(map[string]any)
	require.Equal(t, "web", board["group"])
	require.Equal(t, asJSON(t, g.Board.Tasks), board["tasks"])
}

func TestAPISessionGet(t *testing.T) {
	t.Parallel()
	s := newAPISite(t, webGroups)
	v := temporaltest.TakeTurns(t, s.c, "web", "lead", "l1")
	got := s.ok(t, MethodSessionGet, `{"session": "web/lead"}`)
	require.Equal(t, "idle", got["status"])
	require.Equal(t, asJSON(t, v.Context), got["context"])
	require.Equal(t, 1.0, got["context"].(map[string]any)["totalTurns"])
	require.Equal(t, "nid/web/lead", got["workflowID"])
	require.Equal(t, "http://127.0.0.1:8233/namespaces/"+s.Namespace+"/workflows/nid%2Fweb%2Flead", got["workflowURL"])
	require.Equal(t, asJSON(t, v.Events), got["events"])
}

// session.rotations answers each session's receipts as the session keeps
// them, with what they add up to, for one session or a whole group.
func TestAPIRotations(t *testing.T) {
	t.Parallel()
	s := newAPISite(t, webGroups)
	temporaltest.TakeTurns(t, s.c, "web", "lead", "l1")
	temporaltest.TakeTurns(t, s.c, "web", "worker", "w1")
	temporaltest.Rotate(t, s.c, "web", "lead", config.ModeHandoff)
	temporaltest.Signal(t, s.c, "web", "worker", workflows.SignalRotate, workflows.RotateRequest{Mode: config.ModeCompact, Reason: workflows.ReasonManual})
	worker := temporaltest.WaitSession(t, s.c, "web", "worker", "to fail its compaction", func(v workflows.SessionView) bool { return len(v.Receipts) == 1 })
	lead := temporaltest.Session(t, s.c, "web", "lead")
	require.Len(t, lead.Receipts, 1)
	r := lead.Receipts[0]
	require.Equal(t, config.ModeHandoff, r.Method)
	require.Equal(t, workflows.SummaryFromAgent, r.SummarySource)
	require.Positive(t, r.SummaryBytes)
	require.Equal(t, workflows.VerifiedTrue, r.Verified, "the sim acknowledged holding nothing, which is what it holds")
	require.False(t, worker.Receipts[0].OK)

	leadRotations := map[string]any{"session": "web/lead", "receipts": asJSON(t, lead.Receipts), "stats": map[string]any{
		"compact": 0.0, "handoff": 1.0, "vendor": 0.0, "failed": 0.0, "checked": 1.0, "verified": 1.0, "notAsked": 0.0, "cancelled": 0.0,
		"reclaimedPerRotation": float64(max(0, r.BeforeTokens-r.AfterTokens))}}
	require.Equal(t, map[string]any{"sessions": []any{leadRotations}}, s.ok(t, MethodSessionRotations, `{"session": "web/lead"}`))
	require.Equal(t, map[string]any{"sessions": []any{leadRotations, map[string]any{
		"session": "web/worker", "receipts": asJSON(t, worker.Receipts), "stats": map[string]any{
			"compact": 0.0, "handoff": 0.0, "vendor": 0.0, "failed": 1.0, "checked": 0.0, "verified": 0.0, "notAsked": 0.0, "cancelled": 0.0, "reclaimedPerRotation": 0.0}},
	}}, s.ok(t, MethodSessionRotations, `{"group": "web"}`))
}

func TestAPITranscript(t *testing.T) {
	t.Parallel()
	s := newAPISite(t, webGroups)
	require.NoError(t, s.logs.Append("web", "lead",
		transcript.Entry{Kind: transcript.KindPrompt, Text: "Goal: ship"},
		transcript.Entry{Kind: transcript.KindOutput, Conversation: "sim-1", Text: "did it"},
		transcript.Entry{Kind: transcript.KindRotation, Method: "handoff", Text: "Handoff from your previous conversation: shipped"}))

	got := s.ok(t, MethodSessionTranscript, `{"session": "web/lead", "after": 1}`)
	entries := got["entries"].([]any)
	require.Len(t, entries, 2)
	require.Equal(t, "did it", entries[0].(map[string]any)["text"])
	require.Equal(t, "handoff", entries[1].(map[string]any)["method"])

	// limit keeps the last entries, as docs/api.md's example shows.
	got = s.ok(t, MethodSessionTranscript, `{"session": "web/lead", "limit": 2}`)
	entries = got["entries"].([]any)
	require.Len(t, entries, 2)
	require.Equal(t, []any{2.0, 3.0}, []any{entries[0].(map[string]any)["seq"], entries[1].(map[string]any)["seq"]})

	got = s.ok(t, MethodSessionTranscript, `{"session": "web/worker"}`)
	require.Equal(t, []any{}, got["entries"], "a running session without a transcript yet has none")
}

func TestAPIErrors(t *testing.T) {
	t.Parallel()
	s := newAPISite(t, webGroups)
	tests := []struct {
		name, method, body string
		status             int
		code, field        string
		message            string
	}{
		{"bad JSON", MethodSessionGet, `{"session": `, http.StatusBadRequest, CodeBadJSON, "", "the body is not a JSON object: unexpected EOF"},
		{"not an object", MethodSessionGet, `["web/lead"]`, http.StatusBadRequest, CodeBadJSON, "", ""},
		{"wrong type", MethodSessionGet, `{"session": 7}`, http.StatusBadRequest, CodeBadJSON, "session", "session: must be a string, not a number"},
		{"wrong type beside other fields", MethodSessionRotate, `{"session": 7, "mode": "compact"}`, http.StatusBadRequest, CodeBadJSON, "session", "session: must be a string, not a number"},
		{"unknown field", MethodSessionRotate, `{"session": "web/lead", "method": "compact"}`, http.StatusBadRequest, CodeBadJSON, "method", "method: unknown field"},
		{"two objects", MethodSessionGet, `{"session": "web/lead"} {}`, http.StatusBadRequest, CodeBadJSON, "", "the body must be one JSON object"},
		{"missing session", MethodSessionGet, `{}`, http.StatusBadRequest, CodeInvalid, "session", "session: missing: name the session as GROUP/SESSION, e.g. web/lead"},
		{"malformed session", MethodSessionGet, `{"session": "lead"}`, http.StatusBadRequest, CodeInvalid, "session", `session: "lead" is not GROUP/SESSION, e.g. web/lead`},
		{"unknown session", MethodSessionGet, `{"session": "web/nobody"}`, http.StatusNotFound, CodeNotFound, "session", `no session "web/nobody"; sessions in web: lead, worker`},
		{"unknown session rotate", MethodSessionRotate, `{"session": "api/lead"}`, http.StatusNotFound, CodeNotFound, "session", `no group "api"; running groups: web`},
		{"unknown session send", MethodSessionSend, `{"session": "web/nobody", "text": "hi"}`, http.StatusNotFound, CodeNotFound, "session", `no session "web/nobody"; sessions in web: lead, worker`},
		{"unknown session transcript", MethodSessionTranscript, `{"session": "web/nobody"}`, http.StatusNotFound, CodeNotFound, "session", `no session "web/nobody"; sessions in web: lead, worker`},
		{"bad mode", MethodSessionRotate, `{"session": "web/lead", "mode": "fast"}`, http.StatusBadRequest, CodeInvalid, "mode", `mode: "fast" is not a rotation mode: use auto, compact or handoff, or leave it out for the group's`},
		{"mode off", MethodSessionRotate, `{"session": "web/lead", "mode": "off"}`, http.StatusBadRequest, CodeInvalid, "mode", `mode: "off" is not a rotation mode: use auto, compact or handoff, or leave it out for the group's`},
		{"never took a turn", MethodSessionRotate, `{"session": "web/lead"}`, http.StatusConflict, CodeConflict, "", "web/lead has taken no turn yet: there is no conversation to rotate"},
		{"empty text", MethodSessionSend, `{"session": "web/lead", "text": "  "}`, http.StatusBadRequest, CodeInvalid, "text", "text: missing: the prompt for web/lead's next turn"},
		{"negative limit", MethodSessionTranscript, `{"session": "web/lead", "limit": -1}`, http.StatusBadRequest, CodeInvalid, "limit", "limit: must not be negative"},
		{"bad group name", MethodGroupGet, `{"group": "Web!"}`, http.StatusBadRequest, CodeInvalid, "group", `group: "Web!" is not a group name: use lower-case letters, digits, - and _`},
		{"missing group", MethodBoardRead, `{}`, http.StatusBadRequest, CodeInvalid, "group", "group: missing: name a group, e.g. web"},
		{"unknown group list", MethodSessionList, `{"group": "api"}`, http.StatusNotFound, CodeNotFound, "group", `no group "api"; running groups: web`},
		{"unknown group", MethodGroupGet, `{"group": "api"}`, http.StatusNotFound, CodeNotFound, "group", `no group "api"; running groups: web`},
		{"unknown group inbox", MethodInboxList, `{"group": "api"}`, http.StatusNotFound, CodeNotFound, "group", `no group "api"; running groups: web`},
		{"unknown group inbox clear", MethodInboxClear, `{"group": "api"}`, http.StatusNotFound, CodeNotFound, "group", `no group "api"; running groups: web`},
		{"bad group inbox clear", MethodInboxClear, `{"group": "Web"}`, http.StatusBadRequest, CodeInvalid, "group", `group: "Web" is not a group name: use lower-case letters, digits, - and _`},
		{"bad rotate", MethodGroupSet, `{"group": "web", "rotate": {"contextPercent": 150}}`, http.StatusBadRequest, CodeInvalid, "rotate", ""},
		{"rotate not an object", MethodGroupSet, `{"group": "web", "rotate": "handoff"}`, http.StatusBadRequest, CodeBadJSON, "rotate",
			`rotate: "handoff" is not a JSON object; write one such as {"mode":"handoff","maxTurns":40}`},
		{"budget null", MethodGroupSet, `{"group": "web", "budget": null}`, http.StatusBadRequest, CodeBadJSON, "budget",
			`budget: null is not a JSON object; write one such as {"turns":500,"usd":20}`},
		{"a list for a body", MethodSessionList, `[1]`, http.StatusBadRequest, CodeBadJSON, "", "the body must be one JSON object, not a list"},
		{"a number in quotes", MethodGroupSet, `{"group": "web", "rotate": {"contextPercent": "80"}}`, http.StatusBadRequest, CodeBadJSON, "rotate",
			`rotate: contextPercent: "80" is a string: write a number without quotes`},
		{"bad budget", MethodGroupSet, `{"group": "web", "budget": {"tokens": -1}}`, http.StatusBadRequest, CodeInvalid, "budget", "budget: tokens: -1 must be 0 (no limit) or more"},
		{"nothing to set", MethodGroupSet, `{"group": "web"}`, http.StatusBadRequest, CodeInvalid, "rotate", ""},
		{"rotations of both", MethodSessionRotations, `{"session": "web/lead", "group": "web"}`, http.StatusBadRequest, CodeInvalid, "group", "group: give session (GROUP/SESSION) or group, not both"},
		{"rotations of nothing", MethodSessionRotations, `{}`, http.StatusBadRequest, CodeInvalid, "session",
			"session: missing: name a session as GROUP/SESSION, e.g. web/lead, or a group as group, e.g. web"},
		{"rotations of a bad group", MethodSessionRotations, `{"group": "Web"}`, http.StatusBadRequest, CodeInvalid, "group", `group: "Web" is not a group name: use lower-case letters, digits, - and _`},
		{"rotations of an unknown group", MethodSessionRotations, `{"group": "api"}`, http.StatusNotFound, CodeNotFound, "group", `no group "api"; running groups: web`},
		{"rotations of an unknown session", MethodSessionRotations, `{"session": "web/nobody"}`, http.StatusNotFound, CodeNotFound, "session", `no session "web/nobody"; sessions in web: lead, worker`},
		{"unknown method", "session.delete", `{}`, http.StatusNotFound, CodeUnknownMethod, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, got := s.call(t, tt.method, tt.body, testToken)
			require.Equal(t, tt.status, status, "%v", got)
			require.Equal(t, tt.code, got["code"])
			if tt.field == "" {
				require.NotContains(t, got, "field")
			} else {
				require.Equal(t, tt.field, got["field"])
			}
			if tt.message != "" {
				require.Equal(t, tt.message, got["message"])
			}
			require.Zero(t, s.calls.Sent(), "a bad request signals and updates nothing")
		})
	}
	require.Equal(t, config.DefaultRotate(), temporaltest.Group(t, s.c, "web").Policy)
}

func TestAPIRequestLimits(t *testing.T) {
	t.Parallel()
	s := newAPISite(t, webGroups)
	big := `{"session": "web/lead", "text": "` + strings.Repeat("x", MaxRequestBytes) + `"}`
	status, got := s.call(t, MethodSessionSend, big, testToken)
	require.Equal(t, http.StatusRequestEntityTooLarge, status)
	require.Equal(t, CodeTooLarge, got["code"])
	require.Zero(t, s.calls.Sent())

	req, _ := http.NewRequest(http.MethodGet, s.srv.URL+"/api/"+MethodSessionList, nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
}

func TestAPIToken(t *testing.T) {
	t.Parallel()
	mcpToken := NewMCPEndpoint([]byte("k"), nil, "http://x").token("web", "lead", 0)
	tests := []struct {
		name   string
		header string
	}{
		{"missing", ""},
		{"wrong", "Bearer not-the-token"},
		{"no bearer scheme", testToken},
		{"an MCP session token", "Bearer " + mcpToken},
	}
	s := newAPISite(t, webGroups)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, path := range []string{"/api/" + MethodSessionList, "/api/" + MethodSessionRotate} {
				req, _ := http.NewRequest(http.MethodPost, s.srv.URL+path, strings.NewReader(`{"session": "web/lead"}`))
				if tt.header != "" {
					req.Header.Set("Authorization", tt.header)
				}
				resp, err := http.DefaultClient.Do(req)
				require.NoError(t, err)
				var got APIError
				require.NoError(t, json.NewDecoder(resp.Body).Decode(&got))
				resp.Body.Close()
				require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
				require.Equal(t, CodeUnauthorized, got.Code)
			}
			for _, path := range []string{"/api/events", "/", "/groups/web"} {
				req, _ := http.NewRequest(http.MethodGet, s.srv.URL+path, nil)
				if tt.header != "" {
					req.Header.Set("Authorization", tt.header)
				}
				resp, err := http.DefaultClient.Do(req)
				require.NoError(t, err)
				resp.Body.Close()
				require.Equal(t, http.StatusUnauthorized, resp.StatusCode, path)
			}
			require.Zero(t, s.calls.Sent())
		})
	}
}

func TestMCPRefusesTheAPIToken(t *testing.T) {
	e := NewMCPEndpoint([]byte("key"), &recordingSignaler{}, "http://127.0.0.1")
	srv := httptest.NewServer(e.Handler())
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp/web/lead/"+testToken, strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
}

// browserClient keeps cookies and does not follow redirects, so a test
// sees where each answer sends the browser.
func browserClient(t *testing.T) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func get(t *testing.T, c *http.Client, url string) (*http.Response, string) {
	t.Helper()
	resp, err := c.Get(url)
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	resp.Body.Close()
	return resp, string(b)
}

// The dashboard asks for the token in a form (POST, never in the
// address) and goes on to the page it was asked for.
func TestDashboardLoginForm(t *testing.T) {
	t.Parallel()
	s := newAPISite(t, webGroups)
	temporaltest.TakeTurns(t, s.c, "web", "lead", "l1")
	browser := browserClient(t)

	resp, page := get(t, browser, s.srv.URL+"/groups/web")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Contains(t, page, `<form method="post" action="/login">`)
	require.Contains(t, page, `<input type="hidden" name="next" value="/groups/web">`)
	require.Contains(t, page, `<input type="password" name="token"`)

	post := func(token, next string) (*http.Response, string) {
		resp, err := browser.PostForm(s.srv.URL+"/login", url.Values{"token": {token}, "next": {next}})
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}
	resp, page = post("not-the-token", "/groups/web")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Contains(t, page, "That is not nid&#39;s API token.")
	require.Empty(t, resp.Cookies())

	resp, _ = post(testToken, "https://evil.example/")
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/", resp.Header.Get("Location"), "the form goes on only to a dashboard page")
	resp, _ = post(testToken, "/groups/web")
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/groups/web", resp.Header.Get("Location"))

	resp, page = get(t, browser, s.srv.URL+"/groups/web")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, page, `<script src="/static/app.js">`)
	u, _ := url.Parse(s.srv.URL)
	require.Len(t, browser.Jar.Cookies(u), 1)
	require.NotContains(t, browser.Jar.Cookies(u)[0].Value, testToken, "the cookie is not the token")

	resp, _ = get(t, browser, s.srv.URL+"/login")
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, "no token through GET")

	// The dashboard's script calls the API with its cookie and its header;
	// the cookie alone, as another site's form would send it, is refused.
	for _, tt := range []struct {
		header string
		status int
	}{{"1", http.StatusOK}, {"", http.StatusUnauthorized}} {
		req, _ := http.NewRequest(http.MethodPost, s.srv.URL+"/api/"+MethodSessionRotate, strings.NewReader(`{"session": "web/lead"}`))
		if tt.header != "" {
			req.Header.Set(dashboardHeader, tt.header)
		}
		resp, err := browser.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, tt.status, resp.StatusCode)
	}
	require.Equal(t, 1, s.calls.Sent(), "one rotate request reached web/lead")

	resp, _ = get(t, browser, s.srv.URL+"/nothing/here")
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
}

// A login link works once, within LoginLinkTTL.
func TestDashboardLoginLink(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 15, 0, 0, 0, time.UTC)
	api := newAPI(t, "", APIOptions{Now: func() time.Time { return now }}).api
	srv := httptest.NewServer(api.Handler())
	defer srv.Close()

	link := api.LoginLink()
	require.Regexp(t, `^/login/[A-Z2-7]{26}$`, link)
	require.NotContains(t, link, testToken)
	browser := browserClient(t)
	resp, _ := get(t, browser, srv.URL+link)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/", resp.Header.Get("Location"))
	resp, _ = get(t, browser, srv.URL+"/")
	require.Equal(t, http.StatusOK, resp.StatusCode, "the link logged the browser in")

	// Used once, it is spent, for any browser.
	resp, page := get(t, browserClient(t), srv.URL+link)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Contains(t, page, "This login link was used already or has expired: a link works once, within 10 minutes.")
	require.Contains(t, page, `<form method="post" action="/login">`)
	require.Empty(t, resp.Cookies())

	// Past its time, it is refused.
	late := api.LoginLink()
	now = now.Add(LoginLinkTTL)
	resp, _ = get(t, browserClient(t), srv.URL+late)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Empty(t, resp.Cookies())

	resp, _ = get(t, browserClient(t), srv.URL+"/login/"+testToken)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "the token is no link")
}

// A dashboard login is a random id of its own, not something derived from
// the token: it lasts LoginTTL from when the browser logged in, and the
// Log out button ends it, while another site cannot.
func TestDashboardLoginExpiresAndLogsOut(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 15, 0, 0, 0, time.UTC)
	api := newAPI(t, "", APIOptions{Now: func() time.Time { return now }}).api
	srv := httptest.NewServer(api.Handler())
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	login := func() *http.Client {
		browser := browserClient(t)
		resp, err := browser.PostForm(srv.URL+"/login", url.Values{"token": {testToken}, "next": {"/"}})
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusSeeOther, resp.StatusCode)
		return browser
	}
	loggedIn := func(browser *http.Client) bool {
		resp, _ := get(t, browser, srv.URL+"/")
		return resp.StatusCode == http.StatusOK
	}
	logout := func(browser *http.Client, header bool) int {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/logout", nil)
		if header {
			req.Header.Set(dashboardHeader, "1")
		}
		resp, err := browser.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}

	first, second := login(), login()
	require.NotEqual(t, first.Jar.Cookies(u)[0].Value, second.Jar.Cookies(u)[0].Value, "each login is its own")

	// Another site's form sends the cookie without the dashboard's header.
	require.Equal(t, http.StatusUnauthorized, logout(first, false))
	require.True(t, loggedIn(first))
	stolen := first.Jar.Cookies(u)[0].Value
	require.Equal(t, http.StatusNoContent, logout(first, true))
	require.Empty(t, first.Jar.Cookies(u), "the browser drops the cookie")
	require.False(t, loggedIn(first))
	replay := browserClient(t)
	replay.Jar.SetCookies(u, []*http.Cookie{{Name: cookieName, Value: stolen}})
	require.False(t, loggedIn(replay), "a logged-out cookie is refused wherever it comes from")
	require.True(t, loggedIn(second), "another browser's login goes on")

	now = now.Add(LoginTTL - time.Minute)
	require.True(t, loggedIn(second))
	now = now.Add(time.Minute)
	require.False(t, loggedIn(second), "a login lasts LoginTTL, used or not")
	resp, _ := get(t, browserClient(t), srv.URL+"/logout")
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
}

// sse reads server-sent events from /api/events?query until n of them were
// events (not session lists), and returns all it read; during runs after
// the first.
func sse(t *testing.T, s *apiSite, query string, n int, during func()) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.srv.URL+"/api/events"+query, nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	var got []string
	sc := bufio.NewScanner(resp.Body)
	name := ""
	for events := 0; events < n && sc.Scan(); {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			got = append(got, name+" "+strings.TrimPrefix(line, "data: "))
			if name == SSEEvent {
				events++
			}
			if len(got) == 1 && during != nil {
				during()
			}
		}
	}
	return got
}

// only keeps the server-sent events named name.
func only(got []string, name string) []string {
	var out []string
	for _, g := range got {
		if strings.HasPrefix(g, name+" ") {
			out = append(out, g)
		}
	}
	return out
}

func TestAPIEvents(t *testing.T) {
	t.Parallel()
	s := newAPISite(t, webGroups)
	temporaltest.Settle(t, s.c)
	got := sse(t, s, "?session=web/lead&backlog=5", 2, func() {
		temporaltest.Signal(t, s.c, "web", "lead", workflows.SignalMessage, workflows.Message{Text: "go on"})
	})
	require.True(t, strings.HasPrefix(got[0], SSESessions+` {"sessions":[{"group":"web","name":"lead"`), got[0])
	require.NotContains(t, got[0], `"worker"`, "the stream is filtered to the session")
	events := only(got, SSEEvent)
	require.Contains(t, events[0], `"text":"session started (sim)"`, "the backlog comes first")
	require.Contains(t, events[1], `"text":"message queued: go on"`, "a new event follows live")

	got = sse(t, s, "?group=web&backlog=1", 2, nil)
	require.Contains(t, got[0], `"name":"worker"`)
	require.Len(t, only(got, SSEEvent), 2, "the last event of each session")
}

func TestAPIEventsBadFilter(t *testing.T) {
	t.Parallel()
	s := newAPISite(t, webGroups)
	for _, q := range []string{"?session=lead", "?group=Web", "?backlog=many", "?group=api&session=web/lead"} {
		req, _ := http.NewRequest(http.MethodGet, s.srv.URL+"/api/events"+q, nil)
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		var got APIError
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&got))
		resp.Body.Close()
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, q)
		require.Equal(t, CodeInvalid, got.Code, q)
	}
	// What is not running is not found, before any stream starts.
	for q, want := range map[string]string{
		"?session=web/nobody": `no session "web/nobody"; sessions in web: lead, worker`,
		"?group=nosuch":       `no group "nosuch"; running groups: web`,
	} {
		req, _ := http.NewRequest(http.MethodGet, s.srv.URL+"/api/events"+q, nil)
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		var got APIError
		if resp.StatusCode != http.StatusOK {
			// An OK is a stream, which would never end.
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&got))
		}
		resp.Body.Close()
		require.Equal(t, http.StatusNotFound, resp.StatusCode, q)
		require.Equal(t, CodeNotFound, got.Code, q)
		require.Equal(t, want, got.Message, q)
	}
}

func TestAPITokenSource(t *testing.T) {
	dir := t.TempDir()
	cfg := config.Default()
	cfg.State = dir

	token, file, err := APIToken(cfg)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(dir, TokenFile), file)
	require.Len(t, token, 48)
	fi, err := os.Stat(file)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "only the owner reads the token")
	again, _, err := APIToken(cfg)
	require.NoError(t, err)
	require.Equal(t, token, again, "the generated token survives a restart")

	cfg.HTTP.Token = "chosen-0123456789abcdefghijklmnopqrstuv"
	token, file, err = APIToken(cfg)
	require.NoError(t, err)
	require.Equal(t, "chosen-0123456789abcdefghijklmnopqrstuv", token)
	require.Empty(t, file)

	yaml := filepath.Join(dir, "nid.yaml")
	require.NoError(t, os.WriteFile(yaml, []byte("state: "+dir+"\nhttp:\n  token: from-the-file-0123456789abcdefghijkl\n"), 0o644))
	for _, tt := range []struct {
		environ []string
		want    string
	}{
		{nil, "from-the-file-0123456789abcdefghijkl"},
		{[]string{"NID_HTTP_TOKEN=from-the-environment-0123456789abcdef"}, "from-the-environment-0123456789abcdef"},
	} {
		loaded, err := config.Load(config.LoadOptions{File: yaml, Environ: append([]string{}, tt.environ...)})
		require.NoError(t, err)
		token, _, err := APIToken(loaded)
		require.NoError(t, err)
		require.Equal(t, tt.want, token)
	}
}

func TestNonLoopbackListenNeedsAToken(t *testing.T) {
	tests := []struct {
		listen string
		token  string
		ok     bool
	}{
		{"127.0.0.1:7777", "", true},
		{"localhost:7777", "", true},
		{"[::1]:7777", "", true},
		{"0.0.0.0:7777", "", false},
		{":7777", "", false},
		{"192.168.1.5:7777", "", false},
		{"0.0.0.0:7777", "chosen-0123456789abcdefghijklmnopqrstuv", true},
	}
	for _, tt := range tests {
		t.Run(tt.listen+" "+tt.token, func(t *testing.T) {
			cfg := config.Default()
			cfg.State = t.TempDir()
			cfg.HTTP.Listen, cfg.HTTP.Token = tt.listen, tt.token
			_, _, err := APIToken(cfg)
			if tt.ok {
				require.NoError(t, err)
				return
			}
			require.EqualError(t, err, "http.listen "+tt.listen+" is not a loopback address: set http.token (or NID_HTTP_TOKEN) to serve the API and dashboard there")
		})
	}

	// The node refuses before it starts anything or writes its state
	// directory.
	cfg := config.Default()
	cfg.State = filepath.Join(t.TempDir(), ".nid")
	cfg.HTTP.Listen = "0.0.0.0:0"
	started := false
	_, err := Start(context.Background(), Options{Config: cfg, StartEmbedded: func(context.Context, EmbeddedOptions) (EmbeddedServer, error) {
		started = true
		return nil, context.Canceled
	}})
	require.ErrorContains(t, err, "is not a loopback address")
	require.False(t, started, "no Temporal server was started")
	require.NoDirExists(t, cfg.State, "the state directory is not made")
}

// An event stream over sessions that have nothing to do backs off: its
// polls spread out to one every nidclient.QuietPolls rather than every
// eventsEvery. Only an upper bound is asserted, which a slow machine (fewer
// polls) cannot break.
func TestAQuietEventStreamPollsLessOften(t *testing.T) {
	t.Parallel()
	s := newAPISite(t, webGroups)
	temporaltest.Settle(t, s.c)
	const watched = 5 * time.Second
	opened := make(chan int, 1)
	sse(t, s, "?backlog=1", 2, func() {
		opened <- s.calls.Lists()
		time.Sleep(watched)
	})
	polls := s.calls.Lists() - <-opened
	// Quiet from the start, the pace doubles from eventsEvery to
	// QuietPolls: polls at 0.5, 1.5, 3.5 and 5.5 s. At the fast pace it
	// would have been ten.
	require.LessOrEqual(t, polls, 4, "a quiet stream kept polling every %v", eventsEvery)
}

// session.list says when no worker asks for nid's work, so that nid ls,
// answered by the API, warns as it does when it asks Temporal itself.
func TestSessionListSaysWhenNothingRunsTheSessions(t *testing.T) {
	t.Parallel()
	s := newAPISite(t, "")
	got := s.ok(t, MethodSessionList, `{}`)
	require.Equal(t, map[string]any{"sessions": []any{}, "namespace": s.Namespace, "temporal": s.Address, "unserved": map[string]any{}}, got,
		"no worker has polled this namespace: Temporal knows of none")
}
