package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"os/user"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	"go.temporal.io/sdk/client"
	"golang.org/x/term"

	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/nidclient"
	"github.com/nid-dev/nid/worker"
	"github.com/nid-dev/nid/workflows"
)

type attachOptions struct {
	Group, Name string
	// Command is what an exec agent runs instead of $SHELL.
	Command string
	// Host is the host this terminal is on, as its worker names it
	// (worker.host): a session is attached to on its own host only.
	Host string
	// Who is the person, as user@machine, the others see holding it.
	Who string
}

func newAttachCommand(a *app) *cli.Command {
	return &cli.Command{
		Name:      "attach",
		Usage:     "Take a session over in its agent's own terminal, then hand it back",
		ArgsUsage: "GROUP/SESSION",
		Description: "Opens the session's agent interactively in this terminal, on the session's\n" +
			"conversation, and hands the session back to nid when you exit:\n" +
			"  Claude Code  its interactive CLI, resumed on the session's conversation\n" +
			"  Codex        its interactive CLI, resumed on the session's thread\n" +
			"  exec         your $SHELL, or the program --command names\n" +
			"  sim          refused: it has no terminal (nid send and nid transcript instead)\n" +
			"It runs in the session's worktree (or workdir) with the sandbox, permissions,\n" +
			"environment, settings, model and nid MCP tools its turns get, so what you do\n" +
			"there is what the agent could do.\n\n" +
			"While you are attached the session holds: its status is attached (nid ls, nid\n" +
			"show, the dashboard and the event feed say who and since when), no turn\n" +
			"starts, nid send and nid rotate queue and say so, and its policy does not\n" +
			"rotate it. If a turn is running, nid attach says it is waiting for turn N to\n" +
			"end (Ctrl-C then lets the session go); then the session's own agent process\n" +
			"is closed, so that your CLI is the only one on the conversation, and Ctrl-C\n" +
			"is the CLI's. A second nid attach is refused, naming who holds the session.\n\n" +
			"When the CLI exits, however it exits, nid reads what happened from the\n" +
			"vendor's own records (Claude Code's transcript, Codex's rollout) and folds it\n" +
			"into the context record: the conversation you ended in becomes the session's\n" +
			"(a /clear or a new thread included), a compaction you ran counts as one, and\n" +
			"nid attach prints the context before and after and the turns you took by\n" +
			"hand. Then nid carries on as after any turn: a context over its threshold\n" +
			"rotates at once, and the queued messages are delivered.\n\n" +
			"The hold is a lease nid attach renews every 10s. If this terminal or process\n" +
			"dies (kill -9, a lost ssh connection), the session takes the hold back within\n" +
			"a minute and carries on as after an exit; a restart of nid up meanwhile\n" +
			"changes nothing. While nid attach lives, you are never cut off.\n\n" +
			"Run it on the host that runs the session (nid ls shows it): from another host\n" +
			"it says which host runs it and starts nothing there; attach on that host, or\n" +
			"bring the session here first with nid move GROUP/SESSION THIS-HOST.\n\n" +
			"   nid attach web/lead\n" +
			"   nid attach ops/deploy --command bash",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "command", Usage: "Run `CMD` (a program) instead of $SHELL; exec agents only"},
			&cli.StringFlag{Name: "host", Usage: "This host's `NAME`, as nid up here serves under it (default: worker.host, else the hostname)"},
		},
		Action: action(func(cCtx *cli.Context) error {
			args, err := commandArgs(cCtx)
			if err != nil {
				return err
			}
			opts, err := newAttachOptions(args, cCtx.String("command"))
			if err != nil {
				return err
			}
			opts.Who = a.who()
			return a.withConfigClient(cCtx, func(ctx context.Context, cfg *config.Config, c client.Client) error {
				opts.Host = cfg.Worker.Host
				build := func(ctx context.Context, v workflows.SessionView, conv string, generation int) (*exec.Cmd, error) {
					return attachCommand(ctx, c, cfg, v, conv, generation, opts.Command)
				}
				return runAttach(ctx, temporalAttach{c: c}, build, opts, a.Stdout, a.Stderr)
			})
		}),
	}
}

func newAttachOptions(args []string, command string) (attachOptions, error) {
	if len(args) != 1 {
		return attachOptions{}, fmt.Errorf("nid attach takes one GROUP/SESSION, e.g. nid attach web/lead (got %d arguments)", len(args))
	}
	group, name, err := workflows.ParseSessionRef(args[0])
	if err != nil {
		return attachOptions{}, err
	}
	if command != "" && strings.TrimSpace(command) == "" {
		return attachOptions{}, fmt.Errorf("--command is blank: name the program to run, e.g. --command bash")
	}
	return attachOptions{Group: group, Name: name, Command: command}, nil
}

// who is the person attaching as the others see them: user@machine.
func (a *app) who() string {
	name := a.getenv("USER")
	if name == "" {
		if u, err := user.Current(); err == nil {
			name = u.Username
		}
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return name + "@" + host
}

// attachOps are the calls nid attach makes to a session.
type attachOps interface {
	View(ctx context.Context, group, name string) (workflows.SessionView, error)
	Attach(ctx context.Context, group, name string, req workflows.AttachRequest) (workflows.AttachAnswer, error)
	Renew(ctx context.Context, group, name, lease string) error
	Release(ctx context.Context, group, name, lease string) (workflows.Handback, error)
}

// temporalAttach makes them through nidclient.
type temporalAttach struct{ c client.Client }

func (t temporalAttach) View(ctx context.Context, group, name string) (workflows.SessionView, error) {
	return nidclient.GetSession(ctx, t.c, group, name)
}

func (t temporalAttach) Attach(ctx context.Context, group, name string, req workflows.AttachRequest) (workflows.AttachAnswer, error) {
	return nidclient.Attach(ctx, t.c, group, name, req)
}

func (t temporalAttach) Renew(ctx context.Context, group, name, lease string) error {
	return nidclient.RenewAttach(ctx, t.c, group, name, lease)
}

func (t temporalAttach) Release(ctx context.Context, group, name, lease string) (workflows.Handback, error) {
	return nidclient.ReleaseAttach(ctx, t.c, group, name, lease)
}

// attachBuilder makes the command to run in the terminal once the hold is
// ready, on conversation conv of generation.
type attachBuilder func(ctx context.Context, v workflows.SessionView, conv string, generation int) (*exec.Cmd, error)

// attachCommand is the session's interactive command as this host's
// worker would run it, its MCP tools on the endpoint the session's host
// announced to the hosts registry.
func attachCommand(ctx context.Context, c client.Client, cfg *config.Config, v workflows.SessionView, conv string, generation int, shell string) (*exec.Cmd, error) {
	hosts, _ := nidclient.Hosts(ctx, c)
	httpURL := attachMCPBase(cfg, hosts, v.Host)
	ref := agents.SessionRef{Group: v.Group, Name: v.Name, WorkflowID: workflows.SessionID(v.Group, v.Name)}
	return worker.AttachCommand(ctx, cfg, ref, v.Spec, conv, generation, shell, httpURL)
}

// attachMCPBase is the address of the MCP endpoint the attached CLI's
// nid tools use: that of the worker of host, which is this one, as it
// announced it to the hosts registry (its port may be one the system
// chose), else as this nid.yaml's http.listen says. An announcement is a
// signal anyone with the Temporal credential can send, and the CLI sends
// the session's MCP token there: one that is not this machine's own
// address is not believed.
func attachMCPBase(cfg *config.Config, hosts workflows.HostsView, host string) string {
	for _, h := range hosts.Hosts {
		if h.Name == host && h.HTTP != "" && ownHTTPAddress(h.HTTP) {
			return h.HTTP
		}
	}
	return "http://" + cfg.HTTP.Listen
}

// ownHTTPAddress says u is an http:// URL of this machine: a loopback or
// unspecified address, or one of its interfaces' (not a name, which
// would have to be resolved).
func ownHTTPAddress(u string) bool {
	parsed, err := url.Parse(u)
	if err != nil || parsed.Scheme != "http" || parsed.User != nil {
		return false
	}
	ip := net.ParseIP(parsed.Hostname())
	if ip == nil {
		return false
	}
	if ip.IsLoopback() || ip.IsUnspecified() {
		return true
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
			return true
		}
	}
	return false
}

// attachPoll is how often nid attach looks whether the turn it waits for
// has ended.
const attachPoll = 500 * time.Millisecond

// runAttach takes the hold on a session, runs the command build makes in
// this terminal, and hands the session back when it exits. Once the hold
// is taken it is handed back on every way out: an error, Ctrl-C while
// waiting, the command's exit.
func runAttach(ctx context.Context, ops attachOps, build attachBuilder, opts attachOptions, stdout, stderr io.Writer) error {
	ref := opts.Group + "/" + opts.Name
	v, err := ops.View(ctx, opts.Group, opts.Name)
	if err != nil {
		return err
	}
	if v.Host != "" && v.Host != opts.Host {
		return fmt.Errorf("%s runs on host %s, not on this one (%s): run nid attach %s on %s, or bring it here first with nid move %s %s",
			ref, v.Host, opts.Host, ref, v.Host, ref, opts.Host)
	}
	if opts.Command != "" && v.Agent != agents.KindExec {
		return fmt.Errorf("--command is for exec agents: %s is a %s session, which attaches with its own CLI", ref, agents.KindOf(v.Agent).Title)
	}
	lease, err := newLease()
	if err != nil {
		return err
	}
	// The lease is renewed from the moment it is asked for: taking the
	// hold closes the session's agent, which may take longer than the
	// lease, and the session would take back a hold nid attach was only
	// just given.
	hold := context.WithoutCancel(ctx)
	renewing, stopRenewing := context.WithCancel(hold)
	var renewer sync.WaitGroup
	var taken atomic.Bool
	renewer.Go(func() { renewAttach(renewing, ops, opts, lease, &taken, stderr) })
	ans, err := ops.Attach(ctx, opts.Group, opts.Name, workflows.AttachRequest{Who: opts.Who, Host: opts.Host, Lease: lease})
	if err != nil {
		stopRenewing()
		renewer.Wait()
		return err
	}
	taken.Store(true)

	// From here on the session is held. Its own context (hold) outlives a
	// Ctrl-C, which reaches nid attach too when the person presses it in
	// the CLI sharing this terminal: only the person's exit ends the hold.
	// Caught rather than ignored: an ignored signal stays ignored in the
	// programs the command starts, and Ctrl-C would not stop a command run
	// in an attached shell; a caught one is theirs to handle again.
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGQUIT)
	defer func() {
		signal.Stop(signals)
		close(signals)
	}()
	go func() {
		for range signals {
		}
	}()
	handBack := func() {
		stopRenewing()
		renewer.Wait()
		releaseAttach(hold, ops, opts, lease, stdout, stderr)
	}

	conv, generation := ans.Conversation, ans.Generation
	if !ans.Ready {
		waiting := fmt.Sprintf("turn %d of %s to end", ans.WaitingForTurn, ref)
		if ans.WaitingForTurn == 0 {
			waiting = ref + "'s agent to close"
		}
		fmt.Fprintf(stderr, "nid: waiting for %s…\n", waiting)
		ready, err := waitForHold(ctx, ops, opts)
		if err != nil {
			handBack()
			if ctx.Err() != nil {
				return fmt.Errorf("interrupted while waiting for %s: the hold is let go and nothing was started", waiting)
			}
			return err
		}
		if ready.Host != "" && ready.Host != opts.Host {
			// The session moved while the hold waited: the CLI would run
			// here, the session's worktree and records are there.
			handBack()
			return fmt.Errorf("%s moved to host %s while its turn ended: the hold is let go and nothing was started here; run nid attach %s on %s",
				ref, ready.Host, ref, ready.Host)
		}
		v = ready
		// The turn waited for may have started the conversation or
		// moved on to a new one.
		conv, generation = ready.Conversation, ready.Generation
	}
	cmd, err := build(hold, v, conv, generation)
	if err != nil {
		handBack()
		return err
	}
	fmt.Fprintf(stderr, "nid: attached to %s as %s; exit to hand it back\n", ref, opts.Who)
	runErr := runInTerminal(cmd)
	handBack()
	if _, exited := errors.AsType[*exec.ExitError](runErr); runErr != nil && !exited {
		return fmt.Errorf("could not run %s: %w", cmd.Path, runErr)
	}
	return nil
}

// runInTerminal runs cmd and gives the terminal back as it found it: a
// CLI killed in raw mode would leave it so, and what nid attach prints
// next unreadable. cmd ends with nid attach (endWithNidAttach).
func runInTerminal(cmd *exec.Cmd) error {
	if f, ok := cmd.Stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		if state, err := term.GetState(int(f.Fd())); err == nil {
			defer func() { _ = term.Restore(int(f.Fd()), state) }()
		}
	}
	endWithNidAttach(cmd)
	// Pdeathsig is sent when the thread that started the child ends: the
	// child is started and waited for on this one.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	err := cmd.Run()
	if exit, ok := errors.AsType[*exec.ExitError](err); ok {
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			if f, ok := cmd.Stdout.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
				// A CLI killed mid-screen cannot undo the modes it set:
				// the screen, the cursor, the mouse and the keys.
				_, _ = f.WriteString(terminalModesOff)
			}
		}
	}
	return err
}

// terminalModesOff undoes what a full-screen CLI sets in a terminal: the
// alternate screen, a hidden cursor, mouse reports, bracketed paste, the
// kitty keyboard protocol and focus reports.
const terminalModesOff = "\x1b[?1049l\x1b[?25h\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l\x1b[?2004l\x1b[<u\x1b[?1004l\r\n"

// waitForHold polls the session's view until the hold is ready: the turn
// it waited for ended and the session's agent process was closed.
func waitForHold(ctx context.Context, ops attachOps, opts attachOptions) (workflows.SessionView, error) {
	ref := opts.Group + "/" + opts.Name
	for {
		select {
		case <-ctx.Done():
			return workflows.SessionView{}, ctx.Err()
		case <-time.After(attachPoll):
		}
		v, err := ops.View(ctx, opts.Group, opts.Name)
		switch {
		case err != nil && ctx.Err() != nil:
			return v, ctx.Err()
		case err != nil:
			continue // the session answers again in a moment; the lease is renewed meanwhile
		case v.Attach == nil || v.Attach.Who != opts.Who:
			return v, fmt.Errorf("%s was let go while its turn ended (%s): try nid attach again", ref, heldText(v))
		case v.Attach.Ready:
			return v, nil
		}
	}
}

// heldText says who holds a session now, for a hold that was lost.
func heldText(v workflows.SessionView) string {
	if v.Attach == nil {
		return "it is " + v.Status + " now"
	}
	return "attached by " + v.Attach.Who + " now"
}

// attachRenewEvery is how often nid attach renews its lease.
var attachRenewEvery = workflows.AttachRenewEvery

// renewAttach renews the lease every attachRenewEvery until ctx ends,
// while the hold is asked for too (taken says it was given). A
// renewal that fails is tried again within a second or two and said once
// on stderr: the session keeps the hold for workflows.AttachLease after
// the last renewal that reached it, and the person's CLI is never stopped
// for it. A renewal is a signal, which a session takes whether or not the
// lease still holds it, so each is followed by a look at the session: a
// hold the session took back (its lease ran out while nid could not reach
// it, a machine that slept) is said at once, for nid's turns go on with
// the conversation the person's CLI is still on.
func renewAttach(ctx context.Context, ops attachOps, opts attachOptions, lease string, taken *atomic.Bool, stderr io.Writer) {
	ref := opts.Group + "/" + opts.Name
	failing := false
	wait := attachRenewEvery
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		err := ops.Renew(ctx, opts.Group, opts.Name, lease)
		if err == nil && taken.Load() {
			v, verr := ops.View(ctx, opts.Group, opts.Name)
			if verr == nil && (v.Attach == nil || v.Attach.Who != opts.Who) {
				if ctx.Err() != nil {
					return
				}
				fmt.Fprintf(stderr, "\r\nnid: %s is no longer held by this nid attach: its lease ran out while nid could not be reached, "+
					"and the session has taken it back (%s); nid's turns now go on with its conversation, so exit this CLI, then attach again\r\n",
					ref, heldText(v))
				return
			}
		}
		switch {
		case err == nil:
			if failing {
				fmt.Fprintf(stderr, "\r\nnid: renewed the hold on %s again\r\n", ref)
			}
			failing, wait = false, attachRenewEvery
		case ctx.Err() != nil:
			return
		default:
			if !failing {
				// \r\n: the CLI in the terminal may have put it in raw mode.
				fmt.Fprintf(stderr, "\r\nnid: could not renew the hold on %s (%v); trying again: the session keeps it %s after the last renewal\r\n",
					ref, err, workflows.AttachLease)
			}
			failing, wait = true, 2*time.Second
		}
	}
}

// releaseAttach hands the session back and prints what the hand-back
// found. A session that does not answer is asked again for up to
// workflows.AttachLease: after that the lease has run out and the session
// has taken the hold back by itself.
func releaseAttach(ctx context.Context, ops attachOps, opts attachOptions, lease string, stdout, stderr io.Writer) {
	ref := opts.Group + "/" + opts.Name
	deadline := time.Now().Add(workflows.AttachLease)
	said := false
	for {
		h, err := ops.Release(ctx, opts.Group, opts.Name, lease)
		if err == nil {
			fmt.Fprintln(stdout, handbackText(h))
			return
		}
		if _, refused := errors.AsType[*nidclient.RefusedError](err); refused {
			fmt.Fprintf(stderr, "nid: %s was not handed back: %v\n", ref, err)
			return
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(stderr, "nid: could not hand %s back (%v): its lease hands it back by itself, as if this terminal had died\n", ref, err)
			return
		}
		if !said {
			fmt.Fprintf(stderr, "nid: could not hand %s back yet (%v); trying again for up to %s\n", ref, err, workflows.AttachLease)
			said = true
		}
		time.Sleep(2 * time.Second)
	}
}

// handbackText is what nid attach prints of a hand-back: "handed back:
// context 41% of 200k → 58% of 200k, 3 turns by hand; conversation c-1",
// and a second line with its note, if any.
func handbackText(h workflows.Handback) string {
	s := fmt.Sprintf("handed back: context %s → %s, %s by hand", percentText(h.Before, false), percentText(h.After, false), plural(h.HandTurns, "turn"))
	if h.Compactions > 0 {
		s += ", " + plural(h.Compactions, "compaction")
	}
	if h.Conversation != "" {
		s += "; conversation " + h.Conversation
	}
	if h.Expired {
		s += " (after its lease ran out)"
	}
	if h.Note != "" {
		s += "\n  " + h.Note
	}
	return printable(s, false)
}

// newLease is a random 128-bit id for the hold, which renewals and the
// release name.
func newLease() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("a lease id for the hold: %w", err)
	}
	return hex.EncodeToString(b), nil
}
