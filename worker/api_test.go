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

	"github.com/nid-dev/nid/activities"
	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/transcript"
	"github.com/nid-dev/nid/workflows"
)

const testToken = "test-token-0123456789"

func pct(p float64) *float64 { return &p }

var testBoard = workflows.BoardView{Group: "web", Goal: "ship the site", Tasks: []workflows.Task{{ID: "t1", Title: "write the parser", Status: workflows.TaskTodo}}}

type apiSite struct {
	fake *fakeTemporal
	srv  *httptest.Server
	logs *transcript.Log
}

func newAPISite(t *testing.T) *apiSite {
	t.Helper()
	fake, api, logs := newFakeAPI(t.TempDir())
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	return &apiSite{fake: fake, srv: srv, logs: logs}
}

// newFakeAPI is the API over a fake Temporal holding web/lead (idle) and
// web/worker (working), with transcripts under dir.
func newFakeAPI(dir string) (*fakeTemporal, *API, *transcript.Log) {
	policy := config.Rotate{Mode: config.ModeAuto, ContextPercent: 85}
	fake := &fakeTemporal{
		sessions: []workflows.SessionView{
			{Group: "web", Name: "lead", Agent: "sim", Status: workflows.StatusIdle, Policy: policy,
				Context: workflows.ContextRecord{UsedTokens: 124_000, WindowTokens: 200_000, Percent: pct(62), Source: activities.SourceReported, TotalTurns: 7, Rotations: 1}},
			{Group: "web", Name: "worker", Agent: "sim", Status: workflows.StatusWorking, Policy: policy,
				Context: workflows.ContextRecord{UsedTokens: 160_000, WindowTokens: 200_000, Percent: pct(80), Source: activities.SourceReported, TotalTurns: 9}},
		},
		groups: []workflows.GroupView{{Name: "web", Goal: "ship the site", Policy: policy, Sessions: []string{"lead", "worker"}, Board: testBoard,
			Inbox: []workflows.InboxItem{{Seq: 1, At: time.Date(2026, 1, 2, 15, 0, 0, 0, time.UTC), Group: "web", Session: "worker", Kind: workflows.EventRotationFailed, Text: "compact rotation (context) failed"}}}},
		policy: config.Rotate{Mode: config.ModeHandoff, ContextPercent: 80},
	}
	fake.addEvent("web", "lead", workflows.Event{Kind: workflows.EventStarted, Text: "session started (sim)"})
	logs := transcript.New(dir)
	api := NewAPI(fake, APIOptions{Token: testToken, Transcripts: logs, WebUI: "http://127.0.0.1:8233", Namespace: "default"})
	return fake, api, logs
}

// call posts body to /api/method with the token and returns the status and
// the decoded answer.
func (s *apiSite) call(t *testing.T, method, body, token string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.srv.URL+"/api/"+method, strings.NewReader(body))
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return resp.StatusCode, out
}

func TestAPIMethods(t *testing.T) {
	tests := []struct {
		method, body string
		// want are fields of the answer, as JSON.
		want string
	}{
		{MethodSessionList, `{}`, `{"sessions": [
			{"group":"web","name":"lead","agent":"sim","status":"idle","context":{"usedTokens":124000,"windowTokens":200000,"percent":62,"source":"reported","turns":0,"totalTurns":7,"rotations":1}},
			{"group":"web","name":"worker","agent":"sim","status":"working","context":{"usedTokens":160000,"windowTokens":200000,"percent":80,"source":"reported","turns":0,"totalTurns":9,"rotations":0}}]}`},
		{MethodGroupList, ``, `{"groups": ["web"]}`},
		{MethodInboxList, `{}`, `{"items": [{"seq":1,"at":"2026-01-02T15:00:00Z","group":"web","session":"worker","kind":"rotation-failed","text":"compact rotation (context) failed"}]}`},
		{MethodSessionRotate, `{"session": "web/lead"}`, `{"session":"web/lead","when":"now","mode":"auto","message":"rotating web/lead now (auto)"}`},
		{MethodSessionRotate, `{"session": "web/worker", "mode": "handoff"}`, `{"session":"web/worker","when":"after-turn","mode":"handoff","message":"web/worker is working: it rotates (handoff) when the current turn ends"}`},
		{MethodSessionSend, `{"session": "web/lead", "text": "run the tests"}`, `{"session":"web/lead","queued":true}`},
		{MethodGroupSet, `{"group": "web", "rotate": {"mode": "handoff", "contextPercent": 80}}`, `{"group":"web","rotate":{"mode":"handoff","contextPercent":80,"maxTurns":0,"maxConcurrentRotations":0},"budget":{},"learned":[]}`},
		{MethodGroupSet, `{"group": "web", "budget": {"turns": 500, "usd": 20}}`, `{"group":"web","rotate":{"mode":"auto","contextPercent":85,"maxTurns":0,"maxConcurrentRotations":0},"budget":{"turns":500,"usd":20},"learned":[]}`},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.body, func(t *testing.T) {
			s := newAPISite(t)
			status, got := s.call(t, tt.method, tt.body, testToken)
			require.Equal(t, http.StatusOK, status, "%v", got)
			var want map[string]any
			require.NoError(t, json.Unmarshal([]byte(tt.want), &want))
			require.Equal(t, want, got)
		})
	}
}

func jsonEscape(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

func TestAPISignalsWhatItAnswers(t *testing.T) {
	s := newAPISite(t)
	status, _ := s.call(t, MethodSessionRotate, `{"session": "web/worker", "mode": "compact"}`, testToken)
	require.Equal(t, http.StatusOK, status)
	status, _ = s.call(t, MethodSessionSend, `{"session": "web/lead", "text": "run the tests"}`, testToken)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, []sentSignal{
		{workflows.SessionID("web", "worker"), workflows.SignalRotate, workflows.RotateRequest{Mode: config.ModeCompact, Reason: workflows.ReasonManual}},
		{workflows.SessionID("web", "lead"), workflows.SignalMessage, workflows.Message{Text: "run the tests"}},
	}, s.fake.sent())

	status, _ = s.call(t, MethodGroupSet, `{"group": "web", "rotate": {"maxTurns": 30}}`, testToken)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, []workflows.SetPolicy{{RotateJSON: `{"maxTurns": 30}`}}, s.fake.updates)
}

func TestAPIBoardRead(t *testing.T) {
	s := newAPISite(t)
	status, got := s.call(t, MethodBoardRead, `{"group": "web"}`, testToken)
	require.Equal(t, http.StatusOK, status, "%v", got)
	require.Equal(t, workflows.BoardText(testBoard, ""), got["text"], "the text agents' board_read shows")
	require.Contains(t, got["text"], "t1 [todo] write the parser")
	board := got["board"].(map[string]any)
	require.Equal(t, "web", board["group"])
	require.Equal(t, []any{map[string]any{"id": "t1", "title": "write the parser", "status": "todo"}}, board["tasks"])
}

func TestAPISessionGet(t *testing.T) {
	s := newAPISite(t)
	status, got := s.call(t, MethodSessionGet, `{"session": "web/lead"}`, testToken)
	require.Equal(t, http.StatusOK, status, "%v", got)
	require.Equal(t, "idle", got["status"])
	require.Equal(t, map[string]any{"usedTokens": 124000.0, "windowTokens": 200000.0, "percent": 62.0, "source": "reported", "turns": 0.0, "totalTurns": 7.0, "rotations": 1.0}, got["context"])
	require.Equal(t, "nid/web/lead", got["workflowID"])
	require.Equal(t, "http://127.0.0.1:8233/namespaces/default/workflows/nid%2Fweb%2Flead", got["workflowURL"])
	require.Len(t, got["events"], 1)
}

func TestAPITranscript(t *testing.T) {
	s := newAPISite(t)
	require.NoError(t, s.logs.Append("web", "lead",
		transcript.Entry{Kind: transcript.KindPrompt, Text: "Goal: ship"},
		transcript.Entry{Kind: transcript.KindOutput, Conversation: "sim-1", Text: "did it"},
		transcript.Entry{Kind: transcript.KindRotation, Method: "handoff", Text: "Handoff from your previous conversation: shipped"}))

	status, got := s.call(t, MethodSessionTranscript, `{"session": "web/lead", "after": 1}`, testToken)
	require.Equal(t, http.StatusOK, status, "%v", got)
	entries := got["entries"].([]any)
	require.Len(t, entries, 2)
	require.Equal(t, "did it", entries[0].(map[string]any)["text"])
	require.Equal(t, "handoff", entries[1].(map[string]any)["method"])

	status, got = s.call(t, MethodSessionTranscript, `{"session": "web/worker"}`, testToken)
	require.Equal(t, http.StatusOK, status, "a running session without a transcript yet has none")
	require.Equal(t, []any{}, got["entries"])
}

func TestAPIErrors(t *testing.T) {
	tests := []struct {
		name, method, body string
		status             int
		code, field        string
		message            string
	}{
		{"bad JSON", MethodSessionGet, `{"session": `, http.StatusBadRequest, CodeBadJSON, "", "the body is not a JSON object: unexpected EOF"},
		{"not an object", MethodSessionGet, `["web/lead"]`, http.StatusBadRequest, CodeBadJSON, "", ""},
		{"wrong type", MethodSessionGet, `{"session": 7}`, http.StatusBadRequest, CodeBadJSON, "session", "session: must be a string, not a number"},
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
		{"empty text", MethodSessionSend, `{"session": "web/lead", "text": "  "}`, http.StatusBadRequest, CodeInvalid, "text", "text: missing: the prompt for web/lead's next turn"},
		{"negative limit", MethodSessionTranscript, `{"session": "web/lead", "limit": -1}`, http.StatusBadRequest, CodeInvalid, "limit", "limit: must not be negative"},
		{"bad group name", MethodGroupGet, `{"group": "Web!"}`, http.StatusBadRequest, CodeInvalid, "group", `group: "Web!" is not a group name: use lower-case letters, digits, - and _`},
		{"missing group", MethodBoardRead, `{}`, http.StatusBadRequest, CodeInvalid, "group", "group: missing: name a group, e.g. web"},
		{"unknown group list", MethodSessionList, `{"group": "api"}`, http.StatusNotFound, CodeNotFound, "group", `no group "api"; running groups: web`},
		{"unknown group", MethodGroupGet, `{"group": "api"}`, http.StatusNotFound, CodeNotFound, "group", `no group "api"; running groups: web`},
		{"unknown group inbox", MethodInboxList, `{"group": "api"}`, http.StatusNotFound, CodeNotFound, "group", `no group "api"; running groups: web`},
		{"bad rotate", MethodGroupSet, `{"group": "web", "rotate": {"contextPercent": 150}}`, http.StatusBadRequest, CodeInvalid, "rotate", ""},
		{"rotate not an object", MethodGroupSet, `{"group": "web", "rotate": "handoff"}`, http.StatusBadRequest, CodeInvalid, "rotate", ""},
		{"a list for a body", MethodSessionList, `[1]`, http.StatusBadRequest, CodeBadJSON, "", "the body must be one JSON object, not a list"},
		{"a number in quotes", MethodGroupSet, `{"group": "web", "rotate": {"contextPercent": "80"}}`, http.StatusBadRequest, CodeBadJSON, "rotate",
			`rotate: contextPercent: "80" is a string: write a number without quotes`},
		{"bad budget", MethodGroupSet, `{"group": "web", "budget": {"tokens": -1}}`, http.StatusBadRequest, CodeInvalid, "budget", "budget: tokens: -1 must be 0 (no limit) or more"},
		{"nothing to set", MethodGroupSet, `{"group": "web"}`, http.StatusBadRequest, CodeInvalid, "rotate", ""},
		{"unknown method", "session.delete", `{}`, http.StatusNotFound, CodeUnknownMethod, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newAPISite(t)
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
			require.Empty(t, s.fake.sent(), "a bad request signals nothing")
			require.Empty(t, s.fake.updates, "a bad request updates nothing")
		})
	}
}

func TestAPIRequestLimits(t *testing.T) {
	s := newAPISite(t)
	big := `{"session": "web/lead", "text": "` + strings.Repeat("x", MaxRequestBytes) + `"}`
	status, got := s.call(t, MethodSessionSend, big, testToken)
	require.Equal(t, http.StatusRequestEntityTooLarge, status)
	require.Equal(t, CodeTooLarge, got["code"])
	require.Empty(t, s.fake.sent())

	req, _ := http.NewRequest(http.MethodGet, s.srv.URL+"/api/"+MethodSessionList, nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
}

func TestAPIToken(t *testing.T) {
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
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newAPISite(t)
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
			require.Empty(t, s.fake.sent())
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
	s := newAPISite(t)
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
	require.Len(t, s.fake.sent(), 1)

	resp, _ = get(t, browser, s.srv.URL+"/nothing/here")
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
}

// A login link works once, within LoginLinkTTL.
func TestDashboardLoginLink(t *testing.T) {
	fake, _, logs := newFakeAPI(t.TempDir())
	now := time.Date(2026, 1, 2, 15, 0, 0, 0, time.UTC)
	api := NewAPI(fake, APIOptions{Token: testToken, Transcripts: logs, Now: func() time.Time { return now }})
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
	require.Contains(t, page, "This login link was used already or has expired")
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

// sse reads server-sent events from /api/events?query until n arrived.
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
	for len(got) < n && sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			got = append(got, name+" "+strings.TrimPrefix(line, "data: "))
			if len(got) == 1 && during != nil {
				during()
			}
		}
	}
	return got
}

func TestAPIEvents(t *testing.T) {
	s := newAPISite(t)
	got := sse(t, s, "?session=web/lead&backlog=5", 3, func() {
		s.fake.addEvent("web", "lead", workflows.Event{Kind: workflows.EventTurn, Text: "turn 8"})
	})
	require.Len(t, got, 3)
	require.True(t, strings.HasPrefix(got[0], SSESessions+` {"sessions":[{"group":"web","name":"lead"`), got[0])
	require.NotContains(t, got[0], `"worker"`, "the stream is filtered to the session")
	require.Contains(t, got[1], `"text":"session started (sim)"`, "the backlog comes first")
	require.Contains(t, got[2], `"text":"turn 8"`, "a new event follows live")

	got = sse(t, s, "?group=web", 1, nil)
	require.Contains(t, got[0], `"name":"worker"`)
}

func TestAPIEventsBadFilter(t *testing.T) {
	s := newAPISite(t)
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
	req, _ := http.NewRequest(http.MethodGet, s.srv.URL+"/api/events?session=web/nobody", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
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

	cfg.HTTP.Token = "chosen"
	token, file, err = APIToken(cfg)
	require.NoError(t, err)
	require.Equal(t, "chosen", token)
	require.Empty(t, file)

	yaml := filepath.Join(dir, "nid.yaml")
	require.NoError(t, os.WriteFile(yaml, []byte("state: "+dir+"\nhttp:\n  token: from-the-file\n"), 0o644))
	for _, tt := range []struct {
		environ []string
		want    string
	}{
		{nil, "from-the-file"},
		{[]string{"NID_HTTP_TOKEN=from-the-environment"}, "from-the-environment"},
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
		{"0.0.0.0:7777", "chosen", true},
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

	// The node refuses before it starts anything.
	cfg := config.Default()
	cfg.State = t.TempDir()
	cfg.HTTP.Listen = "0.0.0.0:0"
	started := false
	_, err := Start(context.Background(), Options{Config: cfg, StartEmbedded: func(context.Context, EmbeddedOptions) (EmbeddedServer, error) {
		started = true
		return nil, context.Canceled
	}})
	require.ErrorContains(t, err, "is not a loopback address")
	require.False(t, started, "no Temporal server was started")
}
