package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.temporal.io/api/serviceerror"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The SDK's own words for an outage, as its worker logs them: every poller
// of every worker says the first, and every running activity's heartbeat
// the second, so one stopped server is a dozen raw lines at warn.
const (
	sdkPollFailed      = "Failed to poll for task."
	sdkHeartbeatFailed = "RecordActivityHeartbeat with error"
)

// sdkRepeatEvery is how long the worded line about an unreachable server
// stays said: a server down for an hour is mentioned six times, not at
// every poll.
const sdkRepeatEvery = 10 * time.Minute

// sdkHandler is the handler the SDK logs through: nid's own, except that
// the SDK's complaints about a server it cannot reach are kept at debug and
// said once in words, with the address the user configured, instead.
type sdkHandler struct {
	slog.Handler
	// plain is the handler without the attributes the SDK added (its
	// worker's id, task queue, namespace): the worded line is one for the
	// whole process.
	plain   slog.Handler
	address string
	said    *saidOnce
}

// saidOnce is shared by a handler and those derived from it, since the SDK
// adds attributes (the worker's task queue, an activity's id) to each
// logger it hands out and the outage is one for all of them.
type saidOnce struct {
	mu   sync.Mutex
	last time.Time
}

// due says whether the worded line is to be said now, and notes it said.
func (s *saidOnce) due(now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.last.IsZero() && now.Sub(s.last) < sdkRepeatEvery {
		return false
	}
	s.last = now
	return true
}

// newSDKHandler wraps h for a client of the Temporal server at address.
func newSDKHandler(h slog.Handler, address string) slog.Handler {
	return sdkHandler{Handler: h, plain: h, address: address, said: &saidOnce{}}
}

func (h sdkHandler) Handle(ctx context.Context, r slog.Record) error {
	switch r.Message {
	case sdkPollFailed:
		if h.said.due(r.Time) {
			if err := h.plain.Handle(ctx, h.worded(r)); err != nil {
				return err
			}
		}
	case sdkHeartbeatFailed:
		// A heartbeat lost with the server is covered by the line above;
		// one the server refused cancels the activity, which says so.
	default:
		return h.Handler.Handle(ctx, r)
	}
	if !h.Handler.Enabled(ctx, slog.LevelDebug) {
		return nil
	}
	debug := r.Clone()
	debug.Level = slog.LevelDebug
	return h.Handler.Handle(ctx, debug)
}

// worded is the one line a user reads about a failed poll.
func (h sdkHandler) worded(r slog.Record) slog.Record {
	var cause error
	r.Attrs(func(a slog.Attr) bool {
		if err, ok := a.Value.Any().(error); ok {
			cause = err
			return false
		}
		return true
	})
	why := "it does not answer"
	if cause != nil && !unanswered(cause) {
		why = cause.Error()
	}
	msg := fmt.Sprintf("this worker cannot take work from Temporal at %s: %s; it keeps trying, and says so again in %s if it still cannot",
		h.address, why, spoken(sdkRepeatEvery))
	return slog.NewRecord(r.Time, slog.LevelWarn, msg, r.PC)
}

func (h sdkHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return sdkHandler{Handler: h.Handler.WithAttrs(as), plain: h.plain, address: h.address, said: h.said}
}

func (h sdkHandler) WithGroup(name string) slog.Handler {
	return sdkHandler{Handler: h.Handler.WithGroup(name), plain: h.plain, address: h.address, said: h.said}
}

// unanswered says whether err is a server that did not answer (stopped,
// stopping or unreachable), as gRPC or the SDK's service errors put it.
func unanswered(err error) bool {
	var un *serviceerror.Unavailable
	var de *serviceerror.DeadlineExceeded
	return errors.As(err, &un) || errors.As(err, &de) || errors.Is(err, context.DeadlineExceeded) ||
		status.Code(err) == codes.Unavailable || status.Code(err) == codes.DeadlineExceeded
}

// spoken renders a duration as people say it: "10 minutes", not the
// "10m0s" of time.Duration's String.
func spoken(d time.Duration) string {
	plural := func(n int64, unit string) string {
		if n == 1 {
			return "1 " + unit
		}
		return fmt.Sprintf("%d %ss", n, unit)
	}
	switch {
	case d >= time.Hour && d%time.Hour == 0:
		return plural(int64(d/time.Hour), "hour")
	case d >= time.Minute && d%time.Minute == 0:
		return plural(int64(d/time.Minute), "minute")
	case d >= time.Second && d%time.Second == 0:
		return plural(int64(d/time.Second), "second")
	}
	return d.String()
}
