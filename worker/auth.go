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

// LoginTTL is how long a browser's login lasts, counted from when the
// browser logged in (a fixed expiry: a cookie copied off a machine, or a
// browser left open, is no way in the next day, however it is used).
const LoginTTL = 12 * time.Hour

// maxLogins bounds the logins of one page kept at once; past it, the one
// that expires first is dropped. Only a holder of the token or of a login
// link can make one.
const maxLogins = 64

// guard authenticates API and dashboard requests: a bearer token, or the
// cookie the dashboard sets when a browser logs in, with a one-time login
// link or with the token in the login form.
type guard struct {
	token string
	*Logins
}

func newGuard(token string, now func() time.Time) *guard {
	return &guard{token: token, Logins: NewLogins(cookieName, now)}
}

func (g *guard) bearer(r *http.Request) bool {
	h := r.Header.Get("Authorization")
	t, ok := strings.CutPrefix(h, "Bearer ")
	return ok && g.isToken(t)
}

func (g *guard) isToken(t string) bool { return SameToken(t, g.token) }

// api says whether an API request is authenticated: a bearer token, or the
// dashboard's cookie on a request its script made (a GET such as the event
// stream, which EventSource cannot give headers, or one with the dashboard
// header).
func (g *guard) api(r *http.Request) bool {
	if g.bearer(r) {
		return true
	}
	return g.LoggedIn(r) && (r.Method == http.MethodGet || r.Header.Get(dashboardHeader) != "")
}

// SameToken says whether given, as a person pasted it (surrounding space
// and all), is token. It takes the same time wherever the two differ, so
// that timing a refusal tells nothing of the token.
func SameToken(given, token string) bool {
	return hmac.Equal([]byte(strings.TrimSpace(given)), []byte(token))
}

// Logins are the browser logins of one web page served by nid (the
// dashboard, the embedded Temporal Web UI): one-time login links, and the
// browsers logged in with one or with a token. Both are kept only as the
// SHA-256 of their secret, and only in memory: neither is a lasting
// credential, and a restarted process logs every browser out. The caller
// checks the token a login form was sent with; Logins only remembers the
// login.
type Logins struct {
	// cookie is the login cookie's name. Browsers send a host's cookies
	// to each of its ports, so each page names its own.
	cookie string
	now    func() time.Time

	mu sync.Mutex
	// links are the unused login links, by the SHA-256 of their secret,
	// with when they expire.
	links map[[sha256.Size]byte]time.Time
	// logins are the logged-in browsers, by the SHA-256 of the random id
	// their cookie holds, with when they expire.
	logins map[[sha256.Size]byte]time.Time
}

// NewLogins keeps the logins of a page whose login cookie is named cookie,
// by the clock now (nil: time.Now).
func NewLogins(cookie string, now func() time.Time) *Logins {
	if now == nil {
		now = time.Now
	}
	return &Logins{cookie: cookie, now: now, links: map[[sha256.Size]byte]time.Time{}, logins: map[[sha256.Size]byte]time.Time{}}
}

// LoggedIn says whether r carries the cookie of a login that has neither
// expired nor logged out.
func (l *Logins) LoggedIn(r *http.Request) bool {
	c, err := r.Cookie(l.cookie)
	if err != nil {
		return false
	}
	k := sha256.Sum256([]byte(c.Value))
	l.mu.Lock()
	defer l.mu.Unlock()
	expires, ok := l.logins[k]
	if ok && !l.now().Before(expires) {
		delete(l.logins, k)
		return false
	}
	return ok
}

// LogIn logs the browser w answers in: a cookie with a new random id,
// kept here only as its hash, good for LoginTTL, which the page's script
// cannot read and another site's request does not carry.
func (l *Logins) LogIn(w http.ResponseWriter) {
	id := rand.Text()
	l.mu.Lock()
	now := l.now()
	for k, expires := range l.logins {
		if !now.Before(expires) {
			delete(l.logins, k)
		}
	}
	for len(l.logins) >= maxLogins {
		var first [sha256.Size]byte
		var firstExpires time.Time
		for k, expires := range l.logins {
			if firstExpires.IsZero() || expires.Before(firstExpires) {
				first, firstExpires = k, expires
			}
		}
		delete(l.logins, first)
	}
	l.logins[sha256.Sum256([]byte(id))] = now.Add(LoginTTL)
	l.mu.Unlock()
	http.SetCookie(w, &http.Cookie{
		Name: l.cookie, Value: id, Path: "/", MaxAge: int(LoginTTL / time.Second),
		HttpOnly: true, SameSite: http.SameSiteStrictMode,
	})
}

// LogOut ends the login r's cookie holds, and tells the browser to drop
// the cookie.
func (l *Logins) LogOut(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(l.cookie); err == nil {
		l.mu.Lock()
		delete(l.logins, sha256.Sum256([]byte(c.Value)))
		l.mu.Unlock()
	}
	http.SetCookie(w, &http.Cookie{
		Name: l.cookie, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode,
	})
}

// NewLink makes a login link's secret, good for one use within
// LoginLinkTTL.
func (l *Logins) NewLink() string {
	secret := rand.Text()
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	for k, expires := range l.links {
		if !now.Before(expires) {
			delete(l.links, k)
		}
	}
	l.links[sha256.Sum256([]byte(secret))] = now.Add(LoginLinkTTL)
	return secret
}

// UseLink says whether secret is a login link's that is unused and
// unexpired, and uses it up.
func (l *Logins) UseLink(secret string) bool {
	k := sha256.Sum256([]byte(secret))
	l.mu.Lock()
	defer l.mu.Unlock()
	expires, ok := l.links[k]
	delete(l.links, k)
	return ok && l.now().Before(expires)
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
