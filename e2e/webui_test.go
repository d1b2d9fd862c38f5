package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/workflows"
)

// The embedded Temporal Web UI shows every session's history, so a
// browser that reaches its port sees the login form, which refuses a
// wrong token; the link nid up prints beside its address, or the
// credential in the form, logs the browser in, and the UI then lists the
// sessions' workflows.
func TestWebUILoginInABrowser(t *testing.T) {
	ctx := browser(t)
	s := newSite(t, `  web:
    rotate: {mode: off}
    sessions:
      - agent: sim
        name: lead
        sim: {turnDelay: 0s}
`)
	up := s.up()
	ui := fmt.Sprintf("http://127.0.0.1:%d", s.ui)
	m := regexp.MustCompile(`Web UI login\s+(\S+)`).FindStringSubmatch(up.out.String())
	require.NotNil(t, m, "nid up prints the Web UI's login link:\n%s", up.out.String())
	link := m[1]
	require.True(t, strings.HasPrefix(link, ui+"/nid/login/"), link)
	credential, err := os.ReadFile(filepath.Join(s.dir, ".nid", "temporal-token"))
	require.NoError(t, err)
	require.NotContains(t, up.out.String(), strings.TrimSpace(string(credential)), "nid up prints no credential")

	session := regexp.MustCompile(regexp.QuoteMeta(workflows.SessionID("web", "lead")))
	workflowsPage := ui + "/namespaces/default/workflows"
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(workflowsPage)))
	waitText(t, ctx, "the login form", "h1", regexp.MustCompile(`Log in to the Temporal Web UI`))
	require.NotRegexp(t, session, text(t, ctx, "body"))
	require.NoError(t, chromedp.Do(ctx, chromedp.SendKeys(chromedp.ID("token"), "not the credential"), chromedp.Click(chromedp.ID("login"))))
	waitText(t, ctx, "a wrong token refused", "#login-error", regexp.MustCompile(`neither the Temporal credential nor nid's API token`))

	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(link)))
	waitText(t, ctx, "the session's workflow in the Web UI", "body", session)

	// Another browser logs in with the credential in the form, and lands
	// on the page it asked for.
	other := browser(t)
	require.NoError(t, chromedp.Do(other, chromedp.Navigate(workflowsPage)))
	waitText(t, other, "the login form", "h1", regexp.MustCompile(`Log in to the Temporal Web UI`))
	require.NoError(t, chromedp.Do(other, chromedp.SendKeys(chromedp.ID("token"), strings.TrimSpace(string(credential))), chromedp.Click(chromedp.ID("login"))))
	waitText(t, other, "the session's workflow after the form", "body", session)
	at, err := chromedp.Run(other, chromedp.Evaluate[string](`location.href`))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(at, workflowsPage), at)
}
