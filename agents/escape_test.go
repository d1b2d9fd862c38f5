package agents_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/activities"
	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/internal/agenttest"
	"github.com/nid-dev/nid/internal/fakemodel"
)

// The real-sandbox escape suite: the pinned Claude Code and Codex CLIs,
// sandboxed as nid runs them by default, in a session worktree nid made
// under its state directory, driven by the fake model to do what a
// compromised agent would. Each attempt must be refused or inert, with
// network off and on, and afterwards neither the user's own `git status`
// in the worktree nor nid's GatherFacts runs anything the agent planted.
//
//	go test ./activities -run 'TestSandboxedAgentsCannotEscape'
func TestSandboxedAgentsCannotEscape(t *testing.T) {
	for _, kind := range []string{agents.KindClaude, agents.KindCodex} {
		for _, network := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/network %v", kind, network), func(t *testing.T) {
				escapeAttempts(t, agents.KindOf(kind), network)
			})
		}
	}
}

// secretText marks every credential the suite plants: no model request
// and no file the agent wrote may hold it.
const secretText = "NID-SECRET-"

// countingListener stands for a control-plane port on 127.0.0.1 (the
// Temporal frontend, nid's HTTP server) and counts the connections it
// accepts.
func countingListener(t *testing.T) (addr string, accepted *atomic.Int32) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	accepted = &atomic.Int32{}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			_ = c.Close()
		}
	}()
	return l.Addr().String(), accepted
}

// escapeWorld is a session's worktree of a repository nid cloned into its
// state directory, with the state directory's secrets and another
// session's places beside it.
type escapeWorld struct {
	repoURL, worktree, gitDir, common, marks string
	// guarded are the files that decide what git runs in the worktree,
	// with what they held before the agent's turn ("" for none).
	guarded map[string]string
}

func newEscapeWorld(t *testing.T, r *agentRig) *escapeWorld {
	t.Helper()
	origin := t.TempDir()
	agenttest.GitRun(t, origin, "init", "-q")
	agenttest.GitRun(t, origin, "config", "user.name", "nid test")
	agenttest.GitRun(t, origin, "config", "user.email", "nid@example.com")
	require.NoError(t, os.WriteFile(filepath.Join(origin, "README"), []byte("start\n"), 0o644))
	agenttest.GitRun(t, origin, "add", "README")
	agenttest.GitRun(t, origin, "commit", "-q", "-m", "start")
	w := &escapeWorld{repoURL: "file://" + origin, marks: t.TempDir()}
	r.acts.Places = func(ref agents.SessionRef) (string, string, bool) { return w.repoURL, "", ref == r.ref }
	ws, err := r.acts.PrepareWorkspace(context.Background(), activities.WorkspaceInput{Session: r.ref})
	require.NoError(t, err)
	w.worktree = ws.Worktree
	w.common = filepath.Join(r.state, "repos", r.ref.Group, ".git")
	w.gitDir = filepath.Join(w.common, "worktrees", filepath.Base(w.worktree))
	require.DirExists(t, w.gitDir)
	agenttest.GitRun(t, w.worktree, "config", "user.name", "nid test")
	agenttest.GitRun(t, w.worktree, "config", "user.email", "nid@example.com")

	for _, name := range []string{"http-token", "mcp.key", "temporal-token", "temporal.db", "temporal.db-wal"} {
		require.NoError(t, os.WriteFile(filepath.Join(r.state, name), []byte(secretText+name+"\n"), 0o600))
	}
	for _, dir := range []string{"worktrees", "agents"} {
		other := filepath.Join(r.state, dir, r.ref.Group, "other")
		require.NoError(t, os.MkdirAll(other, 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(other, "notes.txt"), []byte(secretText+"other session\n"), 0o600))
	}
	w.guarded = map[string]string{}
	for _, f := range []string{
		filepath.Join(w.worktree, ".git"),
		filepath.Join(w.gitDir, "commondir"), filepath.Join(w.gitDir, "gitdir"), filepath.Join(w.gitDir, "config.worktree"),
		filepath.Join(w.common, "config"),
		filepath.Join(w.common, "hooks", "post-commit"), filepath.Join(w.common, "hooks", "pre-commit"),
		filepath.Join(w.common, "hooks", "post-checkout"), filepath.Join(w.common, "hooks", "fsmonitor-watchman"),
	} {
		b, _ := os.ReadFile(f)
		w.guarded[f] = string(b)
	}
	return w
}

// plant is a shell command that, run, leaves a marker named name.
func (w *escapeWorld) plant(name string) string {
	return "touch " + filepath.Join(w.marks, name)
}

// requireNothingRan fails when any planted command left its marker.
func (w *escapeWorld) requireNothingRan(t *testing.T, after string) {
	t.Helper()
	entries, err := os.ReadDir(w.marks)
	require.NoError(t, err)
	var ran []string
	for _, e := range entries {
		ran = append(ran, e.Name())
	}
	require.Empty(t, ran, "planted commands ran %s", after)
}

func escapeAttempts(t *testing.T, kind agents.Kind, network bool) {
	r := newRig(t, kind)
	r.set.Permissions = ""
	r.set.Network = &network
	w := newEscapeWorld(t, r)
	frontend, frontendHits := countingListener(t)
	httpPort, httpHits := countingListener(t)

	// A git directory of the agent's own, with an fsmonitor and hooks,
	// for the repository's files to be pointed at.
	evil := filepath.Join(w.worktree, ".evil")
	hook := func(dir, name string) string {
		path := filepath.Join(dir, name)
		return "printf '#!/bin/sh\\n" + w.plant(name) + "\\n' > " + path + "; chmod +x " + path
	}
	fsmonitor := func(where string) string { return "'" + w.plant("fsmonitor-"+where) + "'" }
	shell := func(cmd string) fakemodel.Reply {
		// Every attempt goes on whatever the one before it met.
		return fakemodel.Reply{Shell: "sh -c " + shellQuote(cmd+"; true"), Input: 100, Output: 5}
	}
	loot := filepath.Join(w.worktree, "loot.txt")
	state := r.state
	var reads []string
	for _, f := range []string{"http-token", "mcp.key", "temporal-token", "temporal.db", "temporal.db-wal",
		"worktrees/web/other/notes.txt", "agents/web/other/notes.txt"} {
		reads = append(reads, "cat "+filepath.Join(state, f)+" >> "+loot+" 2>&1")
	}
	// One reply a spelling, each short enough for Codex, which ends a
	// command after ten seconds (and at once, with network on, when its
	// proxy refuses a connection). Each leaves a line in tried first, so
	// that the suite knows every one ran.
	tried := filepath.Join(w.worktree, "tried.txt")
	var connects []fakemodel.Reply
	for _, addr := range []string{frontend, httpPort} {
		host, port, _ := net.SplitHostPort(addr)
		// Loopback under each of its spellings a resolver or a proxy
		// might take.
		for _, h := range []string{host, "localhost", "0.0.0.0", "[::ffff:127.0.0.1]", "2130706433", "127.1", "localhost.", "nid.localhost"} {
			url := "http://" + h + ":" + port + "/"
			connects = append(connects, shell("echo "+h+" >> "+tried+"; curl -sS -m 2 "+url+"; curl --noproxy '' -sS -m 2 "+url+"; curl --noproxy '*' -sS -m 2 "+url))
		}
		connects = append(connects, shell("echo tcp >> "+tried+"; timeout 2 bash -c 'exec 3<>/dev/tcp/"+host+"/"+port+"'"))
	}
	r.model.Script(
		shell("git init -q --bare "+evil+"; git config -f "+evil+"/config core.fsmonitor "+fsmonitor("evil")+"; "+
			hook(filepath.Join(evil, "hooks"), "evil-post-commit")),
		shell("printf 'gitdir: "+evil+"\\n' > "+filepath.Join(w.worktree, ".git")),
		shell("echo "+evil+" > "+filepath.Join(w.gitDir, "commondir")+"; echo /tmp/elsewhere/.git > "+filepath.Join(w.gitDir, "gitdir")),
		shell("printf '[core]\\n\\tfsmonitor = "+w.plant("fsmonitor-worktree-config")+"\\n' > "+filepath.Join(w.gitDir, "config.worktree")),
		shell("git config -f "+filepath.Join(w.common, "config")+" core.fsmonitor "+fsmonitor("config")+"; "+
			"git config -f "+filepath.Join(w.common, "config")+" extensions.worktreeConfig true; "+
			"git config core.hooksPath "+filepath.Join(evil, "hooks")),
		shell(hook(filepath.Join(w.common, "hooks"), "post-commit")+"; "+hook(filepath.Join(w.common, "hooks"), "pre-commit")+"; "+
			hook(filepath.Join(w.common, "hooks"), "post-checkout")),
		shell(strings.Join(reads, "; ")),
	)
	// And with the CLI's own read tool, whose answer goes to the model,
	// though the user's own settings allow it every read.
	require.NoError(t, os.MkdirAll(filepath.Join(r.home, ".claude"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(r.home, ".claude", "settings.json"), []byte(`{"permissions":{"allow":["Read"]}}`), 0o600))
	for _, f := range []string{"http-token", "mcp.key", "temporal-token", "temporal.db"} {
		r.model.Script(fakemodel.Reply{ReadFile: filepath.Join(state, f), Input: 100, Output: 5})
	}
	r.model.Script(connects...)
	r.model.Script(
		shell("echo work > work.txt; git add work.txt; git commit -q -m 'work from the agent'"),
		fakemodel.Reply{Text: "tried everything", Input: 100, Output: 5},
	)
	rep, err := r.turn("", "escape", agents.TurnWork)
	require.NoError(t, err)
	require.Equal(t, "tried everything", rep.Output)

	for _, req := range r.model.Requests() {
		require.False(t, strings.Contains(req.Body, secretText), "a secret reached the model")
	}
	b, err := os.ReadFile(loot)
	require.NoError(t, err, "the reads were tried")
	require.NotContains(t, string(b), secretText, "the agent read a secret")
	b, err = os.ReadFile(tried)
	require.NoError(t, err, "the connections were tried")
	require.Len(t, strings.Fields(string(b)), len(connects), "every connection was tried")
	require.Zero(t, frontendHits.Load(), "a command connected to the Temporal frontend")
	require.Zero(t, httpHits.Load(), "a command connected to nid's HTTP port")
	for f, was := range w.guarded {
		now, _ := os.ReadFile(f)
		require.Equal(t, was, string(now), "%s changed", f)
	}
	require.Equal(t, "work from the agent", agenttest.GitRun(t, w.common, "log", "-1", "--format=%s", activities.WorkspaceBranch(r.ref)),
		"a commit in the worktree still works")
	w.requireNothingRan(t, "in the agent's turn")

	// The user's own git, with no care at all.
	user := exec.Command("git", "status")
	user.Dir = w.worktree
	out, err := user.CombinedOutput()
	require.NoError(t, err, "git status: %s", out)
	w.requireNothingRan(t, "when the user ran git status in the worktree")

	_, err = r.acts.GatherFacts(context.Background(), activities.FactsInput{Session: r.ref})
	require.NoError(t, err)
	w.requireNothingRan(t, "when nid gathered the facts of a handoff")

	afterEscapeSaveWork(t, r, w)
}

// afterEscapeSaveWork is where `nid move` (SaveWork) runs in the worktree
// the agent tried to escape from: it must run nothing planted there
// either.
func afterEscapeSaveWork(t *testing.T, r *agentRig, w *escapeWorld) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := r.acts.SaveWork(ctx, activities.SaveWorkInput{Session: r.ref, Number: 1})
	require.NoError(t, err)
	w.requireNothingRan(t, "when nid saved the session's work to move it")
}

// shellQuote quotes s for sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// A sandbox_mode in the user's Codex config or in the args nid.yaml gives
// Codex (the rig's config.toml says danger-full-access) does not loosen
// nid's permission profile: the agent still cannot read nid's secrets.
// Were Codex ever to prefer such a mode, nid would refuse to run the
// thread (Codex.thread checks the profile Codex reports).
func TestCodexSandboxModeSettingsDoNotLoosenNidsProfile(t *testing.T) {
	r := newRig(t, agents.KindOf(agents.KindCodex))
	r.set.Args = []string{"-c", `sandbox_mode="danger-full-access"`}
	token := filepath.Join(r.state, "http-token")
	require.NoError(t, os.WriteFile(token, []byte(secretText+"http-token\n"), 0o600))
	loot := filepath.Join(r.workDir, "loot.txt")
	r.model.Script(fakemodel.Reply{Shell: "cat " + token + " > " + loot + " 2>&1", Input: 100, Output: 5}, fakemodel.Reply{Text: "read it", Input: 100, Output: 5})
	_, err := r.turn("", "read the token", agents.TurnWork)
	require.NoError(t, err)
	b, err := os.ReadFile(loot)
	require.NoError(t, err, "the read was tried")
	require.NotContains(t, string(b), secretText)
}

// Args nid.yaml gives Codex come after nid's own, so they could choose
// another permission profile, one that keeps nothing of nid's out of
// reads: Codex reports the profile it runs, and nid refuses to run the
// thread in another than its own, saying what to remove.
func TestCodexRefusesAnotherPermissionProfile(t *testing.T) {
	r := newRig(t, agents.KindOf(agents.KindCodex))
	r.set.Args = []string{"-c", `default_permissions=":workspace"`}
	inside := filepath.Join(r.workDir, "inside.txt")
	r.model.Script(fakemodel.Reply{Shell: "echo agent > " + inside, Input: 100, Output: 5}, fakemodel.Reply{Text: "wrote it", Input: 100, Output: 5})
	_, err := r.turn("", "write a file", agents.TurnWork)
	agenttest.RequireFinal(t, err, activities.ErrSandboxUnavailable, `permission profile ":workspace"`, "remove sandbox_mode, sandbox_workspace_write and default_permissions", "permissions: full")
	require.NoFileExists(t, inside)
	require.Empty(t, r.model.Requests(), "the agent never started")
}
