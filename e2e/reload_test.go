package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/internal/temporaltest"
	"github.com/nid-dev/nid/workflows"
)

// nid.yaml is the truth for who is in a team: a dry run says what applying
// it changes and changes nothing; nid reload and SIGHUP apply it to the
// running nid (new groups and sessions start, a changed goal arrives,
// sessions that left the file are stopped with their claims released); a
// bad file changes nothing.
func TestReloadAppliesTheFile(t *testing.T) {
	s := newSite(t, `  web:
    goal: Add dark mode
    rotate: {mode: off}
    tasks:
      - title: Toggle
      - title: Settings page
    sessions:
      - {agent: sim, name: lead, sim: {turnDelay: 200ms, taskTurns: 100000}}
      - {agent: sim, name: worker, sim: {turnDelay: 200ms, taskTurns: 100000}}
  api:
    goal: Rate limits
    rotate: {mode: off}
    sessions:
      - {agent: sim, name: solo, sim: {turnDelay: 200ms}}
`)
	up := s.up()
	s.eventually("both web sessions holding a task", time.Minute, func() bool {
		b := s.board("web")
		return len(b.Tasks) == 2 && b.Tasks[0].Holder != "" && b.Tasks[1].Holder != ""
	})
	var workersTask string
	for _, task := range s.board("web").Tasks {
		if task.Holder == "worker" {
			workersTask = task.ID
		}
	}

	// The file changes: web gets a new goal and a critic, loses its worker;
	// api leaves the file; ops is new.
	s.groups = `  web:
    goal: Add dark mode everywhere
    rotate: {mode: off}
    tasks:
      - title: Toggle
      - title: Settings page
    sessions:
      - {agent: sim, name: lead, sim: {turnDelay: 200ms, taskTurns: 100000}}
      - {agent: sim, name: critic, sim: {turnDelay: 200ms, taskTurns: 100000}}
  ops:
    goal: Watch the deploys
    rotate: {mode: off}
    sessions:
      - {agent: sim, name: pager, sim: {turnDelay: 200ms}}
`
	s.writeConfig()
	plan := s.mustNid("up", "--dry-run")
	for _, line := range []string{
		`web: goal "Add dark mode" → "Add dark mode everywhere"`,
		"start session web/critic (sim)",
		"stop web/worker: it left nid.yaml (its claims and locks go back to the board)",
		"stop api/solo: it left nid.yaml",
		"start group ops with sessions pager",
	} {
		require.Contains(t, plan, line)
	}
	time.Sleep(2 * time.Second)
	rows := s.ls()
	require.NotContains(t, rows, "web/critic", "a dry run starts nothing")
	require.NotEqual(t, workflows.StatusStopped, rows["web/worker"].Status, "and stops nothing")

	out := s.mustNid("reload")
	require.Contains(t, out, "start session web/critic (sim)")
	require.Contains(t, out, "asked nid (process")
	s.eventually("the file applied", time.Minute, func() bool {
		rows := s.ls()
		return rows["web/critic"].Status != "" && rows["ops/pager"].Status != "" &&
			rows["web/worker"].Status == workflows.StatusStopped && rows["api/solo"].Status == workflows.StatusStopped
	})
	show := s.mustNid("group", "show", "web")
	require.Contains(t, show, "Add dark mode everywhere")
	inbox := s.mustNid("inbox", "web")
	require.Contains(t, inbox, "web/worker stopped: it left nid.yaml; released task "+workersTask)
	s.eventually("the worker's task taken by another", time.Minute, func() bool {
		for _, task := range s.board("web").Tasks {
			if task.ID == workersTask {
				return task.Holder != "" && task.Holder != "worker"
			}
		}
		return false
	})

	// SIGHUP does the same; a bad file changes nothing and says why.
	s.groups = strings.Replace(s.groups, "      - {agent: sim, name: pager, sim: {turnDelay: 200ms}}\n",
		"      - {agent: sim, name: pager, sim: {turnDelay: 200ms}}\n      - {agent: sim, name: second, sim: {turnDelay: 200ms}}\n", 1)
	s.writeConfig()
	require.NoError(t, up.cmd.Process.Signal(syscall.SIGHUP))
	s.eventually("the new session from SIGHUP", time.Minute, func() bool { return s.ls()["ops/second"].Status != "" })
	good := s.groups
	s.groups = "  ops:\n    rotate: {mode: sometimes}\n    sessions: [{agent: sim}]\n"
	s.writeConfig()
	require.NoError(t, up.cmd.Process.Signal(syscall.SIGHUP))
	s.eventually("the bad file refused", time.Minute, func() bool {
		return strings.Contains(up.out.String(), `nid: reload: `) && strings.Contains(up.out.String(), "nothing changed")
	})
	require.Contains(t, up.out.String(), `"sometimes" is not one of auto, compact, handoff, off`)
	s.groups = good // nid ls reads the file too
	s.writeConfig()
	rows = s.ls()
	require.NotEqual(t, workflows.StatusStopped, rows["web/lead"].Status, "the bad file stopped nothing")
	require.NotEqual(t, workflows.StatusStopped, rows["ops/second"].Status)

	// With nid stopped there is nothing to reload, and nid reload says so.
	require.NoError(t, up.interrupt(t))
	_, errOut, code := s.nid("reload")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "no nid up or nid worker is running on ")
}

// What runs comes from the worker's nid.yaml at every turn: a reload that
// changes a session's command reaches its next turn.
func TestReloadChangesWhatTheNextTurnRuns(t *testing.T) {
	dir := t.TempDir()
	script := func(name, says string) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte("#!/bin/sh\ncat >/dev/null\necho "+says+"\n"), 0o755))
		return path
	}
	first, second := script("first.sh", "first command"), script("second.sh", "second command")
	group := func(command string) string {
		return "  web:\n    goal: Keep going\n    rotate: {mode: off}\n    sessions:\n" +
			"      - {agent: exec, name: tool, command: " + command + ", permissions: full}\n"
	}
	s := newSite(t, group(first))
	up := s.up()
	// No transcript until the first turn writes one.
	transcript := func() string {
		out, _, _ := s.nid("transcript", "web/tool")
		return out
	}
	s.eventually("a turn of the first command", time.Minute, func() bool {
		return strings.Contains(transcript(), "first command")
	})
	s.groups = group(second)
	s.writeConfig()
	s.mustNid("reload")
	s.eventually("the running nid saying what it reloaded", time.Minute, func() bool {
		return strings.Contains(up.out.String(), "nid: reload: web/tool: agent settings changed")
	})
	s.eventually("a turn of the second command", time.Minute, func() bool {
		return strings.Contains(transcript(), "second command")
	})
}

// With --keep-removed a session that left nid.yaml keeps running: nid
// reload says so and stops nothing; a nid up without the flag stops it.
func TestReloadKeepRemoved(t *testing.T) {
	both := `  web:
    goal: Keep going
    rotate: {mode: off}
    sessions:
      - {agent: sim, name: lead, sim: {turnDelay: 200ms}}
      - {agent: sim, name: worker, sim: {turnDelay: 200ms}}
`
	s := newSite(t, both)
	up := s.up("--keep-removed")
	s.eventually("both sessions working", time.Minute, func() bool {
		rows := s.ls()
		return rows["web/lead"].Turns > 0 && rows["web/worker"].Turns > 0
	})
	s.groups = strings.Replace(both, "      - {agent: sim, name: worker, sim: {turnDelay: 200ms}}\n", "", 1)
	s.writeConfig()
	keeps := "web/worker left nid.yaml and keeps running (--keep-removed); nid stop web/worker stops it"
	require.Contains(t, s.mustNid("reload"), keeps)
	s.eventually("the running nid saying so", time.Minute, func() bool {
		return strings.Contains(up.out.String(), "nid: reload: "+keeps)
	})
	turns := s.ls()["web/worker"].Turns
	s.eventually("web/worker taking turns still", time.Minute, func() bool { return s.ls()["web/worker"].Turns > turns })
	require.NotContains(t, s.mustNid("inbox", "web"), "left nid.yaml")
	require.NoError(t, up.interrupt(t))

	up = s.up()
	s.eventually("web/worker stopped by nid up without the flag", time.Minute, func() bool {
		return s.ls()["web/worker"].Status == workflows.StatusStopped
	})
	require.Contains(t, up.out.String(), "nid: stop web/worker: it left nid.yaml")
	require.NoError(t, up.interrupt(t))
}

// nid up --dry-run says what nid up would start when nothing runs yet;
// then it compares the file with what runs, from → to, naming what nid
// group set set (kept while the file's own value is unchanged, replaced
// once the file changes it) and the settings the running nid takes only
// when it restarts.
func TestDryRunComparesWithWhatRuns(t *testing.T) {
	s := newSite(t, `  web:
    rotate: {mode: off, maxTurns: 5}
    budget: {turns: 100}
    sessions:
      - {agent: sim, name: lead, sim: {turnDelay: 0s}}
`)
	require.Equal(t, "nothing runs on "+filepath.Join(s.dir, ".nid")+" yet (no Temporal server answers at "+s.address()+
		"): nid up would start its embedded Temporal server, then:\nstart group web with sessions lead\n", s.mustNid("up", "--dry-run"))

	s.up()
	require.Equal(t, "nothing to change: the running groups are as the file says\n", s.mustNid("up", "--dry-run"))
	s.mustNid("group", "set", "web", `rotate={"maxTurns":9}`)
	require.Equal(t, "web: rotate keeps what nid group set set: maxTurns 9 (the file says 5); the file's rotate applies when the file changes it\n",
		s.mustNid("up", "--dry-run"))

	s.groups = `  web:
    rotate: {mode: handoff, maxTurns: 7}
    budget: {turns: 200}
    sessions:
      - {agent: sim, name: lead, sim: {turnDelay: 0s}}
`
	s.http = temporaltest.FreePort()
	s.writeConfig()
	require.Equal(t, ""+
		"web: rotate mode off → handoff, maxTurns 9 → 7; replaces what nid group set set: maxTurns 9\n"+
		"web: budget turns 100 → 200\n"+
		"http settings changed: they take effect only when nid restarts (nid reload does not apply them)\n",
		s.mustNid("up", "--dry-run"))
	require.Contains(t, s.mustNid("group", "show", "web"), "maxTurns=9", "a dry run changes nothing")
}
