package e2e

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/workflows"
)

// doctorLine is the line of nid doctor's output about what (e.g.
// "temporal", "web/lead cli") that holds says, or fails the test.
func doctorLine(t *testing.T, out, status, what, says string) {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) > 1 && f[0] == status && strings.HasPrefix(strings.TrimSpace(strings.TrimPrefix(line, f[0])), what+" ") && strings.Contains(line, says) {
			return
		}
	}
	t.Fatalf("nid doctor has no %s line about %s saying %q:\n%s", status, what, says, out)
}

// nid doctor on a site of sim agents: before nid up, the embedded
// server's ports and the HTTP port are free and the state directory can
// be made; while nid up runs, they are its own, its Temporal answers and
// accepts the credential nid up made;
// every check passes, so it exits 0; and it says which rung of the
// version ladder its workflows follow, the newest.
func TestDoctorSim(t *testing.T) {
	s := newSite(t, `  web:
    rotate: {mode: off}
    sessions:
      - {agent: sim, name: lead, sim: {turnDelay: 200ms}}
`)
	out, errOut, code := s.nid("doctor")
	require.Equal(t, 0, code, "%s%s", out, errOut)
	doctorLine(t, out, "ok", "temporal", fmt.Sprintf("temporal.port 127.0.0.1:%d is free for nid up's embedded server", s.frontend))
	doctorLine(t, out, "ok", "temporal", fmt.Sprintf("temporal.ui.port 127.0.0.1:%d is free", s.ui))
	doctorLine(t, out, "ok", "state", "does not exist yet: nid up makes it in "+s.dir)
	doctorLine(t, out, "ok", "credential", "temporal-token does not exist yet: nid up makes it when its Temporal server first starts")
	doctorLine(t, out, "ok", "web/lead agent", "the sim agent runs inside nid: nothing to install")
	doctorLine(t, out, "ok", "http", fmt.Sprintf("http.listen 127.0.0.1:%d is free", s.http))
	require.NotContains(t, out, "fail")
	require.NotContains(t, out, "rungs", "before nid up no workflow runs to ask")
	_, errOut, code = s.nid("doctor", "--rungs")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "no nid runs on "+filepath.Join(s.dir, ".nid")+", so no workflow runs: start nid up")

	up := s.up()
	out, errOut, code = s.nid("doctor")
	require.Equal(t, 0, code, "%s%s", out, errOut)
	pid := strconv.Itoa(up.cmd.Process.Pid)
	doctorLine(t, out, "ok", "temporal", "the embedded Temporal server of the running nid (process "+pid+") answers at "+s.address())
	doctorLine(t, out, "ok", "state", filepath.Join(s.dir, ".nid")+" is writable")
	doctorLine(t, out, "ok", "credential", filepath.Join(s.dir, ".nid", "temporal-token")+" is private and the Temporal server at "+s.address()+" accepts it")
	doctorLine(t, out, "ok", "http", "the running nid (process "+pid+") serves it")
	doctorLine(t, out, "ok", "rungs", fmt.Sprintf("follows rung %d, this nid's newest", workflows.Latest))
	out, errOut, code = s.nid("doctor", "--rungs")
	require.Equal(t, 0, code, "%s%s", out, errOut)
	require.Regexp(t, fmt.Sprintf(`(?m)^%d +(memo|history) +nid.Session +nid/web/lead$`, workflows.Latest), out)
	require.NoError(t, up.interrupt(t))
}

// nid doctor with the real, pinned CLIs finds each at the version nid is
// tested with, logged in, with a sandbox that works here; with a CLI that
// is not there it says how to install it and exits non-zero. nid up names
// that session, whose first turn stops before anything runs: it needs
// attention at once, with the doctor's words in the inbox, instead of
// failing three turns first.
func TestDoctorRealCLIs(t *testing.T) {
	bin := func(name string) string { return agentCLI(t, name) }
	codexHome, repo := t.TempDir(), gitRepo(t)
	agentsYAML := fmt.Sprintf(`agents:
  claude: {command: %s, env: {ANTHROPIC_API_KEY: sk-ant-e2e-secret, HOME: %s}}
  codex: {command: %s, env: {OPENAI_API_KEY: sk-e2e-secret, CODEX_HOME: %s}}
`, bin("claude"), t.TempDir(), bin("codex"), codexHome)
	// A repo, so that each session works in a worktree of its own: a
	// Claude Code and a Codex session in one directory could each write
	// the configuration the other obeys, which validation refuses.
	s := newSite(t, `  web:
    repo: `+repo+`
    rotate: {mode: off}
    sessions:
      - {agent: claude, name: lead}
      - {agent: codex, name: worker}
`+agentsYAML)
	out, errOut, code := s.nid("doctor")
	require.Equal(t, 0, code, "%s%s", out, errOut)
	claude, codex := agents.KindOf(agents.KindClaude), agents.KindOf(agents.KindCodex)
	doctorLine(t, out, "ok", "web/lead cli", bin("claude")+", version "+agents.TestedVersion(claude)+": the version nid is tested with")
	doctorLine(t, out, "ok", "web/lead credentials", "ANTHROPIC_API_KEY is set")
	doctorLine(t, out, "ok", "web/lead sandbox", "bubblewrap runs a sandbox here")
	doctorLine(t, out, "ok", "web/worker cli", bin("codex")+", version "+agents.TestedVersion(codex)+": the version nid is tested with")
	doctorLine(t, out, "ok", "web/worker credentials", "OPENAI_API_KEY is set")
	doctorLine(t, out, "ok", "web/worker sandbox", "it ran `true` here")
	require.NotContains(t, out, "secret", "nid doctor prints no secret")

	// The CLI gone, and a sim beside it that keeps working.
	missing := filepath.Join(t.TempDir(), "claude")
	s.groups = `  web:
    goal: Keep the docs current
    repo: ` + repo + `
    rotate: {mode: off}
    sessions:
      - {agent: claude, name: lead, command: ` + missing + `}
      - {agent: sim, name: sim, sim: {turnDelay: 200ms}}
` + agentsYAML
	s.writeConfig()
	out, errOut, code = s.nid("doctor")
	require.Equal(t, 1, code, "%s%s", out, errOut)
	says := `claude: command "` + missing + `" not found: install Claude Code (npm install -g ` + claude.Package + "@" + agents.TestedVersion(claude) +
		", the version nid is tested with), or set agents.claude.command to where it is"
	doctorLine(t, out, "fail", "web/lead cli", says)
	require.Contains(t, errOut, "1 of 11 checks failed")

	up := s.up()
	s.eventually("web/lead in needs-attention", time.Minute, func() bool {
		return s.ls()["web/lead"].Status == workflows.StatusNeedsAttention
	})
	require.Contains(t, up.out.String(), "nid: web/lead cannot start: "+says+"; it waits in needs-attention")
	inbox := s.mustNid("inbox", "web")
	require.Contains(t, inbox, "web/lead cannot run its agent: "+says)
	require.NotContains(t, inbox, "×", "said once")
	v := s.session(s.client(), "web", "lead")
	var failed []string
	for _, e := range v.Events {
		if e.Kind == workflows.EventTurnFailed {
			failed = append(failed, e.Text)
		}
	}
	require.Len(t, failed, 1, "one turn, not three: %v", failed)
	require.Zero(t, v.Context.TotalTurns)
	s.eventually("the sim working beside it", time.Minute, func() bool { return s.ls()["web/sim"].Turns > 0 })
	require.NoError(t, up.interrupt(t))
}
