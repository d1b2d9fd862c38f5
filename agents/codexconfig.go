package agents

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/statedir"
)

// codexSandboxMode names the sandbox a sandboxed thread runs in, by the
// process's permissions, as nid doctor says it.
func codexSandboxMode(p Process) string {
	if p.readonly() {
		return "nid's permission profile, read-only"
	}
	return "nid's permission profile, workspace"
}

// codexProfile is the permission profile nid gives a sandboxed Codex:
// one of its own, defined on the command line by codexSandbox.
const codexProfile = "nid"

// placeReadOnlyFiles creates, empty, the worktree's config.worktree when
// git has not made one. Codex's sandbox binds each path it keeps read-only
// from where it is, and a missing one failed the thread's start (bwrap:
// "Can't find source path"), now and then; and a file that is not there
// is one the agent could create in the git directory it writes. Empty, it
// says nothing to git, which reads it only with extensions.worktreeConfig.
func placeReadOnlyFiles(p Process) error {
	gitDir, common := gitDirs(p)
	if gitDir == "" || gitDir == common {
		return nil
	}
	f, err := os.OpenFile(filepath.Join(gitDir, "config.worktree"), os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o644)
	switch {
	case err == nil:
		return f.Close()
	case errors.Is(err, fs.ErrExist):
		return nil
	}
	return fmt.Errorf("keeping the worktree's git config read-only: %w", err)
}

// codexSandbox returns the -c overrides that give a sandboxed Codex its
// sandbox, as a permission profile of nid's own (Codex's older
// workspace-write mode cannot keep a path out of reads):
//
//   - reads: everything but nid's state directory, where only the
//     session's own places stay readable (readPolicy): the HTTP token, the
//     MCP key, the Temporal credential and database and the other
//     sessions' worktrees are out of reach.
//   - writes (workspace): the working directory (Codex keeps its .git and
//     .codex read-only), the session's temp directory, and in a git
//     worktree the parts of the repository's git directory a commit writes,
//     so that `git commit` works while the files that say where the
//     repository is and what git runs there (gitReadOnly) stay read-only.
//     /tmp, every session's and every user's, is not among them; sandboxEnv
//     gives the session a temp directory of its own instead. readonly
//     writes nothing.
//   - network: none, unless Process.Network allows it; then only through
//     Codex's own proxy, which allows every domain but refuses this host's
//     loopback, where the Temporal frontend and nid's HTTP port listen.
//
// Codex prefers this profile to a sandbox_mode in the user's config or in
// the args nid.yaml gives it; should a version not, Codex.thread sees
// another profile reported and refuses to run the thread.
func codexSandbox(p Process) []string {
	if !p.Sandboxed() {
		return nil
	}
	fs := map[string]string{"/": "read"}
	if !p.readonly() {
		for _, d := range append([]string{WorkDir(p), p.TempDir}, gitWritable(p)...) {
			if d != "" {
				fs[d] = "write"
			}
		}
		for _, f := range gitReadOnly(p) {
			fs[f] = "read"
		}
	}
	deny, allow := readPolicy(p)
	for _, d := range allow {
		if _, set := fs[d]; !set {
			fs[d] = "read"
		}
	}
	for _, d := range deny {
		for _, h := range codexHidden(d, fs) {
			fs[h] = "none"
		}
	}
	network := "{enabled=false}"
	args := []string{"-c", "default_permissions=" + tomlString(codexProfile)}
	if p.network() {
		network = `{enabled=true, domains={"*"="allow"}}`
		args = append(args, "-c", "features.network_proxy=true")
	}
	return append(args,
		"-c", "permissions."+codexProfile+".filesystem="+tomlTable(fs),
		"-c", "permissions."+codexProfile+".network="+network)
}

// codexHidden returns what a Codex profile marks "none" so that its
// commands cannot read dir but for the places fs gives them there. Codex
// binds a path it may write again inside a directory it hides, but not one
// it may only read: so a directory holding only places to write is hidden
// whole (a session made in it later stays hidden too), and one holding a
// place only to read (the clone of the group's repository, whose git
// directory a worktree's commits read) is walked into, hiding everything
// else in it, as it stands when the agent's app-server starts.
func codexHidden(dir string, fs map[string]string) []string {
	var writes, reads []string
	for path, access := range fs {
		if path != dir && config.Within(path, dir) {
			if access == "write" {
				writes = append(writes, path)
			} else {
				reads = append(reads, path)
			}
		}
	}
	// A place to read inside one to write is bound again with it.
	reads = slices.DeleteFunc(reads, func(r string) bool {
		return slices.ContainsFunc(writes, func(w string) bool { return config.Within(r, w) })
	})
	var hidden []string
	var walk func(d string, names []string)
	walk = func(d string, names []string) {
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			names = append(names, e.Name())
		}
		slices.Sort(names)
		for _, name := range slices.Compact(names) {
			path := filepath.Join(d, name)
			if _, own := fs[path]; own {
				continue
			}
			if slices.ContainsFunc(reads, func(r string) bool { return config.Within(r, path) }) {
				walk(path, nil)
				continue
			}
			hidden = append(hidden, path)
		}
	}
	// What nid keeps there is hidden by name, there yet or not, so that
	// the list (and the app-server's command line, which would start it
	// again when it changes) stays the same from one turn to the next.
	walk(dir, append(slices.Clone(stateSecrets), stateDirs...))
	return hidden
}

// stateDirs are the directories nid keeps in its state directory.
var stateDirs = []string{"agents", "exec", "gitdirs", "pids", "repos", "sim", "transcripts", statedir.Worktrees}

// tomlString is s as a TOML basic string: JSON's escapes are TOML's.
func tomlString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// tomlTable is m as an inline TOML table of strings, its keys in order.
func tomlTable(m map[string]string) string {
	var pairs []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		pairs = append(pairs, tomlString(k)+"="+tomlString(m[k]))
	}
	return "{" + strings.Join(pairs, ", ") + "}"
}

// codexKeys are the variables Codex takes an OpenAI API key from.
var codexKeys = []string{"OPENAI_API_KEY", "CODEX_API_KEY"}

// codexCredentials finds what Codex logs in with. Its model provider (a
// -c model_provider= override in the session's args, else config.toml's
// model_provider, else OpenAI) decides: OpenAI takes a key in the
// environment or a `codex login` in CODEX_HOME; a provider of the user's
// own takes the variable its env_key names, or nothing when it names none.
func codexCredentials(env map[string]string, p Process) Check {
	c := Check{Name: "credentials", Status: CheckOK}
	home, provider, key := codexProvider(env, p)
	if provider != "openai" {
		switch {
		case key == "":
			c.Text = "model provider " + provider + " names no env_key: it takes no key"
		case env[key] != "":
			c.Text = key + " is set, for model provider " + provider
		default:
			c.Status, c.ErrType = CheckFail, ErrUnknownAgent
			c.Text = fmt.Sprintf("codex: model provider %s takes its key from %s, which is not set: set it in agents.codex.env or nid's own environment", provider, key)
		}
		return c
	}
	if k := firstSet(env, codexKeys...); k != "" {
		c.Text = k + " is set"
		return c
	}
	if auth := filepath.Join(home, "auth.json"); exists(auth) {
		c.Text = "a login in " + auth
		return c
	}
	c.Status, c.ErrType = CheckFail, ErrUnknownAgent
	c.Text = fmt.Sprintf("codex: no credentials for Codex: no %s in its environment and no login in %s; "+
		"set OPENAI_API_KEY (agents.codex.env, or nid's own environment), or log in with codex login as this user with CODEX_HOME=%s",
		strings.Join(codexKeys, " or "), home, home)
	return c
}

// codexProvider is the CODEX_HOME Codex reads with env, the model provider
// it uses for p, and the variable the provider's env_key names (none for
// OpenAI's own, whose are codexKeys).
func codexProvider(env map[string]string, p Process) (home, provider, key string) {
	home = cmp.Or(env["CODEX_HOME"], filepath.Join(env["HOME"], ".codex"))
	toml := readCodexConfig(filepath.Join(home, "config.toml"))
	provider = cmp.Or(codexOverride(p.Args, "model_provider"), toml[".model_provider"], "openai")
	if provider != "openai" {
		key = cmp.Or(codexOverride(p.Args, "model_providers."+provider+".env_key"), toml["model_providers."+provider+".env_key"])
	}
	return home, provider, key
}

// codexProviderEnv names the variable Codex's model provider takes its key
// from, so that the worker's passes to the agent as OpenAI's does.
func codexProviderEnv(env map[string]string, p Process) []string {
	if _, _, key := codexProvider(env, p); key != "" {
		return []string{key}
	}
	return nil
}

// codexOverride is the value a -c (--config) key=value override in args
// gives key, unquoted; empty when none does.
func codexOverride(args []string, key string) string {
	v := ""
	for i := 0; i+1 < len(args); i++ {
		if args[i] != "-c" && args[i] != "--config" {
			continue
		}
		if k, val, ok := strings.Cut(args[i+1], "="); ok && strings.TrimSpace(k) == key {
			v = tomlUnquote(strings.TrimSpace(val))
		}
	}
	return v
}

// readCodexConfig reads the string values of a config.toml, keyed by
// table and key ("model_providers.local.env_key"; top-level keys as
// ".model_provider"). It reads only what the credentials check needs:
// `key = "string"` lines under [table] headers; anything else is skipped.
func readCodexConfig(path string) map[string]string {
	out := map[string]string{}
	b, err := os.ReadFile(path)
	if err != nil {
		return out
	}
	table := ""
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") && !strings.HasPrefix(line, "[[") {
			var parts []string
			for _, part := range strings.Split(strings.Trim(line, "[] "), ".") {
				parts = append(parts, tomlUnquote(strings.TrimSpace(part)))
			}
			table = strings.Join(parts, ".")
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		v = strings.TrimSpace(v)
		if i := strings.Index(v, " #"); i >= 0 && (strings.HasPrefix(v, "'") || strings.Count(v[:i], `"`)%2 == 0) {
			v = strings.TrimSpace(v[:i])
		}
		if !strings.HasPrefix(v, `"`) && !strings.HasPrefix(v, "'") {
			continue
		}
		out[table+"."+tomlUnquote(strings.TrimSpace(k))] = tomlUnquote(v)
	}
	return out
}

// tomlUnquote is a TOML basic ("...") or literal ('...') string's value,
// or s itself when it is neither.
func tomlUnquote(s string) string {
	if len(s) >= 2 && s[0] == '\'' && s[len(s)-1] == '\'' {
		return s[1 : len(s)-1]
	}
	if len(s) >= 2 && s[0] == '"' {
		if u, err := strconv.Unquote(s); err == nil {
			return u
		}
	}
	return s
}

// codexSandboxCheck checks Codex's own sandbox, which it brings with it.
// With deep it starts the CLI's app-server as a turn would, which runs
// `true` in that sandbox (see probeSandbox), then stops it; a turn does
// the same before its first prompt.
func codexSandboxCheck(ctx context.Context, cli string, p Process, _ map[string]string, deep bool) Check {
	k := KindOf(KindCodex)
	if !p.Sandboxed() {
		return sandboxNotNeeded(k)
	}
	c := Check{Name: "sandbox", Status: CheckOK, Text: "Codex's own (" + codexSandboxMode(p) + "), tried before the session's first turn"}
	if !deep {
		return c
	}
	if cli == "" {
		c.Status, c.Text = CheckWarn, "Codex's own ("+codexSandboxMode(p)+"): not tried, for want of its CLI"
		return c
	}
	if p.TempDir == "" {
		// As a turn has: the session's own temp directory, which its
		// sandbox may write.
		tmp, err := os.MkdirTemp("", "nid-doctor-")
		if err != nil {
			c.Status, c.Text = CheckWarn, "Codex's own ("+codexSandboxMode(p)+"): not tried: "+err.Error()
			return c
		}
		defer os.RemoveAll(tmp)
		p.TempDir = tmp
	}
	cmd, err := codexCommand(p, MCPAccess{})
	var s *codexServer
	if err == nil {
		s, err = startCodex(ctx, cmd, p)
	}
	if err != nil {
		c.Status, c.Text = CheckFail, oneLine(err.Error(), 400)
		if e, ok := errors.AsType[*Error](err); ok && e.Type == ErrSandboxUnavailable {
			c.ErrType = ErrSandboxUnavailable
		} else {
			c.Text = "codex: could not start the app-server to try its sandbox: " + c.Text
			c.ErrType = ErrUnknownAgent
		}
		return c
	}
	s.kill()
	<-s.exited
	c.Text = "Codex's own (" + codexSandboxMode(p) + "): it ran `true` here"
	return c
}
