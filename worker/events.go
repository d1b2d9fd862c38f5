package worker

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nid-dev/nid/nidclient"
	"github.com/nid-dev/nid/workflows"
)

// Event stream settings. Temporal has no push for workflow state, so the
// stream polls as `nid watch` does: one visibility list and one events query
// per session each interval.
const (
	eventsEvery     = 500 * time.Millisecond
	eventsKeepAlive = 15 * time.Second
	maxBacklog      = 200
	eventsParallel  = 8
)

// SSE event names on GET /api/events.
const (
	// SSEEvent carries one workflows.Event.
	SSEEvent = "event"
	// SSESessions carries the session.list answer whenever it changed.
	SSESessions = "sessions"
)

type streamFilter struct {
	group, name string
	backlog     int
}

func parseStreamFilter(r *http.Request) (streamFilter, error) {
	q := r.URL.Query()
	f := streamFilter{group: q.Get("group")}
	if err := groupName("group", f.group, false); err != nil {
		return f, err
	}
	if s := q.Get("session"); s != "" {
		g, n, err := sessionRef(s)
		if err != nil {
			return f, err
		}
		if f.group != "" && f.group != g {
			return f, invalid("session", "%q is not in group %q", s, f.group)
		}
		f.group, f.name = g, n
	}
	if b := q.Get("backlog"); b != "" {
		n, err := strconv.Atoi(b)
		if err != nil || n < 0 || n > maxBacklog {
			return f, invalid("backlog", "%q is not a number of events in 0..%d", b, maxBacklog)
		}
		f.backlog = n
	}
	return f, nil
}

// serveEvents is GET /api/events: server-sent events of every session, a
// group's (?group=) or one session's (?session=GROUP/SESSION), starting with
// the last ?backlog= events of each.
func (a *API) serveEvents(w http.ResponseWriter, r *http.Request) {
	if !a.guard.api(r) {
		writeError(w, &APIError{Status: http.StatusUnauthorized, Code: CodeUnauthorized, Message: "missing or wrong token"})
		return
	}
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		writeError(w, &APIError{Status: http.StatusMethodNotAllowed, Code: CodeMethodNotAllowed, Message: "/api/events takes GET"})
		return
	}
	f, err := parseStreamFilter(r)
	if err != nil {
		writeError(w, asAPIError(err))
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeError(w, &APIError{Status: http.StatusInternalServerError, Code: CodeUnavailable, Message: "streaming unsupported"})
		return
	}
	if f.name != "" {
		// An unknown session is an error now, not a silent empty stream.
		if _, err := nidclient.QuerySession(r.Context(), a.c, f.group, f.name); err != nil {
			writeError(w, asAPIError(a.notFound(r.Context(), err, "session", f.group, f.name)))
			return
		}
	}
	select {
	case a.streams <- struct{}{}:
		defer func() { <-a.streams }()
	default:
		w.Header().Set("Retry-After", "30")
		writeError(w, &APIError{Status: http.StatusServiceUnavailable, Code: CodeUnavailable,
			Message: fmt.Sprintf("%d event streams are open, as many as this server keeps: close one (a dashboard tab) and try again", cap(a.streams))})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()

	s := &stream{a: a, f: f, w: w, last: map[string]int64{}}
	ctx := r.Context()
	ping := time.Now()
	for first := true; ; first = false {
		wrote := s.poll(ctx, first)
		if wrote {
			ping = time.Now()
		} else if time.Since(ping) > eventsKeepAlive {
			fmt.Fprint(w, ": keep-alive\n\n")
			ping = time.Now()
		}
		flusher.Flush()
		select {
		case <-ctx.Done():
			return
		case <-time.After(eventsEvery):
		}
	}
}

type stream struct {
	a    *API
	f    streamFilter
	w    http.ResponseWriter
	last map[string]int64
	// sessions is the last session list sent.
	sessions []byte
}

func (s *stream) send(name string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", name, b)
}

// poll sends what changed since the last poll and reports whether it sent
// anything. Failures are skipped: the next poll asks again.
func (s *stream) poll(ctx context.Context, first bool) bool {
	sessions, err := nidclient.ListSessions(ctx, s.a.c, s.f.group)
	if err != nil {
		return false
	}
	if s.f.name != "" {
		sessions = slices.DeleteFunc(sessions, func(x nidclient.Session) bool { return x.Name != s.f.name })
	}
	wrote := false
	list := SessionList{Sessions: nonNil(sessions)}
	if b, _ := json.Marshal(list); !bytes.Equal(b, s.sessions) {
		s.sessions = b
		s.send(SSESessions, list)
		wrote = true
	}
	targets := sessions
	if s.f.name != "" && len(targets) == 0 {
		// Visibility may lag behind a session that just started.
		targets = []nidclient.Session{{Group: s.f.group, Name: s.f.name}}
	}
	results := make([][]workflows.Event, len(targets))
	sem := make(chan struct{}, eventsParallel)
	var wg sync.WaitGroup
	for i, t := range targets {
		after := s.last[t.Ref()]
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			results[i], _ = nidclient.QueryEvents(ctx, s.a.c, t.Group, t.Name, after)
		}()
	}
	wg.Wait()
	var events []workflows.Event
	for i, t := range targets {
		evs := results[i]
		last, seen := s.last[t.Ref()]
		if !seen && first {
			evs = evs[max(0, len(evs)-s.f.backlog):]
		}
		for _, e := range results[i] {
			last = max(last, e.Seq)
		}
		s.last[t.Ref()] = last
		events = append(events, evs...)
	}
	slices.SortStableFunc(events, func(x, y workflows.Event) int {
		return cmp.Or(x.At.Compare(y.At), strings.Compare(x.Group+"/"+x.Session, y.Group+"/"+y.Session), cmp.Compare(x.Seq, y.Seq))
	})
	for _, e := range events {
		s.send(SSEEvent, e)
		wrote = true
	}
	return wrote
}
