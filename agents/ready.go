package agents

import (
	"bytes"
	"cmp"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/nid-dev/nid/internal/clip"
)

// What a host needs to run a session's agent, checked the same way by nid
// doctor and by every turn before it starts the agent: its CLI, the
// credentials it logs in with and the sandbox its permissions ask for. A
// turn whose agent fails a check does not run at all: it fails with the
// check's words, and the session needs the human at once (see
// workflows.needsHuman) instead of failing the same way three times.

// Check statuses.
const (
	CheckOK = "ok"
	// CheckWarn is a check that passed with something worth knowing: a
	// CLI version nid is not tested with.
	CheckWarn = "warn"
	// CheckFail is a check whose session cannot start until it is mended.
	CheckFail = "fail"
)

// Check is one thing nid doctor checks, and what it found.
type Check struct {
	// Session is the session it is about ("web/lead"); empty for the host.
	Session string `json:"session,omitempty"`
	// Name is what was checked: "temporal", "state", "cli", "credentials".
	Name   string `json:"check"`
	Status string `json:"status"`
	// Text is what was found, or what to do; it never holds a secret.
	Text string `json:"text"`
	// ErrType is the error type a turn fails with when this check fails.
	ErrType string `json:"-"`
}

// Failing returns the checks that failed.
func Failing(checks []Check) []Check {
	var out []Check
	for _, c := range checks {
		if c.Status == CheckFail {
			out = append(out, c)
		}
	}
	return out
}

//go:embed testdata/agents/package.json
var agentsPackageJSON []byte

// TestedVersion is the version of the kind's CLI that nid's tests run:
// the one testdata/agents/package.json pins, which `npm ci` installs for
// them. Empty for a kind whose CLI nid does not install (sim, exec).
func TestedVersion(k Kind) string {
	if k.Package == "" {
		return ""
	}
	var pkg struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	if err := json.Unmarshal(agentsPackageJSON, &pkg); err != nil {
		panic("agents: testdata/agents/package.json: " + err.Error())
	}
	return pkg.Dependencies[k.Package]
}

// installHint says how to install a kind's CLI, at the version nid is
// tested with.
func installHint(k Kind) string {
	if k.Package == "" {
		return "install it"
	}
	return fmt.Sprintf("install %s (npm install -g %s@%s, the version nid is tested with)", k.Title, k.Package, TestedVersion(k))
}

// Ready runs a turn's checks of p: the first that fails is the turn's
// error, in the check's words.
func Ready(ctx context.Context, ref SessionRef, k Kind, p Process) error {
	for _, c := range AgentChecks(ctx, k, p, false) {
		if c.Status == CheckFail {
			return &Error{Type: c.ErrType, Err: fmt.Errorf("%s (nid doctor checks this again; nid send %s/%s resumes the session once it is mended)",
				c.Text, ref.Group, ref.Name)}
		}
	}
	return nil
}

// AgentChecks are the checks of a process agent: CLI, credentials,
// sandbox, one each.
func AgentChecks(ctx context.Context, k Kind, p Process, deep bool) []Check {
	env := ProcessEnv(p, nil)
	path, cli := cliCheck(ctx, k, p, env, deep)
	checks := []Check{cli}
	if k.Credentials != nil {
		checks = append(checks, k.Credentials(env, p))
	}
	switch {
	case k.Sandbox != nil:
		checks = append(checks, k.Sandbox(ctx, path, p, env, deep))
	case !p.Sandboxed():
		checks = append(checks, sandboxNotNeeded(k))
	}
	return checks
}

// versionRE finds a version number in what a CLI's --version prints
// ("2.1.332 (Claude Code)", "codex-cli 0.171.0").
var versionRE = regexp.MustCompile(`\d+\.\d+\.\d+[0-9A-Za-z.+-]*`)

// cliCheck finds the kind's command as a turn would and, with deep, asks
// it its version; it returns the command's path ("" when missing).
func cliCheck(ctx context.Context, k Kind, p Process, env map[string]string, deep bool) (string, Check) {
	c := Check{Name: "cli"}
	path, err := lookCommand(k.Name, p)
	if err != nil {
		c.Status, c.Text, c.ErrType = CheckFail, err.Error(), ErrUnknownAgent
		return "", c
	}
	c.Status, c.Text = CheckOK, "found at "+path
	if !deep || k.Package == "" {
		return path, c
	}
	vctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := newCommand(vctx, path, []string{"--version"}, p, nil)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	runErr := cmd.Run()
	version := versionRE.FindString(out.String())
	tested := TestedVersion(k)
	switch {
	case runErr != nil || version == "":
		said := cmp.Or(oneLine(out.String(), 200), "nothing")
		if runErr != nil {
			said += " (" + runErr.Error() + ")"
		}
		c.Status, c.ErrType = CheckFail, ErrUnknownAgent
		c.Text = fmt.Sprintf("%s: %s does not run: `%s --version` says %s; reinstall it: %s", k.Name, path, filepath.Base(path), said, installHint(k))
	case version == tested:
		c.Text = fmt.Sprintf("%s, version %s: the version nid is tested with", path, version)
	default:
		c.Status = CheckWarn
		c.Text = fmt.Sprintf("%s, version %s: nid is tested with %s (npm install -g %s@%s)", path, version, tested, k.Package, tested)
	}
	return path, c
}

// lookPathIn finds name on the search path list, as the agent's own
// environment would: a sandbox's helpers are looked up by the agent's CLI
// with its PATH, which nid.yaml may set, not the worker's.
func lookPathIn(name, list string) (string, bool) {
	for _, dir := range filepath.SplitList(list) {
		if dir == "" {
			dir = "."
		}
		path := filepath.Join(dir, name)
		if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return path, true
		}
	}
	return "", false
}

// fileHas says the JSON file at path is an object holding one of keys.
func fileHas(path string, keys ...string) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return false
	}
	for _, k := range keys {
		if v, ok := m[k]; ok && string(v) != "null" && string(v) != `""` {
			return true
		}
	}
	return false
}

// oneLine is s with its lines joined by "; ", clipped to n runes: what a
// process printed, fit for one line of nid doctor.
func oneLine(s string, n int) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return clip.Runes(strings.TrimSpace(strings.Join(lines, "; ")), n)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// firstSet is the first of names set to something in env.
func firstSet(env map[string]string, names ...string) string {
	for _, n := range names {
		if env[n] != "" {
			return n
		}
	}
	return ""
}

// sandboxNotNeeded is the sandbox check of a session that runs without one.
func sandboxNotNeeded(k Kind) Check {
	return Check{Name: "sandbox", Status: CheckOK, Text: "none: permissions: full runs " + k.Name + " without a sandbox"}
}
