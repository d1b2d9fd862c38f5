package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/nidclient"
	"github.com/nid-dev/nid/workflows"
)

// chromiumPath is the browser the dashboard test drives: $NID_CHROMIUM, else
// Debian's chromium, which .ci/run installs.
func chromiumPath(t *testing.T) string {
	for _, p := range []string{os.Getenv("NID_CHROMIUM"), "/usr/bin/chromium"} {
		if p == "" {
			continue
		}
		if _, err := exec.LookPath(p); err == nil {
			return p
		}
	}
	t.Skip("no chromium: install Debian's chromium (.ci/run does) or set NID_CHROMIUM")
	return ""
}

// browser starts a headless chromium with a fresh profile that reaches
// nothing but the pages it is sent to.
func browser(t *testing.T) context.Context {
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 1400),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	ctx, cancel := context.WithTimeout(ctx, 4*time.Minute)
	t.Cleanup(func() { cancel(); cancelTab(); cancelAlloc() })
	return ctx
}

// text is the visible text of the first element sel matches, "" when none
// does yet.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`(document.querySelector(%q) || {innerText: ""}).innerText`, sel)))
	require.NoError(t, err)
	return s
}

// waitText waits until the text of sel matches re and returns it.
func waitText(t *testing.T, ctx context.Context, what, sel string, re *regexp.Regexp) string {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		s := text(t, ctx, sel)
		if re.MatchString(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s: %s is %q, want %s", what, sel, s, re)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// cspViolations collects what the browser refuses under the pages'
// content security policy, on every page the tab opens from now on.
func cspViolations(t *testing.T, ctx context.Context) func() []string {
	t.Helper()
	const binding = "nidCSPViolation"
	var mu sync.Mutex
	var got []string
	require.NoError(t, chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*runtime.EventBindingCalled); ok && e.Name == binding {
			mu.Lock()
			got = append(got, e.Payload)
			mu.Unlock()
		}
	}))
	_, err := chromedp.Call(ctx, runtime.AddBinding, runtime.AddBindingParams{Name: binding})
	require.NoError(t, err)
	_, err = chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: `
document.addEventListener("securitypolicyviolation", (e) =>
  ` + binding + `(location.pathname + ": " + e.violatedDirective + " refused " + (e.blockedURI || "inline code") + " at " + e.sourceFile + ":" + e.lineNumber));`})
	require.NoError(t, err)
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
}

func TestDashboardInABrowser(t *testing.T) {
	ctx := browser(t)
	violations := cspViolations(t, ctx)
	s := newSite(t, `  web:
    goal: Add dark mode to the settings page
    rotate: {mode: auto, contextPercent: 85}
    sessions:
      - agent: sim
        name: lead
        sim: {window: 200000, tokensPerTurn: 3000, turnDelay: 300ms}
      - agent: sim
        name: worker
        sim: {window: 1000000, tokensPerTurn: 8000, turnDelay: 300ms}
  ops:
    rotate: {mode: off, maxConcurrentRotations: 1}
    sessions:
      - agent: sim
        name: full
        sim: {window: 100000, tokensPerTurn: 40000, turnDelay: 100ms}
  wild:
    rotate: {mode: off}
    sessions:
      - {agent: exec, name: over, command: ./over.sh, permissions: full}
`)
	// An agent that reports more context than its window.
	require.NoError(t, os.WriteFile(filepath.Join(s.dir, "over.sh"),
		[]byte("#!/bin/sh\ncat >/dev/null\necho '{\"nid\":\"usage\",\"used\":300000,\"window\":100000}'\n"), 0o755))
	up := s.up()
	tokenFile := filepath.Join(s.dir, ".nid", "http-token")
	require.Contains(t, up.out.String(), tokenFile, "nid up says where the API token is")
	b, err := os.ReadFile(tokenFile)
	require.NoError(t, err)
	token := strings.TrimSpace(string(b))
	base := fmt.Sprintf("http://127.0.0.1:%d", s.http)
	m := regexp.MustCompile(`Dashboard\s+(\S+/login/\S+)`).FindStringSubmatch(up.out.String())
	require.NotNil(t, m, "nid up prints a login link:\n%s", up.out.String())
	link := m[1]
	require.True(t, strings.HasPrefix(link, base+"/login/"), link)
	require.NotContains(t, up.out.String(), token, "nid up prints no token")

	// The login link logs the browser in and lands on the groups page.
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(link)))
	waitText(t, ctx, "the groups page", "#groups", regexp.MustCompile(`web\s+2`))
	url, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href`))
	require.NoError(t, err)
	require.Equal(t, base+"/", url)

	// The group page: one row per session with its context.
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(base+"/groups/web")))
	waitText(t, ctx, "the lead's context", `#sessions tr[data-session="lead"]`, regexp.MustCompile(`ctx \d+% of 200k`))
	row := waitText(t, ctx, "the worker's context", `#sessions tr[data-session="worker"]`, regexp.MustCompile(`ctx \d+% of 1M`))
	require.Regexp(t, `^worker\s+sim\s+(idle|working)\s+`+regexp.QuoteMeta(config.DefaultHost())+`\s+ctx \d+% of 1M\s+↻0\s+\d+$`, row, "its host between status and context")

	// A context from 75% up is yellow.
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(base+"/groups/ops")))
	s.mustNid("send", "ops/full", "fill your context")
	s.mustNid("send", "ops/full", "and fill it more")
	waitText(t, ctx, "a full context", `#sessions tr[data-session="full"] .ctx.warn`, regexp.MustCompile(`^ctx (7[5-9]|[89]\d|100)% of 100k$`))
	require.Equal(t, "rotate: mode=off contextPercent=85 maxTurns=never maxConcurrentRotations=1", text(t, ctx, "#policy"), "the policy as nid group show words it")
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(base+"/groups/wild")))
	s.mustNid("send", "wild/over", "report")
	waitText(t, ctx, "a context past its window", `#sessions tr[data-session="over"] .ctx`,
		regexp.MustCompile(`^ctx 300% of 100k \(more than the window, as the agent reports it\)$`))

	// A session a person holds with nid attach says who holds it, in the
	// table and on its page, which gives the command to attach; the page
	// says what the hand-back found.
	c := s.client()
	over := s.session(c, "wild", "over")
	_, err = nidclient.Attach(t.Context(), c, "wild", "over", workflows.AttachRequest{Who: "alice@box", Host: over.Host, Lease: "dash"})
	require.NoError(t, err)
	waitText(t, ctx, "the holder in the table", `#sessions tr[data-session="over"] .status-attached`, regexp.MustCompile(`^attached by alice@box$`))
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(base+"/sessions/wild/over")))
	waitText(t, ctx, "the holder on the page", "#holder", regexp.MustCompile(`^attached by alice@box since \S+$`))
	require.Equal(t, "take it over in its agent's own CLI, on host "+over.Host+": nid attach wild/over", text(t, ctx, "#attach"))
	_, err = nidclient.ReleaseAttach(t.Context(), c, "wild", "over", "dash")
	require.NoError(t, err)
	waitText(t, ctx, "the hand-back on the page", "#holder",
		regexp.MustCompile(`^handed back by alice@box at \S+: context 300% → 300%, 0 turns by hand \(an exec agent keeps no records`))

	// The session page: the meter, then Rotate with a mode.
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(base+"/sessions/web/lead")))
	waitText(t, ctx, "the meter", "#meter-text", regexp.MustCompile(`^ctx \d+% of 200k · [\d.]+k used of 200k · reported`))
	require.Contains(t, text(t, ctx, "#meter"), "rotate at 85% = 170k (contextPercent)", "the meter marks the threshold in both units")
	waitText(t, ctx, "the live feed", "#feed", regexp.MustCompile(`turn \d+`))
	_, err = chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("rotate-mode").value = "handoff"`))
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#rotate"))))
	waitText(t, ctx, "the rotate answer", "#rotate-answer",
		regexp.MustCompile(`^(rotating web/lead now \(handoff\)|web/lead is working: it rotates \(handoff\) when the current turn ends)$`))

	feed := waitText(t, ctx, "the rotation in the feed", "#feed", regexp.MustCompile(`↻ handoff \(manual\)`))
	require.Regexp(t, `↻ handoff \(manual\) [\d.]+k → [\d.]+k  sim-1 → sim-2`, feed)
	history := waitText(t, ctx, "the rotation in the history", "#history", regexp.MustCompile(`handoff\s+manual`))
	require.Regexp(t, `^1\s+\S+\s+handoff\s+manual\s+[\d.]+k → [\d.]+k\s+sim-1 → sim-2\s+[\d.]+k tokens\s+the agent's handoff, [\d.]+k?B Handoff from sim conversation sim-1`, history)
	tail := waitText(t, ctx, "the fresh conversation in the transcript", "#transcript", regexp.MustCompile(`(?s)↻ handoff: You are session web/lead.*< sim turn 1 of conversation sim-2`))
	require.Equal(t, 1, strings.Count(tail, "sim turn 1 of conversation sim-2"), "each transcript entry shows once:\n%s", tail)

	// Stop and Start beside Rotate.
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#stop"))))
	waitText(t, ctx, "the stop answer", "#rotate-answer", regexp.MustCompile(`^stopped web/lead; (it held no tasks or locks|released .+)$`))
	waitText(t, ctx, "the status stopped", "#status", regexp.MustCompile(`stopped`))
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#start"))))
	waitText(t, ctx, "the start answer", "#rotate-answer", regexp.MustCompile(`^started web/lead; it goes on in the same conversation$`))
	waitText(t, ctx, "turns again after the start", "#feed", regexp.MustCompile(`started again: it goes on in the same conversation`))

	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	dir := filepath.Join("artifacts")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	path, err := filepath.Abs(filepath.Join(dir, "session-page.png"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, shot, 0o644))
	t.Logf("screenshot of the session page: %s", path)

	// The groups and inbox pages.
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(base+"/")))
	waitText(t, ctx, "the groups page", "#groups", regexp.MustCompile(`(?s)ops\s+1\s+\d\s+ctx \d+% of 100k.*web\s+2\s+\d\s+ctx \d+% of`))
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(base+"/inbox")))
	waitText(t, ctx, "the inbox page", "#inbox", regexp.MustCompile(`inbox empty`))

	// Logged out, the spent link is refused; the form logs in, and goes
	// on to the page asked for.
	_, err = chromedp.Call(ctx, network.ClearBrowserCookies, cdp.Empty{})
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(link)))
	waitText(t, ctx, "the spent link refused", "#login-error", regexp.MustCompile(`used already or has expired`))
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(base+"/groups/ops")))
	require.NoError(t, chromedp.Do(ctx, chromedp.SendKeys(chromedp.ID("token"), "not the token"), chromedp.Click(chromedp.ID("login"))))
	waitText(t, ctx, "a wrong token refused", "#login-error", regexp.MustCompile(`That is not nid's API token`))
	require.NoError(t, chromedp.Do(ctx, chromedp.SendKeys(chromedp.ID("token"), token), chromedp.Click(chromedp.ID("login"))))
	waitText(t, ctx, "the group page after the form", `#sessions tr[data-session="full"]`, regexp.MustCompile(`ctx \d+% of 100k`))
	url, err = chromedp.Run(ctx, chromedp.Evaluate[string](`location.href`))
	require.NoError(t, err)
	require.Equal(t, base+"/groups/ops", url, "the token is in no address")

	// Log out ends the login: the form again, on every page.
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.ID("logout"))))
	waitText(t, ctx, "logged out", "main.login h1", regexp.MustCompile(`Log in to the dashboard`))
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(base+"/groups/ops")))
	waitText(t, ctx, "still logged out", "main.login h1", regexp.MustCompile(`Log in to the dashboard`))

	require.Empty(t, violations(), "the pages break none of their content security policy")

	// The same rotation through the command line's transcript.
	out := s.mustNid("transcript", "web/lead")
	require.Contains(t, out, "↻ handoff: You are session web/lead")
	require.Contains(t, out, "── conversation sim-2")
}

// The session page charts the context per turn: a point for every turn
// the session keeps, the threshold, and a marker for every rotation by
// its method; the group page adds the rotations up per session.
func TestContextChartInABrowser(t *testing.T) {
	ctx := browser(t)
	violations := cspViolations(t, ctx)
	// Without a goal or tasks the session takes a turn per message, so the
	// test decides every turn: three turns fill it past 60% and it
	// compacts, twice, then a handoff by hand and one more turn.
	s := newSite(t, `  chart:
    rotate: {mode: auto, contextPercent: 60}
    sessions:
      - agent: sim
        name: lead
        sim: {window: 100000, tokensPerTurn: 25000, turnDelay: 0s}
`)
	up := s.up()
	m := regexp.MustCompile(`Dashboard\s+(\S+/login/\S+)`).FindStringSubmatch(up.out.String())
	require.NotNil(t, m, "nid up prints a login link:\n%s", up.out.String())
	c := s.client()
	settled := func(turns, rotations int) func() bool {
		return func() bool {
			v := s.session(c, "chart", "lead")
			return v.Context.TotalTurns == turns && v.Context.Rotations == rotations && v.Status == workflows.StatusIdle && v.QueuedMessages == 0
		}
	}
	for i := range 6 {
		s.mustNid("send", "chart/lead", fmt.Sprint("step ", i+1))
	}
	s.eventually("six turns and two compactions", 2*time.Minute, settled(6, 2))
	s.mustNid("rotate", "chart/lead", "--mode", "handoff")
	s.eventually("the handoff", 2*time.Minute, settled(6, 3))
	s.mustNid("send", "chart/lead", "step 7")
	s.eventually("the seventh turn", 2*time.Minute, settled(7, 3))
	v := s.session(c, "chart", "lead")
	var turns int
	var markers []string
	for _, p := range v.Points {
		if p.Rotation == "" {
			turns++
		} else {
			markers = append(markers, "marker marker-"+p.Rotation)
		}
	}
	require.Equal(t, 7, turns, "every turn is a point")
	require.Equal(t, []string{"marker marker-compact", "marker marker-compact", "marker marker-handoff"}, markers)
	var ok int
	for _, r := range v.Receipts {
		if r.OK {
			ok++
		}
	}
	require.Len(t, markers, ok, "every rotation that went through is marked")

	base := fmt.Sprintf("http://127.0.0.1:%d", s.http)
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(m[1])))
	waitText(t, ctx, "the groups page", "#groups", regexp.MustCompile(`chart\s+1`))
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(base+"/sessions/chart/lead")))
	count := func(sel string) int {
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll(%q).length`, sel)))
		require.NoError(t, err)
		return n
	}
	s.eventually("the chart", time.Minute, func() bool { return count("#context-chart circle.point") > 0 })
	require.Equal(t, turns, count("#context-chart circle.point"), "a point per turn shown")
	got, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("#context-chart g.marker")).map((g) => g.getAttribute("class"))`))
	require.NoError(t, err)
	require.Equal(t, markers, got, "a marker per rotation, by method, in order")
	require.Positive(t, count("#context-chart polyline.threshold-line"), "the threshold is drawn")
	history := waitText(t, ctx, "the handoff's receipt", "#history", regexp.MustCompile(`handoff\s+manual`))
	require.Regexp(t, `handoff\s+manual\s+[\d.]+k → [\d.]+k\s+sim-1 → sim-2\s+[\d.]+k tokens\s+the agent's handoff, [\d.]+k?B Handoff from sim conversation sim-1.*\s+true`, history)

	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll("artifacts", 0o755))
	path, err := filepath.Abs(filepath.Join("artifacts", "context-chart.png"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, shot, 0o644))
	t.Logf("screenshot of the context chart: %s", path)

	// The group page: rotations by method, the share verified, tokens
	// reclaimed, as nid rotations sums them.
	var sums []nidclient.SessionRotations
	require.NoError(t, json.Unmarshal([]byte(s.mustNid("rotations", "chart", "--json")), &sums))
	require.Len(t, sums, 1)
	st := sums[0].Stats
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(base+"/groups/chart")))
	waitText(t, ctx, "the rotation stats", `#rotation-stats tr[data-session="lead"]`,
		regexp.MustCompile(`^lead\s+2\s+1\s+0\s+0\s+1 of 1 \(100%\)\s+`+regexp.QuoteMeta(workflows.TokensText(st.ReclaimedPerRotation))+`$`))

	require.NotContains(t, text(t, ctx, "#main"), "null", "a group without a goal shows none")

	shot, err = chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join("artifacts", "group-rotations.png"), shot, 0o644))
	require.Empty(t, violations(), "the pages break none of their content security policy")
}
