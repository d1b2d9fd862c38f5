package worker

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/nid-dev/nid/internal/temporaltest"
)

var fuzzMethods = []string{
	MethodSessionList, MethodSessionGet, MethodSessionRotate, MethodSessionSend, MethodSessionTranscript,
	MethodGroupList, MethodGroupGet, MethodGroupSet, MethodBoardRead, MethodInboxList,
}

// FuzzAPIRequest posts arbitrary bodies to every API method. Whatever the
// body, the API answers with JSON, never fails on its side, and a request
// it refuses has a code and a message and has signalled and updated
// nothing.
func FuzzAPIRequest(f *testing.F) {
	for i, body := range []string{
		`{}`, `{"session": "web/lead"}`, `{"session": "web/worker", "mode": "handoff"}`,
		`{"session": "web/lead", "text": "run the tests"}`, `{"session": "web/lead", "limit": 5}`,
		`{"group": "web"}`, `{"group": "web", "rotate": {"mode": "compact", "contextPercent": 70, "maxTurns": 3}}`,
		`{"group": "web", "budget": {"turns": 10, "tokens": 5000, "usd": 1.5}}`, `{"group": "web"}`, `{"group": "api"}`,
		`{"session": `, `[1,2]`, `{"session": "web/lead"} {}`, `{"group": "web", "rotate": "handoff"}`, "\x00\xff",
	} {
		f.Add(byte(i), []byte(body))
	}
	s := newAPISite(f, webGroups)
	temporaltest.TakeTurns(f, s.c, "web", "lead", "l1")
	f.Fuzz(func(t *testing.T, which byte, body []byte) {
		method := fuzzMethods[int(which)%len(fuzzMethods)]
		c := &temporaltest.Counter{Client: s.c}
		api := NewAPI(c, APIOptions{Token: testToken, Transcripts: s.logs})
		req := httptest.NewRequest(http.MethodPost, "/api/"+method, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+testToken)
		rec := httptest.NewRecorder()
		api.Handler().ServeHTTP(rec, req)

		var answer map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &answer); err != nil {
			t.Fatalf("%s %q: the answer is not a JSON object: %v\n%s", method, body, err, rec.Body.String())
		}
		if rec.Code >= 500 {
			t.Fatalf("%s %q: status %d: %v", method, body, rec.Code, answer)
		}
		if rec.Code == http.StatusOK {
			return
		}
		code, _ := answer["code"].(string)
		message, _ := answer["message"].(string)
		if code == "" || message == "" {
			t.Fatalf("%s %q: refused without a code and a message: %v", method, body, answer)
		}
		if c.Sent() > 0 {
			t.Fatalf("%s %q: refused (%v) but sent %d signals and updates", method, body, answer, c.Sent())
		}
	})
}
