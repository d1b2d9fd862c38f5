package worker

import (
	"context"
	"regexp"
	"slices"
	"sync"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/nidclient"
	"github.com/nid-dev/nid/workflows"
)

// fakeTemporal stands in for Temporal behind the API: it lists, queries,
// signals and updates an in-memory set of sessions and groups the way the
// workflows answer. Methods the API does not use panic through the nil
// embedded client.
type fakeTemporal struct {
	client.Client

	mu       sync.Mutex
	sessions []workflows.SessionView
	groups   []workflows.GroupView
	// policy is what the set_policy update answers.
	policy  config.Rotate
	signals []sentSignal
	updates []workflows.SetPolicy
}

type sentSignal struct {
	WorkflowID string
	Name       string
	Arg        any
}

var groupFilter = regexp.MustCompile(workflows.SearchGroup + ` = '([^']*)'`)

func payloadOf(v any) *commonpb.Payload {
	p, err := converter.GetDefaultDataConverter().ToPayload(v)
	if err != nil {
		panic(err)
	}
	return p
}

func (f *fakeTemporal) ListWorkflow(_ context.Context, req *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*workflowpb.WorkflowExecutionInfo
	if req.GetQuery() == nidclient.GroupsQuery() {
		for _, g := range f.groups {
			out = append(out, &workflowpb.WorkflowExecutionInfo{
				Execution: &commonpb.WorkflowExecution{WorkflowId: workflows.GroupID(g.Name)},
				SearchAttributes: &commonpb.SearchAttributes{IndexedFields: map[string]*commonpb.Payload{
					workflows.SearchGroup: payloadOf(g.Name)}},
			})
		}
		return &workflowservice.ListWorkflowExecutionsResponse{Executions: out}, nil
	}
	group := ""
	if m := groupFilter.FindStringSubmatch(req.GetQuery()); m != nil {
		group = m[1]
	}
	for _, s := range f.sessions {
		if group != "" && s.Group != group {
			continue
		}
		out = append(out, &workflowpb.WorkflowExecutionInfo{
			Execution: &commonpb.WorkflowExecution{WorkflowId: workflows.SessionID(s.Group, s.Name)},
			SearchAttributes: &commonpb.SearchAttributes{IndexedFields: map[string]*commonpb.Payload{
				workflows.SearchGroup:   payloadOf(s.Group),
				workflows.SearchSession: payloadOf(s.Name),
				workflows.SearchAgent:   payloadOf(s.Agent),
				workflows.SearchStatus:  payloadOf(s.Status),
			}},
			Memo: &commonpb.Memo{Fields: map[string]*commonpb.Payload{workflows.MemoContext: payloadOf(s.Context)}},
		})
	}
	return &workflowservice.ListWorkflowExecutionsResponse{Executions: out}, nil
}

type encoded struct{ p *commonpb.Payload }

func (v encoded) HasValue() bool    { return v.p != nil }
func (v encoded) Get(ptr any) error { return converter.GetDefaultDataConverter().FromPayload(v.p, ptr) }

func (f *fakeTemporal) session(id string) (workflows.SessionView, bool) {
	for _, s := range f.sessions {
		if workflows.SessionID(s.Group, s.Name) == id {
			return s, true
		}
	}
	return workflows.SessionView{}, false
}

func (f *fakeTemporal) group(id string) (workflows.GroupView, bool) {
	for _, g := range f.groups {
		if workflows.GroupID(g.Name) == id {
			return g, true
		}
	}
	return workflows.GroupView{}, false
}

func notFound(id string) error { return serviceerror.NewNotFound("workflow not found for ID: " + id) }

func (f *fakeTemporal) QueryWorkflow(_ context.Context, id, _ string, queryType string, args ...any) (converter.EncodedValue, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch queryType {
	case workflows.QuerySession:
		if s, ok := f.session(id); ok {
			return encoded{payloadOf(s)}, nil
		}
	case workflows.QueryEvents:
		if s, ok := f.session(id); ok {
			out := []workflows.Event{}
			for _, e := range s.Events {
				if e.Seq > args[0].(int64) {
					out = append(out, e)
				}
			}
			return encoded{payloadOf(out)}, nil
		}
	case workflows.QueryGroup:
		if g, ok := f.group(id); ok {
			return encoded{payloadOf(g)}, nil
		}
	default:
		return nil, serviceerror.NewInvalidArgument("unknown query " + queryType)
	}
	return nil, notFound(id)
}

func (f *fakeTemporal) SignalWorkflow(_ context.Context, id, _ string, name string, arg any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.session(id); !ok {
		return notFound(id)
	}
	f.signals = append(f.signals, sentSignal{id, name, arg})
	return nil
}

func (f *fakeTemporal) UpdateWorkflow(_ context.Context, opts client.UpdateWorkflowOptions) (client.WorkflowUpdateHandle, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.group(opts.WorkflowID); !ok {
		return nil, notFound(opts.WorkflowID)
	}
	switch opts.UpdateName {
	case workflows.UpdateSetPolicy:
		f.updates = append(f.updates, opts.Args[0].(workflows.SetPolicy))
	case workflows.UpdateSetBudget:
		b, err := config.ApplyBudgetJSON(config.Budget{}, opts.Args[0].(workflows.SetBudget).BudgetJSON)
		if err != nil {
			return nil, err
		}
		return updated{encoded{payloadOf(b)}}, nil
	}
	return updated{encoded{payloadOf(f.policy)}}, nil
}

func (f *fakeTemporal) sent() []sentSignal {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.signals)
}

// addEvent appends an event to a session's feed, as a turn would.
func (f *fakeTemporal) addEvent(group, name string, e workflows.Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.sessions {
		if f.sessions[i].Group == group && f.sessions[i].Name == name {
			e.Group, e.Session = group, name
			e.Seq = int64(len(f.sessions[i].Events) + 1)
			f.sessions[i].Events = append(f.sessions[i].Events, e)
		}
	}
}

type updated struct{ v encoded }

func (h updated) WorkflowID() string                 { return "" }
func (h updated) RunID() string                      { return "" }
func (h updated) UpdateID() string                   { return "" }
func (h updated) Get(_ context.Context, p any) error { return h.v.Get(p) }
