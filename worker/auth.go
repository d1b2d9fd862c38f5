package worker

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/statedir"
)

// TokenFile is the file under the state directory holding the API token nid
// generated because neither http.token nor NID_HTTP_TOKEN set one.
const TokenFile = "http-token"

// needsToken refuses an HTTP listen address other than loopback without a
// configured token (see APIToken).
func needsToken(cfg *config.Config) error {
	if cfg.HTTP.Token == "" && !config.LoopbackAddress(cfg.HTTP.Listen) {
		return fmt.Errorf("http.listen %s is not a loopback address: set http.token (or NID_HTTP_TOKEN) to serve the API and dashboard there", cfg.HTTP.Listen)
	}
	return nil
}

// APIToken returns the bearer token the API and the dashboard require:
// http.token when set, else the one in the state directory, generated on
// first use. file is where a generated token lives, empty for a configured
// one. A listen address other than loopback needs a configured token: a
// token written to disk on a shared host is not a secret worth guarding a
// network port with.
func APIToken(cfg *config.Config) (token, file string, err error) {
	if cfg.HTTP.Token != "" {
		return cfg.HTTP.Token, "", nil
	}
	if err := needsToken(cfg); err != nil {
		return "", "", err
	}
	file = filepath.Join(cfg.State, TokenFile)
	b, err := os.ReadFile(file)
	if err == nil && len(strings.TrimSpace(string(b))) > 0 {
		return strings.TrimSpace(string(b)), file, nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", "", fmt.Errorf("API token: %w", err)
	}
	raw := make([]byte, 24)
	if _, err := rand.Read(raw); err != nil {
		return "", "", err
	}
	token = hex.EncodeToString(raw)
	if err := os.MkdirAll(cfg.State, statedir.DirMode); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(file, []byte(token+"\n"), statedir.FileMode); err != nil {
		return "", "", fmt.Errorf("API token: %w", err)
	}
	return token, file, nil
}

// cookieName is the dashboard's session cookie.
const cookieName = "nid_session"

// dashboardHeader marks an API request made by the dashboard's own script.
// A browser sends a custom header cross-origin only after a CORS preflight,
// which nid never answers, so a page on another site cannot ride the
// dashboard's cookie.
const dashboardHeader = "X-Nid-Dashboard"

// LoginLinkTTL is how long a login link stays valid: long enough to open
// it from nid up's output, short enough that an old terminal scrollback
// or shell history is no way in.
const LoginLinkTTL = 10 * time.Minute

// LoginLinkLife is LoginLinkTTL as the dashboard and nid up say it.
func LoginLinkLife() string { return spoken(LoginLinkTTL) }

// LoginTTL is how long a dashboard login lasts, counted from when the
// browser logged in (a fixed expiry: a cookie copied off a machine, or a
// browser left open, is no way in the next day, however it is used).
const LoginTTL = 12 * time.Hour

// maxLogins bounds the dashboard logins kept at once; past it, the one
// that expires first is dropped. Only a holder of the token or of a login
// link can make one.
const maxLogins = 64

// guard authenticates API and dashboard requests: a bearer token, or the
// cookie the dashboard sets when a browser logs in, with a one-time login
// link or with the token in the login form.
type guard struct {
	token string
	now   func() time.Time

	mu sync.Mutex
	// links are the unused login links, by the SHA-256 of their secret,
	// with when they expire.
	links map[[sha256.Size]byte]time.Time
	// logins are the dashboard's logged-in browsers, by the SHA-256 of the
	// random id their cookie holds, with when they expire. They live in
	// memory only: the cookie is no lasting credential, and a restarted
	// worker logs every browser out.
	logins map[[sha256.Size]byte]time.Time
}

func newGuard(token string, now func() time.Time) *guard {
	if now == nil {
		now = time.Now
	}
	return &guard{token: token, now: now, links: map[[sha256.Size]byte]time.Time{}, logins: map[[sha256.Size]byte]time.Time{}}
}

func (g *guard) bearer(r *http.Request) bool {
	h := r.Header.Get("Authorization")
	t, ok := strings.CutPrefix(h, "Bearer ")
	return ok && g.isToken(t)
}

func (g *guard) isToken(t string) bool {
	return hmac.Equal([]byte(strings.TrimSpace(t)), []byte(g.token))
}

func (g *guard) hasCookie(r *http.Request) bool {
	c, err := r.Cookie(cookieName)
	if err != nil {
		return false
	}
	k := sha256.Sum256([]byte(c.Value))
	g.mu.Lock()
	defer g.mu.Unlock()
	expires, ok := g.logins[k]
	if ok && !g.now().Before(expires) {
		delete(g.logins, k)
		return false
	}
	return ok
}

// api says whether an API request is authenticated: a bearer token, or the
// dashboard's cookie on a request its script made (a GET such as the event
// stream, which EventSource cannot give headers, or one with the dashboard
// header).
func (g *guard) api(r *http.Request) bool {
	if g.bearer(r) {
		return true
	}
	return g.hasCookie(r) && (r.Method == http.MethodGet || r.Header.Get(dashboardHeader) != "")
}

// setCookie logs the browser in: a new random id, kept here only as its
// hash, good for LoginTTL.
func (g *guard) setCookie(w http.ResponseWriter) {
	id := rand.Text()
	g.mu.Lock()
	now := g.now()
	for k, expires := range g.logins {
		if !now.Before(expires) {
			delete(g.logins, k)
		}
	}
	for len(g.logins) >= maxLogins {
		var first [sha256.Size]byte
		var firstExpires time.Time
		for k, expires := range g.logins {
			if firstExpires.IsZero() || expires.Before(firstExpires) {
				first, firstExpires = k, expires
			}
		}
		delete(g.logins, first)
	}
	g.logins[sha256.Sum256([]byte(id))] = now.Add(LoginTTL)
	g.mu.Unlock()
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: id, Path: "/", MaxAge: int(LoginTTL / time.Second),
		HttpOnly: true, SameSite: http.SameSiteStrictMode,
	})
}

// logout ends the login r's cookie holds, and tells the browser to drop
// the cookie.
func (g *guard) logout(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(cookieName); err == nil {
		g.mu.Lock()
		delete(g.logins, sha256.Sum256([]byte(c.Value)))
		g.mu.Unlock()
	}
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode,
	})
}

// newLink makes a login link's secret, good for one use within
// LoginLinkTTL.
func (g *guard) newLink() string {
	secret := rand.Text()
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	for k, expires := range g.links {
		if !now.Before(expires) {
			delete(g.links, k)
		}
	}
	g.links[sha256.Sum256([]byte(secret))] = now.Add(LoginLinkTTL)
	return secret
}

// useLink says whether secret is a login link's that is unused and
// unexpired, and uses it up.
func (g *guard) useLink(secret string) bool {
	k := sha256.Sum256([]byte(secret))
	g.mu.Lock()
	defer g.mu.Unlock()
	expires, ok := g.links[k]
	delete(g.links, k)
	return ok && g.now().Before(expires)
}

// MetricsAuth guards h, the Prometheus metrics, with bearer tokens: the
// API token, and metricsToken when http.metricsToken sets one, which reads
// the metrics and nothing else (a Prometheus server holding it cannot
// drive a session). A scrape without either is refused.
func MetricsAuth(h http.Handler, apiToken, metricsToken string) http.Handler {
	guards := []*guard{newGuard(apiToken, nil)}
	if metricsToken != "" {
		guards = append(guards, newGuard(metricsToken, nil))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "/metrics takes GET", http.StatusMethodNotAllowed)
			return
		}
		for _, g := range guards {
			if g.bearer(r) {
				h.ServeHTTP(w, r)
				return
			}
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="nid metrics"`)
		http.Error(w, "missing or wrong token: /metrics takes the API token (http.token) or http.metricsToken as a bearer token", http.StatusUnauthorized)
	})
}
