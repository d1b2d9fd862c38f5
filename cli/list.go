package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/nid-dev/nid/workflows"
)

// session is one running session as Temporal visibility lists it.
type session struct {
	Group   string
	Name    string
	Agent   string
	Status  string
	Context workflows.ContextRecord
}

// Ref is the session's address, group/name.
func (s session) Ref() string { return s.Group + "/" + s.Name }

// sessionsQuery selects running session workflows, of one group when group
// is not empty. Group names are validated before they get here, so they
// cannot break out of the quotes.
func sessionsQuery(group string) string {
	q := fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus = 'Running'", workflows.SessionWorkflowName)
	if group != "" {
		q += fmt.Sprintf(" AND %s = '%s'", workflows.SearchGroup, group)
	}
	return q
}

func groupsQuery() string {
	return fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus = 'Running'", workflows.GroupWorkflowName)
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

// listSessions returns the running sessions, of one group when group is not
// empty, sorted by group/name. It is one visibility query: everything the
// CONTEXT column needs is in the search attributes and the memo.
func listSessions(ctx context.Context, c client.Client, group string) ([]session, error) {
	execs, err := listExecutions(ctx, c, sessionsQuery(group))
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []session
	for _, e := range execs {
		s := sessionFrom(e)
		// A session that just continued as new can show twice while
		// visibility catches up; the newest run comes first.
		if seen[s.Ref()] {
			continue
		}
		seen[s.Ref()] = true
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b session) int { return strings.Compare(a.Ref(), b.Ref()) })
	return out, nil
}

func sessionFrom(e *workflowpb.WorkflowExecutionInfo) session {
	sa := e.GetSearchAttributes()
	s := session{
		Group:  searchString(sa, workflows.SearchGroup),
		Name:   searchString(sa, workflows.SearchSession),
		Agent:  searchString(sa, workflows.SearchAgent),
		Status: searchString(sa, workflows.SearchStatus),
	}
	if s.Group == "" || s.Name == "" {
		// Before its first search attribute upsert is visible, the id
		// still says who it is: nid/<group>/<session>.
		parts := strings.SplitN(e.GetExecution().GetWorkflowId(), "/", 3)
		if len(parts) == 3 {
			s.Group, s.Name = parts[1], parts[2]
		}
	}
	if p, ok := e.GetMemo().GetFields()[workflows.MemoContext]; ok {
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

// listGroups returns the names of the running groups, sorted.
func listGroups(ctx context.Context, c client.Client) ([]string, error) {
	execs, err := listExecutions(ctx, c, groupsQuery())
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

// unknownGroup is the error for a group that is not running: it lists the
// groups that are.
func unknownGroup(ctx context.Context, c client.Client, group string) error {
	groups, err := listGroups(ctx, c)
	if err != nil {
		return fmt.Errorf("no group %q", group)
	}
	return groupMissing(group, groups)
}

func groupMissing(group string, groups []string) error {
	if len(groups) == 0 {
		return fmt.Errorf("no group %q: no group is running (start them with nid up)", group)
	}
	return fmt.Errorf("no group %q; running groups: %s", group, strings.Join(groups, ", "))
}

// unknownSession is the error for a session that is not running: it lists
// the group's sessions, or the groups when the group is not running either.
func unknownSession(ctx context.Context, c client.Client, group, name string) error {
	ref := group + "/" + name
	all, err := listSessions(ctx, c, "")
	if err != nil {
		return fmt.Errorf("no session %q", ref)
	}
	var names []string
	for _, s := range all {
		if s.Group == group {
			names = append(names, s.Name)
		}
	}
	if len(names) > 0 {
		return fmt.Errorf("no session %q; sessions in %s: %s", ref, group, strings.Join(names, ", "))
	}
	groups, err := listGroups(ctx, c)
	if err != nil {
		return fmt.Errorf("no session %q", ref)
	}
	if slices.Contains(groups, group) {
		return fmt.Errorf("no session %q: group %s has no running sessions", ref, group)
	}
	return groupMissing(group, groups)
}

func isNotFound(err error) bool {
	var nf *serviceerror.NotFound
	return errors.As(err, &nf)
}

// queryTimeout bounds a query: a workflow whose worker died a moment ago is
// still handed the query, and nothing would answer it.
const queryTimeout = 10 * time.Second

// notAnswering words a query that failed for another reason than the
// workflow not existing: almost always no worker is running.
func notAnswering(who string, err error) error {
	return fmt.Errorf("%s did not answer (is nid up or nid worker running?): %w", who, err)
}

// querySession asks a session workflow for its view.
func querySession(ctx context.Context, c client.Client, group, name string) (workflows.SessionView, error) {
	ctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	var v workflows.SessionView
	val, err := c.QueryWorkflow(ctx, workflows.SessionID(group, name), "", workflows.QuerySession)
	if err != nil {
		return v, err
	}
	return v, val.Get(&v)
}

// queryGroup asks a group workflow for its view.
func queryGroup(ctx context.Context, c client.Client, group string) (workflows.GroupView, error) {
	ctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	var v workflows.GroupView
	val, err := c.QueryWorkflow(ctx, workflows.GroupID(group), "", workflows.QueryGroup)
	if err != nil {
		return v, err
	}
	return v, val.Get(&v)
}

// validGroup checks a GROUP argument.
func validGroup(g string) error {
	if !workflows.ValidName(g) {
		return fmt.Errorf("%q is not a group name: use lower-case letters, digits, - and _", g)
	}
	return nil
}

// optionalGroup reads the [GROUP] argument of a command.
func optionalGroup(command string, args []string) (string, error) {
	switch len(args) {
	case 0:
		return "", nil
	case 1:
		if err := validGroup(args[0]); err != nil {
			return "", err
		}
		return args[0], nil
	default:
		return "", fmt.Errorf("too many arguments: nid %s takes at most one GROUP", command)
	}
}
