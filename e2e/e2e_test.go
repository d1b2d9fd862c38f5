package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/internal/temporaltest"
	"github.com/nid-dev/nid/workflows"
)

func TestGroupRotatesByContextAndLsShowsIt(t *testing.T) {
	s := newSite(t, `  web:
    goal: Add dark mode to the settings page
    rotate: {mode: compact, contextPercent: 60}
    sessions:
      - agent: sim
        name: lead
        sim: {window: 100000, tokensPerTurn: 15000, turnDelay: 50ms}
      - agent: sim
        sim: {window: 200000, tokensPerTurn: 1000, turnDelay: 1s}
`)
	up := s.up()
	require.Contains(t, up.out.String(), "http://127.0.0.1:", "nid up says where the Web UI is")

	s.eventually("web/lead to rotate by context", 2*time.Minute, func() bool {
		return s.ls()["web/lead"].Context.Rotations >= 1
	})
	rows := s.ls()
	require.Len(t, rows, 2)
	require.Equal(t, "sim", rows["web/sim"].Agent, "a session's name defaults to its agent kind")
	lead := rows["web/lead"]
	require.Equal(t, "reported", lead.Context.Source)
	require.EqualValues(t, 100_000, lead.Context.WindowTokens)

	c := s.client()
	rots := rotationEvents(s.session(c, "web", "lead"))
	require.NotEmpty(t, rots)
	require.Equal(t, config.ModeCompact, rots[0].Method)
	require.Equal(t, workflows.ReasonContext, rots[0].Reason)
	require.GreaterOrEqual(t, rots[0].BeforeTokens, int64(60_000))
	require.Less(t, rots[0].AfterTokens, rots[0].BeforeTokens/5)

	// The Temporal Web UI says in words what each workflow is.
	require.Equal(t, "nid session web/lead (sim agent)", summaryOf(t, c, workflows.SessionID("web", "lead")))
	require.Equal(t, "nid group web: Add dark mode to the settings page", summaryOf(t, c, workflows.GroupID("web")))
	require.Equal(t, "rotation 1 of web/lead: compact (context)", summaryOf(t, c, workflows.RotationID("web", "lead", 1)))

	out := s.mustNid("ls")
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	require.Len(t, lines, 3, out)
	require.Regexp(t, `^SESSION\s+AGENT\s+STATUS\s+HOST\s+TURNS\s+CONTEXT$`, lines[0])
	host := config.DefaultHost()
	// Past the threshold again, the lead may be waiting for its next
	// rotation when ls looks.
	require.Regexp(t, `^web/lead\s+sim\s+(idle|working|rotating|waiting-to-rotate)\s+`+regexp.QuoteMeta(host)+`\s+\d+\s+\d+% of 100k ↻\d+$`, lines[1])
	require.Regexp(t, `^web/sim\s+sim\s+(idle|working)\s+`+regexp.QuoteMeta(host)+`\s+\d+\s+(\d+% of 200k|—)$`, lines[2])
	require.NotContains(t, out, "\x1b[", "no colour when stdout is not a terminal")

	out = s.mustNid("ls", "web")
	require.Contains(t, out, "web/lead")
	_, errOut, code := s.nid("ls", "nope")
	require.NotEqual(t, 0, code)
	require.Contains(t, errOut, "web", "an unknown group error lists the groups that exist")

	require.NoError(t, up.interrupt(t), "Ctrl-C stops nid up cleanly:\n%s", up.out.String())
}

func TestManualHandoffSummaryComesThroughMCP(t *testing.T) {
	s := newSite(t, `  api:
    rotate: {mode: off}
    sessions:
      - agent: sim
        name: solo
        sim: {window: 200000, tokensPerTurn: 5000, turnDelay: 10ms}
`)
	s.up()
	s.eventually("api/solo listed", time.Minute, func() bool { return s.ls()["api/solo"].Status == "idle" })

	out := s.mustNid("send", "api/solo", "Write the rate limiter")
	require.Contains(t, out, "api/solo")
	s.eventually("the message turn", time.Minute, func() bool { return s.ls()["api/solo"].Turns == 1 })

	out = s.mustNid("rotate", "api/solo", "--mode", "handoff")
	require.Contains(t, out, "now", "an idle session rotates at once")
	s.eventually("the handoff", time.Minute, func() bool { return s.ls()["api/solo"].Context.Rotations == 1 })

	c := s.client()
	v := s.session(c, "api", "solo")
	rots := rotationEvents(v)
	require.Len(t, rots, 1)
	r := rots[0]
	require.Equal(t, config.ModeHandoff, r.Method)
	require.Equal(t, workflows.ReasonManual, r.Reason)
	require.Equal(t, workflows.SummaryFromAgent, r.SummarySource, "the sim called handoff_write over MCP")
	require.Contains(t, r.Summary, "Write the rate limiter", "the summary is the agent's own")
	require.NotEmpty(t, r.OldConversation)
	require.NotEmpty(t, r.NewConversation)
	require.NotEqual(t, r.OldConversation, r.NewConversation)
	require.Equal(t, r.NewConversation, v.Conversation)

	_, errOut, code := s.nid("rotate", "api/solo", "--mode", "sideways")
	require.NotEqual(t, 0, code)
	require.Contains(t, errOut, "use auto, compact or handoff")
	_, errOut, code = s.nid("rotate", "api/ghost")
	require.NotEqual(t, 0, code)
	require.Contains(t, errOut, "solo", "an unknown session error lists the sessions that exist")
}

func TestGroupSetChangesBehaviour(t *testing.T) {
	s := newSite(t, `  web:
    goal: Keep going
    rotate: {mode: off}
    sessions:
      - agent: sim
        name: lead
        sim: {window: 1000000, tokensPerTurn: 100, turnDelay: 20ms}
`)
	s.up()
	s.eventually("a few turns", time.Minute, func() bool { return s.ls()["web/lead"].Turns >= 5 })
	require.Equal(t, 0, s.ls()["web/lead"].Context.Rotations, "off never rotates by itself")

	out := s.mustNid("group", "set", "web", `rotate={"mode":"handoff","maxTurns":3}`)
	require.Contains(t, out, "mode=handoff")
	require.Contains(t, out, "maxTurns=3")

	s.eventually("rotations by maxTurns", time.Minute, func() bool { return s.ls()["web/lead"].Context.Rotations >= 2 })
	for _, r := range rotationEvents(s.session(s.client(), "web", "lead")) {
		require.Equal(t, workflows.ReasonMaxTurns, r.Reason)
		require.Equal(t, config.ModeHandoff, r.Method)
	}

	_, errOut, code := s.nid("group", "set", "web", `rotate={"mode":"fast"}`)
	require.NotEqual(t, 0, code)
	require.Contains(t, errOut, "auto, compact, handoff, off")
}

func TestSessionsSurviveKillNine(t *testing.T) {
	s := newSite(t, `  web:
    goal: Survive
    rotate: {mode: handoff, maxTurns: 4}
    sessions:
      - agent: sim
        name: lead
        sim: {window: 200000, tokensPerTurn: 2000, turnDelay: 100ms}
`)
	up := s.up()
	s.eventually("two rotations", 2*time.Minute, func() bool { return s.ls()["web/lead"].Context.Rotations >= 2 })
	seen := s.ls()["web/lead"].Context.Rotations
	up.kill()

	s.up()
	c := s.client()
	first := s.session(c, "web", "lead")
	require.GreaterOrEqual(t, first.Context.Rotations, seen, "rotation count intact after kill -9")
	s.eventually("more turns after the restart", 2*time.Minute, func() bool {
		return s.ls()["web/lead"].Turns > first.Context.TotalTurns+4
	})
	after := s.session(c, "web", "lead")
	require.Greater(t, after.Context.Rotations, first.Context.Rotations, "it goes on rotating")
	require.Less(t, after.Context.Turns, 5, "maxTurns still holds after the restart")
}

func TestWatchPrintsRotations(t *testing.T) {
	s := newSite(t, `  web:
    goal: Watch me
    rotate: {mode: auto, maxTurns: 2}
    sessions:
      - agent: sim
        name: lead
        sim: {window: 200000, tokensPerTurn: 1000, turnDelay: 50ms}
`)
	s.up()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, temporaltest.Binary(t), "watch", "web/lead", "--json")
	cmd.Dir = s.dir
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	scanner := bufio.NewScanner(stdout)
	var got workflows.Event
	for scanner.Scan() {
		var e workflows.Event
		require.NoError(t, json.Unmarshal(scanner.Bytes(), &e), scanner.Text())
		if e.Kind == workflows.EventRotation {
			got = e
			break
		}
	}
	require.Equal(t, workflows.EventRotation, got.Kind)
	require.Equal(t, "web", got.Group)
	require.Equal(t, workflows.ReasonMaxTurns, got.Rotation.Reason)
}

func TestNoServerAndBadConfigAreClearErrors(t *testing.T) {
	s := newSite(t, `  web:
    sessions:
      - agent: sim
`)
	_, errOut, code := s.nid("ls")
	require.NotEqual(t, 0, code)
	require.Contains(t, errOut, "no Temporal server at "+s.address()+"; start one with `nid up`")

	bad := newSite(t, `  web:
    rotate: {mode: fast, contextPercent: 0}
    sessions:
      - agent: gpt
`)
	_, errOut, code = bad.nid("up")
	require.NotEqual(t, 0, code)
	require.Regexp(t, regexp.MustCompile(`groups\.web\.rotate\.mode: "fast" is not one of auto, compact, handoff, off`), errOut)
	require.Contains(t, errOut, "groups.web.rotate.contextPercent")
	require.Contains(t, errOut, "groups.web.sessions[0].agent")
}

func TestKillNineMidRotationRotatesExactlyOnce(t *testing.T) {
	s := newSite(t, `  web:
    goal: Rotate under fire
    rotate: {mode: handoff, maxTurns: 2}
    sessions:
      - agent: sim
        name: lead
        sim: {window: 200000, tokensPerTurn: 2000, turnDelay: 1500ms}
`)
	up := s.up()
	s.eventually("a rotation in progress", 2*time.Minute, func() bool { return s.ls()["web/lead"].Status == workflows.StatusRotating })
	up.kill()

	s.up()
	c := s.client()
	s.eventually("the rotation to finish after the restart", 2*time.Minute, func() bool {
		return s.session(c, "web", "lead").Context.Rotations >= 1
	})
	v := s.session(c, "web", "lead")
	rots := rotationEvents(v)
	require.NotEmpty(t, rots)
	require.Equal(t, 1, rots[0].Number)
	for i, r := range rots {
		require.Equal(t, i+1, r.Number, "each rotation is recorded once, in order")
		require.True(t, r.OK)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		Query: "WorkflowId = '" + workflows.RotationID("web", "lead", 1) + "'",
	})
	require.NoError(t, err)
	require.Len(t, resp.Executions, 1, "the interrupted rotation resumed rather than ran twice")
	require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, resp.Executions[0].GetStatus())
}

func TestUpUsesAnExistingCluster(t *testing.T) {
	host := newSite(t, `  web:
    sessions:
      - agent: sim
        name: lead
`)
	host.up()
	// Another host of the same cluster: its worker serves under a host
	// name of its own, and runs the sessions its own file lists there.
	guest := newSite(t, `  api:
    goal: Share the cluster
    host: guest
    sessions:
      - agent: sim
        name: solo
        sim: {turnDelay: 20ms}
`)
	guest.worker = "  host: guest\n"
	guest.join(host)

	p := guest.up()
	require.Contains(t, p.out.String(), "not started here", "no second server, no second Web UI")
	guest.eventually("api/solo working on the host's cluster", time.Minute, func() bool { return guest.ls()["api/solo"].Turns > 0 })
	require.Contains(t, host.ls(), "api/solo", "one cluster lists both")
	_, err := os.Stat(filepath.Join(guest.dir, ".nid", "temporal.db"))
	require.True(t, os.IsNotExist(err), "the guest started no server")
}

// summaryOf is a workflow's static summary, as the Web UI shows it.
func summaryOf(t *testing.T, c client.Client, id string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := c.DescribeWorkflowExecution(ctx, id, "")
	require.NoError(t, err)
	var summary string
	require.NoError(t, converter.GetDefaultDataConverter().FromPayload(d.GetExecutionConfig().GetUserMetadata().GetSummary(), &summary))
	return summary
}
