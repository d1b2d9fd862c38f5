package worker

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/nid-dev/nid/nidclient"
)

// Event stream settings. Temporal has no push for workflow state, so the
// stream polls as `nid watch` does (see nidclient.Feed), each interval
// while there is news and less often while there is none
// (nidclient.QuietPolls).
const (
	eventsEvery     = 500 * time.Millisecond
	eventsKeepAlive = 15 * time.Second
	maxBacklog      = 200
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
	ctx := r.Context()
	feed := nidclient.NewFeed(a.c, nidclient.FeedOptions{Group: f.group, Name: f.name, Backlog: f.backlog, Listing: a.listing})
	// The first poll comes before the answer's status: an unknown group or
	// session is an error, not a silent empty stream.
	poll, err := feed.Poll(ctx)
	if err != nil {
		writeError(w, asAPIError(err))
		return
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

	s := &stream{w: w}
	ping := time.Now()
	pace := nidclient.Pace{Every: eventsEvery}
	for {
		news := s.show(poll)
		if news {
			ping = time.Now()
		} else if time.Since(ping) > eventsKeepAlive {
			fmt.Fprint(w, ": keep-alive\n\n")
			ping = time.Now()
		}
		flusher.Flush()
		select {
		case <-ctx.Done():
			return
		case <-time.After(pace.Next(news)):
		}
		// A failed poll is skipped: the next one asks again.
		poll, _ = feed.Poll(ctx)
	}
}

type stream struct {
	w http.ResponseWriter
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

// show sends what a poll found, the session list only when it changed, and
// reports whether it sent anything.
func (s *stream) show(poll nidclient.FeedPoll) bool {
	wrote := false
	list := SessionList{Sessions: nonNil(poll.Sessions)}
	if b, _ := json.Marshal(list); !bytes.Equal(b, s.sessions) {
		s.sessions = b
		s.send(SSESessions, list)
		wrote = true
	}
	for _, e := range poll.Events {
		s.send(SSEEvent, e)
		wrote = true
	}
	return wrote
}
