package worker

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/nid-dev/nid/activities"
	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/workflows"
)

// nid doctor says, for the configuration in force, whether this host can
// run nid up and its sessions, one check at a time: Temporal (or the ports
// the embedded server takes), the state directory, git for the groups with
// a repo, each session's agent (the checks every turn makes before its
// agent starts, see activities.Activities.CheckAgent, and deeper ones), and
// the HTTP port, and the credential nid's own Temporal server requires.
// nid up makes the session checks too, and names the
// sessions that cannot start.

// DoctorOptions says what nid doctor checks.
type DoctorOptions struct {
	Config *config.Config
	// Running is the process id of the nid up or nid worker running on
	// the configuration's state directory, 0 when none runs: the ports it
	// holds are its own, not in the way.
	Running int
}

// Doctor runs every check, host first, then each session in group and
// session order; agents.Failing says which failed.
func Doctor(ctx context.Context, opts DoctorOptions) []agents.Check {
	cfg := opts.Config
	checks := temporalChecks(ctx, opts)
	checks = append(checks, credentialChecks(ctx, opts)...)
	checks = append(checks, stateCheck(cfg.State))
	checks = append(checks, gitChecks(cfg)...)
	checks = append(checks, SessionChecks(ctx, cfg, true)...)
	return append(checks, httpCheck(cfg, opts.Running))
}

// SessionChecks checks what each session of cfg needs of this host, as its
// turns will run it; deep also asks each CLI its version and tries each
// sandbox.
func SessionChecks(ctx context.Context, cfg *config.Config, deep bool) []agents.Check {
	acts := &activities.Activities{Agents: Agents(), Settings: AgentSettings(cfg)}
	var checks []agents.Check
	for _, group := range cfg.GroupNames() {
		for _, s := range cfg.Groups[group].Sessions {
			ref := agents.SessionRef{Group: group, Name: s.Name, WorkflowID: workflows.SessionID(group, s.Name)}
			checks = append(checks, acts.CheckAgent(ctx, ref, AgentSpec(cfg, group, s), deep)...)
		}
	}
	return checks
}

func ok(name, format string, args ...any) agents.Check {
	return agents.Check{Name: name, Status: agents.CheckOK, Text: fmt.Sprintf(format, args...)}
}

func failed(name, format string, args ...any) agents.Check {
	return agents.Check{Name: name, Status: agents.CheckFail, Text: fmt.Sprintf(format, args...)}
}

// temporalChecks checks the Temporal server the configuration names
// answers, or, for the embedded one, that its ports are free (or held by
// the nid running on this state directory, whose server then answers).
func temporalChecks(ctx context.Context, opts DoctorOptions) []agents.Check {
	cfg := opts.Config
	address := cfg.Address()
	answers := func() error {
		// The check's line says why a dial failed; the SDK need not.
		c, err := Dial(ctx, cfg, slog.New(slog.DiscardHandler))
		if err == nil {
			c.Close()
		}
		return err
	}
	if !cfg.Embedded() {
		if err := answers(); err != nil {
			return []agents.Check{failed("temporal", "%v", err)}
		}
		return []agents.Check{ok("temporal", "Temporal at %s answers (namespace %s)", address, cfg.Temporal.Namespace)}
	}
	if opts.Running != 0 {
		if err := answers(); err != nil {
			return []agents.Check{failed("temporal", "nid (process %d) runs on %s, but its Temporal server does not answer: %v; stop it and start nid up again",
				opts.Running, cfg.State, err)}
		}
		return []agents.Check{ok("temporal", "the embedded Temporal server of the running nid (process %d) answers at %s", opts.Running, address)}
	}
	var checks []agents.Check
	ports := []struct {
		key  string
		port int
	}{{"temporal.port", cfg.Temporal.Port}, {"temporal.ui.port", cfg.Temporal.UI.Port}}
	for _, p := range ports {
		if p.port == 0 {
			continue
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(p.port))
		if err := portFree(addr); err != nil {
			what := "another program"
			if p.key == "temporal.port" && answers() == nil {
				what = "a Temporal server that no nid on " + cfg.State + " runs (another nid up or nid server?)"
			}
			checks = append(checks, failed("temporal", "%s %s is taken by %s, so nid up cannot start its embedded server: stop it, or set %s to a free port (%v)",
				p.key, addr, what, p.key, err))
			continue
		}
		checks = append(checks, ok("temporal", "%s %s is free for nid up's embedded server", p.key, addr))
	}
	return checks
}

// credentialChecks checks the credential nid's own Temporal server (the
// embedded one, or nid server on this host) requires of its clients: the
// file is there once a server has started on the state directory, private,
// and the server, when one runs, accepts it. With temporal.apiKey set, or a
// cluster elsewhere, the temporal check's dial is the whole test.
func credentialChecks(ctx context.Context, opts DoctorOptions) []agents.Check {
	cfg := opts.Config
	if cfg.Temporal.APIKey != "" || !ownServer(cfg) {
		return nil
	}
	file := TemporalTokenPath(cfg.State)
	serverUp := opts.Running != 0 || !cfg.Embedded()
	info, err := os.Stat(file)
	switch {
	case os.IsNotExist(err) && !serverUp:
		return []agents.Check{ok("credential", "%s does not exist yet: nid up makes it when its Temporal server first starts", file)}
	case os.IsNotExist(err):
		return []agents.Check{failed("credential", "%s is missing, and the Temporal server at %s refuses clients without the credential its nid up or nid server made: set state to that nid's state directory, or temporal.apiKey to the content of its temporal-token",
			file, cfg.Address())}
	case err != nil:
		return []agents.Check{failed("credential", "%v", err)}
	case info.Mode().Perm()&0o077 != 0:
		return []agents.Check{failed("credential", "%s is readable by other users (mode %04o), and whoever reads it controls every session: chmod 600 %s (nid up tightens it too)",
			file, info.Mode().Perm(), file)}
	case !serverUp:
		return []agents.Check{ok("credential", "%s is private; nid up's Temporal server will require it", file)}
	}
	c, err := Dial(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		return []agents.Check{failed("credential", "%v", err)}
	}
	c.Close()
	return []agents.Check{ok("credential", "%s is private and the Temporal server at %s accepts it", file, cfg.Address())}
}

// portFree says whether addr can be listened on now.
func portFree(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return l.Close()
}

// stateCheck checks the state directory is one nid can write, or can be
// made in a directory nid can write.
func stateCheck(state string) agents.Check {
	dir := state
	for {
		fi, err := os.Stat(dir)
		if err == nil {
			if !fi.IsDir() {
				return failed("state", "state %s: %s is not a directory: set state to a directory", state, dir)
			}
			break
		}
		parent := filepath.Dir(dir)
		if !os.IsNotExist(err) || parent == dir {
			return failed("state", "state %s: %v", state, err)
		}
		dir = parent
	}
	f, err := os.CreateTemp(dir, ".nid-doctor-")
	if err != nil {
		return failed("state", "state %s: nid cannot write %s (%v): make it writable for this user, or set state to a directory it can write", state, dir, err)
	}
	_ = f.Close()
	_ = os.Remove(f.Name())
	if dir != state {
		return ok("state", "%s does not exist yet: nid up makes it in %s, which this user can write", state, dir)
	}
	return ok("state", "%s is writable", state)
}

// gitChecks checks git is installed when a group has repo:, and that each
// repo is a git repository.
func gitChecks(cfg *config.Config) []agents.Check {
	var groups []string
	for _, name := range cfg.GroupNames() {
		if cfg.Groups[name].Repo != "" {
			groups = append(groups, name)
		}
	}
	if len(groups) == 0 {
		return nil
	}
	uses := "the repo: of " + strings.Join(groups, ", ")
	path, err := exec.LookPath("git")
	if err != nil {
		return []agents.Check{failed("git", "git is not installed, and %s needs it for the sessions' worktrees: install git (on Debian or Ubuntu: apt-get install git)", uses)}
	}
	version, err := agents.GitVersion(context.Background())
	if err != nil {
		return []agents.Check{failed("git", "%s does not run (%v), and %s needs it: reinstall git", path, err, uses)}
	}
	checks := []agents.Check{ok("git", "%s (%s), for %s", version, path, uses)}
	for _, name := range groups {
		key := "groups." + name + ".repo"
		if repo := cfg.Groups[name].Repo; config.IsRepoURL(repo) {
			if msg := config.RepoProblem(repo); msg != "" {
				checks = append(checks, failed("repo", "%s: %s", key, msg))
			} else {
				checks = append(checks, ok("repo", "%s: %s, which each host clones when a session first needs it", key, repo))
			}
			continue
		}
		if msg := config.GitRepoProblem(cfg.Groups[name].Repo); msg != "" {
			checks = append(checks, failed("repo", "%s: %s: set it to a git repository (git init makes one)", key, msg))
			continue
		}
		checks = append(checks, ok("repo", "%s: %s is a git repository", key, cfg.Groups[name].Repo))
	}
	return checks
}

// httpCheck checks nid's HTTP server can listen where http.listen says.
func httpCheck(cfg *config.Config, running int) agents.Check {
	listen := cfg.HTTP.Listen
	if cfg.HTTP.Token == "" && !config.LoopbackAddress(listen) {
		return failed("http", "http.listen %s is not a loopback address: set http.token (or NID_HTTP_TOKEN) to serve the API and dashboard there", listen)
	}
	err := portFree(listen)
	switch {
	case err == nil:
		return ok("http", "http.listen %s is free", listen)
	case running != 0:
		return ok("http", "http.listen %s: the running nid (process %d) serves it", listen, running)
	}
	return failed("http", "http.listen %s is taken by another program, so nid up cannot serve the dashboard and the agents' MCP endpoint: stop it, or set http.listen to a free port (%v)", listen, err)
}
