// Package config loads nid.yaml into a typed Config.
//
// Load reads, in order of precedence from lowest to highest: built-in
// defaults, the YAML file, NID_* environment variables, then flag overrides.
// Nothing outside this package sees koanf. Every problem in a file is reported
// at once by Validate, each naming its key path and what is allowed.
//
// Config knows no agent kind of its own: each kind is one entry in
// agents.Kinds(), and the caller hands their config part in, so that a
// fact about a kind (its default command, the permissions it can enforce,
// whether a sim: block configures it) lives in that entry only.
//
//	cfg, err := config.Load(config.LoadOptions{File: path, Environ: os.Environ(), Kinds: agents.ConfigKinds()})
//
// A group's rotate policy can also change on a running group:
// ApplyRotateJSON lays the JSON typed after `nid group set GROUP rotate=`
// over the current policy and validates the result.
package config

import (
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Rotation modes a group's policy may name.
const (
	ModeAuto    = "auto"
	ModeCompact = "compact"
	ModeHandoff = "handoff"
	ModeOff     = "off"
)

// Modes returns the rotation modes a group's policy may name.
func Modes() []string { return []string{ModeAuto, ModeCompact, ModeHandoff, ModeOff} }

// Kind is what the configuration must know of an agent kind. The kinds
// and every other fact about them are one entry each in
// agents.Kinds(); since config imports nothing of nid's own, whoever
// loads or validates a configuration hands them in (LoadOptions.Kinds,
// Validate).
type Kind struct {
	// Name is what a session's agent key says, and the key of the kind's
	// agents: entry.
	Name string
	// Process says it runs a command, which an agents: entry and the
	// session keys command, args, env, model, turnTimeout, permissions and
	// network configure.
	Process bool
	// DefaultCommand is the program it runs when nid.yaml names none;
	// empty means nid.yaml must name one.
	DefaultCommand string
	// Permissions are the permissions values it can enforce, in the order
	// of PermissionsModes.
	Permissions []string
	// Sim says a session's sim: block configures it.
	Sim bool
	// Compacts says it can compact its conversation when asked: a group
	// whose rotate mode is compact cannot have a session of a kind that
	// cannot.
	Compacts bool
}

// kinds are the agent kinds a configuration is checked against.
type kinds []Kind

// named returns the kind called name.
func (ks kinds) named(name string) (Kind, bool) {
	for _, k := range ks {
		if k.Name == name {
			return k, true
		}
	}
	return Kind{}, false
}

// names lists the names of the kinds keep accepts, for messages.
func (ks kinds) names(keep func(Kind) bool) string {
	var names []string
	for _, k := range ks {
		if keep(k) {
			names = append(names, k.Name)
		}
	}
	return strings.Join(names, ", ")
}

// What an agent may change: its permissions. Claude Code and Codex enforce
// them with their own sandboxes; nid only chooses the setting.
const (
	// PermissionsWorkspace lets the agent edit and run commands in its
	// worktree without approval, and refuses writes anywhere else.
	PermissionsWorkspace = "workspace"
	// PermissionsReadonly lets the agent read and run commands but change
	// nothing, its worktree included.
	PermissionsReadonly = "readonly"
	// PermissionsFull runs the agent with no sandbox: it can do whatever
	// the user running nid can.
	PermissionsFull = "full"
)

// DefaultPermissions is what an agent may change when nid.yaml does not say.
const DefaultPermissions = PermissionsWorkspace

// PermissionsModes returns the values permissions may take.
func PermissionsModes() []string {
	return []string{PermissionsWorkspace, PermissionsReadonly, PermissionsFull}
}

// nameRE is the rule for group and session names. They become parts of
// workflow ids and URLs, hence the small alphabet. The length is checked
// apart, as for hostRE.
var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

// ValidName reports whether s may name a group or a session: lower-case
// letters, digits, '-' and '_', starting with a letter or digit, at most 63
// characters.
func ValidName(s string) bool { return len(s) <= 63 && nameRE.MatchString(s) }

// MaxGoalBytes bounds a group's goal: it travels in every board push and
// every session's prompt.
const MaxGoalBytes = 16 << 10

// Defaults the user documented.
const (
	DefaultContextPercent = 85
	// DefaultMaxConcurrentRotations: twenty sessions crossing the
	// threshold together must not all spend a rotation turn at once.
	DefaultMaxConcurrentRotations = 2
	DefaultStateDir               = ".nid"
	DefaultNamespace              = "default"
	DefaultFrontendPort           = 7233
	DefaultUIPort                 = 8233
	DefaultHTTPListen             = "127.0.0.1:7777"
	DefaultAddress                = "127.0.0.1:7233"
)

// Config is the whole of nid.yaml after defaults, environment and flags.
type Config struct {
	State    string           `koanf:"state" json:"state"`
	Temporal Temporal         `koanf:"temporal" json:"temporal"`
	HTTP     HTTP             `koanf:"http" json:"http"`
	Worker   Worker           `koanf:"worker" json:"worker"`
	Groups   map[string]Group `koanf:"groups" json:"groups"`
	// Agents holds defaults for every session of an agent kind, by kind.
	Agents map[string]AgentSettings `koanf:"agents" json:"agents,omitempty"`
}

// Default returns the configuration of an empty nid.yaml: no groups, the
// embedded Temporal server on its usual ports, HTTP on loopback.
func Default() *Config {
	return &Config{
		State: DefaultStateDir,
		Temporal: Temporal{
			Namespace: DefaultNamespace,
			Port:      DefaultFrontendPort,
			UI:        UI{Port: DefaultUIPort},
		},
		HTTP:   HTTP{Listen: DefaultHTTPListen},
		Worker: Worker{Host: DefaultHost(), MaxSessions: DefaultMaxSessions(), Heartbeat: Duration(DefaultHeartbeat)},
	}
}

// GroupNames returns the names of c's groups in sorted order.
func (c *Config) GroupNames() []string {
	names := make([]string, 0, len(c.Groups))
	for name := range c.Groups {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// SessionNames returns the names of g's sessions in the file's order.
func (g Group) SessionNames() []string {
	names := make([]string, len(g.Sessions))
	for i, s := range g.Sessions {
		names[i] = s.Name
	}
	return names
}

// Embedded reports whether nid up should start its own Temporal server,
// which it does when no address is configured.
func (c *Config) Embedded() bool { return c.Temporal.Address == "" }

// Address returns the Temporal frontend to dial: temporal.address, or the
// embedded server's frontend on loopback.
func (c *Config) Address() string {
	if !c.Embedded() {
		return c.Temporal.Address
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(c.Temporal.Port))
}

// Temporal says which Temporal server to use. An empty Address means nid up
// starts the embedded server on Port with its Web UI as UI says; TLS and
// APIKey are for a cluster at Address.
type Temporal struct {
	Address   string `koanf:"address" json:"address"`
	Namespace string `koanf:"namespace" json:"namespace"`
	Port      int    `koanf:"port" json:"port"`
	UI        UI     `koanf:"ui" json:"ui"`
	TLS       TLS    `koanf:"tls" json:"tls"`
	// APIKey is sent as a bearer token on every call; it turns TLS on,
	// except to an address on loopback (a nid server's own, or a tunnel to
	// it) unless TLS is set too.
	APIKey string `koanf:"apiKey" json:"-"`
}

// UI is the embedded server's Web UI.
type UI struct {
	Port int `koanf:"port" json:"port"`
	// WriteActions lets the Web UI signal, terminate, cancel, reset and
	// start workflows. Off, it only reads: anything that reaches the UI
	// could otherwise steer every session.
	WriteActions bool `koanf:"writeActions" json:"writeActions"`
	// URL is where the Web UI is, for links from the dashboard and the
	// API, when this process does not start it (nid worker beside nid
	// server, or a cluster's UI); empty: none, or the embedded server's own.
	URL string `koanf:"url" json:"url,omitempty"`
}

// TLS is how nid reaches a cluster over TLS. Setting any of it turns TLS
// on; the files are read when the configuration loads.
type TLS struct {
	// CAFile holds the PEM certificates of the CAs that may sign the
	// server's certificate; empty means the system's.
	CAFile string `koanf:"caFile" json:"caFile,omitempty"`
	// CertFile and KeyFile are nid's client certificate and its key, for
	// a server that asks for one (mTLS).
	CertFile string `koanf:"certFile" json:"certFile,omitempty"`
	KeyFile  string `koanf:"keyFile" json:"keyFile,omitempty"`
	// ServerName is the name the server's certificate must carry; empty
	// means the host of temporal.address.
	ServerName string `koanf:"serverName" json:"serverName,omitempty"`
}

// On reports whether any TLS setting is given.
func (t TLS) On() bool { return t != TLS{} }

// HTTP is the worker's HTTP server: the MCP endpoint for agents, the
// dashboard and the JSON API.
type HTTP struct {
	Listen string `koanf:"listen" json:"listen"`
	// Token is the bearer token the API and the dashboard require. Empty
	// means one generated into the state directory, which only a loopback
	// listen address may use.
	Token string `koanf:"token" json:"-"`
	// MetricsToken is a bearer token that reads /metrics and nothing else,
	// for a Prometheus server; the API token reads them too. Empty means
	// only the API token does.
	MetricsToken string `koanf:"metricsToken" json:"-"`
}

// Group is a team with a goal, a rotate policy and sessions.
type Group struct {
	Goal   string `koanf:"goal" json:"goal,omitempty"`
	Rotate Rotate `koanf:"rotate" json:"rotate"`
	// Repo is a git repository: each session works in its own worktree on
	// its own branch. Without it, sessions share WorkDir.
	Repo    string `koanf:"repo" json:"repo,omitempty"`
	WorkDir string `koanf:"workdir" json:"workdir,omitempty"`
	// Tasks seed the group's board.
	Tasks    []Task    `koanf:"tasks" json:"tasks,omitempty"`
	Budget   Budget    `koanf:"budget" json:"budget"`
	Prompts  Prompts   `koanf:"prompts" json:"prompts"`
	Sessions []Session `koanf:"sessions" json:"sessions"`
	// Permissions and Network, when set, apply to every session of the
	// group that does not set its own (see AgentSettings).
	Permissions string `koanf:"permissions" json:"permissions,omitempty"`
	Network     *bool  `koanf:"network" json:"network,omitempty"`
	// Host pins every session of the group that names none to that host.
	Host string `koanf:"host" json:"host,omitempty"`
}

// Rotate is a group's rotation policy. It is also the payload of
// `nid group set GROUP rotate=...` and travels inside workflow state, so it
// must stay plain data.
type Rotate struct {
	Mode           string `koanf:"mode" json:"mode"`
	ContextPercent int    `koanf:"contextPercent" json:"contextPercent"`
	// ContextTokens rotates when the context holds this many tokens (0:
	// no such limit), whichever of it and ContextPercent comes first: on a
	// 1M window 85% is far past where models degrade.
	ContextTokens int64 `koanf:"contextTokens" json:"contextTokens,omitempty"`
	MaxTurns      int   `koanf:"maxTurns" json:"maxTurns"`
	// MaxConcurrentRotations is how many of the group's sessions may
	// rotate by themselves at once (0: no limit); the others wait at their
	// turn boundary, fullest first. A manual rotation never waits.
	MaxConcurrentRotations int `koanf:"maxConcurrentRotations" json:"maxConcurrentRotations"`
}

// Session is one agent seat in a group.
type Session struct {
	Agent string `koanf:"agent" json:"agent"`
	Name  string `koanf:"name" json:"name"`
	Sim   Sim    `koanf:"sim" json:"sim,omitempty"`
	// The fields below override the agents: entry of the session's kind;
	// Env is merged into it key by key.
	Command     string            `koanf:"command" json:"command,omitempty"`
	Args        []string          `koanf:"args" json:"args,omitempty"`
	Env         map[string]string `koanf:"env" json:"env,omitempty"`
	Model       string            `koanf:"model" json:"model,omitempty"`
	TurnTimeout Duration          `koanf:"turnTimeout" json:"turnTimeout,omitempty"`
	Permissions string            `koanf:"permissions" json:"permissions,omitempty"`
	Network     *bool             `koanf:"network" json:"network,omitempty"`
	// Window is the context window in tokens of a session whose agent
	// reports what its conversation holds but not its window (an exec
	// command's usage line without "window"); 0: only what the agent
	// reports. A window the agent reports wins.
	Window int64 `koanf:"window" json:"window,omitempty"`
	// Host pins the session to a host when nid first places it; empty
	// lets nid choose the live host with the most room.
	Host string `koanf:"host" json:"host,omitempty"`
}

// AgentSettings says how to run an agent's command: which program, with
// which extra arguments and environment, which model, how long one turn
// may take, and what the agent may change. Env usually holds API keys, so
// it stays on the worker: it is never part of workflow input or history.
type AgentSettings struct {
	Command     string            `koanf:"command" json:"command,omitempty"`
	Args        []string          `koanf:"args" json:"args,omitempty"`
	Env         map[string]string `koanf:"env" json:"env,omitempty"`
	Model       string            `koanf:"model" json:"model,omitempty"`
	TurnTimeout Duration          `koanf:"turnTimeout" json:"turnTimeout,omitempty"`
	// Permissions is one of PermissionsModes; empty means
	// DefaultPermissions. A session's own value wins over its group's,
	// which wins over the agents: entry of its kind.
	Permissions string `koanf:"permissions" json:"permissions,omitempty"`
	// Network says whether the agent's commands may reach the network;
	// nil means what the kind's sandbox does by default, which its entry in
	// agents.Kinds() says. It is resolved like Permissions.
	Network *bool `koanf:"network" json:"network,omitempty"`
	// Window is the session's own window (Session.Window); an agents:
	// entry has none, since a window belongs to one session's model.
	Window int64 `koanf:"-" json:"window,omitempty"`
}

// DefaultTurnTimeout bounds a turn of a process agent whose settings give no
// turnTimeout.
const DefaultTurnTimeout = 30 * time.Minute

// Session returns the session named name in group; ok is false when the
// config has no such session.
func (c *Config) Session(group, name string) (s Session, ok bool) {
	if p := c.session(group, name); p != nil {
		return *p, true
	}
	return Session{}, false
}

// session is the session named name in group as the config holds it, or
// nil.
func (c *Config) session(group, name string) *Session {
	sessions := c.Groups[group].Sessions
	for i := range sessions {
		if sessions[i].Name == name {
			return &sessions[i]
		}
	}
	return nil
}

// AgentFor resolves a session's agent settings: the agents: entry of its
// kind, then the session's own values over it (env merged key by key), then
// the built-in turn timeout, DefaultTurnTimeout. An empty Command means the
// kind's default command (Kind.DefaultCommand), which the worker resolves.
// ok is false when the config has no such session.
func (c *Config) AgentFor(group, session string) (s AgentSettings, ok bool) {
	sess := c.session(group, session)
	if sess == nil {
		return AgentSettings{}, false
	}
	base := c.Agents[sess.Agent]
	s = AgentSettings{
		Command:     base.Command,
		Args:        slices.Clone(base.Args),
		Env:         map[string]string{},
		Model:       base.Model,
		TurnTimeout: base.TurnTimeout,
	}
	maps.Copy(s.Env, base.Env)
	maps.Copy(s.Env, sess.Env)
	if sess.Command != "" {
		s.Command = sess.Command
	}
	if sess.Args != nil {
		s.Args = slices.Clone(sess.Args)
	}
	if sess.Model != "" {
		s.Model = sess.Model
	}
	if sess.TurnTimeout > 0 {
		s.TurnTimeout = sess.TurnTimeout
	}
	if s.TurnTimeout <= 0 {
		s.TurnTimeout = Duration(DefaultTurnTimeout)
	}
	s.Permissions, _ = c.permissions(group, sess)
	s.Network, _ = c.network(group, sess)
	s.Window = sess.Window
	return s, true
}

// permissions is a session's own permissions, else its group's, else its
// kind's agents: entry, else the default, with the key path that set it
// ("" for the default).
func (c *Config) permissions(group string, s *Session) (string, string) {
	path := c.sessionPath(group, s)
	switch {
	case s.Permissions != "":
		return s.Permissions, path + ".permissions"
	case c.Groups[group].Permissions != "":
		return c.Groups[group].Permissions, "groups." + group + ".permissions"
	case c.Agents[s.Agent].Permissions != "":
		return c.Agents[s.Agent].Permissions, "agents." + s.Agent + ".permissions"
	}
	return DefaultPermissions, ""
}

// network resolves a session's network setting as permissions does; nil
// means the vendor's default.
func (c *Config) network(group string, s *Session) (*bool, string) {
	path := c.sessionPath(group, s)
	switch {
	case s.Network != nil:
		return s.Network, path + ".network"
	case c.Groups[group].Network != nil:
		return c.Groups[group].Network, "groups." + group + ".network"
	case c.Agents[s.Agent].Network != nil:
		return c.Agents[s.Agent].Network, "agents." + s.Agent + ".network"
	}
	return nil, ""
}

// sessionPath is the key path of a session of a group: groups.web.sessions[1].
func (c *Config) sessionPath(group string, s *Session) string {
	for i := range c.Groups[group].Sessions {
		if &c.Groups[group].Sessions[i] == s {
			return fmt.Sprintf("groups.%s.sessions[%d]", group, i)
		}
	}
	return "groups." + group + ".sessions"
}

// Sim configures the built-in simulated agent.
type Sim struct {
	// Window is the context window in tokens the sim reports.
	Window int64 `koanf:"window" json:"window,omitempty"`
	// TokensPerTurn is how much each turn adds to the context.
	TokensPerTurn int64 `koanf:"tokensPerTurn" json:"tokensPerTurn,omitempty"`
	// TurnDelay is how long a turn takes.
	TurnDelay Duration `koanf:"turnDelay" json:"turnDelay,omitempty"`
	// FailCompact makes every compaction fail.
	FailCompact bool `koanf:"failCompact" json:"failCompact,omitempty"`
	// NoHandoff makes the sim ignore requests to call handoff_write.
	NoHandoff bool `koanf:"noHandoff" json:"noHandoff,omitempty"`
	// HandoffAfterTurns makes the sim call handoff_write by itself after
	// this many turns in one conversation (0: never).
	HandoffAfterTurns int `koanf:"handoffAfterTurns" json:"handoffAfterTurns,omitempty"`
	// Silent makes the sim report no usage at all, like an agent that
	// prints no token counts.
	Silent bool `koanf:"silent" json:"silent,omitempty"`
	// TaskTurns is how many turns the sim spends on a task before it calls
	// task_done.
	TaskTurns int `koanf:"taskTurns" json:"taskTurns,omitempty"`
	// Ack is how a fresh conversation answers nid's request to call
	// handoff_ack: SimAckCorrect (the default) names the tasks it holds,
	// SimAckWrong others, SimAckNone does not call it.
	Ack string `koanf:"ack" json:"ack,omitempty"`
	// CompactAt makes the sim compact by itself, as Claude Code does near
	// its own limit, at the start of a turn once its context is this many
	// percent of the window full (0: never). nid sees a vendor compaction.
	CompactAt int `koanf:"compactAt" json:"compactAt,omitempty"`
	// CompactKeeps is the percent of its context a compaction, nid's or its
	// own, keeps (0: DefaultSimCompactKeeps). A high one is a compaction
	// that does not help.
	CompactKeeps int `koanf:"compactKeeps" json:"compactKeeps,omitempty"`
	// StartTokens is what a fresh conversation holds before its first
	// message, as a real agent's system prompt and tools do.
	StartTokens int64 `koanf:"startTokens" json:"startTokens,omitempty"`
}

// How the sim acknowledges a handoff (Sim.Ack).
const (
	SimAckCorrect = "correct"
	SimAckWrong   = "wrong"
	SimAckNone    = "none"
)

// Sim defaults.
const (
	DefaultSimWindow        int64 = 200_000
	DefaultSimTokensPerTurn int64 = 12_000
	DefaultSimTurnDelay           = 500 * time.Millisecond
	DefaultSimTaskTurns           = 5
	// DefaultSimCompactKeeps: a compaction keeps a tenth.
	DefaultSimCompactKeeps = 10
)

// DefaultSim is the configuration of a sim session that sets nothing.
func DefaultSim() Sim {
	return Sim{
		Window:        DefaultSimWindow,
		TokensPerTurn: DefaultSimTokensPerTurn,
		TurnDelay:     Duration(DefaultSimTurnDelay),
		TaskTurns:     DefaultSimTaskTurns,
	}
}

// Duration is a time.Duration written as "500ms" in YAML and JSON.
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// MarshalJSON writes d as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON accepts a Go duration string or a number of nanoseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("%q is not a duration (use e.g. 500ms, 2s, 1m)", s)
		}
		*d = Duration(v)
		return nil
	}
	var n int64
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("%s is not a duration (use e.g. 500ms, 2s, 1m)", strings.TrimSpace(string(b)))
	}
	*d = Duration(n)
	return nil
}

// DefaultRotate is the policy of a group that says nothing.
func DefaultRotate() Rotate {
	return Rotate{Mode: ModeAuto, ContextPercent: DefaultContextPercent, MaxConcurrentRotations: DefaultMaxConcurrentRotations}
}
