package config

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Validate reports every problem in c at once, one line each, naming its key
// path and what is allowed, with sessions checked against the agent kinds
// given (agents.Kinds() has them). Load calls it; a Config built in code
// should be checked with it too.
func (c *Config) Validate(ks []Kind) error { return joinLines(c.problems(ks)) }

func (c *Config) problems(ks kinds) []problem {
	var ps []problem
	add := func(path, format string, args ...any) {
		ps = append(ps, problem{path: path, msg: fmt.Sprintf(format, args...)})
	}

	if strings.TrimSpace(c.State) == "" {
		add("state", "must name a directory")
	}

	t := c.Temporal
	if t.Address != "" {
		if _, _, err := net.SplitHostPort(t.Address); err != nil {
			add("temporal.address", "%q must be host:port, or empty to start the embedded server", t.Address)
		}
	}
	if strings.TrimSpace(t.Namespace) == "" {
		add("temporal.namespace", "must not be empty")
	}
	for _, p := range []struct {
		key  string
		port int
	}{{"temporal.port", t.Port}, {"temporal.ui.port", t.UI.Port}} {
		if p.port < 1 || p.port > 65535 {
			add(p.key, "%d is outside 1..65535", p.port)
		}
	}
	if c.Embedded() && t.Port == t.UI.Port {
		add("temporal.ui.port", "%d is also temporal.port; the Web UI needs a port of its own", t.UI.Port)
	}
	if t.UI.URL != "" {
		if u, err := url.Parse(t.UI.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			add("temporal.ui.url", "%q must be an http:// or https:// address, e.g. http://127.0.0.1:8233", t.UI.URL)
		}
	}
	if msg := apiKeyProblem(t.APIKey); msg != "" {
		add("temporal.apiKey", "%s", msg)
	}
	switch {
	case c.Embedded() && t.TLS.On():
		add("temporal.tls", "is for a cluster at temporal.address; the embedded server nid up starts listens on 127.0.0.1 without TLS")
	case c.Embedded() && t.APIKey != "":
		add("temporal.apiKey", "is for a cluster at temporal.address; the embedded server nid up starts takes the credential it keeps in the state directory (temporal-token)")
	default:
		_, tlsProblems := t.clientTLS()
		ps = append(ps, tlsProblems...)
	}

	if msg := listenProblem(c.HTTP.Listen); msg != "" {
		add("http.listen", "%s", msg)
	}
	ps = append(ps, c.Worker.problems()...)
	if msg := tokenProblem(c.HTTP.Token); msg != "" {
		add("http.token", "%s", msg)
	}
	if msg := metricsTokenProblem(c.HTTP); msg != "" {
		add("http.metricsToken", "%s", msg)
	}

	for _, name := range slices.Sorted(maps.Keys(c.Agents)) {
		path := "agents." + name
		if k, ok := ks.named(name); !ok || !k.Process {
			add(path, "%q is not an agent kind that runs a command (known: %s)", name, ks.names(runsProcess))
			continue
		}
		ps = append(ps, c.Agents[name].problems(path)...)
	}

	for _, name := range c.GroupNames() {
		ps = append(ps, c.Groups[name].problems(name, ks)...)
		for i, s := range c.Groups[name].Sessions {
			k, ok := ks.named(s.Agent)
			if !ok || !k.Process {
				continue
			}
			if k.DefaultCommand == "" && s.Command == "" && c.Agents[k.Name].Command == "" {
				add(fmt.Sprintf("groups.%s.sessions[%d].command", name, i), "the %s agent has no default command: name one here or in agents.%s.command", k.Name, k.Name)
			}
			ps = append(ps, c.sandboxProblems(name, &c.Groups[name].Sessions[i], k)...)
		}
	}
	ps = append(ps, c.sharedDirProblems(ks)...)
	return ps
}

// runsProcess selects the kinds that run a command.
func runsProcess(k Kind) bool { return k.Process }

// sandboxProblems checks that a session's agent, of kind k, can enforce
// the permissions and network setting it ends up with, naming the key that
// set each.
func (c *Config) sandboxProblems(group string, s *Session, k Kind) []problem {
	supported := k.Permissions
	var ps []problem
	perm, permPath := c.permissions(group, s)
	if !slices.Contains(PermissionsModes(), perm) {
		return nil // reported where it is set
	}
	if !slices.Contains(supported, perm) {
		path, msg := permPath, fmt.Sprintf("%s is not supported by %s agents (supported: %s)", perm, s.Agent, strings.Join(supported, ", "))
		switch {
		case path == "" && slices.Equal(supported, []string{PermissionsFull}):
			path = c.sessionPath(group, s) + ".permissions"
			msg = fmt.Sprintf("unset means %s, which %s agents cannot enforce: nid runs their command as it is, with no sandbox. "+
				"Set permissions: %s here, on the group or in agents.%s to let it do whatever the user running nid can",
				DefaultPermissions, s.Agent, PermissionsFull, s.Agent)
		case path == "":
			path = c.sessionPath(group, s) + ".permissions"
			msg = fmt.Sprintf("unset means %s, which %s agents cannot enforce (supported: %s)", DefaultPermissions, s.Agent, strings.Join(supported, ", "))
		case path != c.sessionPath(group, s)+".permissions":
			msg += " (session " + c.sessionPath(group, s) + " is " + s.Agent + ")"
		}
		ps = append(ps, problem{path, msg})
	}
	if net, netPath := c.network(group, s); net != nil && !*net && perm == PermissionsFull {
		ps = append(ps, problem{netPath, fmt.Sprintf("false needs a sandbox, and %s runs with permissions: full, which has none (use %s or %s)",
			c.sessionPath(group, s), PermissionsWorkspace, PermissionsReadonly)})
	}
	return ps
}

// permissionsProblem says what is wrong with a permissions value, if
// anything; empty means the default.
func permissionsProblem(path, v string) []problem {
	if v == "" || slices.Contains(PermissionsModes(), v) {
		return nil
	}
	return []problem{{path, fmt.Sprintf("%q is not one of %s", v, strings.Join(PermissionsModes(), ", "))}}
}

// reservedEnv are the prefixes of variables nid keeps from agents (its own
// configuration and Temporal's, which hold the worker's secrets) or sets
// itself (NIDAGENT_*).
var reservedEnv = []string{"NIDAGENT_", EnvPrefix, "TEMPORAL_"}

// ReservedEnv reports whether an agent's environment may not hold the
// variable name: nid never passes its own or Temporal's settings to an
// agent, and sets the NIDAGENT_ variables itself.
func ReservedEnv(name string) bool {
	return slices.ContainsFunc(reservedEnv, func(p string) bool { return strings.HasPrefix(strings.ToUpper(name), p) })
}

func (a AgentSettings) problems(path string) []problem {
	var ps []problem
	if a.TurnTimeout < 0 {
		ps = append(ps, problem{path + ".turnTimeout", fmt.Sprintf("%s must be more than 0 (or unset for %s)", a.TurnTimeout.D(), DefaultTurnTimeout)})
	}
	for _, k := range slices.Sorted(maps.Keys(a.Env)) {
		switch {
		case k == "" || strings.ContainsAny(k, "= \x00"):
			ps = append(ps, problem{path + ".env", fmt.Sprintf("%q is not an environment variable name", k)})
		case ReservedEnv(k):
			ps = append(ps, problem{path + ".env", fmt.Sprintf("%q is reserved: agents never get nid's or Temporal's settings (%s*), and nid sets NIDAGENT_* itself",
				k, strings.Join(reservedEnv[1:], "*, "))})
		}
	}
	ps = append(ps, permissionsProblem(path+".permissions", a.Permissions)...)
	return ps
}

// listenProblem says what is wrong with a listen address, if anything. Port 0
// is allowed: the system then picks a free one.
func listenProblem(addr string) string {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Sprintf("%q must be host:port, e.g. %s", addr, DefaultHTTPListen)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Sprintf("%q has no port number in 0..65535", addr)
	}
	return ""
}

// reservedGroupNames are words the commands that take a GROUP also take as
// a subcommand or help: a group named so could not be addressed.
var reservedGroupNames = []string{"add", "clear", "h", "help"}

// NameRule is what ValidName allows, in words, for every refusal of a
// group or session name: in nid.yaml, a workflow's input, an activity's.
const NameRule = "a group or session name is lower-case letters, digits, '-' and '_', starting with a letter or digit, at most 63 characters"

// nameRule is the message for a name ValidName refuses.
func nameRule(name string) string {
	return fmt.Sprintf("%q is not a name: %s", name, NameRule)
}

func (g Group) problems(name string, ks kinds) []problem {
	path := "groups." + name
	var ps []problem
	if !ValidName(name) {
		ps = append(ps, problem{path, nameRule(name)})
	}
	if slices.Contains(reservedGroupNames, name) {
		ps = append(ps, problem{path, fmt.Sprintf("%q is a word nid's commands take (%s), so nid ls %s would not name the group: choose another name",
			name, strings.Join(reservedGroupNames, ", "), name)})
	}
	if len(g.Goal) > MaxGoalBytes {
		ps = append(ps, problem{path + ".goal", fmt.Sprintf("is %d bytes; a goal is at most %d (it goes into every prompt): put the details in a file and name it", len(g.Goal), MaxGoalBytes)})
	}
	ps = append(ps, g.Rotate.problems(path+".rotate")...)
	ps = append(ps, g.teamProblems(path)...)
	ps = append(ps, permissionsProblem(path+".permissions", g.Permissions)...)
	ps = append(ps, hostProblem(path+".host", g.Host)...)
	if len(g.Sessions) == 0 {
		ps = append(ps, problem{path + ".sessions", "a group needs at least one session"})
	}
	seen := make(map[string]bool, len(g.Sessions))
	for i, s := range g.Sessions {
		sp := fmt.Sprintf("%s.sessions[%d]", path, i)
		ps = append(ps, s.problems(sp, ks)...)
		ps = append(ps, hostProblem(sp+".host", s.Host)...)
		if s.Name == "" {
			continue
		}
		if seen[s.Name] {
			msg := fmt.Sprintf("%q is used twice in group %s", s.Name, name)
			if s.Name == s.Agent {
				msg += " (a session's name defaults to its agent kind: give each one a name)"
			}
			ps = append(ps, problem{sp + ".name", msg})
		}
		seen[s.Name] = true
	}
	if g.Rotate.Mode == ModeCompact {
		for _, s := range g.Sessions {
			if k, ok := ks.named(s.Agent); ok && !k.Compacts {
				ps = append(ps, problem{path + ".rotate.mode", CompactNever(s.Name, s.Agent)})
				break
			}
		}
	}
	return ps
}

// CompactNever says why rotate mode compact cannot be a group's that has
// session, of an agent kind that cannot compact: validation says it of the
// file, nid group set of a running group.
func CompactNever(session, kind string) string {
	return fmt.Sprintf("compact never works for session %s: %s agents cannot compact; use handoff, or auto (which hands them off)", session, kind)
}

func (s Session) problems(path string, ks kinds) []problem {
	var ps []problem
	// Worded only for a session that has a problem: a fleet's file has a
	// thousand that have none.
	known := func() string {
		if names := ks.names(func(Kind) bool { return true }); names != "" {
			return names
		}
		// A caller's mistake, not the user's: say so plainly.
		return "none: whoever loaded this configuration gave config no agent kinds (LoadOptions.Kinds)"
	}
	k, ok := ks.named(s.Agent)
	switch {
	case s.Agent == "":
		ps = append(ps, problem{path + ".agent", fmt.Sprintf("missing (known: %s)", known())})
	case !ok:
		ps = append(ps, problem{path + ".agent", fmt.Sprintf("%q is not a known agent (known: %s)", s.Agent, known())})
	}
	// With no agent there is no name to default to; the missing agent is
	// the problem to fix.
	if !ValidName(s.Name) && (s.Name != "" || s.Agent != "") {
		ps = append(ps, problem{path + ".name", nameRule(s.Name)})
	}
	switch {
	case k.Sim:
		ps = append(ps, s.Sim.problems(path+".sim")...)
	case s.Sim != Sim{}:
		ps = append(ps, problem{path + ".sim", "only allowed with agent: " + ks.names(func(k Kind) bool { return k.Sim })})
	}
	if ok && !k.Process {
		processOnly := []struct {
			key string
			set bool
		}{{"command", s.Command != ""}, {"args", s.Args != nil}, {"env", s.Env != nil}, {"model", s.Model != ""}, {"turnTimeout", s.TurnTimeout != 0},
			{"permissions", s.Permissions != ""}, {"network", s.Network != nil}, {"window", s.Window != 0}}
		for _, f := range processOnly {
			if f.set {
				ps = append(ps, problem{path + "." + f.key, "only allowed with agent: " + ks.names(runsProcess)})
			}
		}
	}
	ps = append(ps, AgentSettings{Env: s.Env, TurnTimeout: s.TurnTimeout, Permissions: s.Permissions}.problems(path)...)
	switch {
	case s.Window < 0:
		ps = append(ps, problem{path + ".window", fmt.Sprintf("%d must be more than 0 tokens (or unset: the window the agent reports)", s.Window)})
	case s.Window > maxWindow:
		ps = append(ps, problem{path + ".window", fmt.Sprintf("%d must be at most %d tokens", s.Window, int64(maxWindow))})
	}
	return ps
}

// maxWindow is the largest context window a session may be given, far
// beyond any real model's: a typo of a few zeros is caught.
const maxWindow = 1 << 40

// maxSimWindow is the largest window a sim session may claim, far beyond
// any real model's.
const maxSimWindow = 1 << 40

func (s Sim) problems(path string) []problem {
	var ps []problem
	if s.Window <= 0 {
		ps = append(ps, problem{path + ".window", fmt.Sprintf("%d must be more than 0", s.Window)})
	}
	// The sim adds a turn's tokens to what the conversation holds before
	// capping it at the window: bounding both keeps that sum from
	// overflowing into negative usage.
	if s.Window > maxSimWindow {
		ps = append(ps, problem{path + ".window", fmt.Sprintf("%d must be at most %d", s.Window, int64(maxSimWindow))})
	}
	switch {
	case s.TokensPerTurn < 0:
		ps = append(ps, problem{path + ".tokensPerTurn", fmt.Sprintf("%d must be 0 or more", s.TokensPerTurn)})
	case s.TokensPerTurn > s.Window && s.Window > 0:
		ps = append(ps, problem{path + ".tokensPerTurn", fmt.Sprintf("%d must be at most the window, %d", s.TokensPerTurn, s.Window)})
	}
	if s.TurnDelay < 0 {
		ps = append(ps, problem{path + ".turnDelay", fmt.Sprintf("%s must be 0 or more", s.TurnDelay.D())})
	}
	if s.HandoffAfterTurns < 0 {
		ps = append(ps, problem{path + ".handoffAfterTurns", fmt.Sprintf("%d must be 0 (never) or more", s.HandoffAfterTurns)})
	}
	if s.TaskTurns < 0 {
		ps = append(ps, problem{path + ".taskTurns", fmt.Sprintf("%d must be 1 or more (0: the default, %d)", s.TaskTurns, DefaultSimTaskTurns)})
	}
	if s.CompactAt < 0 || s.CompactAt > 100 {
		ps = append(ps, problem{path + ".compactAt", fmt.Sprintf("%d is outside 0..100 (0: it never compacts by itself)", s.CompactAt)})
	}
	if s.CompactKeeps < 0 || s.CompactKeeps > 99 {
		ps = append(ps, problem{path + ".compactKeeps", fmt.Sprintf("%d is outside 1..99 (0: the default, %d)", s.CompactKeeps, DefaultSimCompactKeeps)})
	}
	switch {
	case s.StartTokens < 0:
		ps = append(ps, problem{path + ".startTokens", fmt.Sprintf("%d must be 0 or more", s.StartTokens)})
	case s.StartTokens > s.Window && s.Window > 0:
		ps = append(ps, problem{path + ".startTokens", fmt.Sprintf("%d must be at most the window, %d", s.StartTokens, s.Window)})
	}
	switch s.Ack {
	case "", SimAckCorrect, SimAckWrong, SimAckNone:
	default:
		ps = append(ps, problem{path + ".ack", fmt.Sprintf("%q is not one of %s, %s, %s", s.Ack, SimAckCorrect, SimAckWrong, SimAckNone)})
	}
	return ps
}

// Problems returns what is wrong with r, one line each, with every key path
// under prefix: Problems("groups.web.rotate") names
// groups.web.rotate.mode, Problems("") names mode.
func (r Rotate) Problems(prefix string) []string {
	ps := r.problems(prefix)
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	return lines
}

// Validate reports every problem in r at once, keys named without a prefix.
func (r Rotate) Validate() error { return joinLines(r.problems("")) }

func (r Rotate) problems(prefix string) []problem {
	var ps []problem
	if !slices.Contains(Modes(), r.Mode) {
		ps = append(ps, problem{join(prefix, "mode"), fmt.Sprintf("%q is not one of %s", r.Mode, strings.Join(Modes(), ", "))})
	}
	if r.ContextPercent < 1 || r.ContextPercent > 100 {
		ps = append(ps, problem{join(prefix, "contextPercent"), fmt.Sprintf("%d is outside 1..100", r.ContextPercent)})
	}
	if r.MaxTurns < 0 {
		ps = append(ps, problem{join(prefix, "maxTurns"), fmt.Sprintf("%d must be 0 (never) or more", r.MaxTurns)})
	}
	if r.ContextTokens < 0 {
		ps = append(ps, problem{join(prefix, "contextTokens"), fmt.Sprintf("%d must be 0 (no token limit) or more", r.ContextTokens)})
	}
	if r.MaxConcurrentRotations < 0 {
		ps = append(ps, problem{join(prefix, "maxConcurrentRotations"), fmt.Sprintf("%d must be 0 (no limit) or more", r.MaxConcurrentRotations)})
	}
	return ps
}

// merge returns the problems found while decoding and those found by
// validation, sorted by key path. A key that could not be decoded kept its
// default or zero value, so validation's verdict on it and on anything below
// it is dropped: the user should hear that the value has the wrong type, not
// that it is missing.
func merge(decoded, checked []problem) []problem {
	all := slices.Clone(decoded)
	for _, p := range checked {
		under := func(d problem) bool {
			return p.path == d.path || strings.HasPrefix(p.path, d.path+".") || strings.HasPrefix(p.path, d.path+"[")
		}
		if !slices.ContainsFunc(decoded, under) {
			all = append(all, p)
		}
	}
	slices.SortStableFunc(all, func(a, b problem) int { return strings.Compare(a.path, b.path) })
	return all
}

// joinLines returns nil for no problems, else one error with a line each.
func joinLines(ps []problem) error {
	errs := make([]error, len(ps))
	for i, p := range ps {
		errs[i] = errors.New(p.String())
	}
	return errors.Join(errs...)
}

// MinToken is the shortest http.token nid takes: the token drives every
// session and may guard a port facing the network, so it must not be
// guessable. The token nid generates when none is set is longer.
const MinToken = 32

// tokenProblem says what is wrong with http.token, if anything.
func tokenProblem(t string) string {
	switch {
	case t == "":
		return ""
	case apiKeyProblem(t) != "":
		return apiKeyProblem(t)
	case len(t) < MinToken:
		return fmt.Sprintf("is %d characters long; it needs at least %d (empty: nid makes one in the state directory)", len(t), MinToken)
	}
	return ""
}

// minMetricsToken is the shortest http.metricsToken nid takes: it guards a
// port that may face the network, so it must not be guessable.
const minMetricsToken = 16

// metricsTokenProblem says what is wrong with http.metricsToken, if
// anything.
func metricsTokenProblem(h HTTP) string {
	t := h.MetricsToken
	switch {
	case t == "":
		return ""
	case apiKeyProblem(t) != "":
		return apiKeyProblem(t)
	case len(t) < minMetricsToken:
		return fmt.Sprintf("is %d characters long; it needs at least %d (empty: only the API token reads /metrics)", len(t), minMetricsToken)
	case t == h.Token:
		return "is the same as http.token; set another token, or leave it empty for the API token to read /metrics alone"
	}
	return ""
}
