package cli

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/workflows"
)

// fakeClient stands in for Temporal: it lists, queries, signals and updates
// an in-memory set of sessions and groups the way the workflows answer.
// Methods the commands do not use panic through the nil embedded client.
type fakeClient struct {
	client.Client

	mu       sync.Mutex
	sessions []workflows.SessionView
	// noMemo lists sessions whose memo is not visible yet.
	noMemo map[string]bool
	groups []workflows.GroupView
	// events are the sessions' feeds, by workflow id.
	events map[string][]workflows.Event
	// queryErr makes queries of a workflow id fail.
	queryErr map[string]error
	// pageSize splits list answers into pages; 0 means one page.
	pageSize int
	// onList runs before the n-th list call answers (counting from 1);
	// onEvents before the n-th events query does.
	onList   func(n int)
	onEvents func(n int)
	// updateResult is what every update returns.
	updateResult any

	lists       []string
	eventsCalls int
	signals     []sentSignal
	updates     []client.UpdateWorkflowOptions
}

type sentSignal struct {
	WorkflowID string
	Name       string
	Arg        any
}

var groupFilterRE = regexp.MustCompile(workflows.SearchGroup + ` = '([^']*)'`)

func (f *fakeClient) ListWorkflow(_ context.Context, req *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
	f.mu.Lock()
	f.lists = append(f.lists, req.GetQuery())
	n := len(f.lists)
	hook := f.onList
	f.mu.Unlock()
	if hook != nil {
		hook(n)
	}
	f.mu.Lock()
	defer f.mu.Unlock()

	var all []*workflowpb.WorkflowExecutionInfo
	if strings.Contains(req.GetQuery(), "'"+workflows.GroupWorkflowName+"'") {
		for _, g := range f.groups {
			all = append(all, &workflowpb.WorkflowExecutionInfo{
				Execution:        &commonpb.WorkflowExecution{WorkflowId: workflows.GroupID(g.Name)},
				SearchAttributes: searchAttrs(map[string]any{workflows.SearchGroup: g.Name}),
			})
		}
	} else {
		group := ""
		if m := groupFilterRE.FindStringSubmatch(req.GetQuery()); m != nil {
			group = m[1]
		}
		for _, s := range f.sessions {
			if group != "" && s.Group != group {
				continue
			}
			all = append(all, f.sessionInfo(s))
		}
	}

	start := 0
	if len(req.GetNextPageToken()) > 0 {
		start, _ = strconv.Atoi(string(req.GetNextPageToken()))
	}
	end := len(all)
	var next []byte
	if f.pageSize > 0 && start+f.pageSize < len(all) {
		end = start + f.pageSize
		next = []byte(strconv.Itoa(end))
	}
	return &workflowservice.ListWorkflowExecutionsResponse{Executions: all[start:end], NextPageToken: next}, nil
}

func (f *fakeClient) sessionInfo(s workflows.SessionView) *workflowpb.WorkflowExecutionInfo {
	id := workflows.SessionID(s.Group, s.Name)
	attrs := map[string]any{
		workflows.SearchGroup:     s.Group,
		workflows.SearchSession:   s.Name,
		workflows.SearchAgent:     s.Agent,
		workflows.SearchStatus:    s.Status,
		workflows.SearchRotations: int64(s.Context.Rotations),
	}
	if s.Context.Percent != nil {
		attrs[workflows.SearchContextPercent] = *s.Context.Percent
	}
	info := &workflowpb.WorkflowExecutionInfo{
		Execution:        &commonpb.WorkflowExecution{WorkflowId: id},
		SearchAttributes: searchAttrs(attrs),
	}
	if !f.noMemo[id] {
		info.Memo = &commonpb.Memo{Fields: map[string]*commonpb.Payload{workflows.MemoContext: payload(s.Context)}}
	}
	return info
}

func searchAttrs(m map[string]any) *commonpb.SearchAttributes {
	sa := &commonpb.SearchAttributes{IndexedFields: map[string]*commonpb.Payload{}}
	for k, v := range m {
		sa.IndexedFields[k] = payload(v)
	}
	return sa
}

func payload(v any) *commonpb.Payload {
	p, err := converter.GetDefaultDataConverter().ToPayload(v)
	if err != nil {
		panic(err)
	}
	return p
}

// value is a query answer, encoded and decoded as the SDK would.
type value struct{ p *commonpb.Payload }

func (v value) HasValue() bool { return v.p != nil }

func (v value) Get(ptr any) error { return converter.GetDefaultDataConverter().FromPayload(v.p, ptr) }

func (f *fakeClient) QueryWorkflow(_ context.Context, id, _ string, queryType string, args ...any) (converter.EncodedValue, error) {
	if queryType == workflows.QueryEvents {
		f.mu.Lock()
		f.eventsCalls++
		n, hook := f.eventsCalls, f.onEvents
		f.mu.Unlock()
		if hook != nil {
			hook(n)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.queryErr[id]; err != nil {
		return nil, err
	}
	switch queryType {
	case workflows.QuerySession, workflows.QueryEvents:
		s, ok := f.session(id)
		if !ok {
			return nil, serviceerror.NewNotFound("workflow not found for ID: " + id)
		}
		if queryType == workflows.QuerySession {
			return value{payload(s)}, nil
		}
		after := args[0].(int64)
		out := []workflows.Event{}
		for _, e := range f.events[id] {
			if e.Seq > after {
				out = append(out, e)
			}
		}
		return value{payload(out)}, nil
	case workflows.QueryGroup:
		for _, g := range f.groups {
			if workflows.GroupID(g.Name) == id {
				return value{payload(g)}, nil
			}
		}
		return nil, serviceerror.NewNotFound("workflow not found for ID: " + id)
	}
	return nil, serviceerror.NewInvalidArgument("unknown query " + queryType)
}

func (f *fakeClient) session(id string) (workflows.SessionView, bool) {
	for _, s := range f.sessions {
		if workflows.SessionID(s.Group, s.Name) == id {
			return s, true
		}
	}
	return workflows.SessionView{}, false
}

func (f *fakeClient) SignalWorkflow(_ context.Context, id, _ string, name string, arg any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.session(id); !ok {
		return serviceerror.NewNotFound("workflow not found for ID: " + id)
	}
	f.signals = append(f.signals, sentSignal{WorkflowID: id, Name: name, Arg: arg})
	return nil
}

func (f *fakeClient) UpdateWorkflow(_ context.Context, opts client.UpdateWorkflowOptions) (client.WorkflowUpdateHandle, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !slices.ContainsFunc(f.groups, func(g workflows.GroupView) bool { return workflows.GroupID(g.Name) == opts.WorkflowID }) {
		return nil, serviceerror.NewNotFound("workflow not found for ID: " + opts.WorkflowID)
	}
	f.updates = append(f.updates, opts)
	return updateHandle{value{payload(f.updateResult)}}, nil
}

func (f *fakeClient) Close() {}

type updateHandle struct{ v value }

func (h updateHandle) WorkflowID() string                 { return "" }
func (h updateHandle) RunID() string                      { return "" }
func (h updateHandle) UpdateID() string                   { return "" }
func (h updateHandle) Get(_ context.Context, p any) error { return h.v.Get(p) }

func pct(p float64) *float64 { return &p }

// runApp runs the whole command line against fake, the way main does.
func runApp(t *testing.T, fake *fakeClient, d Deps, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	return runAppContext(t, context.Background(), fake, d, args...)
}

// runAppContext is runApp until ctx ends, for commands that follow.
func runAppContext(t *testing.T, ctx context.Context, fake *fakeClient, d Deps, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	d.Stdout, d.Stderr = &out, &errOut
	if d.Environ == nil {
		d.Environ = []string{}
	}
	if d.Dial == nil {
		d.Dial = func(context.Context, *config.Config, *slog.Logger) (client.Client, error) {
			if fake == nil {
				t.Fatal("the command dialled Temporal")
			}
			return fake, nil
		}
	}
	if d.IsTerminal == nil {
		d.IsTerminal = func(io.Writer) bool { return false }
	}
	err = NewApp(d).RunContext(ctx, append([]string{"nid"}, args...))
	return out.String(), errOut.String(), err
}
