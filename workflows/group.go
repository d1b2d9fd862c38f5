package workflows

import (
	"fmt"
	"slices"
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/nid-dev/nid/config"
)

// maxInbox bounds the inbox a group keeps.
const maxInbox = 500

// GroupState is everything a group carries across continue-as-new.
type GroupState struct {
	Goal   string        `json:"goal,omitempty"`
	Policy config.Rotate `json:"policy"`
	// FilePolicy is the policy nid.yaml last said. `nid up` applies the
	// file's policy only when the file changed it, so a `nid group set`
	// survives restarts until the file is edited.
	FilePolicy config.Rotate `json:"filePolicy"`
	Sessions   []string      `json:"sessions"`
	Inbox      []InboxItem   `json:"inbox,omitempty"`
	NextSeq    int64         `json:"nextSeq"`
	// HistoryLimit overrides defaultHistoryLimit (tests use a small one).
	HistoryLimit int `json:"historyLimit,omitempty"`
}

type group struct {
	name string
	st   *GroupState
}

// GroupWorkflow owns a group's policy and inbox. It changes the policy
// through validated updates and pushes it to the group's sessions.
func GroupWorkflow(ctx workflow.Context, in GroupInput) error {
	g := &group{name: in.Name, st: in.State}
	if g.st == nil {
		g.st = &GroupState{Goal: in.Goal, Policy: in.Policy, FilePolicy: in.Policy, Sessions: slices.Clone(in.Sessions)}
	}
	if err := g.setup(ctx); err != nil {
		return err
	}
	return g.run(ctx)
}

func (g *group) setup(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, QueryGroup, g.view); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateSetPolicy, g.setPolicy,
		workflow.UpdateHandlerOptions{Validator: g.validateSetPolicy}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateSync, g.sync,
		workflow.UpdateHandlerOptions{Validator: g.validateSync}); err != nil {
		return err
	}
	inbox := workflow.GetSignalChannel(ctx, SignalInbox)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var item InboxItem
			inbox.Receive(ctx, &item)
			g.addInbox(item)
		}
	})
	return nil
}

func (g *group) run(ctx workflow.Context) error {
	if err := workflow.Await(ctx, func() bool { return historyFull(ctx, g.st.HistoryLimit) }); err != nil {
		return err
	}
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return err
	}
	var item InboxItem
	for workflow.GetSignalChannel(ctx, SignalInbox).ReceiveAsync(&item) {
		g.addInbox(item)
	}
	return workflow.NewContinueAsNewError(ctx, GroupWorkflowName, GroupInput{Name: g.name, State: g.st})
}

func (g *group) addInbox(item InboxItem) {
	g.st.NextSeq++
	item.Seq = g.st.NextSeq
	g.st.Inbox = append(g.st.Inbox, item)
	if len(g.st.Inbox) > maxInbox {
		g.st.Inbox = append([]InboxItem(nil), g.st.Inbox[len(g.st.Inbox)-maxInbox:]...)
	}
}

func (g *group) view() (GroupView, error) {
	v := GroupView{Name: g.name, Goal: g.st.Goal, Policy: g.st.Policy, Sessions: slices.Clone(g.st.Sessions), Inbox: slices.Clone(g.st.Inbox)}
	if v.Inbox == nil {
		v.Inbox = []InboxItem{}
	}
	return v, nil
}

func (g *group) validateSetPolicy(_ workflow.Context, req SetPolicy) error {
	_, err := config.ApplyRotateJSON(g.st.Policy, req.RotateJSON) //workflowcheck:ignore decoding JSON is deterministic
	return err
}

func (g *group) setPolicy(ctx workflow.Context, req SetPolicy) (config.Rotate, error) {
	p, err := config.ApplyRotateJSON(g.st.Policy, req.RotateJSON) //workflowcheck:ignore decoding JSON is deterministic
	if err != nil {
		return g.st.Policy, err
	}
	g.st.Policy = p
	g.push(ctx)
	return p, nil
}

func (g *group) validateSync(_ workflow.Context, req GroupSync) error {
	var problems []string
	if err := req.Rotate.Validate(); err != nil {
		problems = append(problems, err.Error())
	}
	for _, s := range req.Sessions {
		if !ValidName(s) {
			problems = append(problems, fmt.Sprintf("session name %q is not valid", s))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("group %s: %s", g.name, strings.Join(problems, "; "))
	}
	return nil
}

func (g *group) sync(ctx workflow.Context, req GroupSync) (GroupView, error) {
	g.st.Goal = req.Goal
	for _, s := range req.Sessions {
		if !slices.Contains(g.st.Sessions, s) {
			g.st.Sessions = append(g.st.Sessions, s)
		}
	}
	slices.Sort(g.st.Sessions)
	if req.Rotate != g.st.FilePolicy {
		g.st.FilePolicy = req.Rotate
		g.st.Policy = req.Rotate
		g.push(ctx)
	}
	return g.view()
}

// push sends the policy to every session, in name order.
func (g *group) push(ctx workflow.Context) {
	for _, s := range g.st.Sessions {
		err := workflow.SignalExternalWorkflow(ctx, SessionID(g.name, s), "", SignalPolicy, PolicyChange{Rotate: g.st.Policy}).Get(ctx, nil)
		if err != nil {
			workflow.GetLogger(ctx).Warn("policy not delivered", "session", s, "error", err)
		}
	}
}

// historyFull says a workflow should continue as new: the server suggests
// it, or its history passed limit (defaultHistoryLimit when 0).
func historyFull(ctx workflow.Context, limit int) bool {
	info := workflow.GetInfo(ctx)
	if limit <= 0 {
		limit = defaultHistoryLimit
	}
	return info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() >= limit
}

// BoardText is what board_read shows and what a fresh conversation's first
// message carries: the group's goal and its board.
func BoardText(g GroupView) string {
	var b strings.Builder
	b.WriteString(fmt.Sprintf("Group: %s\n", g.Name))
	if g.Goal != "" {
		b.WriteString(fmt.Sprintf("Goal: %s\n", g.Goal))
	} else {
		b.WriteString("Goal: (none set)\n")
	}
	b.WriteString("Tasks: none on the board yet.\nLocks: none held.\n")
	return b.String()
}
