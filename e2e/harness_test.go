// Package e2e runs the real nid binary, embedded Temporal server included, in
// temporary directories and drives it the way a user does: nid up, the CLI,
// and kill -9.
package e2e

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/internal/temporaltest"
	"github.com/nid-dev/nid/statedir"
	"github.com/nid-dev/nid/workflows"
)

// The tests run the nid binary temporaltest builds once for them.
func TestMain(m *testing.M) { temporaltest.Main(m) }

// site is one nid installation: a directory with nid.yaml and its state.
type site struct {
	t      testing.TB
	dir    string
	groups string
	// top is YAML for nid.yaml's top level before groups: (agents:).
	top string
	// upWait bounds how long nid up may take to say it serves (0: two
	// minutes); a thousand sessions start in more on a busy machine.
	upWait   time.Duration
	frontend int
	ui       int
	http     int
	// cluster is the address of a Temporal server the site uses instead of
	// starting its own; apiKey its credential (temporal.apiKey), if it
	// requires one.
	cluster string
	apiKey  string
	// worker is the site's worker: section (YAML, indented as under
	// "worker:"), if any.
	worker string
}

// newSite writes nid.yaml with the given groups section (YAML, indented as
// under "groups:").
func newSite(t testing.TB, groups string) *site {
	s := &site{t: t, dir: t.TempDir(), groups: groups}
	s.newPorts()
	return s
}

// newPorts picks free ports and writes nid.yaml with them.
func (s *site) newPorts() {
	s.frontend, s.ui, s.http = temporaltest.FreePort(), temporaltest.FreePort(), temporaltest.FreePort()
	s.writeConfig()
}

func (s *site) writeConfig() {
	address := ""
	if s.cluster != "" {
		address = "  address: " + s.cluster + "\n"
	}
	if s.apiKey != "" {
		address += "  apiKey: " + s.apiKey + "\n"
	}
	worker := ""
	if s.worker != "" {
		worker = "worker:\n" + s.worker
	}
	cfg := fmt.Sprintf("state: %s\ntemporal:\n%s  port: %d\n  ui: {port: %d}\nhttp:\n  listen: 127.0.0.1:%d\n%sgroups:\n%s",
		filepath.Join(s.dir, ".nid"), address, s.frontend, s.ui, s.http, worker+s.top, s.groups)
	require.NoError(s.t, os.WriteFile(filepath.Join(s.dir, "nid.yaml"), []byte(cfg), 0o644))
}

func (s *site) address() string {
	if s.cluster != "" {
		return s.cluster
	}
	return fmt.Sprintf("127.0.0.1:%d", s.frontend)
}

// upProcess is a running nid up.
type upProcess struct {
	cmd  *exec.Cmd
	out  *temporaltest.SyncBuffer
	done chan error
}

// up starts nid up with args and waits until it prints that it is serving.
func (s *site) up(args ...string) *upProcess {
	s.t.Helper()
	// Ports picked free can be taken by another test process before nid
	// binds them; a first start may try again on new ones.
	_, err := os.Stat(filepath.Join(s.dir, ".nid"))
	first := os.IsNotExist(err)
	for attempt := 1; ; attempt++ {
		p, out, ok := s.start(args...)
		if ok {
			return p
		}
		if !first || attempt == 3 || !strings.Contains(out, "address already in use") {
			s.t.Fatalf("nid up exited:\n%s", out)
		}
		require.NoError(s.t, os.RemoveAll(filepath.Join(s.dir, ".nid")))
		s.newPorts()
	}
}

// start starts nid up with args and waits until it prints that it is
// serving; if it exits first it returns its output.
func (s *site) start(args ...string) (*upProcess, string, bool) {
	s.t.Helper()
	p := &upProcess{out: &temporaltest.SyncBuffer{}, done: make(chan error, 1)}
	p.cmd = exec.Command(temporaltest.Binary(s.t), append([]string{"up"}, args...)...)
	p.cmd.Dir = s.dir
	p.cmd.Env = append(os.Environ(), "NO_COLOR=1")
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	require.NoError(s.t, p.cmd.Start())
	go func() { p.done <- p.cmd.Wait() }()
	s.t.Cleanup(func() {
		p.kill()
		s.reapAgents()
	})
	deadline := time.Now().Add(cmp.Or(s.upWait, 2*time.Minute))
	for !strings.Contains(p.out.String(), s.address()) {
		select {
		case err := <-p.done:
			p.done <- err
			return nil, fmt.Sprintf("(%v)\n%s", err, p.out.String()), false
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("nid up did not come up:\n%s", p.out.String())
		}
	}
	return p, "", true
}

func (p *upProcess) kill() {
	if p.cmd.ProcessState == nil {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
		p.done <- nil
	}
}

// reapAgents does what the next nid up would do on the site's state
// directory after a kill -9: it kills the agent processes the killed nid
// recorded, and waits for them to be gone. Left alone, a session's Claude
// Code or Codex, whose stdin the dead nid closed, would still be saving its
// files in directories the test is about to remove.
func (s *site) reapAgents() {
	dir := agents.PidDir(filepath.Join(s.dir, ".nid"))
	entries, _ := os.ReadDir(dir) // none recorded: nothing to reap
	if _, err := agents.ReapOrphans(dir); err != nil {
		s.t.Logf("reaping the agents nid left: %v", err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(strings.TrimSuffix(e.Name(), ".json"))
		if err != nil {
			continue
		}
		for deadline := time.Now().Add(10 * time.Second); running(pid) && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// running says whether pid is a process that has not ended: a zombie has,
// and waits only for a parent to notice.
func running(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The command's name, in parentheses, may hold anything.
	stat := string(b)
	return !strings.HasPrefix(stat[strings.LastIndexByte(stat, ')')+1:], " Z")
}

// interrupt stops nid up the way Ctrl-C does and waits for it to exit.
func (p *upProcess) interrupt(t testing.TB) error { return p.signal(t, os.Interrupt) }

// signal sends sig and waits for nid to exit.
func (p *upProcess) signal(t testing.TB, sig os.Signal) error {
	require.NoError(t, p.cmd.Process.Signal(sig))
	select {
	case err := <-p.done:
		p.done <- err
		return err
	case <-time.After(time.Minute):
		t.Fatalf("nid did not stop on %v:\n%s", sig, p.out.String())
		return nil
	}
}

// nid runs one CLI command in the site and returns stdout, stderr and the
// exit code.
func (s *site) nid(args ...string) (string, string, int) {
	s.t.Helper()
	cmd := exec.Command(temporaltest.Binary(s.t), args...)
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if exit, ok := err.(*exec.ExitError); ok {
		code = exit.ExitCode()
	} else {
		require.NoError(s.t, err)
	}
	return stdout.String(), stderr.String(), code
}

// mustNid runs a command that must succeed.
func (s *site) mustNid(args ...string) string {
	s.t.Helper()
	out, errOut, code := s.nid(args...)
	require.Equal(s.t, 0, code, "nid %s failed:\n%s%s", strings.Join(args, " "), out, errOut)
	return out
}

// lsRow is one object of nid ls --json.
type lsRow struct {
	Session string                  `json:"session"`
	Group   string                  `json:"group"`
	Name    string                  `json:"name"`
	Agent   string                  `json:"agent"`
	Status  string                  `json:"status"`
	Host    string                  `json:"host"`
	Turns   int                     `json:"turns"`
	Context workflows.ContextRecord `json:"context"`
}

func (s *site) ls() map[string]lsRow {
	return listBy(s, func(r lsRow) string { return r.Session }, "ls", "--json")
}

// listBy runs a nid command that prints a JSON list and keys its rows.
func listBy[R any](s *site, key func(R) string, args ...string) map[string]R {
	s.t.Helper()
	var rows []R
	require.NoError(s.t, json.Unmarshal([]byte(s.mustNid(args...)), &rows))
	out := map[string]R{}
	for _, r := range rows {
		out[key(r)] = r
	}
	return out
}

// eventually polls cond until it holds or the deadline passes.
func (s *site) eventually(what string, timeout time.Duration, cond func() bool) {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			s.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// join points the site at other's Temporal server (nid up's or nid server's,
// which must be running), with its credential, as another host would be.
func (s *site) join(other *site) {
	s.t.Helper()
	s.cluster, s.apiKey = other.address(), other.credential()
	s.writeConfig()
}

// credential is what the site's Temporal server requires: the one nid made
// in its state directory, or the cluster's apiKey.
func (s *site) credential() string {
	s.t.Helper()
	if s.cluster != "" {
		return s.apiKey
	}
	b, err := os.ReadFile(filepath.Join(s.dir, ".nid", statedir.TemporalToken))
	require.NoError(s.t, err, "the site's server made its credential")
	return strings.TrimSpace(string(b))
}

func (s *site) client() client.Client {
	s.t.Helper()
	opts := client.Options{HostPort: s.address()}
	if key := s.credential(); key != "" {
		opts.Credentials = client.NewAPIKeyStaticCredentials(key)
		opts.ConnectionOptions.TLSDisabled = true
	}
	c, err := client.Dial(opts)
	require.NoError(s.t, err)
	s.t.Cleanup(c.Close)
	return c
}

func (s *site) session(c client.Client, group, name string) workflows.SessionView {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, err := c.QueryWorkflow(ctx, workflows.SessionID(group, name), "", workflows.QuerySession)
	require.NoError(s.t, err)
	var view workflows.SessionView
	require.NoError(s.t, v.Get(&view))
	return view
}

func rotationEvents(v workflows.SessionView) []workflows.RotationEvent {
	var out []workflows.RotationEvent
	for _, e := range v.Events {
		if e.Kind == workflows.EventRotation && e.Rotation != nil {
			out = append(out, *e.Rotation)
		}
	}
	return out
}
