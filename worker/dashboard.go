package worker

import (
	"embed"
	"html/template"
	"io/fs"
	"net/http"
	"strings"

	"github.com/nid-dev/nid/workflows"
)

// The dashboard is plain HTML, CSS and JavaScript built into the binary: it
// loads nothing from elsewhere, so it works offline.
//
//go:embed dashboard
var dashboardFiles embed.FS

// dashboardPage reports whether path is one of the dashboard's pages, all
// of which are index.html routed by its script.
func dashboardPage(path string) bool {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case path == "/":
		return true
	case len(parts) == 1 && parts[0] == "inbox":
		return true
	case len(parts) == 2 && parts[0] == "groups":
		return workflows.ValidName(parts[1])
	case len(parts) == 3 && parts[0] == "sessions":
		return workflows.ValidName(parts[1]) && workflows.ValidName(parts[2])
	}
	return false
}

// LoginLink makes a one-time login link for the dashboard, a path to add
// to the server's URL: opened within LoginLinkTTL, once, it logs the
// browser in and goes to the groups page. The token itself never appears
// in an address, a browser's history or a log.
func (a *API) LoginLink() string { return "/login/" + a.guard.NewLink() }

// dashboard serves the pages to a browser holding the dashboard cookie (or
// a client with the bearer token), and the login form to one without.
// Its script and style are served to anyone: they are the same in every
// nid binary, and the login form uses the style.
func (a *API) dashboard() http.Handler {
	static, err := fs.Sub(dashboardFiles, "dashboard")
	if err != nil {
		panic(err) // the embedded directory is part of the build
	}
	files := http.FileServerFS(static)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		if strings.HasPrefix(r.URL.Path, "/static/") {
			r2 := r.Clone(r.Context())
			r2.URL.Path = strings.TrimPrefix(r.URL.Path, "/static")
			files.ServeHTTP(w, r2)
			return
		}
		if !a.guard.LoggedIn(r) && !a.guard.bearer(r) {
			loginPage(w, http.StatusUnauthorized, r.URL.Path, "")
			return
		}
		if !dashboardPage(r.URL.Path) {
			http.NotFound(w, r)
			return
		}
		http.ServeFileFS(w, r, static, "index.html")
	})
}

// loginBodyBytes bounds the login form's body.
const loginBodyBytes = 4 << 10

// serveLogin is the login form's POST /login: the right token sets the
// cookie and goes on to the page the form was shown for.
func (a *API) serveLogin(w http.ResponseWriter, r *http.Request) {
	if !loginMethod(w, r, http.MethodPost, "The login form is sent with POST.") {
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, loginBodyBytes)
	next := "/"
	if err := r.ParseForm(); err != nil {
		loginPage(w, http.StatusBadRequest, next, "The form could not be read: "+err.Error())
		return
	}
	if p := r.PostFormValue("next"); dashboardPage(p) {
		next = p
	}
	if !a.guard.isToken(r.PostFormValue("token")) {
		loginPage(w, http.StatusUnauthorized, next, "That is not nid's API token.")
		return
	}
	a.guard.LogIn(w)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// serveLoginLink is GET /login/<secret>, a link nid up printed.
func (a *API) serveLoginLink(w http.ResponseWriter, r *http.Request) {
	if !loginMethod(w, r, http.MethodGet, "A login link is opened with GET.") {
		return
	}
	if !a.guard.UseLink(strings.TrimPrefix(r.URL.Path, "/login/")) {
		loginPage(w, http.StatusUnauthorized, "/",
			"This login link was used already or has expired: a link works once, within "+LoginLinkLife()+". Log in with the API token instead.")
		return
	}
	a.guard.LogIn(w)
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// serveLogout is POST /logout, the dashboard's Log out button: it ends the
// browser's login. It takes what the API takes, the cookie with the
// dashboard's header, so that another site cannot log a browser out.
func (a *API) serveLogout(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, &APIError{Status: http.StatusMethodNotAllowed, Code: CodeMethodNotAllowed, Message: "/logout takes POST"})
		return
	}
	if !a.guard.LoggedIn(r) || r.Header.Get(dashboardHeader) == "" {
		writeError(w, &APIError{Status: http.StatusUnauthorized, Code: CodeUnauthorized,
			Message: "not logged in: /logout ends a dashboard login, and takes its cookie with the dashboard's " + dashboardHeader + " header"})
		return
	}
	a.guard.LogOut(w, r)
	w.WriteHeader(http.StatusNoContent)
}

// loginMethod says whether a login request came with method, and answers
// it with the form and why when not. Nothing of a login may be stored.
func loginMethod(w http.ResponseWriter, r *http.Request, method, why string) bool {
	w.Header().Set("Cache-Control", "no-store")
	if r.Method == method {
		return true
	}
	w.Header().Set("Allow", method)
	loginPage(w, http.StatusMethodNotAllowed, "/", why)
	return false
}

var loginTemplate = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>nid: log in</title>
<link rel="stylesheet" href="/static/style.css">
</head>
<body>
<header><a class="brand" href="/">nid</a></header>
<main class="login">
<h1>Log in to the dashboard</h1>
{{if .Message}}<p class="answer error" id="login-error">{{.Message}}</p>{{end}}
<p>Open the one-time link <code>nid up</code> printed, or enter nid's API token: <code>http.token</code> in nid.yaml,
<code>NID_HTTP_TOKEN</code>, or the contents of the token file <code>nid up</code> names.</p>
<form method="post" action="/login">
<input type="hidden" name="next" value="{{.Next}}">
<label>API token <input type="password" name="token" id="token" autocomplete="off" required autofocus></label>
<button type="submit" id="login">Log in</button>
</form>
</main>
</body>
</html>
`))

// loginPage answers with the login form, which goes on to next.
func loginPage(w http.ResponseWriter, status int, next, message string) {
	if !dashboardPage(next) {
		next = "/"
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_ = loginTemplate.Execute(w, struct{ Next, Message string }{next, message})
}
