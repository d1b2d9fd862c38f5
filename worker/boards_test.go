package worker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/internal/temporaltest"
	"github.com/nid-dev/nid/workflows"
)

// fakeGroup answers board queries with a board whose one task is titled
// after the query's number; a query waits while hold is closed off.
type fakeGroup struct {
	mu      sync.Mutex
	queries int
	hold    chan struct{} // when not nil, queries wait for it to close
	fail    error
	now     time.Time
}

func (g *fakeGroup) query(ctx context.Context, _ string) (workflows.BoardView, error) {
	g.mu.Lock()
	g.queries++
	n, hold, fail := g.queries, g.hold, g.fail
	g.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return workflows.BoardView{}, ctx.Err()
		}
	}
	if fail != nil {
		return workflows.BoardView{}, fail
	}
	return workflows.BoardView{Tasks: []workflows.Task{{ID: "t1", Title: fmt.Sprintf("answer %d", n), Status: workflows.TaskTodo}}}, nil
}

func (g *fakeGroup) clock() time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.now
}

func (g *fakeGroup) pass(d time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.now = g.now.Add(d)
}

func (g *fakeGroup) holdQueries() chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.hold = make(chan struct{})
	return g.hold
}

func (g *fakeGroup) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.queries
}

func newFakeBoards() (*Boards, *fakeGroup) {
	g := &fakeGroup{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	return newBoards(g.query, g.clock), g
}

// The sessions of a group on one host share a board read while it is
// fresh, and the ones reading while a query runs share that query.
func TestBoardReadsShareOneQueryWhileFresh(t *testing.T) {
	b, g := newFakeBoards()
	hold := g.holdQueries()
	var reads sync.WaitGroup
	texts := make([]string, 10)
	for i := range texts {
		reads.Go(func() {
			var err error
			texts[i], err = b.Text(t.Context(), "web", fmt.Sprintf("s%d", i))
			require.NoError(t, err)
		})
	}
	require.Eventually(t, func() bool { return g.count() == 1 }, 10*time.Second, time.Millisecond)
	close(hold)
	reads.Wait()
	for _, text := range texts {
		require.Contains(t, text, "answer 1")
	}
	require.Equal(t, 1, g.count(), "ten sessions reading at once: one query")

	g.mu.Lock()
	g.hold = nil
	g.mu.Unlock()
	g.pass(boardFresh / 2)
	text, err := b.Text(t.Context(), "web", "s1")
	require.NoError(t, err)
	require.Contains(t, text, "answer 1", "still fresh")
	g.pass(boardFresh)
	text, err = b.Text(t.Context(), "web", "s1")
	require.NoError(t, err)
	require.Contains(t, text, "answer 2", "read again once no longer fresh")
	require.NotContains(t, text, "as of")
}

// A group too busy to answer within boardPatience is read from the board
// last read, which says how old it is; with none read yet, the read waits
// for the group.
func TestBoardReadTheGroupDoesNotAnswerAtOnce(t *testing.T) {
	b, g := newFakeBoards()
	hold := g.holdQueries()
	first := make(chan string)
	go func() {
		text, err := b.Text(t.Context(), "web", "s1")
		require.NoError(t, err)
		first <- text
	}()
	select {
	case <-first:
		t.Fatal("a first read answered before the group did")
	case <-time.After(2 * boardPatience):
	}
	close(hold)
	require.Contains(t, <-first, "answer 1")

	g.holdQueries()
	g.pass(3 * time.Second)
	text, err := b.Text(t.Context(), "web", "s2")
	require.NoError(t, err)
	require.Contains(t, text, "answer 1")
	require.Contains(t, text, "This board is as of 3s ago: the group did not answer at once")
}

// A claim or a lock a session of this host sent is in every board read
// after it while the group answers in time: a board asked for before it is
// not shared again, nor the answer to a query sent before it. A busy
// group's readers are given the last board, saying that what was changed
// since is not in it.
func TestBoardReadAfterAChangeAsksTheGroup(t *testing.T) {
	b, g := newFakeBoards()
	text, err := b.Text(t.Context(), "web", "s1")
	require.NoError(t, err)
	require.Contains(t, text, "answer 1")

	b.Changed("web")
	text, err = b.Text(t.Context(), "web", "s1")
	require.NoError(t, err)
	require.Contains(t, text, "answer 2", "fresh, but read before the change")
	text, err = b.Text(t.Context(), "web", "s3")
	require.NoError(t, err)
	require.Contains(t, text, "answer 2", "s3 shares the board asked for after the change")

	// A query under way when a change is made: its answer goes to the
	// read that waited for it, and is not shared.
	hold := g.holdQueries()
	b.Changed("web")
	early := make(chan string)
	go func() {
		text, err := b.Text(context.Background(), "web", "s2")
		require.NoError(t, err)
		early <- text
	}()
	require.Eventually(t, func() bool { return g.count() == 3 }, 10*time.Second, time.Millisecond)
	b.Changed("web")
	close(hold)
	require.Contains(t, <-early, "answer 3")
	g.mu.Lock()
	g.hold = nil
	g.mu.Unlock()
	text, err = b.Text(t.Context(), "web", "s1")
	require.NoError(t, err)
	require.Contains(t, text, "answer 4", "the answer to a query sent before the change is not shared")

	g.pass(2 * time.Second)
	b.Changed("web")
	hold = g.holdQueries()
	text, err = b.Text(t.Context(), "web", "s1")
	require.NoError(t, err)
	require.Contains(t, text, "answer 4")
	require.Contains(t, text, "as of 2s ago: the group did not answer at once. Claims and locks made since, yours included, are not in it")
	close(hold)
}

// A query that fails says so when no board was read before, and is not
// kept: the next read asks again. Once one was, a failed query is answered
// with it, saying how old it is.
func TestBoardReadThatFailsIsNotKept(t *testing.T) {
	b, g := newFakeBoards()
	g.fail = errors.New("no such group")
	_, err := b.Text(t.Context(), "web", "s1")
	require.ErrorContains(t, err, "group web: no such group")
	g.fail = nil
	text, err := b.Text(t.Context(), "web", "s1")
	require.NoError(t, err)
	require.Contains(t, text, "answer 2")

	g.pass(5 * time.Second)
	g.fail = errors.New("context deadline exceeded")
	text, err = b.Text(t.Context(), "web", "s1")
	require.NoError(t, err)
	require.Contains(t, text, "answer 2")
	require.Contains(t, text, "as of 5s ago")
}

// board_read on a real group: a lock a session takes through the worker's
// MCP routing is in the board it reads next, though the board read a
// moment before is still fresh (temporalSessions.BoardUpdate tells Boards).
func TestBoardReadShowsTheLockItsSessionJustTook(t *testing.T) {
	env := temporaltest.New(t)
	c := env.Client(t)
	startNode(t, env.Config(t, "  web:\n    tasks:\n      - {title: write the parser}\n    sessions:\n      - {agent: sim, name: lead, sim: {turnDelay: 1h}}\n"))
	sessions := temporalSessions{c: c, boards: NewBoards(c)}

	before, err := sessions.Board(t.Context(), "web", "lead")
	require.NoError(t, err)
	require.Contains(t, before, "Locks: none held.")
	_, err = sessions.BoardUpdate(t.Context(), "web", workflows.UpdateLockAcquire, workflows.BoardRequest{Session: "lead", Lock: "src/parser.go"})
	require.NoError(t, err)
	after, err := sessions.Board(t.Context(), "web", "lead")
	require.NoError(t, err)
	require.NotContains(t, after, "Locks: none held.")
	require.Contains(t, after, "src/parser.go")
}
