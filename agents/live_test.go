package agents

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type fakeLive struct{ ended chan struct{} }

func newFakeLive() *fakeLive                       { return &fakeLive{ended: make(chan struct{})} }
func (f *fakeLive) end()                           { close(f.ended) }
func (f *fakeLive) wait(ctx context.Context) error { <-f.ended; return nil }
func (f *fakeLive) isEnded() bool {
	select {
	case <-f.ended:
		return true
	default:
		return false
	}
}

// A session's process is ended for sitting idle only if it still is the
// session's and no request uses it; one request at a time uses it.
func TestLiveProcsEndOnlyAnIdleProcess(t *testing.T) {
	procs := newLiveProcs[*fakeLive]()
	procs.setIdle(0) // no timers: the test expires processes itself
	ctx := context.Background()

	_, done, err := procs.use(ctx, "s")
	require.NoError(t, err)
	p := newFakeLive()
	procs.set("s", p)
	procs.expire("s", p)
	require.False(t, p.isEnded(), "a request uses it")

	busy, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, _, err = procs.use(busy, "s")
	require.ErrorIs(t, err, context.DeadlineExceeded, "a second request waits for the first")
	done()

	got, done, err := procs.use(ctx, "s")
	require.NoError(t, err)
	require.Same(t, p, got)
	q := newFakeLive()
	procs.drop("s", p)
	procs.set("s", q)
	done()
	procs.expire("s", p)
	require.False(t, q.isEnded(), "an earlier process's timer ends nothing of the next one")

	procs.expire("s", q)
	require.True(t, q.isEnded())
	got, done, err = procs.use(ctx, "s")
	require.NoError(t, err)
	require.Nil(t, got, "the ended process is no longer the session's")
	done()
}
