package worker

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// HTTPLimits bounds what one connection may hold of the worker's HTTP
// server, so that a client that sends slowly, reads slowly or idles cannot
// pile up connections.
type HTTPLimits struct {
	// ReadHeader and Read bound reading a request's headers and the whole
	// request; Write bounds writing an ordinary response; Idle bounds a
	// kept-alive connection between requests.
	ReadHeader, Read, Write, Idle time.Duration
	// StreamWrite bounds each write of a long-lived response (the event
	// stream, an MCP call) instead of Write, which would cut it: a stream
	// lives as long as its reader keeps reading.
	StreamWrite time.Duration
}

// DefaultHTTPLimits are the worker's HTTP limits.
func DefaultHTTPLimits() HTTPLimits {
	return HTTPLimits{ReadHeader: 10 * time.Second, Read: 30 * time.Second, Write: time.Minute, Idle: 2 * time.Minute, StreamWrite: 30 * time.Second}
}

// contentSecurityPolicy lets the dashboard load its own script, style and
// API and nothing else: no inline script or style, no other origin, no
// framing by any page.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// NewHTTPServer is the worker's HTTP server: the MCP endpoint at /mcp/,
// Prometheus metrics at /metrics and the API with the dashboard everywhere
// else, every response with security headers.
func NewHTTPServer(mcp, api, metrics http.Handler, lim HTTPLimits) *http.Server {
	// Shutdown waits for requests to end, and a stream ends only when its
	// reader leaves: closing tells the streams the server is going.
	closing, closed := context.WithCancel(context.Background())
	mux := http.NewServeMux()
	mux.Handle("/mcp/", longLived(mcp, lim.StreamWrite, closing))
	mux.Handle("/metrics", metrics)
	mux.Handle("/api/events", longLived(api, lim.StreamWrite, closing))
	mux.Handle("/", api)
	srv := &http.Server{
		Handler:           secureHeaders(mux),
		ReadHeaderTimeout: lim.ReadHeader,
		ReadTimeout:       lim.Read,
		WriteTimeout:      lim.Write,
		IdleTimeout:       lim.Idle,
	}
	srv.RegisterOnShutdown(closed)
	return srv
}

// stopHTTP shuts srv down, giving requests under way grace to finish, then
// closes what is left. What is left is not an error: net/http counts a
// connection that never sent a request as busy for its first five
// seconds, and an HTTP client may open one it never uses.
func stopHTTP(srv *http.Server, grace time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	err := srv.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		return srv.Close()
	}
	return err
}

// secureHeaders sets headers that keep other pages from framing, sniffing
// or embedding what the server answers.
func secureHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", contentSecurityPolicy)
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Referrer-Policy", "no-referrer")
		hd.Set("Cross-Origin-Opener-Policy", "same-origin")
		hd.Set("Cross-Origin-Resource-Policy", "same-origin")
		h.ServeHTTP(w, r)
	})
}

// longLived serves a response that may outlive the server's write timeout
// (an event stream, an MCP call waiting on a workflow): each write gets d
// from when it starts, so a reader that stops reading is still cut off.
// (The read timeout needs nothing: net/http lifts it once the request body
// is read.) The response ends when closing is done, as when its reader
// leaves.
func longLived(h http.Handler, d time.Duration, closing context.Context) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		defer context.AfterFunc(closing, cancel)()
		h.ServeHTTP(&streamWriter{ResponseWriter: w, rc: http.NewResponseController(w), d: d}, r.WithContext(ctx))
	})
}

// streamWriter moves the connection's write deadline before every write.
type streamWriter struct {
	http.ResponseWriter
	rc *http.ResponseController
	d  time.Duration
}

func (s *streamWriter) extend() { _ = s.rc.SetWriteDeadline(time.Now().Add(s.d)) }

func (s *streamWriter) WriteHeader(code int) {
	s.extend()
	s.ResponseWriter.WriteHeader(code)
}

func (s *streamWriter) Write(b []byte) (int, error) {
	s.extend()
	return s.ResponseWriter.Write(b)
}

// Flush flushes the response as http.Flusher does.
func (s *streamWriter) Flush() {
	s.extend()
	_ = s.rc.Flush()
}

// Unwrap lets http.ResponseController reach the connection.
func (s *streamWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }
