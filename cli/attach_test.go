package cli

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/internal/temporaltest"
	"github.com/nid-dev/nid/nidclient"
	"github.com/nid-dev/nid/workflows"
)

// fakeAttach is a session as nid attach sees it through attachOps: the
// hold itself is the workflow's, tested there; these tests are about what
// the command does around it.
type fakeAttach struct {
	mu sync.Mutex
	// view is the session's view; waiting, if any, the views the polls
	// see, one each, before view.
	view    workflows.SessionView
	waiting []workflows.SessionView
	answer  workflows.AttachAnswer
	refusal error
	back    workflows.Handback

	attached []workflows.AttachRequest
	released []string
}

func (f *fakeAttach) View(context.Context, string, string) (workflows.SessionView, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.waiting) > 0 {
		v := f.waiting[0]
		f.waiting = f.waiting[1:]
		return v, nil
	}
	return f.view, nil
}

func (f *fakeAttach) Attach(_ context.Context, _, _ string, req workflows.AttachRequest) (workflows.AttachAnswer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.attached = append(f.attached, req)
	return f.answer, f.refusal
}

func (f *fakeAttach) Renew(context.Context, string, string, string) error { return nil }

func (f *fakeAttach) Release(_ context.Context, _, _, lease string) (workflows.Handback, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.released = append(f.released, lease)
	return f.back, nil
}

func percent(p float64) *float64 { return &p }

// An exec session on box-a, idle, at 41% of 200k.
func execSession() workflows.SessionView {
	return workflows.SessionView{Group: "web", Name: "lead", Agent: agents.KindExec, Host: "box-a", Status: workflows.StatusIdle,
		Spec: agents.AgentSpec{Kind: agents.KindExec}}
}

func contextAt(p float64, turns int) workflows.ContextRecord {
	return workflows.ContextRecord{Usage: agents.Usage{UsedTokens: int64(p * 2000), WindowTokens: 200000}, Percent: percent(p), Turns: turns}
}

// built records the command nid attach was given to run.
type built struct {
	mu           sync.Mutex
	conv         string
	generation   int
	calls        int
	exitWithCode string
}

func (b *built) build(_ context.Context, _ workflows.SessionView, conv string, generation int) (*exec.Cmd, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.conv, b.generation, b.calls = conv, generation, b.calls+1
	return exec.Command("sh", "-c", "exit "+b.exitWithCode), nil
}

var attachBoxA = attachOptions{Group: "web", Name: "lead", Host: "box-a", Who: "alice@box-a"}

func TestAttachRunsTheCommandThenHandsBackAndSaysWhatItFound(t *testing.T) {
	f := &fakeAttach{view: execSession(),
		answer: workflows.AttachAnswer{Ready: true, Conversation: "c-1", Generation: 3, Context: contextAt(41, 7)},
		back: workflows.Handback{Who: "alice@box-a", Before: contextAt(41, 7), After: contextAt(58, 10), HandTurns: 3, Conversation: "c-2",
			Note: "the transcript ended mid-line"}}
	b := &built{exitWithCode: "3"}
	var out, errOut bytes.Buffer
	// The person's CLI exiting non-zero is how they left it, not a failure
	// of nid attach.
	require.NoError(t, runAttach(context.Background(), f, b.build, attachBoxA, &out, &errOut))
	require.Equal(t, "handed back: context 41% of 200k → 58% of 200k, 3 turns by hand; conversation c-2\n  the transcript ended mid-line\n", out.String())
	require.Equal(t, "nid: attached to web/lead as alice@box-a; exit to hand it back\n", errOut.String())
	require.Equal(t, "c-1", b.conv)
	require.Equal(t, 3, b.generation)
	require.Len(t, f.attached, 1)
	req := f.attached[0]
	require.Equal(t, "alice@box-a", req.Who)
	require.Equal(t, "box-a", req.Host)
	require.Regexp(t, "^[0-9a-f]{32}$", req.Lease, "a random 128-bit lease")
	require.Equal(t, []string{req.Lease}, f.released, "handed back once, by the lease it took")
}

func TestAttachRefusesASessionOfAnotherHostAndSendsNothing(t *testing.T) {
	f := &fakeAttach{view: execSession()}
	b := &built{}
	opts := attachBoxA
	opts.Host = "box-b"
	err := runAttach(context.Background(), f, b.build, opts, &bytes.Buffer{}, &bytes.Buffer{})
	require.EqualError(t, err, "web/lead runs on host box-a, not on this one (box-b): run nid attach web/lead on box-a, or bring it here first with nid move web/lead box-b")
	require.Empty(t, f.attached, "no hold asked for")
	require.Zero(t, b.calls, "nothing started")
}

// The same against a real session: the session runs on testhost, and nid
// attach on box-a says so and leaves the session as it was.
func TestAttachFromAnotherHostAgainstARealSession(t *testing.T) {
	t.Parallel()
	s := newSite(t, `  web:
    sessions:
      - {agent: sim, name: lead, sim: {turnDelay: 0s}}
`)
	out, _, err := s.nid("attach", "web/lead", "--host", "box-a")
	require.EqualError(t, err, "web/lead runs on host "+temporaltest.Host+", not on this one (box-a): run nid attach web/lead on "+temporaltest.Host+
		", or bring it here first with nid move web/lead box-a")
	require.Empty(t, out)
	v := temporaltest.WaitSession(t, s.c, "web", "lead", "to be idle", func(v workflows.SessionView) bool { return v.Status == workflows.StatusIdle })
	require.Nil(t, v.Attach, "no hold taken")
}

func TestAttachSaysTheRefusalInOneSentence(t *testing.T) {
	refusal := "web/lead is attached by bob@box-a since 15:02 (lease renewed 4s ago); wait for them to hand it back"
	f := &fakeAttach{view: execSession(), refusal: &nidclient.RefusedError{Message: refusal}}
	b := &built{}
	err := runAttach(context.Background(), f, b.build, attachBoxA, &bytes.Buffer{}, &bytes.Buffer{})
	require.EqualError(t, err, refusal)
	require.Zero(t, b.calls)
	require.Empty(t, f.released, "a hold not taken is not handed back")
}

func TestAttachWaitsForTheRunningTurnThenResumesTheConversationItLeft(t *testing.T) {
	waiting := execSession()
	waiting.Attach = &workflows.AttachView{Who: "alice@box-a", WaitingForTurn: 4}
	ready := execSession()
	ready.Attach = &workflows.AttachView{Who: "alice@box-a", Ready: true}
	ready.Conversation, ready.Generation = "c-after-turn-4", 2
	f := &fakeAttach{view: ready, waiting: []workflows.SessionView{waiting, waiting},
		answer: workflows.AttachAnswer{WaitingForTurn: 4, Conversation: "c-before", Generation: 1}}
	b := &built{exitWithCode: "0"}
	var errOut bytes.Buffer
	require.NoError(t, runAttach(context.Background(), f, b.build, attachBoxA, &bytes.Buffer{}, &errOut))
	require.Equal(t, 1, strings.Count(errOut.String(), "nid: waiting for turn 4 of web/lead to end…\n"), errOut.String())
	require.Equal(t, "c-after-turn-4", b.conv, "the conversation as the turn left it")
	require.Equal(t, 2, b.generation)
	require.Len(t, f.released, 1)
}

func TestAttachInterruptedWhileWaitingLetsTheHoldGo(t *testing.T) {
	waiting := execSession()
	waiting.Attach = &workflows.AttachView{Who: "alice@box-a", WaitingForTurn: 4}
	f := &fakeAttach{view: waiting, answer: workflows.AttachAnswer{WaitingForTurn: 4}}
	b := &built{}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(time.Second, cancel) // Ctrl-C
	err := runAttach(ctx, f, b.build, attachBoxA, &bytes.Buffer{}, &bytes.Buffer{})
	require.EqualError(t, err, "interrupted while waiting for turn 4 of web/lead to end: the hold is let go and nothing was started")
	require.Zero(t, b.calls, "nothing started")
	require.Len(t, f.released, 1, "the hold is handed back")
}

func TestAttachCommandFlagIsForExecAgentsOnly(t *testing.T) {
	v := execSession()
	v.Agent, v.Spec.Kind = agents.KindClaude, agents.KindClaude
	f := &fakeAttach{view: v}
	opts := attachBoxA
	opts.Command = "bash"
	err := runAttach(context.Background(), f, (&built{}).build, opts, &bytes.Buffer{}, &bytes.Buffer{})
	require.EqualError(t, err, "--command is for exec agents: web/lead is a Claude Code session, which attaches with its own CLI")
	require.Empty(t, f.attached)
}

func TestAttachArgumentErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no session", []string{"attach"}, "nid attach takes one GROUP/SESSION, e.g. nid attach web/lead (got 0 arguments)"},
		{"two sessions", []string{"attach", "web/lead", "web/worker"}, "nid attach takes one GROUP/SESSION, e.g. nid attach web/lead (got 2 arguments)"},
		{"a group", []string{"attach", "web"}, `"web" is not a session: write GROUP/SESSION, e.g. web/lead`},
		{"a malformed session", []string{"attach", "web/Lead!"}, `"web/Lead!" is not a session`},
		{"--command without its value", []string{"attach", "web/lead", "--command"}, "flag needs an argument: --command"},
		{"a blank --command", []string{"attach", "web/lead", "--command", " "}, "--command is blank: name the program to run, e.g. --command bash"},
		{"unknown flag", []string{"attach", "web/lead", "--shell", "zsh"}, "flag provided but not defined: --shell (see nid attach --help"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A nil client: none of these may reach Temporal.
			_, _, err := runApp(t, Deps{}, tt.args...)
			require.ErrorContains(t, err, tt.want)
		})
	}
}

// nid attach --help says everything a person needs before taking a
// session over: what runs for each kind, the hold, the hand-back, the
// lease and the host.
func TestAttachHelpSaysWhatAttachingDoes(t *testing.T) {
	out, _, err := runApp(t, Deps{}, "attach", "--help")
	require.NoError(t, err)
	help := strings.Join(strings.Fields(out), " ")
	for _, want := range []string{
		"nid attach [command options] GROUP/SESSION",
		"Claude Code its interactive CLI, resumed on the session's conversation",
		"Codex its interactive CLI, resumed on the session's thread",
		"exec your $SHELL, or the program --command names",
		"sim refused",
		"sandbox, permissions, environment, settings, model and nid MCP tools",
		"its status is attached",
		"no turn starts, nid send and nid rotate queue and say so, and its policy does not rotate it",
		"waiting for turn N to end",
		"A second nid attach is refused, naming who holds the session",
		"context before and after and the turns you took by hand",
		"a context over its threshold rotates at once, and the queued messages are delivered",
		"lease nid attach renews every 10s",
		"kill -9, a lost ssh connection",
		"takes the hold back within a minute",
		"a restart of nid up meanwhile changes nothing",
		"it says which host runs it and starts nothing there",
		"nid move GROUP/SESSION THIS-HOST",
		"--command CMD", "--host NAME", "--config FILE",
	} {
		require.Contains(t, help, want)
	}

	out, _, err = runApp(t, Deps{}, "--help")
	require.NoError(t, err)
	require.Regexp(t, `(?m)^\s+attach\s+Take a session over in its agent's own terminal, then hand it back$`, out)
}

func TestAttachCompletion(t *testing.T) {
	complete := func(words ...string) []string {
		t.Helper()
		out, errOut, err := runApp(t, Deps{}, append(words, "--generate-bash-completion")...)
		require.NoError(t, err, errOut)
		return strings.Fields(out)
	}
	require.Contains(t, complete(""), "attach")
	require.Equal(t, []string{"--command", "--config"}, complete("attach", "web/lead", "--co"))
	require.Empty(t, complete("attach", "web/lead", "--command", ""), "a program: the shell completes a file name")
}

// lostHold is a session that took its hold back while nid attach still
// ran its command (the lease ran out while nid could not be reached): the
// renewals it is sent are signals, which it takes without a word.
type lostHold struct {
	fakeAttach
	lost chan struct{}
}

func (f *lostHold) View(ctx context.Context, g, n string) (workflows.SessionView, error) {
	select {
	case <-f.lost:
		v := execSession()
		v.Status = workflows.StatusWorking
		return v, nil
	default:
		return f.fakeAttach.View(ctx, g, n)
	}
}

func TestAttachSaysWhenTheSessionTookItsHoldBack(t *testing.T) {
	defer func(was time.Duration) { attachRenewEvery = was }(attachRenewEvery)
	attachRenewEvery = 50 * time.Millisecond
	held := execSession()
	held.Attach = &workflows.AttachView{Who: "alice@box-a", Ready: true}
	f := &lostHold{fakeAttach: fakeAttach{view: held, answer: workflows.AttachAnswer{Ready: true, Conversation: "c-1"}}, lost: make(chan struct{})}
	close(f.lost)
	var errOut temporaltest.SyncBuffer
	build := func(context.Context, workflows.SessionView, string, int) (*exec.Cmd, error) {
		return exec.Command("sleep", "0.5"), nil
	}
	require.NoError(t, runAttach(context.Background(), f, build, attachBoxA, &bytes.Buffer{}, &errOut))
	require.Equal(t, 1, strings.Count(errOut.String(), "web/lead is no longer held by this nid attach"), errOut.String())
	require.Contains(t, errOut.String(), "it is working now")
}

// The attached CLI sends the session's MCP token to the address its host's
// worker announced: an announcement is a signal any Temporal client can
// send, so one naming another machine is not believed.
func TestAttachSendsTheMCPTokenOnlyToThisMachine(t *testing.T) {
	cfg := &config.Config{HTTP: config.HTTP{Listen: "127.0.0.1:7777"}}
	hosts := func(url string) workflows.HostsView {
		var h workflows.HostView
		h.Name, h.HTTP = "box-a", url
		return workflows.HostsView{Hosts: []workflows.HostView{h}}
	}
	require.Equal(t, "http://127.0.0.1:41234", attachMCPBase(cfg, hosts("http://127.0.0.1:41234"), "box-a"), "the port the worker got")
	for _, planted := range []string{"http://evil.example:80", "http://203.0.113.9:7777", "https://127.0.0.1:1", "http://u:p@127.0.0.1:1"} {
		require.Equal(t, "http://127.0.0.1:7777", attachMCPBase(cfg, hosts(planted), "box-a"), planted)
	}
}

func TestAttachStartsNothingWhenTheSessionMovedWhileItWaited(t *testing.T) {
	waiting := execSession()
	waiting.Attach = &workflows.AttachView{Who: "alice@box-a", WaitingForTurn: 4}
	moved := execSession()
	moved.Host = "box-b"
	moved.Attach = &workflows.AttachView{Who: "alice@box-a", Ready: true}
	f := &fakeAttach{view: moved, waiting: []workflows.SessionView{waiting}, answer: workflows.AttachAnswer{WaitingForTurn: 4}}
	b := &built{}
	err := runAttach(context.Background(), f, b.build, attachBoxA, &bytes.Buffer{}, &bytes.Buffer{})
	require.EqualError(t, err, "web/lead moved to host box-b while its turn ended: the hold is let go and nothing was started here; run nid attach web/lead on box-b")
	require.Zero(t, b.calls, "nothing started on the wrong host")
	require.Len(t, f.released, 1, "the hold is handed back")
}

// slowAttach is a session whose hold takes long to be given (its agent is
// slow to close), and that counts the renewals it is sent.
type slowAttach struct {
	fakeAttach
	renewals atomic.Int32
	during   int32
}

func (f *slowAttach) Attach(ctx context.Context, g, n string, req workflows.AttachRequest) (workflows.AttachAnswer, error) {
	time.Sleep(300 * time.Millisecond)
	f.during = f.renewals.Load()
	return f.fakeAttach.Attach(ctx, g, n, req)
}

func (f *slowAttach) Renew(context.Context, string, string, string) error {
	f.renewals.Add(1)
	return nil
}

func TestAttachRenewsTheLeaseWhileTheHoldIsGiven(t *testing.T) {
	defer func(was time.Duration) { attachRenewEvery = was }(attachRenewEvery)
	attachRenewEvery = 50 * time.Millisecond
	held := execSession()
	held.Attach = &workflows.AttachView{Who: "alice@box-a", Ready: true}
	f := &slowAttach{fakeAttach: fakeAttach{view: held, answer: workflows.AttachAnswer{Ready: true, Conversation: "c-1"}}}
	var errOut temporaltest.SyncBuffer
	require.NoError(t, runAttach(context.Background(), f, (&built{exitWithCode: "0"}).build, attachBoxA, &bytes.Buffer{}, &errOut))
	require.Positive(t, f.during, "the lease was renewed while the session closed its agent")
	require.NotContains(t, errOut.String(), "no longer held")
}

// A CLI killed while it holds the terminal in its modes (alternate
// screen, hidden cursor, mouse and key reports) leaves the person a
// terminal that works again.
func TestAttachGivesTheTerminalBackAfterAKilledCLI(t *testing.T) {
	ptmx, tty, err := pty.Open()
	require.NoError(t, err)
	defer ptmx.Close()
	defer tty.Close()
	var seen temporaltest.SyncBuffer
	go func() { _, _ = io.Copy(&seen, ptmx) }()
	cmd := exec.Command("sh", "-c", `printf '\033[?1049h\033[?25l'; kill -9 $$`)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	require.Error(t, runInTerminal(cmd))
	require.Eventually(t, func() bool { return strings.Contains(seen.String(), "\x1b[?1049l\x1b[?25h") }, 5*time.Second, 20*time.Millisecond,
		"the terminal's modes were not undone: %q", seen.String())
}

// envAttachChild, set, makes the test binary play nid attach for
// TestTheAttachedCommandEndsWithNidAttach: it runs a command as nid attach
// runs the CLI, having printed the command's pid.
const envAttachChild = "NIDTEST_ATTACH_CHILD"

// A nid attach killed with -9 in a person's shell takes the CLI it started
// with it: left running in the terminal, the CLI would go on with the
// session's conversation while the session, its lease run out, goes on
// with it too.
func TestTheAttachedCommandEndsWithNidAttach(t *testing.T) {
	if os.Getenv(envAttachChild) != "" {
		cmd := exec.Command("sh", "-c", "echo $$; exec sleep 300")
		cmd.Stdout = os.Stdout
		_ = runInTerminal(cmd)
		return
	}
	if runtime.GOOS != "linux" {
		t.Skip("only Linux ties a child's life to its parent's")
	}
	nidAttach := exec.Command(os.Args[0], "-test.run=^TestTheAttachedCommandEndsWithNidAttach$")
	nidAttach.Env = append(os.Environ(), envAttachChild+"=1")
	out, err := nidAttach.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, nidAttach.Start())
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	require.NoError(t, err)
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })

	require.NoError(t, nidAttach.Process.Signal(syscall.SIGKILL))
	_ = nidAttach.Wait()
	require.Eventually(t, func() bool {
		// Gone, or a zombie no one has reaped yet: either way, ended.
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		return err != nil || strings.Contains(string(stat), ") Z ")
	}, 5*time.Second, 50*time.Millisecond, "the command nid attach ran outlived it")
}
