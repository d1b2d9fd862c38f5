package worker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"golang.org/x/sync/errgroup"

	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/nidclient"
	"github.com/nid-dev/nid/workflows"
)

// startConcurrency is how many groups, and then sessions, StartGroups
// starts at once. One after another, a thousand sessions waited on a
// thousand round trips through the server, each a few milliseconds on an
// idle machine and tens on a busy one; a few dozen in flight keep the
// server and the worker busy without queueing more than they take.
const startConcurrency = 32

// StartGroups starts every group of cfg and its sessions, or finds them
// running and leaves their state alone: a restart resumes each session where
// it was. The file's goal, sessions and (when the file changed it) policy
// reach a running group through a validated update.
//
// A session is placed on a host (PlaceAll) before it starts; one running
// keeps the host it has. The groups start first, then every new session is
// placed in one batch, in the file's order (groups by name), then the
// sessions start, startConcurrency at a time.
func StartGroups(ctx context.Context, c client.Client, cfg *config.Config) error {
	// Placing asks the hosts registry: a restart of a couple of hundred
	// sessions would wait on it for nothing. One list says where the
	// running ones are (a session the list has not caught up with yet is
	// placed, and the registry answers with its host).
	placed := map[string]workflows.Placement{}
	list, listErr := nidclient.ListSessions(ctx, c, "")
	listed := map[string]bool{}
	for _, s := range list {
		listed[s.Ref()] = true
		if s.Host != "" {
			placed[s.Ref()] = workflows.Placement{Host: s.Host}
		}
	}
	names := cfg.GroupNames()
	views := make([]workflows.GroupView, len(names))
	fresh := make([]*workflows.GroupInput, len(names))
	starting, gctx := errgroup.WithContext(ctx)
	starting.SetLimit(startConcurrency)
	for i, name := range names {
		running := slices.DeleteFunc(cfg.Groups[name].SessionNames(), func(s string) bool { return !listed[name+"/"+s] })
		starting.Go(func() (err error) {
			views[i], fresh[i], err = startGroup(gctx, c, name, cfg.Groups[name], running, listErr == nil)
			return err
		})
	}
	if err := starting.Wait(); err != nil {
		return err
	}

	var unplaced []workflows.PlaceRequest
	for _, name := range names {
		for _, s := range cfg.Groups[name].Sessions {
			if ref := name + "/" + s.Name; placed[ref].Host == "" {
				unplaced = append(unplaced, workflows.PlaceRequest{Session: ref, Want: cfg.SessionHost(name, s)})
			}
		}
	}
	if len(unplaced) > 0 {
		answers, err := PlaceAll(ctx, c, unplaced)
		if err != nil {
			return err
		}
		for i, req := range unplaced {
			placed[req.Session] = answers[i]
		}
	}

	// The groups' sessions take turns to start: a new session's first turn
	// waits for its group's board, and a group answers its sessions one
	// at a time, so a group whose sessions all start at once gives its
	// last one the board long after the first, while a group whose
	// sessions start last sits idle until then.
	starting, sctx := errgroup.WithContext(ctx)
	starting.SetLimit(startConcurrency)
	for round := 0; ; round++ {
		started := false
		for i, name := range names {
			g := cfg.Groups[name]
			if round >= len(g.Sessions) {
				continue
			}
			s := g.Sessions[round]
			started = true
			var board workflows.BoardView
			if fresh[i] != nil {
				board = workflows.StartingBoard(*fresh[i], s.Name)
			} else {
				board = workflows.SeatOf(views[i], s.Name)
			}
			starting.Go(func() error {
				return startSession(sctx, c, cfg, name, g, s, views[i], &board, placed[name+"/"+s.Name])
			})
		}
		if !started {
			break
		}
	}
	return starting.Wait()
}

// TellStarted tells each group of cfg that its sessions run: a board it
// sent one before it ran is sent again (workflows.SignalStarted). nid up
// says so after every start and reload, those that failed part of the way
// included, so that a session started by a nid up that died before
// saying it is not left without the board it missed for long. A group that
// does not hear it loses nothing else: the error says which.
func TellStarted(ctx context.Context, c client.Client, cfg *config.Config) error {
	var telling errgroup.Group
	telling.SetLimit(startConcurrency)
	names := cfg.GroupNames()
	errs := make([]error, len(names))
	for i, name := range names {
		sessions := cfg.Groups[name].SessionNames()
		telling.Go(func() error {
			if err := c.SignalWorkflow(ctx, workflows.GroupID(name), "", workflows.SignalStarted, workflows.SessionsStarted{Sessions: sessions}); err != nil {
				errs[i] = fmt.Errorf("group %s: %w", name, err)
			}
			return nil
		})
	}
	_ = telling.Wait()
	return errors.Join(errs...)
}

// startGroup starts group name, or finds it running and tells it what the
// file says now; the answer says its policy and what it learned. A group
// that starts now has the file's policy and has learned nothing, so it is
// not asked: its answer would cost a board pushed to each of its sessions
// in turn, none of which runs yet, before a single one could start. fresh
// is the input of a group started now, whose starting board its new
// sessions are given (workflows.StartingBoard); nil for one found running,
// whose answer gives them theirs (workflows.SeatOf). running are the
// group's sessions that run already, when known: a group started now sends
// its first board to those alone. Unknown (the list failed), it sends it to
// every session, as before nid up knew which ran.
func startGroup(ctx context.Context, c client.Client, name string, g config.Group, running []string, known bool) (view workflows.GroupView, fresh *workflows.GroupInput, err error) {
	sessions := g.SessionNames()
	in := workflows.GroupInput{
		Name: name, Goal: g.Goal, Policy: g.Rotate, Sessions: sessions,
		Tasks: g.Tasks, Budget: g.Budget, Prompts: g.Prompts,
	}
	if known {
		in.BoardsAtStart, in.Running = true, running
	}
	_, err = c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       workflows.GroupID(name),
		TaskQueue:                workflows.TaskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		// Else the SDK answers a running group with its run, as if
		// started now.
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		TypedSearchAttributes:                    workflows.GroupSearchAttributes(name),
		StaticSummary:                            workflows.GroupSummary(name, g.Goal),
		StaticDetails: fmt.Sprintf("The nid group %s: it owns the rotate policy, the board (tasks, claims, locks), "+
			"the budget and the inbox of its sessions (%s), and pushes them to the sessions.", name, strings.Join(sessions, ", ")),
	}, workflows.GroupWorkflowName, in)
	if err == nil {
		return workflows.GroupView{Policy: g.Rotate}, &in, nil
	}
	if _, running := errors.AsType[*serviceerror.WorkflowExecutionAlreadyStarted](err); !running {
		return workflows.GroupView{}, nil, fmt.Errorf("group %s: %w", name, err)
	}
	// The group's answer says its policy and what it learned: a session
	// that starts now starts with them, as its siblings run, rather than
	// with the file's policy until the next push.
	err = nidclient.UpdateGroup(ctx, c, name, workflows.UpdateSync, workflows.GroupSync{
		Goal: g.Goal, Rotate: g.Rotate, Sessions: sessions,
		Tasks: g.Tasks, Budget: g.Budget, Prompts: g.Prompts,
	}, &view)
	if err != nil {
		return workflows.GroupView{}, nil, fmt.Errorf("group %s: %w", name, err)
	}
	return view, nil, nil
}

// startSession starts session s of group name where it is placed, or tells
// the running session what the file says now; its state stays as it was.
// board, when not nil, is its group's board as nid up knows it.
func startSession(ctx context.Context, c client.Client, cfg *config.Config, name string, g config.Group, s config.Session, view workflows.GroupView, board *workflows.BoardView, at workflows.Placement) error {
	host := at.Host
	spec := AgentSpec(cfg, name, s)
	_, err := c.SignalWithStartWorkflow(ctx, workflows.SessionID(name, s.Name),
		workflows.SignalConfig, workflows.SessionConfig{Goal: g.Goal, Spec: spec},
		client.StartWorkflowOptions{
			TaskQueue:                workflows.SessionQueue(host),
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
			Placed:        at.Alive,
			Board:         board,
			Repo:          g.Repo,
			WorkDir:       g.WorkDir,
		})
	if err != nil {
		return fmt.Errorf("session %s/%s: %w", name, s.Name, err)
	}
	return nil
}

// temporalSessions routes the MCP endpoint's tool calls to workflows.
type temporalSessions struct {
	c      client.Client
	boards *Boards
}

func (t temporalSessions) HandoffWrite(ctx context.Context, sessionWorkflowID, summary string) error {
	return t.c.SignalWorkflow(ctx, sessionWorkflowID, "", workflows.SignalHandoffWrite, workflows.HandoffWrite{Summary: summary})
}

func (t temporalSessions) HandoffAck(ctx context.Context, sessionWorkflowID string, ack workflows.HandoffAck) error {
	return t.c.SignalWorkflow(ctx, sessionWorkflowID, "", workflows.SignalHandoffAck, ack)
}

func (t temporalSessions) Board(ctx context.Context, group, session string) (string, error) {
	return t.boards.Text(ctx, group, session)
}

func (t temporalSessions) Session(ctx context.Context, group, name string) (workflows.SessionView, error) {
	return nidclient.QuerySession(ctx, t.c, group, name)
}

func (t temporalSessions) BoardUpdate(ctx context.Context, group, update string, req workflows.BoardRequest) (workflows.BoardResult, error) {
	// Said whether or not the group took it: an update that timed out
	// here may still be taken.
	defer t.boards.Changed(group)
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
