package worker

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/nid-dev/nid/nidclient"
	"github.com/nid-dev/nid/workflows"
)

// Boards answers agents' board_read for the sessions this worker serves.
// A read is a query to the group workflow, which the server answers with
// a workflow task of its own behind the group's busy ones: in a group of
// a thousand sessions at a turn every 30 s, one read in a hundred waited
// over a second, the ones that met the group continuing as new or
// replaying. So the sessions of a group on this host share one query
// while it runs and its answer for boardFresh after, and a read the group
// has not answered within boardPatience, or at all, is answered from the
// board last read, saying how old it is. Claims and locks are updates the group
// checks against its own state, so an older board misleads no one into
// holding what another holds, and the answer says that the claims and
// locks made since, the reader's own included, are not in it. A board
// change a session of this host makes (Changed) ends the sharing of the
// boards asked for before it: while the group answers in time, a session
// reads its own claims and locks.
type Boards struct {
	query func(ctx context.Context, group string) (workflows.BoardView, error)
	now   func() time.Time

	mu      sync.Mutex
	last    map[string]*boardQuery // the newest answered, by group
	running map[string]*boardQuery // the one in flight, by group
	changes map[string]int         // Changed calls, by group
}

// boardQuery is one query of a group's board.
type boardQuery struct {
	view workflows.BoardView
	err  error
	// changes is the group's Changed count when the query was sent: an
	// answer to a query sent before a change is not shared as fresh, only
	// given late (Boards.late) when the group does not answer.
	changes int
	at      time.Time     // when it was answered
	done    chan struct{} // closed once answered
}

const (
	// boardFresh is how long a board read is given again to the
	// group's other sessions on this host: the group's turns change it
	// a few times a second at most for any one task or lock.
	boardFresh = time.Second
	// boardPatience is how long a read waits for the group before it is
	// answered from the board last read.
	boardPatience = 500 * time.Millisecond
	// boardQueryTimeout bounds a query that a read left running.
	boardQueryTimeout = time.Minute
)

// NewBoards reads boards through c.
func NewBoards(c client.Client) *Boards {
	return newBoards(func(ctx context.Context, group string) (workflows.BoardView, error) {
		g, err := nidclient.QueryGroup(ctx, c, group)
		return g.Board, err
	}, time.Now)
}

func newBoards(query func(context.Context, string) (workflows.BoardView, error), now func() time.Time) *Boards {
	return &Boards{query: query, now: now, last: map[string]*boardQuery{}, running: map[string]*boardQuery{}, changes: map[string]int{}}
}

// Changed says a session of this host changed group's board (a claim, a
// lock): reads from now on ask the group, rather than share a board asked
// for before, and do not join a query under way.
func (b *Boards) Changed(group string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.changes[group]++
	delete(b.running, group)
}

// Text is the board of group as board_read shows it to session.
func (b *Boards) Text(ctx context.Context, group, session string) (string, error) {
	b.mu.Lock()
	last := b.last[group]
	if last != nil && last.changes == b.changes[group] && b.now().Sub(last.at) < boardFresh {
		b.mu.Unlock()
		return workflows.BoardText(last.view, session), nil
	}
	q := b.running[group]
	if q == nil {
		q = &boardQuery{changes: b.changes[group], done: make(chan struct{})}
		b.running[group] = q
		go b.run(group, q)
	}
	b.mu.Unlock()

	patience := time.NewTimer(boardPatience)
	defer patience.Stop()
	select {
	case <-q.done:
	case <-ctx.Done():
		return "", ctx.Err()
	case <-patience.C:
		if last != nil {
			return b.late(last, session), nil
		}
		select {
		case <-q.done:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	switch {
	case q.err == nil:
		return workflows.BoardText(q.view, session), nil
	case last != nil:
		return b.late(last, session), nil
	}
	return "", fmt.Errorf("group %s: %w", group, q.err)
}

// late is the board last read, for a read the group did not answer in
// time or at all, saying how old it is.
func (b *Boards) late(last *boardQuery, session string) string {
	age := b.now().Sub(last.at).Round(100 * time.Millisecond)
	return workflows.BoardText(last.view, session) +
		fmt.Sprintf("\n(This board is as of %s ago: the group did not answer at once. Claims and locks made since, yours included, are not in it; the group checks every claim and lock against its own board.)\n", age)
}

// run asks the group for its board for q, which every read waiting on it
// then shares, and keeps the answer as the last one.
func (b *Boards) run(group string, q *boardQuery) {
	ctx, cancel := context.WithTimeout(context.Background(), boardQueryTimeout)
	defer cancel()
	view, err := b.query(ctx, group)
	b.mu.Lock()
	q.view, q.err, q.at = view, err, b.now()
	if b.running[group] == q {
		delete(b.running, group)
	}
	if last := b.last[group]; err == nil && (last == nil || q.changes >= last.changes) {
		b.last[group] = q
	}
	b.mu.Unlock()
	close(q.done)
}
