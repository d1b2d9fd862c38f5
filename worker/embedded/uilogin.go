package embedded

import (
	"encoding/json"
	"html/template"
	"net/http"
	"net/url"
	"strings"

	"github.com/nid-dev/nid/worker"
)

// The Web UI's server presents the Temporal credential on every call it
// makes, so whoever reaches its port reads every session's history and,
// with temporal.ui.writeActions, steers them. uiGate puts a login of its
// own in front of all of it, made as the dashboard's is (worker.Logins): a
// one-time link nid up and nid server print, or a form that takes the
// Temporal credential or nid's API token.

// uiCookie is the Web UI's login cookie. A browser sends a host's cookies
// to each of its ports, so it is not the dashboard's: a dashboard login is
// no Web UI login, and the two logins end apart.
const uiCookie = "nid_ui_session"

// uiLoginPath is the login form's address, and the prefix of the login
// links'. The Web UI's own pages, assets and API use none under /nid/.
const uiLoginPath = "/nid/login"

// uiLoginBodyBytes bounds the login form's body.
const uiLoginBodyBytes = 4 << 10

// uiGate answers the Web UI's login and lets only a logged-in browser on
// to next, the UI itself: its API, its pages and its assets alike.
type uiGate struct {
	logins *worker.Logins
	// tokens are the secrets the form takes: the Temporal credential, and
	// nid's API token when the process knows one.
	tokens []string
	// credentialFile is where the Temporal credential is, to tell a person
	// at the login form.
	credentialFile string
	next           http.Handler
}

// loginLink makes a one-time login link, a path on the UI's address.
func (g *uiGate) loginLink() string { return uiLoginPath + "/" + g.logins.NewLink() }

func (g *uiGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == uiLoginPath:
		g.serveLogin(w, r)
	case strings.HasPrefix(r.URL.Path, uiLoginPath+"/"):
		g.serveLink(w, r)
	case g.logins.LoggedIn(r):
		g.next.ServeHTTP(w, withoutCookie(r, uiCookie))
	case strings.HasPrefix(r.URL.Path, "/api/"):
		// As the UI's API answers a refused call (a gRPC status, 16 is
		// Unauthenticated), so that its page shows the message.
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusUnauthorized)
		_ = json.NewEncoder(w).Encode(map[string]any{
			"code":    16,
			"message": "not logged in to nid's Temporal Web UI: open the login link nid up or nid server printed, or log in at " + uiLoginPath + " with the Temporal credential or nid's API token",
			"details": []any{},
		})
	default:
		next := "/"
		if r.Method == http.MethodGet {
			next = r.URL.RequestURI()
		}
		g.page(w, http.StatusUnauthorized, next, "")
	}
}

// serveLogin is the form's POST: the Temporal credential or nid's API
// token logs the browser in and goes on to the page the form was shown
// for. A secret is taken only in a form's body, never in an address, which
// a browser's history and a log keep.
func (g *uiGate) serveLogin(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		g.page(w, http.StatusMethodNotAllowed, "/", "The login form is sent with POST.")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, uiLoginBodyBytes)
	if err := r.ParseForm(); err != nil {
		g.page(w, http.StatusBadRequest, "/", "The form could not be read: "+err.Error())
		return
	}
	next := localPath(r.PostFormValue("next"))
	given := r.PostFormValue("token")
	for _, t := range g.tokens {
		if t != "" && worker.SameToken(given, t) {
			g.logins.LogIn(w)
			w.Header().Set("Cache-Control", "no-store")
			http.Redirect(w, r, next, http.StatusSeeOther)
			return
		}
	}
	g.page(w, http.StatusUnauthorized, next, "That is neither the Temporal credential nor nid's API token.")
}

// serveLink is GET /nid/login/<secret>, a link nid up or nid server
// printed: good once, within worker.LoginLinkTTL.
func (g *uiGate) serveLink(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		g.page(w, http.StatusMethodNotAllowed, "/", "A login link is opened with GET.")
		return
	}
	if !g.logins.UseLink(strings.TrimPrefix(r.URL.Path, uiLoginPath+"/")) {
		g.page(w, http.StatusUnauthorized, "/", "This login link was used already or has expired: a link works once, within "+
			worker.LoginLinkTTL.String()+". Log in with the Temporal credential or nid's API token instead.")
		return
	}
	g.logins.LogIn(w)
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

var uiLoginTemplate = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>nid: log in to the Temporal Web UI</title>
<style>
body { font: 16px/1.5 system-ui, sans-serif; max-width: 36rem; margin: 4rem auto; padding: 0 1rem; color: #1d1d1f; }
code { font-size: 0.9em; }
.error { color: #b00020; }
input { font: inherit; width: 100%; box-sizing: border-box; margin: 0.25rem 0 1rem; padding: 0.4rem; }
button { font: inherit; padding: 0.4rem 1.2rem; }
</style>
</head>
<body>
<main>
<h1>Log in to the Temporal Web UI</h1>
{{if .Message}}<p class="error" id="login-error">{{.Message}}</p>{{end}}
<p>Open the one-time link <code>nid up</code> or <code>nid server</code> printed beside this address, or enter
the Temporal credential (the content of <code>{{.CredentialFile}}</code>) or nid's API token.</p>
<form method="post" action="/nid/login">
<input type="hidden" name="next" value="{{.Next}}">
<label>Temporal credential or API token <input type="password" name="token" id="token" autocomplete="off" required autofocus></label>
<button type="submit" id="login">Log in</button>
</form>
</main>
</body>
</html>
`))

// page answers with the login form, which goes on to next.
func (g *uiGate) page(w http.ResponseWriter, status int, next, message string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	// The page loads nothing, sends its form only here, and is framed by
	// no other page, which could dress it up to have a token typed in.
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	w.WriteHeader(status)
	_ = uiLoginTemplate.Execute(w, struct{ Next, Message, CredentialFile string }{localPath(next), message, g.credentialFile})
}

// localPath is next when it is a path on this server other than the login
// form's, else "/": a login must not send the browser to another site.
func localPath(next string) string {
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil ||
		!strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.Contains(next, `\`) ||
		strings.HasPrefix(u.Path, uiLoginPath) {
		return "/"
	}
	return next
}

// withoutCookie is r without the cookie named name. The login is nid's
// alone: the UI's server would pass the cookie on to the Temporal frontend
// with the rest of the request's headers.
func withoutCookie(r *http.Request, name string) *http.Request {
	cookies := r.Cookies()
	kept := make([]string, 0, len(cookies))
	for _, c := range cookies {
		if c.Name != name {
			kept = append(kept, c.Name+"="+c.Value)
		}
	}
	r2 := r.Clone(r.Context())
	r2.Header.Del("Cookie")
	if len(kept) > 0 {
		r2.Header.Set("Cookie", strings.Join(kept, "; "))
	}
	return r2
}
