package cli

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/internal/temporaltest"
	"github.com/nid-dev/nid/nidclient"
	"github.com/nid-dev/nid/worker"
	"github.com/nid-dev/nid/workflows"
)

// writeYAML writes a nid.yaml into a directory of its own and returns its
// path.
func writeYAML(t *testing.T, yaml string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "nid.yaml")
	require.NoError(t, os.WriteFile(file, []byte(yaml), 0o600))
	return file
}

// doctorChecks runs nid doctor --json and returns its checks by what
// they checked ("temporal", "web/lead cli"), each as "status: text".
func doctorChecks(t *testing.T, file string) (map[string]string, error) {
	t.Helper()
	out, _, err := runApp(t, Deps{Dial: worker.Dial}, "doctor", "--json", "--config", file)
	var checks []agents.Check
	require.NoError(t, json.Unmarshal([]byte(out), &checks), "%s", out)
	got := map[string]string{}
	for _, c := range checks {
		what := strings.TrimSpace(c.Session + " " + c.Name)
		if got[what] != "" {
			got[what] += "\n"
		}
		got[what] += c.Status + ": " + c.Text
	}
	return got, err
}

// nid doctor against a cluster: Temporal answers, the state directory can
// be made, git and each group's repo, each session's agent, the HTTP
// port; a session that cannot start fails it, saying what to do.
func TestDoctor(t *testing.T) {
	t.Parallel()
	env := temporaltest.New(t)
	dir := t.TempDir()
	notRepo := t.TempDir()
	yaml := fmt.Sprintf(`state: %s
temporal: {address: %s, namespace: %s, apiKey: %s}
http: {listen: "127.0.0.1:0"}
groups:
  web:
    repo: %s
    sessions:
      - {agent: sim, name: lead}
      - {agent: exec, name: lint, command: %s, permissions: full}
`, filepath.Join(dir, "state"), env.Address, env.Namespace, env.APIKey, notRepo, filepath.Join(dir, "no-such-lint"))
	file := writeYAML(t, yaml)
	lint := filepath.Join(dir, "no-such-lint")
	checks, err := doctorChecks(t, file)
	require.EqualError(t, err, "2 of 9 checks failed: mend what their lines say, then run nid doctor again")
	require.Equal(t, map[string]string{
		"temporal":         "ok: Temporal at " + env.Address + " answers (namespace " + env.Namespace + ")",
		"state":            "ok: " + filepath.Join(dir, "state") + " does not exist yet: nid up makes it in " + dir + ", which this user can write",
		"git":              checks["git"],
		"repo":             checks["repo"],
		"web/lead agent":   "ok: the sim agent runs inside nid: nothing to install",
		"web/lint cli":     `fail: exec: command "` + lint + `" not found: install it, or set agents.exec.command to where it is`,
		"web/lint sandbox": "ok: none: permissions: full runs exec without a sandbox",
		"http":             "ok: http.listen 127.0.0.1:0 is free",
		"rungs":            fmt.Sprintf("ok: no nid workflow runs in namespace %s: none needs a rung older than %d, this nid's newest", env.Namespace, workflows.Latest),
	}, checks)
	require.Regexp(t, `^ok: git version \S+ \(/\S+/git\), for the repo: of web$`, checks["git"])
	require.Regexp(t, `^fail: groups.web.repo: ".*" is not a git repository \(.*\): set it to a git repository \(git init makes one\)$`, checks["repo"])

	// The text: one line per check, what failed saying what to do.
	out, _, err := runApp(t, Deps{Dial: worker.Dial}, "doctor", "--config", file)
	require.Error(t, err)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Len(t, lines, 9)
	require.Equal(t, `fail  web/lint cli      exec: command "`+lint+`" not found: install it, or set agents.exec.command to where it is`, lines[5])
	require.Equal(t, "ok    http              http.listen 127.0.0.1:0 is free", lines[7])

	// Mended, every check passes and nid doctor exits 0.
	mended := strings.Replace(strings.Replace(yaml, "    repo: "+notRepo+"\n", "", 1), lint, "/bin/true", 1)
	checks, err = doctorChecks(t, writeYAML(t, mended))
	require.NoError(t, err, "%v", checks)
	require.Equal(t, "ok: found at /bin/true", checks["web/lint cli"])
	require.NotContains(t, checks, "git", "no group has repo: git is not checked")
}

// A configuration with a problem does not stop nid doctor: the problem is
// a failed check, and the others run too, the repo and git ones included,
// so it lists every problem nid up --dry-run would.
func TestDoctorGoesOnPastConfigurationProblems(t *testing.T) {
	t.Parallel()
	env := temporaltest.New(t)
	dir := t.TempDir()
	notRepo := t.TempDir()
	file := writeYAML(t, fmt.Sprintf(`state: %s
temporal: {address: %s, namespace: %s, apiKey: %s}
http: {listen: "127.0.0.1:0"}
groups:
  web:
    repo: %s
    rotate: {mode: sometimes}
    sessions:
      - {agent: sim, name: lead}
`, filepath.Join(dir, "state"), env.Address, env.Namespace, env.APIKey, notRepo))
	checks, err := doctorChecks(t, file)
	require.EqualError(t, err, "2 of 8 checks failed: mend what their lines say, then run nid doctor again")
	require.Regexp(t, `^fail: groups.web.rotate.mode: "sometimes" `, checks["config"])
	require.Regexp(t, `^fail: groups.web.repo: ".*" is not a git repository \(`, checks["repo"])
	require.Regexp(t, `^ok: git version `, checks["git"])
	require.Equal(t, "ok: the sim agent runs inside nid: nothing to install", checks["web/lead agent"])

	// nid up --dry-run names the same two problems.
	_, _, err = runApp(t, Deps{Dial: worker.Dial}, "up", "--dry-run", "--config", file)
	require.ErrorContains(t, err, "2 problems")
	require.ErrorContains(t, err, "groups.web.rotate.mode")
	require.ErrorContains(t, err, "groups.web.repo")

	// A file that cannot be read stops it: there is nothing to check.
	_, _, err = runApp(t, Deps{Dial: worker.Dial}, "doctor", "--config", filepath.Join(dir, "none.yaml"))
	require.ErrorContains(t, err, "config file: ")
}

// For the embedded server nid doctor checks its ports are free; one
// taken, or the HTTP port taken, is a failure naming the key to change. A
// nid running on the state directory holds them itself: then Temporal must
// answer there.
func TestDoctorPorts(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = taken.Close() })
	port := taken.Addr().(*net.TCPAddr).Port
	free := temporaltest.FreePort()
	state := filepath.Join(t.TempDir(), "state")
	yaml := fmt.Sprintf("state: %s\ntemporal: {port: %d, ui: {port: %d}}\nhttp: {listen: %q}\ngroups: {}\n", state, port, free, taken.Addr().String())
	file := writeYAML(t, yaml)
	checks, err := doctorChecks(t, file)
	require.EqualError(t, err, "2 of 5 checks failed: mend what their lines say, then run nid doctor again")
	require.Equal(t, "ok: "+filepath.Join(state, "temporal-token")+" does not exist yet: nid up makes it when its Temporal server first starts", checks["credential"])
	require.Equal(t, fmt.Sprintf("fail: temporal.port 127.0.0.1:%d is taken by another program, so nid up cannot start its embedded server: "+
		"stop it, or set temporal.port to a free port (listen tcp 127.0.0.1:%d: bind: address already in use)\n"+
		"ok: temporal.ui.port 127.0.0.1:%d is free for nid up's embedded server", port, port, free), checks["temporal"])
	require.Equal(t, fmt.Sprintf("fail: http.listen %s is taken by another program, so nid up cannot serve the dashboard and the agents' MCP endpoint: "+
		"stop it, or set http.listen to a free port (listen tcp %s: bind: address already in use)", taken.Addr(), taken.Addr()), checks["http"])

	// The running nid's own ports: its HTTP port is in use by it, and its
	// Temporal must answer, which this one does not.
	require.NoError(t, os.MkdirAll(state, 0o700))
	require.NoError(t, writeRunning(&config.Config{State: state}, false))
	checks, err = doctorChecks(t, file)
	require.Error(t, err)
	require.Equal(t, fmt.Sprintf("ok: http.listen %s: the running nid (process %d) serves it", taken.Addr(), os.Getpid()), checks["http"])
	require.Contains(t, checks["temporal"], fmt.Sprintf("fail: nid (process %d) runs on %s, but its Temporal server does not answer", os.Getpid(), state))
}

// Against nid's own Temporal server, nid doctor checks the credential in
// the state directory: there, private, and accepted by the server.
func TestDoctorCredential(t *testing.T) {
	t.Parallel()
	env := temporaltest.New(t)
	state := filepath.Join(t.TempDir(), "state")
	file := writeYAML(t, fmt.Sprintf("state: %s\ntemporal: {address: %s, namespace: %s}\nhttp: {listen: \"127.0.0.1:0\"}\ngroups: {}\n",
		state, env.Address, env.Namespace))
	token := filepath.Join(state, "temporal-token")
	credential := func() string {
		checks, _ := doctorChecks(t, file)
		return checks["credential"]
	}

	require.Equal(t, "fail: "+token+" is missing, and the Temporal server at "+env.Address+" refuses clients without the credential its nid up or nid server made: "+
		"set state to that nid's state directory, or temporal.apiKey to the content of its temporal-token", credential())

	require.NoError(t, os.MkdirAll(state, 0o700))
	require.NoError(t, os.WriteFile(token, []byte(env.APIKey+"\n"), 0o600))
	require.Equal(t, "ok: "+token+" is private and the Temporal server at "+env.Address+" accepts it", credential())

	require.NoError(t, os.Chmod(token, 0o644))
	require.Equal(t, "fail: "+token+" is readable by other users (mode 0644), and whoever reads it controls every session: chmod 600 "+token+" (nid up tightens it too)", credential())

	require.NoError(t, os.WriteFile(token, []byte("not-the-credential\n"), 0o600))
	require.NoError(t, os.Chmod(token, 0o600))
	require.Equal(t, "fail: the Temporal server at "+env.Address+" refused nid's credential from "+token+
		": it is not the credential that server keeps (a nid server with another state directory? set temporal.apiKey to the content of its temporal-token)", credential())
}

// While workflows run, nid doctor says the oldest rung of the version
// ladder they follow, and --rungs lists each with its rung, read from what
// it published; a workflow an older nid started is read from its history
// (nidclient's TestReadRungs).
func TestDoctorRungs(t *testing.T) {
	t.Parallel()
	s := newSite(t, `  web:
    sessions:
      - {agent: sim, name: lead}
`)
	file := writeYAML(t, fmt.Sprintf("state: %s\ntemporal: {address: %s, namespace: %s, apiKey: %s}\nhttp: {listen: \"127.0.0.1:0\"}\ngroups: {}\n",
		filepath.Join(t.TempDir(), "state"), s.Address, s.Namespace, s.APIKey))
	latest := workflows.Latest
	var r nidclient.Rungs
	require.Eventually(t, func() bool {
		out, _, err := runApp(t, Deps{Dial: worker.Dial}, "doctor", "--rungs", "--json", "--config", file)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal([]byte(out), &r), "%s", out)
		memo := 0
		for _, w := range r.Workflows {
			if w.From == "memo" {
				memo++
			}
		}
		return memo == 3 && len(r.Workflows) == 3
	}, 30*time.Second, 100*time.Millisecond, "the group, its session and the hosts registry published their rung")
	require.Equal(t, nidclient.Rungs{Latest: latest, Oldest: &latest, Counts: []nidclient.RungCount{{Rung: latest, Workflows: 3}},
		Workflows: []nidclient.RunningRung{
			{ID: workflows.HostsID, Type: workflows.HostsWorkflowName, Rung: &latest, From: "memo"},
			{ID: workflows.GroupID("web"), Type: workflows.GroupWorkflowName, Rung: &latest, From: "memo"},
			{ID: workflows.SessionID("web", "lead"), Type: workflows.SessionWorkflowName, Rung: &latest, From: "memo"},
		}}, r)

	out, _, err := runApp(t, Deps{Dial: worker.Dial}, "doctor", "--rungs", "--config", file)
	require.NoError(t, err)
	n := strconv.Itoa(int(latest))
	require.Equal(t, "RUNG  FROM  TYPE         WORKFLOW\n"+
		n+"    memo  nid.Hosts    nid/hosts\n"+
		n+"    memo  nid.Group    nid/web\n"+
		n+"    memo  nid.Session  nid/web/lead\n"+
		"every running workflow (3) follows rung "+n+", this nid's newest\n", out)

	checks, err := doctorChecks(t, file)
	require.NoError(t, err, "%v", checks)
	require.Equal(t, "ok: every running workflow (3) follows rung "+n+", this nid's newest", checks["rungs"])
}
