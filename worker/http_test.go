package worker

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/internal/temporaltest"
	"github.com/nid-dev/nid/workflows"
)

// slowBoard answers board_read only after a while, as a group workflow
// busy with other updates does.
type slowBoard struct {
	*recordingSignaler
	d time.Duration
}

func (s slowBoard) Board(ctx context.Context, group, session string) (string, error) {
	time.Sleep(s.d)
	return s.recordingSignaler.Board(ctx, group, session)
}

type httpSite struct {
	*apiSite
	mcp *MCPEndpoint
	url string
}

// startHTTP serves the API over groups (none when empty) and an MCP
// endpoint whose board_read takes boardDelay, as the worker serves them.
func startHTTP(t *testing.T, groups string, lim HTTPLimits, opts APIOptions, boardDelay time.Duration) *httpSite {
	t.Helper()
	s := newAPI(t, groups, opts)
	ts := httptest.NewUnstartedServer(nil)
	url := "http://" + ts.Listener.Addr().String()
	mcp := NewMCPEndpoint([]byte("0123456789abcdef0123456789abcdef"), slowBoard{&recordingSignaler{board: "the board"}, boardDelay}, url)
	ts.Config = NewHTTPServer(mcp.Handler(), s.api.Handler(), http.NotFoundHandler(), lim)
	ts.Start()
	t.Cleanup(ts.Close)
	return &httpSite{apiSite: s, mcp: mcp, url: ts.URL}
}

// long is a limit no test reaches.
const long = time.Hour

func TestSecurityHeadersOnEveryResponse(t *testing.T) {
	s := startHTTP(t, webGroups, DefaultHTTPLimits(), APIOptions{}, 0)
	requests := []struct {
		method, path, token string
		status              int
	}{
		{http.MethodGet, "/", "", http.StatusUnauthorized},
		{http.MethodGet, "/groups/web", testToken, http.StatusOK},
		{http.MethodGet, "/static/app.js", "", http.StatusOK},
		{http.MethodGet, "/nothing", testToken, http.StatusNotFound},
		{http.MethodPost, "/api/" + MethodSessionList, testToken, http.StatusOK},
		{http.MethodPost, "/api/" + MethodSessionList, "", http.StatusUnauthorized},
		{http.MethodGet, "/api/events?session=web/nobody", testToken, http.StatusNotFound},
		{http.MethodGet, "/login/not-a-link", "", http.StatusUnauthorized},
		{http.MethodPost, "/mcp/web/lead/not-the-token", "", http.StatusForbidden},
		{http.MethodGet, "/mcp/", "", http.StatusNotFound},
	}
	for _, r := range requests {
		req, err := http.NewRequest(r.method, s.url+r.path, strings.NewReader(`{}`))
		require.NoError(t, err)
		if r.token != "" {
			req.Header.Set("Authorization", "Bearer "+r.token)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, r.status, resp.StatusCode, r.path)
		h := resp.Header
		require.Equal(t, "DENY", h.Get("X-Frame-Options"), r.path)
		require.Contains(t, h.Get("Content-Security-Policy"), "frame-ancestors 'none'", r.path)
		require.Contains(t, h.Get("Content-Security-Policy"), "script-src 'self';", r.path)
		require.NotContains(t, h.Get("Content-Security-Policy"), "unsafe-inline", r.path)
		require.Equal(t, "nosniff", h.Get("X-Content-Type-Options"), r.path)
		require.Equal(t, "no-referrer", h.Get("Referrer-Policy"), r.path)
	}
}

// openStream opens an event stream and reads until its first event.
func openStream(t *testing.T, ctx context.Context, url string) (*http.Response, *bufio.Scanner) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/api/events?session=web/lead", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	sc := bufio.NewScanner(resp.Body)
	if resp.StatusCode == http.StatusOK {
		require.True(t, sc.Scan())
	}
	return resp, sc
}

// An event stream and an MCP call outlive the write timeout that bounds an
// ordinary response.
func TestLongResponsesOutliveTheWriteTimeout(t *testing.T) {
	lim := HTTPLimits{ReadHeader: long, Read: 200 * time.Millisecond, Write: 200 * time.Millisecond, Idle: long, StreamWrite: long}
	s := startHTTP(t, webGroups, lim, APIOptions{}, time.Second)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, sc := openStream(t, ctx, s.url)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	time.Sleep(time.Second)
	temporaltest.Signal(t, s.c, "web", "lead", workflows.SignalMessage, workflows.Message{Text: "a second later"})
	found := false
	for !found && sc.Scan() {
		found = strings.Contains(sc.Text(), "message queued: a second later")
	}
	require.True(t, found, "the stream still delivers: %v", sc.Err())

	res, err := callTool(t, s.mcp.URL(webLead, 0), "board_read", nil)
	require.NoError(t, err)
	require.Equal(t, "the board", resultText(res))
}

func TestEventStreamsAreCapped(t *testing.T) {
	s := startHTTP(t, webGroups, DefaultHTTPLimits(), APIOptions{MaxEventStreams: 2}, 0)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	first, firstCancel := context.WithCancel(ctx)
	for _, c := range []context.Context{first, ctx} {
		resp, _ := openStream(t, c, s.url)
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}

	resp, _ := openStream(t, ctx, s.url)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.NotEmpty(t, resp.Header.Get("Retry-After"))
	var got APIError
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&got))
	require.Equal(t, "2 event streams are open, as many as this server keeps: close one (a dashboard tab) and try again", got.Message)

	// A closed stream makes room.
	firstCancel()
	require.Eventually(t, func() bool {
		resp, _ := openStream(t, ctx, s.url)
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 20*time.Second, 100*time.Millisecond)
}

// A client that sends too slowly, or idles, is cut off by the server.
func TestSlowClientsAreCutOff(t *testing.T) {
	short := 100 * time.Millisecond
	tests := []struct {
		name string
		lim  HTTPLimits
		send func(t *testing.T, c net.Conn, r *bufio.Reader)
	}{
		{"headers that never end", HTTPLimits{ReadHeader: short, Read: long, Write: long, Idle: long, StreamWrite: long},
			func(t *testing.T, c net.Conn, _ *bufio.Reader) {
				_, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
				require.NoError(t, err)
			}},
		{"a body that never ends", HTTPLimits{ReadHeader: long, Read: short, Write: long, Idle: long, StreamWrite: long},
			func(t *testing.T, c net.Conn, _ *bufio.Reader) {
				_, err := io.WriteString(c, "POST /api/"+MethodSessionList+" HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "+testToken+
					"\r\nContent-Length: 1000\r\n\r\n{\"group\":")
				require.NoError(t, err)
			}},
		{"a connection kept idle", HTTPLimits{ReadHeader: long, Read: long, Write: long, Idle: short, StreamWrite: long},
			func(t *testing.T, c net.Conn, r *bufio.Reader) {
				_, err := io.WriteString(c, "GET /static/style.css HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
				require.NoError(t, err)
				resp, err := http.ReadResponse(r, nil)
				require.NoError(t, err)
				_, err = io.Copy(io.Discard, resp.Body)
				require.NoError(t, err)
				require.Equal(t, http.StatusOK, resp.StatusCode)
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := startHTTP(t, "", tt.lim, APIOptions{}, 0)
			c, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
			require.NoError(t, err)
			defer c.Close()
			r := bufio.NewReader(c)
			tt.send(t, c, r)
			// Far longer than the limit: the server closes first.
			require.NoError(t, c.SetReadDeadline(time.Now().Add(30*time.Second)))
			_, err = io.ReadAll(r)
			require.NoError(t, err, "the server closed the connection")
		})
	}
}
