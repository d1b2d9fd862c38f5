package config

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	koanfmaps "github.com/knadh/koanf/maps"
	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/providers/env/v2"
	"github.com/knadh/koanf/v2"
)

// DefaultFile is the file Load reads, if it exists, when none is named.
const DefaultFile = "nid.yaml"

// EnvPrefix starts every environment variable nid reads for its
// configuration: NID_TEMPORAL_UI_PORT sets temporal.ui.port.
const EnvPrefix = "NID_"

// EnvConfig is the variable for the command line's --config flag. It names
// the file rather than a key, so Load passes over it instead of calling it
// unknown.
const EnvConfig = EnvPrefix + "CONFIG"

// temporalEnv maps the Temporal CLI's own variables to nid's keys, so a shell
// already set up for `temporal` points nid at the same cluster.
var temporalEnv = map[string]string{
	"TEMPORAL_ADDRESS":   "temporal.address",
	"TEMPORAL_NAMESPACE": "temporal.namespace",
	"TEMPORAL_API_KEY":   "temporal.apiKey",
}

// LoadOptions says where Load finds the configuration.
type LoadOptions struct {
	// File is the YAML file to read. Empty means DefaultFile in the current
	// directory if there is one, else no file at all.
	File string
	// Environ is the environment, as os.Environ returns it. Nil means the
	// process's own environment.
	Environ []string
	// Flags override everything else, by koanf key path:
	// {"temporal.port": 7300}.
	Flags map[string]any
	// Worker says the configuration is for a process that runs sessions
	// (nid up, nid worker): only then must each group's repo be a git
	// repository on this host. Commands that only read leave it false, so
	// a repo they never use cannot stop them.
	Worker bool
	// Kinds are the agent kinds sessions may name, with what the
	// configuration must know of each: agents.ConfigKinds(). Without
	// them, a session names no known agent.
	Kinds []Kind
	// Partial returns an invalid configuration as far as it was read,
	// with the error listing its problems: nid doctor reports them and
	// goes on to check everything else.
	Partial bool
}

// Load builds the configuration from built-in defaults, then the YAML file,
// then NID_* environment variables (and TEMPORAL_ADDRESS,
// TEMPORAL_NAMESPACE and TEMPORAL_API_KEY, which NID_ ones override), then
// flags, and validates it. A file that cannot be parsed is an error naming
// it and the line of the mistake; an invalid configuration is one error
// listing every problem (Problems lists them one by one), each under the
// environment variable that set the value when one did, with no
// configuration unless LoadOptions.Partial asks for it.
func Load(opts LoadOptions) (*Config, error) {
	file, data, err := readFile(opts.File)
	if err != nil {
		return nil, err
	}
	environ := opts.Environ
	if environ == nil {
		environ = os.Environ()
	}

	k := koanf.New(".")
	// The groups, most of a fleet's file, are kept out of koanf: no
	// variable or flag sets a key inside them, and koanf copies every
	// value it holds deeply when asked for them (Raw), a fifth of the time
	// nid ls took to read a thousand sessions' nid.yaml.
	var groups any
	var hasGroups bool
	if data != nil {
		parsed, err := yaml.Parser().Unmarshal(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, yamlError(data, err))
		}
		koanfmaps.IntfaceKeysToStrings(parsed)
		groups, hasGroups = parsed["groups"]
		delete(parsed, "groups")
		if err := k.Load(confmap.Provider(parsed, ""), nil); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
	}
	fromEnv := func() []string { return environ }
	// setBy names the variable each key's value came from, so a bad value
	// is reported under the variable the user set, not under the file.
	setBy := make(map[string]string)
	temporal := env.Provider(".", env.Opt{
		EnvironFunc: fromEnv,
		TransformFunc: func(name, value string) (string, any) {
			// An empty variable is one left unset in a shell profile.
			if value == "" {
				return "", nil
			}
			if key := temporalEnv[name]; key != "" {
				setBy[key] = name
			}
			return temporalEnv[name], value
		},
	})
	if err := k.Load(temporal, nil); err != nil {
		return nil, err
	}
	envKeys := scalarKeys(reflect.TypeFor[Config](), "")
	var envProblems []problem
	nid := env.Provider(".", env.Opt{
		Prefix:      EnvPrefix,
		EnvironFunc: fromEnv,
		TransformFunc: func(name, value string) (string, any) {
			if name == EnvConfig {
				return "", nil
			}
			// Keys are camelCase, variables upper case: match either way.
			key, ok := envKeys[strings.ToUpper(name)]
			if !ok {
				// A moved key or a near miss of a known variable is worth
				// stopping for; any other NID_ variable is someone else's (a
				// shell profile's, a script's), not nid's to refuse.
				if msg := envUnknown(name, envKeys); msg != "" {
					envProblems = append(envProblems, problem{name, msg})
					setBy[name] = name
				}
				return "", nil
			}
			if value != "" {
				setBy[key] = name
			}
			return key, value
		},
	})
	if err := k.Load(nid, nil); err != nil {
		return nil, err
	}
	if len(opts.Flags) > 0 {
		if err := k.Load(confmap.Provider(opts.Flags, "."), nil); err != nil {
			return nil, err
		}
		for key := range opts.Flags {
			delete(setBy, key)
		}
	}

	c := Default()
	d := decoder{kinds: opts.Kinds}
	raw := k.Raw()
	if hasGroups {
		raw["groups"] = groups
	}
	d.decode("", raw, reflect.ValueOf(c).Elem())
	c.nameSessions()
	c.resolvePaths(filepath.Dir(file))
	ps := merge(append(envProblems, d.problems...), c.problems(opts.Kinds))
	if opts.Worker {
		ps = merge(ps, c.repoProblems())
	}
	if len(ps) > 0 {
		invalid := &invalidError{file: file, setBy: setBy, problems: ps}
		if opts.Partial {
			return c, invalid
		}
		return nil, invalid
	}
	return c, nil
}

// readFile returns the configuration file's name and contents, or no name
// and no contents when none was named and DefaultFile does not exist.
func readFile(name string) (string, []byte, error) {
	if name == "" {
		data, err := os.ReadFile(DefaultFile)
		if errors.Is(err, fs.ErrNotExist) {
			return "", nil, nil
		}
		if err != nil {
			return "", nil, fmt.Errorf("config file: %w", err)
		}
		return DefaultFile, data, nil
	}
	data, err := os.ReadFile(name)
	if err != nil {
		return "", nil, fmt.Errorf("config file: %w", err)
	}
	return name, data, nil
}

// resolvePaths makes the file's relative paths relative to the file's own
// directory, as a reader of the file expects, rather than to wherever nid
// was started: the state directory, the TLS files, each group's repo and
// workdir, and a command named by a path (./agent.sh; a bare name is looked
// up on PATH).
func (c *Config) resolvePaths(dir string) {
	if d, err := filepath.Abs(dir); err == nil {
		dir = d
	}
	abs := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(dir, p)
	}
	c.State = abs(c.State)
	t := &c.Temporal.TLS
	t.CAFile, t.CertFile, t.KeyFile = abs(t.CAFile), abs(t.CertFile), abs(t.KeyFile)
	command := func(cmd string) string {
		if strings.ContainsRune(cmd, filepath.Separator) {
			return abs(cmd)
		}
		return cmd
	}
	for name, g := range c.Groups {
		if !IsRepoURL(g.Repo) {
			g.Repo = abs(g.Repo)
		}
		g.WorkDir = abs(g.WorkDir)
		for i := range g.Sessions {
			g.Sessions[i].Command = command(g.Sessions[i].Command)
		}
		c.Groups[name] = g
	}
	for kind, a := range c.Agents {
		a.Command = command(a.Command)
		c.Agents[kind] = a
	}
}

// nameSessions gives each session without a name its agent kind's name.
func (c *Config) nameSessions() {
	for _, g := range c.Groups {
		for i := range g.Sessions {
			if g.Sessions[i].Name == "" {
				g.Sessions[i].Name = g.Sessions[i].Agent
			}
		}
	}
}

// scalarKeys returns the environment variable for every key of struct type t
// that holds a single value outside groups, mapped to its key path:
// NID_TEMPORAL_UI_PORT → temporal.ui.port. Groups are lists and maps, which
// one variable cannot express.
func scalarKeys(t reflect.Type, prefix string) map[string]string {
	out := make(map[string]string)
	for i := range t.NumField() {
		f := t.Field(i)
		key := join(prefix, f.Tag.Get("koanf"))
		switch {
		case f.Type.Kind() == reflect.Struct:
			for name, k := range scalarKeys(f.Type, key) {
				out[name] = k
			}
		case f.Type.Kind() != reflect.Map && f.Type.Kind() != reflect.Slice:
			out[envName(key)] = key
		}
	}
	return out
}

// envUnknown says what is wrong with a NID_ variable that names no key:
// it names a key that moved, or is a typo of a known variable; "" when it
// is not nid's at all.
func envUnknown(name string, known map[string]string) string {
	for from, to := range movedKeys {
		if strings.EqualFold(name, envName(from)) {
			return fmt.Sprintf("moved to %s (%s)", envName(to), to)
		}
	}
	if near := nearestEnv(strings.ToUpper(name), known); near != "" {
		return "unknown environment variable; did you mean " + near + "?"
	}
	return ""
}

// nearestEnv is the known variable name is a typo of, if any: at most two
// letters added, dropped or changed.
func nearestEnv(name string, known map[string]string) string {
	best, bestDist := "", 3
	for _, k := range slices.Sorted(maps.Keys(known)) {
		if d := editDistance(name, k); d < bestDist {
			best, bestDist = k, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

func envName(key string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// Problems are the problems of an invalid configuration that Load
// reported in err, each naming its key, or nil when err is not one (no
// error, a file that cannot be read or parsed).
func Problems(err error) []string {
	invalid, ok := errors.AsType[*invalidError](err)
	if !ok {
		return nil
	}
	out := make([]string, len(invalid.problems))
	for i, p := range invalid.problems {
		out[i] = invalid.line(p)
	}
	return out
}

// invalidError lists every problem Load found, each under the name the
// user wrote: a key of the file, or the environment variable that set it.
type invalidError struct {
	file     string // "" when there was none
	setBy    map[string]string
	problems []problem
}

func (e *invalidError) Error() string {
	var b strings.Builder
	b.WriteString(e.source())
	if len(e.problems) == 1 {
		b.WriteString(": " + e.line(e.problems[0]))
		return b.String()
	}
	fmt.Fprintf(&b, ": %d problems:", len(e.problems))
	for _, p := range e.problems {
		b.WriteString("\n  " + e.line(p))
	}
	return b.String()
}

// source names where the problems are: the file only when one of them is
// in it, since a variable's mistake is not the file's.
func (e *invalidError) source() string {
	var inEnv, elsewhere bool
	for _, p := range e.problems {
		if e.setBy[p.path] != "" {
			inEnv = true
		} else {
			elsewhere = true
		}
	}
	where := e.file
	if where == "" {
		where = "configuration"
	}
	switch {
	case inEnv && elsewhere:
		return where + " and the environment"
	case inEnv:
		return "environment"
	}
	return where
}

// line renders one problem, naming the variable that set its key:
// NID_TEMPORAL_PORT (temporal.port): "abc" is not a number.
func (e *invalidError) line(p problem) string {
	if v := e.setBy[p.path]; v != "" && v != p.path {
		return v + " (" + p.path + "): " + p.msg
	}
	return p.String()
}
