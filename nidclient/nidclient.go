// Package nidclient is every operation nid's clients (the command line and
// the HTTP API) carry out on its workflows, so that each client only prints
// the answer or maps the error: reading sessions (one visibility list,
// decoded from their search attributes and memo) and groups, rotating,
// sending, setting a group, the inbox, the board, stopping and starting, the
// feed of events, and the rungs of the version ladder running workflows
// follow (rungs.go). The operations (ops.go, feed.go) return the error
// types of errors.go: not found, refused, invalid, unavailable.
//
//	answer, err := nidclient.Rotate(ctx, c, "web", "lead", "")
//	var refused *nidclient.RefusedError
//	if errors.As(err, &refused) {
//		// the session would ignore the request: it was not sent
//	}
package nidclient

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/nid-dev/nid/workflows"
)

// Session is one running session as Temporal visibility lists it.
type Session struct {
	Group   string                  `json:"group"`
	Name    string                  `json:"name"`
	Agent   string                  `json:"agent"`
	Status  string                  `json:"status"`
	Context workflows.ContextRecord `json:"context"`
	// Host is the host the session runs on (empty: a session of before
	// hosts, not yet continued as new).
	Host string `json:"host,omitempty"`
	// LastEvent is the sequence number of the session's newest event as
	// its listing says; 0 when it does not say (a session of before
	// workflows.VersionListedEvents).
	LastEvent int64 `json:"-"`
}

// Ref is the session's address, group/name.
func (s Session) Ref() string { return s.Group + "/" + s.Name }

// SessionsQuery selects running session workflows, of one group when group
// is not empty. Group names are validated before they get here, so they
// cannot break out of the quotes.
func SessionsQuery(group string) string {
	q := fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus = 'Running'", workflows.SessionWorkflowName)
	if group != "" {
		q += fmt.Sprintf(" AND %s = '%s'", workflows.SearchGroup, group)
	}
	return q
}

// GroupsQuery selects running group workflows.
func GroupsQuery() string {
	return fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus = 'Running'", workflows.GroupWorkflowName)
}

// RunningOnTaskQueue lists the running workflows whose tasks go to queue:
// sessions, rotations and groups alike.
func RunningOnTaskQueue(ctx context.Context, c client.Client, queue string) ([]*workflowpb.WorkflowExecutionInfo, error) {
	return listExecutions(ctx, c, fmt.Sprintf("TaskQueue = '%s' AND ExecutionStatus = 'Running'", queue))
}

// listExecutions runs one visibility query, following its pages.
func listExecutions(ctx context.Context, c client.Client, query string) ([]*workflowpb.WorkflowExecutionInfo, error) {
	var out []*workflowpb.WorkflowExecutionInfo
	var token []byte
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query:         query,
			NextPageToken: token,
		})
		if err != nil {
			return nil, fmt.Errorf("listing workflows: %w", err)
		}
		out = append(out, resp.GetExecutions()...)
		token = resp.GetNextPageToken()
		if len(token) == 0 {
			return out, nil
		}
	}
}

// ListSessions returns the running sessions, of one group when group is not
// empty, sorted by group/name. It is one visibility query: everything the
// CONTEXT column needs is in the search attributes and the memo.
func ListSessions(ctx context.Context, c client.Client, group string) ([]Session, error) {
	execs, err := listExecutions(ctx, c, SessionsQuery(group))
	if err != nil {
		return nil, err
	}
	runs := make([]sessionRun, 0, len(execs))
	for _, e := range execs {
		runs = append(runs, runOf(e))
	}
	return newestRuns(runs), nil
}

// sessionRun is a session as one of its runs lists it.
type sessionRun struct {
	Session
	id    string
	start time.Time
}

func runOf(e *workflowpb.WorkflowExecutionInfo) sessionRun {
	return sessionRun{Session: SessionFrom(e), id: e.GetExecution().GetRunId(), start: e.GetStartTime().AsTime()}
}

// newestRuns is each session once, as its newest run lists it (a session
// that just continued as new can show twice while visibility catches up),
// sorted by group/name.
func newestRuns(runs []sessionRun) []Session {
	slices.SortFunc(runs, func(a, b sessionRun) int {
		return cmp.Or(strings.Compare(a.Ref(), b.Ref()), b.start.Compare(a.start), strings.Compare(a.id, b.id))
	})
	out := make([]Session, 0, len(runs))
	for i, r := range runs {
		if i > 0 && runs[i-1].Ref() == r.Ref() {
			continue
		}
		out = append(out, r.Session)
	}
	return out
}

// SessionFrom decodes a session workflow's visibility record.
func SessionFrom(e *workflowpb.WorkflowExecutionInfo) Session {
	sa := e.GetSearchAttributes()
	s := Session{
		Group:  searchString(sa, workflows.SearchGroup),
		Name:   searchString(sa, workflows.SearchSession),
		Agent:  searchString(sa, workflows.SearchAgent),
		Status: searchString(sa, workflows.SearchStatus),
		Host:   searchString(sa, workflows.SearchHost),
	}
	if s.Group == "" || s.Name == "" {
		// Before its first search attribute upsert is visible, the id
		// still says who it is: nid/<group>/<session>.
		parts := strings.SplitN(e.GetExecution().GetWorkflowId(), "/", 3)
		if len(parts) == 3 {
			s.Group, s.Name = parts[1], parts[2]
		}
	}
	memo := e.GetMemo().GetFields()
	if p, ok := memo[workflows.MemoEvents]; ok {
		_ = converter.GetDefaultDataConverter().FromPayload(p, &s.LastEvent)
	}
	if p, ok := memo[workflows.MemoContext]; ok {
		if err := converter.GetDefaultDataConverter().FromPayload(p, &s.Context); err == nil {
			return s
		}
	}
	// No memo yet: the search attributes still carry the percent and the
	// rotations.
	if pct, ok := searchFloat(sa, workflows.SearchContextPercent); ok {
		s.Context.Percent = &pct
	}
	if n, ok := searchInt(sa, workflows.SearchRotations); ok {
		s.Context.Rotations = int(n)
	}
	return s
}

func searchPayload(sa *commonpb.SearchAttributes, key string) *commonpb.Payload {
	return sa.GetIndexedFields()[key]
}

func searchString(sa *commonpb.SearchAttributes, key string) string {
	p := searchPayload(sa, key)
	if p == nil {
		return ""
	}
	dc := converter.GetDefaultDataConverter()
	var s string
	if err := dc.FromPayload(p, &s); err == nil {
		return s
	}
	// Some servers hand keywords back as a one-element list.
	var list []string
	if err := dc.FromPayload(p, &list); err == nil && len(list) > 0 {
		return list[0]
	}
	return ""
}

func searchFloat(sa *commonpb.SearchAttributes, key string) (float64, bool) {
	p := searchPayload(sa, key)
	if p == nil {
		return 0, false
	}
	var f float64
	if err := converter.GetDefaultDataConverter().FromPayload(p, &f); err != nil {
		return 0, false
	}
	return f, true
}

func searchInt(sa *commonpb.SearchAttributes, key string) (int64, bool) {
	p := searchPayload(sa, key)
	if p == nil {
		return 0, false
	}
	var n int64
	if err := converter.GetDefaultDataConverter().FromPayload(p, &n); err != nil {
		return 0, false
	}
	return n, true
}

// ListGroups returns the names of the running groups, sorted.
func ListGroups(ctx context.Context, c client.Client) ([]string, error) {
	execs, err := listExecutions(ctx, c, GroupsQuery())
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range execs {
		name := searchString(e.GetSearchAttributes(), workflows.SearchGroup)
		if name == "" {
			name = strings.TrimPrefix(e.GetExecution().GetWorkflowId(), workflows.GroupID(""))
		}
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names, nil
}

// QueryTimeout bounds one try of a query: a workflow whose worker died a
// moment ago is still handed the query, and nothing would answer it; the
// next try reaches the worker that took it over (see query).
const QueryTimeout = 10 * time.Second

// queryError is a query that failed, with when it was asked: a query no
// worker took while none asked for work since shows that none runs (see
// unanswered).
type queryError struct {
	err   error
	asked time.Time
}

func (e *queryError) Error() string { return e.err.Error() }
func (e *queryError) Unwrap() error { return e.err }

// QuerySession asks a session workflow for its view.
func QuerySession(ctx context.Context, c client.Client, group, name string) (workflows.SessionView, error) {
	var v workflows.SessionView
	asked := time.Now()
	val, err := query(ctx, c, workflows.SessionID(group, name), workflows.QuerySession)
	if err != nil {
		return v, &queryError{err: err, asked: asked}
	}
	return v, val.Get(&v)
}

// QueryGroup asks a group workflow for its view.
func QueryGroup(ctx context.Context, c client.Client, group string) (workflows.GroupView, error) {
	var v workflows.GroupView
	asked := time.Now()
	val, err := query(ctx, c, workflows.GroupID(group), workflows.QueryGroup)
	if err != nil {
		return v, &queryError{err: err, asked: asked}
	}
	return v, val.Get(&v)
}

// QueryEvents asks a session workflow for its events after seq.
func QueryEvents(ctx context.Context, c client.Client, group, name string, after int64) ([]workflows.Event, error) {
	ctx, cancel := context.WithTimeout(ctx, QueryTimeout)
	defer cancel()
	asked := time.Now()
	val, err := c.QueryWorkflow(ctx, workflows.SessionID(group, name), "", workflows.QueryEvents, after)
	if err != nil {
		return nil, &queryError{err: err, asked: asked}
	}
	var evs []workflows.Event
	if err := val.Get(&evs); err != nil {
		return nil, err
	}
	return evs, nil
}
