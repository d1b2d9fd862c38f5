package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/worker"
	"github.com/nid-dev/nid/workflows"
)

// gitRepo makes a repository with one commit.
func gitRepo(t *testing.T) string {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"-c", "user.email=nid@example.com", "-c", "user.name=nid", "commit", "-q", "--allow-empty", "-m", "start"},
	} {
		out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
		require.NoError(t, err, string(out))
	}
	return dir
}

func (s *site) board(group string) workflows.BoardView {
	s.t.Helper()
	var boards []workflows.BoardView
	require.NoError(s.t, json.Unmarshal([]byte(s.mustNid("board", group, "--json")), &boards))
	require.Len(s.t, boards, 1)
	return boards[0]
}

// mcpCall calls one of nid's tools as the session's agent would, through
// the session's own MCP URL with its current conversation's token.
func (s *site) mcpCall(group, name, tool string, args map[string]any) *mcp.CallToolResult {
	s.t.Helper()
	return s.mcpCallAs(group, name, s.session(s.client(), group, name).Generation, tool, args)
}

// mcpCallAs calls one of nid's tools as the agent of the session's
// conversation of generation would.
func (s *site) mcpCallAs(group, name string, generation int, tool string, args map[string]any) *mcp.CallToolResult {
	s.t.Helper()
	key, err := os.ReadFile(filepath.Join(s.dir, ".nid", "mcp.key"))
	require.NoError(s.t, err)
	url := worker.NewMCPEndpoint(key, nil, "http://127.0.0.1:"+strconv.Itoa(s.http)).URL(agents.SessionRef{Group: group, Name: name}, generation)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, nil)
	require.NoError(s.t, err)
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	require.NoError(s.t, err)
	return res
}

func TestTeamWorksThroughTheBoardInItsOwnWorktrees(t *testing.T) {
	repo := gitRepo(t)
	s := newSite(t, `  web:
    goal: Add dark mode
    repo: `+repo+`
    rotate: {mode: off}
    tasks:
      - title: Dark mode toggle
      - title: Settings page
        detail: the form that holds the toggle
      - title: Persist the choice
      - title: Docs
    sessions:
      - agent: sim
        name: lead
        sim: {turnDelay: 20ms, taskTurns: 2}
      - agent: sim
        name: worker
        sim: {turnDelay: 20ms, taskTurns: 2}
`)
	s.up()
	s.eventually("every task done", 2*time.Minute, func() bool {
		for _, task := range s.board("web").Tasks {
			if task.Status != workflows.TaskDone {
				return false
			}
		}
		return true
	})
	out := s.mustNid("board", "web")
	require.Regexp(t, `(?m)^TASK\s+STATUS\s+HOLDER\s+TITLE$`, out)
	require.Regexp(t, `(?m)^t4\s+done\s+web/(lead|worker)\s+Docs$`, out, "a done task names who did it")

	c := s.client()
	for _, name := range []string{"lead", "worker"} {
		v := s.session(c, "web", name)
		require.Equal(t, "nid/web/"+name, v.Branch)
		require.Equal(t, filepath.Join(s.dir, ".nid", "worktrees", "web", name), v.Worktree)
		head, err := exec.Command("git", "-C", v.Worktree, "rev-parse", "--abbrev-ref", "HEAD").Output()
		require.NoError(t, err)
		require.Equal(t, "nid/web/"+name, strings.TrimSpace(string(head)), "the worktree is on the session's own branch")
		require.Equal(t, workflows.StatusIdle, v.Status, "nothing left: idle")
	}
	list, err := exec.Command("git", "-C", repo, "worktree", "list").Output()
	require.NoError(t, err)
	require.Contains(t, string(list), "[nid/web/lead]")
	require.Contains(t, string(list), "[nid/web/worker]")

	// A new task wakes an idle session.
	out = s.mustNid("board", "add", "web", "Changelog", "--detail", "one line")
	require.Contains(t, out, "added task t5 to web: Changelog")
	s.eventually("the new task done", time.Minute, func() bool { return s.board("web").Tasks[4].Status == workflows.TaskDone })
}

func TestHandoffKeepsClaimAndLockAndBriefsWithTheBoard(t *testing.T) {
	s := newSite(t, `  web:
    goal: Add dark mode
    rotate: {mode: off}
    tasks:
      - title: Dark mode toggle
    sessions:
      - agent: sim
        name: lead
        sim: {turnDelay: 100ms, taskTurns: 100000}
      - agent: sim
        name: worker
        sim: {turnDelay: 100ms, taskTurns: 100000}
`)
	s.up()
	s.eventually("lead to hold the task", time.Minute, func() bool {
		t1 := s.board("web").Tasks[0]
		return t1.Holder != ""
	})
	holder := s.board("web").Tasks[0].Holder
	res := s.mcpCall("web", holder, agents.ToolLockAcquire, map[string]any{"name": "src/settings.tsx"})
	require.False(t, res.IsError)
	other := map[string]string{"lead": "worker", "worker": "lead"}[holder]
	refused := s.mcpCall("web", other, agents.ToolLockAcquire, map[string]any{"name": "src/settings.tsx"})
	require.True(t, refused.IsError, "another session cannot take the lock")

	c := s.client()
	before := s.session(c, "web", holder)
	s.mustNid("rotate", "web/"+holder, "--mode", "handoff")
	s.eventually("the handoff", time.Minute, func() bool { return s.session(c, "web", holder).Context.Rotations == 1 })

	after := s.session(c, "web", holder)
	require.NotEqual(t, before.Conversation, after.Conversation)
	require.NotNil(t, after.Task)
	require.Equal(t, "t1", after.Task.ID, "the claim survives the rotation")
	require.Equal(t, []string{"src/settings.tsx"}, after.Locks, "so does the lock")
	require.Equal(t, before.WorkDir, after.WorkDir)

	// The fresh conversation's first message carries the board.
	var conv struct {
		FirstMessage string `json:"firstMessage"`
	}
	b, err := os.ReadFile(filepath.Join(s.dir, ".nid", "sim", "web", holder, after.Conversation+".json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &conv))
	require.Contains(t, conv.FirstMessage, "The board (what board_read shows):")
	require.Contains(t, conv.FirstMessage, "t1 [claimed] Dark mode toggle (claimed by "+holder+") <- yours")
	require.Contains(t, conv.FirstMessage, "src/settings.tsx (held by "+holder+") <- yours")

	// Stopping releases what it held, and says so.
	out := s.mustNid("stop", "web/"+holder)
	first, _, _ := strings.Cut(out, "\n")
	require.Equal(t, "stopped web/"+holder+"; released task t1, lock src/settings.tsx", first)
	s.eventually("the other session to take the task", time.Minute, func() bool {
		return s.board("web").Tasks[0].Holder == other
	})
	// The session itself stops its agent after the board has let go.
	s.eventually("the session to stop", time.Minute, func() bool {
		return s.session(c, "web", holder).Status == workflows.StatusStopped
	})
}

func TestBudgetStopsTheGroupAtNTurns(t *testing.T) {
	s := newSite(t, `  web:
    goal: Spend it
    rotate: {mode: off}
    budget: {turns: 6}
    sessions:
      - agent: sim
        name: lead
        sim: {turnDelay: 10ms}
      - agent: sim
        name: worker
        sim: {turnDelay: 10ms}
`)
	s.up()
	s.eventually("both paused", time.Minute, func() bool {
		rows := s.ls()
		return rows["web/lead"].Status == workflows.StatusPaused && rows["web/worker"].Status == workflows.StatusPaused
	})
	rows := s.ls()
	require.Equal(t, 6, rows["web/lead"].Turns+rows["web/worker"].Turns, "exactly N turns across the group")
	show := s.mustNid("group", "show", "web")
	require.Contains(t, show, "turns 6 of 6 spent (0 left)")
	require.Contains(t, show, "exhausted (turns)")
	inbox := s.mustNid("inbox", "web")
	require.Equal(t, 1, strings.Count(inbox, "budget exhausted (turns)"), inbox)

	// A manual rotation still runs while the budget is spent.
	s.mustNid("rotate", "web/lead", "--mode", "handoff")
	s.eventually("the manual rotation", time.Minute, func() bool { return s.ls()["web/lead"].Context.Rotations == 1 })
	require.Equal(t, 6, s.ls()["web/lead"].Turns+s.ls()["web/worker"].Turns, "a rotation is no work turn")

	// Raising the budget resumes the group, up to the new limit.
	out := s.mustNid("group", "set", "web", `budget={"turns":12}`)
	require.Contains(t, out, "web budget: turns")
	s.eventually("paused again at the new limit", time.Minute, func() bool {
		rows := s.ls()
		return rows["web/lead"].Status == workflows.StatusPaused && rows["web/worker"].Status == workflows.StatusPaused &&
			s.board("web").Spent.Turns >= 12
	})
	var view workflows.GroupView
	require.NoError(t, json.Unmarshal([]byte(s.mustNid("group", "show", "web", "--json")), &view))
	require.EqualValues(t, 12, view.Board.Spent.Turns, "the rotation's turns were charged, then work filled the rest")
}

// A budgeted session waits for the group's grant before every turn, so the
// grant often arrives in the very task that continues the session as new;
// it must be carried into the next run, or the session waits forever.
func TestBudgetHoldsAcrossContinueAsNew(t *testing.T) {
	s := newSite(t, `  web:
    goal: Many small turns
    rotate: {mode: off}
    budget: {turns: 1200}
    sessions:
      - agent: sim
        name: lead
        sim: {turnDelay: 0s, tokensPerTurn: 1, window: 100000000}
`)
	s.up()
	last, moved := 0, time.Now()
	s.eventually("1200 turns, then paused", 5*time.Minute, func() bool {
		row := s.ls()["web/lead"]
		if row.Turns != last {
			last, moved = row.Turns, time.Now()
		}
		require.Less(t, time.Since(moved), 90*time.Second, "the session stalled at %d turns", last)
		return row.Status == workflows.StatusPaused
	})
	board := s.board("web")
	require.Equal(t, 1200, s.ls()["web/lead"].Turns,
		"exactly the budget, across several runs (the board spent %+v, granted %v)", board.Spent, board.Grants)
}
