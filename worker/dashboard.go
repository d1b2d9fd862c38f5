package worker

import (
	"embed"
	"html"
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

// dashboard serves the pages and their assets to a browser holding the
// dashboard cookie (or a client with the bearer token). Opening any page
// with ?token= logs the browser in and drops the token from the address.
func (a *API) dashboard() http.Handler {
	static, err := fs.Sub(dashboardFiles, "dashboard")
	if err != nil {
		panic(err) // the embedded directory is part of the build
	}
	files := http.FileServerFS(static)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.guard.login(w, r) {
			http.Redirect(w, r, r.URL.Path, http.StatusSeeOther)
			return
		}
		if !a.guard.hasCookie(r) && !a.guard.bearer(r) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(loginPage(r.URL.Path)))
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		switch {
		case dashboardPage(r.URL.Path):
			http.ServeFileFS(w, r, static, "index.html")
		case strings.HasPrefix(r.URL.Path, "/static/"):
			r2 := r.Clone(r.Context())
			r2.URL.Path = strings.TrimPrefix(r.URL.Path, "/static")
			files.ServeHTTP(w, r2)
		default:
			http.NotFound(w, r)
		}
	})
}

func loginPage(path string) string {
	return `<!doctype html><meta charset="utf-8"><title>nid: log in</title>` +
		`<body style="font:15px system-ui;margin:3rem"><h1>nid dashboard</h1>` +
		`<p>This dashboard needs nid's API token. Open it as <code>` + html.EscapeString(path) + `?token=TOKEN</code>, ` +
		`where TOKEN is http.token from nid.yaml, NID_HTTP_TOKEN, or the contents of the token file <code>nid up</code> names.</p>`
}
