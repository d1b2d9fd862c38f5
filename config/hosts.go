package config

import (
	"fmt"
	"os"
	"regexp"
	"runtime"
	"strings"
	"time"
)

// Worker is this process's place among the hosts that share the work: the
// name it serves under, how many sessions it takes, and how often it says
// it is alive.
type Worker struct {
	// Host names this worker; sessions placed on it run their turns on
	// its task queue. Default: the machine's hostname.
	Host string `koanf:"host" json:"host"`
	// MaxSessions is how many sessions nid places here by itself; 0 makes
	// a worker that runs workflow tasks only and takes no session.
	MaxSessions int `koanf:"maxSessions" json:"maxSessions"`
	// Heartbeat is how often the worker tells the hosts registry it is
	// alive; three missed beats and its sessions wait for it.
	Heartbeat Duration `koanf:"heartbeat" json:"heartbeat"`
}

// Bounds on worker.heartbeat: more often floods the registry's history,
// less often leaves a dead host's sessions unaware for minutes.
const (
	DefaultHeartbeat = 10 * time.Second
	minHeartbeat     = 500 * time.Millisecond
	maxHeartbeat     = 5 * time.Minute
)

// hostRE is the rule for host names: they become parts of task queue names
// and of paths under the state directory.
// A fully qualified hostname may be 253 characters long: the default host
// name is the machine's own, and must stay what it was when sessions ran
// on the queue named after it before hosts had names of their own. The
// length is checked apart: a bounded repeat compiles into a program the
// size of its bound, at every start of every nid command.
var hostRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// ValidHost reports whether s may name a host: letters, digits, '.', '-'
// and '_', starting with a letter or digit, at most 253 characters.
func ValidHost(s string) bool { return len(s) <= 253 && hostRE.MatchString(s) }

// hostRule is the message for a host name ValidHost refuses.
func hostRule(name string) string {
	return fmt.Sprintf("%q must be letters, digits, '.', '-' or '_' (at most 253, starting with a letter or digit)", name)
}

// DefaultHost is the machine's hostname, or localhost when it has none nid
// can use.
func DefaultHost() string {
	h, err := os.Hostname()
	if err != nil || !ValidHost(h) {
		return "localhost"
	}
	return h
}

// DefaultMaxSessions is one session per core, and at least two: an agent
// CLI with the builds and tests it runs wants about a core.
func DefaultMaxSessions() int { return max(2, runtime.NumCPU()) }

func (w Worker) problems() []problem {
	var ps []problem
	if !ValidHost(w.Host) {
		ps = append(ps, problem{"worker.host", hostRule(w.Host)})
	}
	if w.MaxSessions < 0 {
		ps = append(ps, problem{"worker.maxSessions", fmt.Sprintf("%d must be 0 (take no sessions) or more", w.MaxSessions)})
	}
	if d := w.Heartbeat.D(); d < minHeartbeat || d > maxHeartbeat {
		ps = append(ps, problem{"worker.heartbeat", fmt.Sprintf("%s is outside %s..%s", d, minHeartbeat, maxHeartbeat)})
	}
	return ps
}

// hostProblem checks a host: key on a group or session.
func hostProblem(path, host string) []problem {
	if host == "" || ValidHost(host) {
		return nil
	}
	return []problem{{path, hostRule(host)}}
}

// scpRE matches git's scp-like remote syntax, user@host:path.
var scpRE = regexp.MustCompile(`^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:`)

// IsRepoURL reports whether a group's repo is a remote (https://...,
// ssh://..., file://..., git@host:path) rather than a path on this host:
// each host then keeps its own clone.
func IsRepoURL(repo string) bool {
	return strings.Contains(repo, "://") || scpRE.MatchString(repo)
}

// RepoProblem says why git must not be given repo as a repository to
// clone, fetch or push, or "" when it may: an https://, ssh:// or file://
// URL, git's scp-like user@host:path, or a path on this host. Anything git
// would take as an option (a leading -), hand to a remote helper that
// runs a program (ext::, or any other transport::address), or reach over
// another transport (http://, git://) is refused, as is text with control
// characters.
func RepoProblem(repo string) string {
	const allowed = "a repo is an https://, ssh:// or file:// URL, user@host:path, or a path on this host"
	switch {
	case repo == "":
		return "repo is empty; " + allowed
	case strings.HasPrefix(repo, "-"):
		return fmt.Sprintf("repo %q begins with -, which git would take as an option; %s", repo, allowed)
	case strings.IndexFunc(repo, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0:
		return fmt.Sprintf("repo %q holds control characters; %s", repo, allowed)
	case strings.Contains(repo, "::"):
		return fmt.Sprintf("repo %q names a git remote helper (transport::address), which runs a program; %s", repo, allowed)
	}
	if scheme, _, ok := strings.Cut(repo, "://"); ok {
		switch strings.ToLower(scheme) {
		case "https", "ssh", "file":
			return ""
		}
		return fmt.Sprintf("repo %q uses %s://, which nid does not fetch over; %s", repo, scheme, allowed)
	}
	return ""
}

// SessionHost is the host nid.yaml pins a session to: its own host:, else
// its group's; empty lets nid place it.
func (c *Config) SessionHost(group string, s Session) string {
	if s.Host != "" {
		return s.Host
	}
	return c.Groups[group].Host
}
