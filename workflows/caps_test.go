package workflows

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/nid-dev/nid/activities"
	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/config"
)

// A workflow whose input names a group or session that is not a name
// (anything that reaches Temporal can start one) fails at once, saying
// which field and what a name is, and schedules nothing: the names become
// paths, branches and queue names on the worker.
func TestWorkflowsRefuseNamesThatAreNotNames(t *testing.T) {
	long := strings.Repeat("a", 10<<10)
	for _, tc := range []struct {
		name     string
		workflow string
		input    any
		field    string
	}{
		{"a group that climbs", SessionWorkflowName, SessionInput{Group: "../../home/.config/git", Name: "lead"}, `group "../../home/.config/git"`},
		{"a name with a slash", SessionWorkflowName, SessionInput{Group: "web", Name: "a/b"}, `name "a/b"`},
		{"an absolute path", SessionWorkflowName, SessionInput{Group: "/etc", Name: "lead"}, `group "/etc"`},
		{"a NUL", SessionWorkflowName, SessionInput{Group: "web", Name: "lead\x00"}, `name "lead\x00"`},
		{"10 KB", SessionWorkflowName, SessionInput{Group: long, Name: "lead"}, `group "` + long[:79] + `…"`},
		{"an empty name", SessionWorkflowName, SessionInput{Group: "web"}, `name ""`},
		{"a group", GroupWorkflowName, GroupInput{Name: "..", Sessions: []string{"lead"}}, `name ".."`},
		{"a group's session", GroupWorkflowName, GroupInput{Name: "web", Sessions: []string{"lead", "../x"}}, `sessions "../x"`},
		{"a rotation", RotationWorkflowName, RotationInput{Session: agents.SessionRef{Group: "web", Name: "/root"}}, `session.name "/root"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var suite testsuite.WorkflowTestSuite
			suite.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
			env := suite.NewTestWorkflowEnvironment()
			env.RegisterWorkflowWithOptions(SessionWorkflow, workflow.RegisterOptions{Name: SessionWorkflowName})
			env.RegisterWorkflowWithOptions(GroupWorkflow, workflow.RegisterOptions{Name: GroupWorkflowName})
			env.RegisterWorkflowWithOptions(RotationWorkflow, workflow.RegisterOptions{Name: RotationWorkflowName})
			scheduled := 0
			env.SetOnActivityStartedListener(func(*activity.Info, context.Context, converter.EncodedValues) { scheduled++ })
			env.ExecuteWorkflow(tc.workflow, tc.input)
			require.True(t, env.IsWorkflowCompleted())
			var appErr *temporal.ApplicationError
			require.True(t, errors.As(env.GetWorkflowError(), &appErr), "%v", env.GetWorkflowError())
			require.Equal(t, activities.ErrBadInput, appErr.Type())
			require.True(t, appErr.NonRetryable())
			require.Contains(t, appErr.Error(), tc.field+" is not a name: a group or session name is lower-case letters, digits")
			require.Less(t, len(appErr.Error()), 400, "the error quotes the input clipped")
			require.Zero(t, scheduled, "no activity ran")
		})
	}
}

// Signals sent straight to Temporal meet the caps the HTTP API and the MCP
// endpoint apply: each refusal is said in the feed, and what the session
// holds stays.
func TestSessionSignalsPastTheCapsAreRefused(t *testing.T) {
	h := newHarness(t)
	h.agent.perTurn = 10
	big := strings.Repeat("x", MaxSummaryBytes+1)
	tooMany := make([]string, MaxTasks+1)
	for i := range tooMany {
		tooMany[i] = fmt.Sprintf("t%d", i)
	}
	hugeBoard := BoardView{Group: "web", Rev: 1 << 40, Prompts: config.DefaultPrompts()}
	for i := range MaxTasks + 1 {
		hugeBoard.Tasks = append(hugeBoard.Tasks, Task{ID: fmt.Sprintf("t%d", i), Title: "forged", Status: TaskTodo})
	}
	h.at(time.Minute, func() { h.env.SignalWorkflow(SignalMessage, Message{Text: "first"}) })
	h.at(10*time.Minute, func() {
		h.env.SignalWorkflow(SignalHandoffWrite, HandoffWrite{Summary: big})
		h.env.SignalWorkflow(SignalHandoffWrite, HandoffWrite{Summary: ""})
		h.env.SignalWorkflow(SignalHandoffAck, HandoffAck{Tasks: tooMany})
		h.env.SignalWorkflow(SignalHandoffAck, HandoffAck{Tasks: []string{strings.Repeat("t", MaxTaskIDBytes+1)}})
		h.env.SignalWorkflow(SignalBoard, hugeBoard)
		h.env.SignalWorkflow(SignalPolicy, PolicyChange{Rotate: config.Rotate{Mode: "fast", ContextPercent: 0}})
		h.env.SignalWorkflow(SignalConfig, SessionConfig{Goal: strings.Repeat("g", config.MaxGoalBytes+1), Spec: agents.AgentSpec{Kind: "fake"}})
	})
	h.at(20*time.Minute, func() { h.env.SignalWorkflow(SignalMessage, Message{Text: "second"}) })
	h.at(30*time.Minute, func() { h.env.SignalWorkflow(SignalStop, StopRequest{Why: strings.Repeat("w", 10<<10)}) })
	v := h.run(sessionInput(policy(config.ModeAuto, 85, 0)), time.Hour)

	require.Contains(t, eventTexts(v, EventHandoffWritten), fmt.Sprintf("handoff not taken: the summary is %d bytes; the limit is %d", MaxSummaryBytes+1, MaxSummaryBytes))
	require.Contains(t, eventTexts(v, EventHandoffWritten), "handoff not taken: the summary is empty")
	require.Contains(t, eventTexts(v, EventHandoffAck), fmt.Sprintf("handoff_ack not taken: it names %d task ids; a board holds at most %d tasks", MaxTasks+1, MaxTasks))
	require.Contains(t, eventTexts(v, EventHandoffAck), fmt.Sprintf("handoff_ack not taken: a task id is %d bytes; the limit is %d", MaxTaskIDBytes+1, MaxTaskIDBytes))
	require.Contains(t, eventTexts(v, EventTask), fmt.Sprintf("board not taken: it holds %d tasks; a board keeps at most %d", MaxTasks+1, MaxTasks))
	require.Contains(t, strings.Join(eventTexts(v, EventPolicy), "\n"), "policy not taken: its rotate policy is not one nid takes")
	require.Contains(t, eventTexts(v, EventConfig), fmt.Sprintf("configuration not taken: its goal is %d bytes; the limit is %d", config.MaxGoalBytes+1, config.MaxGoalBytes))
	require.Empty(t, rotations(v), "no handoff was taken, so nothing rotated")
	require.Equal(t, config.ModeAuto, v.Policy.Mode, "the policy it held stays")
	require.Equal(t, 2, v.Context.TotalTurns, "the session kept working")
	stopped := eventTexts(v, EventStopped)
	require.NotEmpty(t, stopped)
	require.Less(t, len(stopped[0]), MaxWhyChars+100, "a stop's reason is clipped")
}

// The group takes inbox news only from its own sessions, clipped, and
// keeps a bounded list of learned thresholds; the hosts registry takes
// assignments only of sessions.
func TestGroupAndHostsSignalsPastTheCapsAreRefused(t *testing.T) {
	h := newGroupHarness(t)
	h.env.RegisterDelayedCallback(func() {
		h.env.SignalWorkflow(SignalInbox, InboxItem{Group: "web", Session: "../../etc", Kind: EventRotationFailed, Text: "forged"})
		h.env.SignalWorkflow(SignalInbox, InboxItem{Group: "other", Session: "lead", Kind: EventRotationFailed, Text: strings.Repeat("y", 10<<10)})
		h.env.SignalWorkflow(SignalLearned, LearnedPoint{Kind: strings.Repeat("k", MaxKindBytes+1), Percent: 50})
		for i := range MaxLearned + 5 {
			h.env.SignalWorkflow(SignalLearned, LearnedPoint{Kind: "claude", Model: fmt.Sprintf("m%d", i), Percent: 50, SeenTokens: 100, Window: 200})
		}
		h.env.SignalWorkflow(SignalCharge, Charge{Session: "lead", Turns: 1, Tokens: 1000, USD: 0.5})
		h.env.SignalWorkflow(SignalCharge, Charge{Session: "lead", Turns: -100, Tokens: -1e9, USD: -50})
		h.env.SignalWorkflow(SignalCharge, Charge{Session: "../../etc", Turns: 1})
		h.env.SignalWorkflow(SignalCharge, Charge{Session: "lead", Tokens: MaxChargeTokens + 1})
	}, time.Minute)
	v := h.run(groupInput(), time.Hour)
	var fromLead []InboxItem
	for _, it := range v.Inbox {
		require.NotEqual(t, "../../etc", it.Session)
		if it.Session == "lead" && it.Kind == EventRotationFailed {
			fromLead = append(fromLead, it)
		}
	}
	require.Len(t, fromLead, 1)
	require.Equal(t, "web", fromLead[0].Group, "an item is the group's own")
	require.LessOrEqual(t, len([]rune(fromLead[0].Text)), MaxInboxText)
	require.Len(t, v.Learned, MaxLearned)
	require.Equal(t, Spend{Turns: 1, Tokens: 1000, USD: 0.5}, v.Board.Spent, "only the charge a turn could make was taken")

	hh := newHostsHarness(t)
	hh.beat(time.Minute, HostBeat{Host: "a", MaxSessions: 4, Every: 10 * time.Second})
	hh.at(2*time.Minute, func() {
		hh.env.SignalWorkflow(SignalHostAssign, HostAssign{Session: strings.Repeat("s", 10<<10), Host: "a"})
		hh.env.SignalWorkflow(SignalHostAssign, HostAssign{Session: "web/lead", Host: "a"})
		hh.env.SignalWorkflow(SignalHeartbeat, HostBeat{Host: "b", MaxSessions: 4, Every: 10 * time.Second, HTTP: strings.Repeat("h", MaxHostHTTP+1)})
	})
	var hv HostsView
	hh.at(3*time.Minute, func() { hv = hh.view() })
	hh.run(4 * time.Minute)
	require.Len(t, hv.Hosts, 1, "host b's oversize heartbeat was refused")
	require.Equal(t, []string{"web/lead"}, hv.Hosts[0].Sessions)
}
