package embedded

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdkclient "go.temporal.io/sdk/client"

	"github.com/nid-dev/nid/internal/freeport"
	"github.com/nid-dev/nid/worker"
)

// noRedirects is a browser that shows each answer rather than following
// it, so that a test sees the login cookie and where a login goes.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// uiAnswer is one answer of the Web UI: its status, the login cookie it
// set (nil: none), where it redirects, and its body.
type uiAnswer struct {
	status   int
	cookie   *http.Cookie
	location string
	// csp is the page's Content-Security-Policy.
	csp  string
	body string
}

// uiGet opens u as a browser would, without following a redirect.
func uiGet(t *testing.T, u string) uiAnswer {
	t.Helper()
	resp, err := noRedirects.Get(u)
	return answer(t, resp, err)
}

// uiGetWith is uiGet with the cookie login.
func uiGetWith(t *testing.T, u string, login *http.Cookie) uiAnswer {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	require.NoError(t, err)
	req.AddCookie(login)
	resp, err := noRedirects.Do(req)
	return answer(t, resp, err)
}

// uiPost sends a form to u as a browser would, without following a
// redirect.
func uiPost(t *testing.T, u string, form url.Values) uiAnswer {
	t.Helper()
	resp, err := noRedirects.PostForm(u, form)
	return answer(t, resp, err)
}

func answer(t *testing.T, resp *http.Response, err error) uiAnswer {
	t.Helper()
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	a := uiAnswer{status: resp.StatusCode, location: resp.Header.Get("Location"), csp: resp.Header.Get("Content-Security-Policy"), body: string(body)}
	for _, c := range resp.Cookies() {
		if c.Name == uiCookie {
			a.cookie = c
		}
	}
	return a
}

// uiLogin logs in to srv's Web UI with a login link, as a person does
// with the link nid up printed, and returns the login cookie.
func uiLogin(t *testing.T, srv *Server) *http.Cookie {
	t.Helper()
	a := uiGet(t, srv.UILoginLink())
	require.Equal(t, http.StatusSeeOther, a.status, a.body)
	require.NotNil(t, a.cookie, "the link sets the Web UI's login cookie")
	return &http.Cookie{Name: a.cookie.Name, Value: a.cookie.Value}
}

// The Web UI's server presents the Temporal credential on each call, so
// the UI itself asks for a login: without one, its API and its pages are
// refused; a login link logs in once; the form takes the Temporal
// credential or nid's API token and nothing else; and a logged-in browser
// reads the workflows.
func TestWebUIAsksForALogin(t *testing.T) {
	uiPort, err := freeport.Find()
	require.NoError(t, err)
	state := t.TempDir()
	const apiToken = "the-api-token-of-this-nid-0123456789abcdef"
	srv := startTestWith(t, worker.EmbeddedOptions{StateDir: state, UIPort: uiPort, APIToken: apiToken}, nil)
	c := trustedClient(t, srv, state)
	_, err = c.ExecuteWorkflow(context.Background(), sdkclient.StartWorkflowOptions{ID: "target", TaskQueue: "nobody"}, "Target")
	require.NoError(t, err)
	base := "http://127.0.0.1:" + strconv.Itoa(uiPort)
	list := "/api/v1/namespaces/default/workflows"
	local := "127.0.0.1:" + strconv.Itoa(uiPort)

	// Without a login: the API answers 401, the pages the login form.
	status, body := uiCall(t, uiPort, nil, local, http.MethodGet, list)
	require.Equal(t, http.StatusUnauthorized, status, body)
	require.Contains(t, body, "not logged in to nid's Temporal Web UI")
	require.NotContains(t, body, "target")
	for _, page := range []string{"/", "/namespaces/default/workflows", "/namespaces/default/workflows/target"} {
		a := uiGet(t, base+page)
		require.Equal(t, http.StatusUnauthorized, a.status, page)
		require.Contains(t, a.body, `<form method="post" action="/nid/login">`, page)
		require.Contains(t, a.body, worker.TemporalTokenPath(state), "the form says where the credential is")
		require.NotContains(t, a.body, "/_app/", "not the UI's page")
		require.Contains(t, a.csp, "frame-ancestors 'none'", "no other page frames the form to have a token typed in")
	}
	a := uiGet(t, base+"/_app/version.json")
	require.Equal(t, http.StatusUnauthorized, a.status, "nor its assets")
	// Neither the dashboard's cookie nor a made-up one is a login.
	for _, cookie := range []*http.Cookie{{Name: "nid_session", Value: "x"}, {Name: uiCookie, Value: "x"}} {
		status, _ := uiCall(t, uiPort, cookie, local, http.MethodGet, list)
		require.Equal(t, http.StatusUnauthorized, status, cookie.Name)
	}

	t.Run("a login link works once", func(t *testing.T) {
		link := srv.UILoginLink()
		require.Regexp(t, `^`+base+`/nid/login/[A-Z2-7]{26}$`, link)
		require.NotContains(t, link, srv.token)
		a := uiGet(t, link)
		require.Equal(t, http.StatusSeeOther, a.status, a.body)
		require.Equal(t, "/", a.location)
		require.NotNil(t, a.cookie)
		require.True(t, a.cookie.HttpOnly, "the page's script cannot read the login")
		require.Equal(t, http.SameSiteStrictMode, a.cookie.SameSite, "another site's request does not carry it")
		require.Equal(t, int(worker.LoginTTL/time.Second), a.cookie.MaxAge)
		require.Equal(t, "/", a.cookie.Path)

		listsTarget(t, uiPort, a.cookie.Value, local, list)
		page := uiGetWith(t, base+"/namespaces/default/workflows", &http.Cookie{Name: uiCookie, Value: a.cookie.Value})
		require.Equal(t, http.StatusOK, page.status)
		require.Contains(t, page.body, "/_app/", "the logged-in browser gets the UI's page")

		again := uiGet(t, link)
		require.Equal(t, http.StatusUnauthorized, again.status)
		require.Nil(t, again.cookie)
		require.Contains(t, again.body, "This login link was used already or has expired")
	})

	t.Run("the form", func(t *testing.T) {
		for _, tt := range []struct {
			name, token string
			ok          bool
		}{
			{"the Temporal credential", srv.token, true},
			{"the credential as pasted from the file", srv.token + "\n", true},
			{"nid's API token", apiToken, true},
			{"a wrong token", "not-the-token", false},
			{"the credential's prefix", srv.token[:len(srv.token)-1], false},
			{"nothing", "", false},
		} {
			t.Run(tt.name, func(t *testing.T) {
				a := uiPost(t, base+uiLoginPath, url.Values{"token": {tt.token}, "next": {"/namespaces/default/workflows"}})
				if !tt.ok {
					require.Equal(t, http.StatusUnauthorized, a.status)
					require.Nil(t, a.cookie)
					require.Contains(t, a.body, "That is neither the Temporal credential nor nid&#39;s API token.")
					return
				}
				require.Equal(t, http.StatusSeeOther, a.status, a.body)
				require.Equal(t, "/namespaces/default/workflows", a.location, "the login goes on to the page it was asked for")
				require.NotNil(t, a.cookie)
				listsTarget(t, uiPort, a.cookie.Value, local, list)
			})
		}
	})

	t.Run("never in an address, never to another site", func(t *testing.T) {
		a := uiGet(t, base+uiLoginPath+"?token="+url.QueryEscape(srv.token))
		require.Equal(t, http.StatusMethodNotAllowed, a.status)
		require.Nil(t, a.cookie)
		for _, next := range []string{"//evil.example/", "http://evil.example/", `/\evil.example`, uiLoginPath} {
			a := uiPost(t, base+uiLoginPath, url.Values{"token": {srv.token}, "next": {next}})
			require.Equal(t, http.StatusSeeOther, a.status)
			require.Equal(t, "/", a.location, "next %s", next)
		}
	})
}

// The login cookie is nid's alone: the UI's server would hand it on to
// the Temporal frontend with the request's other headers.
func TestWithoutCookieKeepsTheOthers(t *testing.T) {
	r, err := http.NewRequest(http.MethodGet, "http://127.0.0.1/", nil)
	require.NoError(t, err)
	r.Header.Set("Cookie", "_csrf=abc; "+uiCookie+"=secret; theme=dark")
	got := withoutCookie(r, uiCookie)
	require.Equal(t, "_csrf=abc; theme=dark", got.Header.Get("Cookie"))
	require.False(t, strings.Contains(got.Header.Get("Cookie"), "secret"))
	require.Contains(t, r.Header.Get("Cookie"), "secret", "the request itself is left as it came")
}

// listsTarget checks that the UI, logged in with the cookie value login,
// lists the test's workflow. The list is visibility's, which may lag the
// workflow's start by a moment.
func listsTarget(t *testing.T, uiPort int, login, host, list string) {
	t.Helper()
	require.Eventually(t, func() bool {
		status, body := uiCall(t, uiPort, &http.Cookie{Name: uiCookie, Value: login}, host, http.MethodGet, list)
		return status == http.StatusOK && strings.Contains(body, `"target"`)
	}, 10*time.Second, 100*time.Millisecond, "the logged-in UI lists the workflow")
}
