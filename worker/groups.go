package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/nidclient"
	"github.com/nid-dev/nid/workflows"
)

// StartGroups starts every group of cfg and its sessions, or finds them
// running and leaves their state alone: a restart resumes each session where
// it was. The file's goal, sessions and (when the file changed it) policy
// reach a running group through a validated update.
//
// A session is placed on a host (Place) before it starts; one running
// keeps the host it has.
func StartGroups(ctx context.Context, c client.Client, cfg *config.Config) error {
	// Placing is one update of the hosts registry a session: a restart of
	// a couple of hundred sessions would wait on as many. One list says
	// where the running ones are (a session the list has not caught up
	// with yet is placed, and the registry answers with its host).
	placed := map[string]string{}
	if running, err := nidclient.ListSessions(ctx, c, ""); err == nil {
		for _, s := range running {
			if s.Host != "" {
				placed[s.Ref()] = s.Host
			}
		}
	}
	for _, name := range cfg.GroupNames() {
		g := cfg.Groups[name]
		sessions := make([]string, 0, len(g.Sessions))
		for _, s := range g.Sessions {
			sessions = append(sessions, s.Name)
		}
		_, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
			ID:                       workflows.GroupID(name),
			TaskQueue:                workflows.TaskQueue,
			WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
			TypedSearchAttributes:    workflows.GroupSearchAttributes(name),
			StaticSummary:            workflows.GroupSummary(name, g.Goal),
			StaticDetails: fmt.Sprintf("The nid group %s: it owns the rotate policy, the board (tasks, claims, locks), "+
				"the budget and the inbox of its sessions (%s), and pushes them to the sessions.", name, strings.Join(sessions, ", ")),
		}, workflows.GroupWorkflowName, workflows.GroupInput{
			Name: name, Goal: g.Goal, Policy: g.Rotate, Sessions: sessions,
			Tasks: g.Tasks, Budget: g.Budget, Prompts: g.Prompts,
		})
		if err != nil {
			return fmt.Errorf("group %s: %w", name, err)
		}
		// The group's answer says its policy and what it learned: a session
		// that starts now starts with them, as its siblings run, rather than
		// with the file's policy until the next push.
		var view workflows.GroupView
		err = nidclient.UpdateGroup(ctx, c, name, workflows.UpdateSync, workflows.GroupSync{
			Goal: g.Goal, Rotate: g.Rotate, Sessions: sessions,
			Tasks: g.Tasks, Budget: g.Budget, Prompts: g.Prompts,
		}, &view)
		if err != nil {
			return fmt.Errorf("group %s: %w", name, err)
		}
		for _, s := range g.Sessions {
			spec := AgentSpec(cfg, name, s)
			host, ok := placed[name+"/"+s.Name]
			if !ok {
				var err error
				if host, err = Place(ctx, c, name+"/"+s.Name, cfg.SessionHost(name, s)); err != nil {
					return err
				}
			}
			// Start it, or tell the running session what the file says now;
			// its state stays as it was.
			_, err = c.SignalWithStartWorkflow(ctx, workflows.SessionID(name, s.Name),
				workflows.SignalConfig, workflows.SessionConfig{Goal: g.Goal, Spec: spec},
				client.StartWorkflowOptions{
					TaskQueue:                workflows.TaskQueue,
					WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
					TypedSearchAttributes:    workflows.SessionSearchAttributes(name, s.Name, s.Agent, host),
					StaticSummary:            workflows.SessionSummary(name, s.Name, s.Agent),
					StaticDetails: fmt.Sprintf("The nid session %s/%s: one %s agent seat in group %s. It sends the agent "+
						"its turns, tracks how full its context is, and rotates the conversation (compaction or handoff) "+
						"before it fills, keeping its worktree, branch, tasks and locks.", name, s.Name, s.Agent, name),
				}, workflows.SessionWorkflowName, workflows.SessionInput{
					Group:         name,
					Name:          s.Name,
					Goal:          g.Goal,
					Spec:          spec,
					Policy:        view.Policy,
					Learned:       view.Learned,
					ActivityQueue: workflows.HostQueue(host),
					Host:          host,
					Repo:          g.Repo,
					WorkDir:       g.WorkDir,
				})
			if err != nil {
				return fmt.Errorf("session %s/%s: %w", name, s.Name, err)
			}
		}
	}
	return nil
}

// temporalSessions routes the MCP endpoint's tool calls to workflows.
type temporalSessions struct{ c client.Client }

func (t temporalSessions) HandoffWrite(ctx context.Context, sessionWorkflowID, summary string) error {
	return t.c.SignalWorkflow(ctx, sessionWorkflowID, "", workflows.SignalHandoffWrite, workflows.HandoffWrite{Summary: summary})
}

func (t temporalSessions) HandoffAck(ctx context.Context, sessionWorkflowID string, ack workflows.HandoffAck) error {
	return t.c.SignalWorkflow(ctx, sessionWorkflowID, "", workflows.SignalHandoffAck, ack)
}

func (t temporalSessions) Board(ctx context.Context, group, session string) (string, error) {
	g, err := nidclient.QueryGroup(ctx, t.c, group)
	if err != nil {
		return "", fmt.Errorf("group %s: %w", group, err)
	}
	return workflows.BoardText(g.Board, session), nil
}

func (t temporalSessions) Session(ctx context.Context, group, name string) (workflows.SessionView, error) {
	return nidclient.QuerySession(ctx, t.c, group, name)
}

func (t temporalSessions) BoardUpdate(ctx context.Context, group, update string, req workflows.BoardRequest) (workflows.BoardResult, error) {
	return UpdateBoard(ctx, t.c, group, update, req)
}

// UpdateBoard runs a board update on a group and waits for its answer. A
// refusal (someone else holds the task) comes back as an error saying so in
// the validator's own words.
func UpdateBoard(ctx context.Context, c client.Client, group, update string, req workflows.BoardRequest) (workflows.BoardResult, error) {
	var res workflows.BoardResult
	if err := nidclient.UpdateGroup(ctx, c, group, update, req, &res); err != nil {
		return res, errors.New(workflows.ErrorText(err))
	}
	return res, nil
}
