package metrics

import (
	"context"
	"errors"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/nid-dev/nid/activities"
	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/workflows"
)

// Interceptors observe turns as their activities end and rotations as
// their workflows end: give them to every Temporal worker of the node.
func (m *Metrics) Interceptors() []interceptor.WorkerInterceptor {
	return []interceptor.WorkerInterceptor{&observer{m: m}}
}

// observer sees RunTurn activities and rotation workflows end. It only
// reads what they return: their results, and so their histories, are what
// they would be without it.
type observer struct {
	interceptor.WorkerInterceptorBase
	m *Metrics
}

func (o *observer) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	return &activityObserver{ActivityInboundInterceptorBase: interceptor.ActivityInboundInterceptorBase{Next: next}, m: o.m}
}

func (o *observer) InterceptWorkflow(ctx workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &workflowObserver{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}, m: o.m}
}

type activityObserver struct {
	interceptor.ActivityInboundInterceptorBase
	m *Metrics
}

// ExecuteActivity times a turn and notes a compaction the vendor did in it.
func (a *activityObserver) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	if activity.GetInfo(ctx).ActivityType.Name != activities.RunTurnName || len(in.Args) != 1 {
		return a.Next.ExecuteActivity(ctx, in)
	}
	turn, ok := in.Args[0].(activities.TurnInput)
	if !ok {
		return a.Next.ExecuteActivity(ctx, in)
	}
	start := time.Now()
	res, err := a.Next.ExecuteActivity(ctx, in)
	a.m.turnEnded(turn, res, err, time.Since(start))
	return res, err
}

func (m *Metrics) turnEnded(in activities.TurnInput, res any, err error, took time.Duration) {
	kind := in.Kind
	if kind == "" {
		kind = agents.TurnWork
	}
	m.turnSeconds.WithLabelValues(in.Spec.Kind, kind, outcome(err)).Observe(took.Seconds())
	if r, ok := res.(activities.TurnResult); ok && err == nil && r.Vendor != nil {
		m.rotations.WithLabelValues(in.Session.Group, in.Spec.Kind, config.ModeCompact, workflows.ReasonVendor, OutcomeOK).Inc()
	}
}

// outcome names how an activity or workflow ended.
func outcome(err error) string {
	if err == nil {
		return OutcomeOK
	}
	if errors.Is(err, context.Canceled) || temporal.IsCanceledError(err) {
		return OutcomeCancelled
	}
	if app, ok := errors.AsType[*temporal.ApplicationError](err); ok && app.Type() == activities.ErrContextFull {
		return OutcomeContextFull
	}
	return OutcomeFailed
}

type workflowObserver struct {
	interceptor.WorkflowInboundInterceptorBase
	m *Metrics
}

// ExecuteWorkflow counts and times a rotation when its workflow ends. A
// history that is being replayed ended before, and was counted then (or
// by the worker that ran it), so nothing is counted while replaying.
func (w *workflowObserver) ExecuteWorkflow(ctx workflow.Context, in *interceptor.ExecuteWorkflowInput) (any, error) {
	res, err := w.Next.ExecuteWorkflow(ctx, in)
	info := workflow.GetInfo(ctx)
	if info.WorkflowType.Name != workflows.RotationWorkflowName || workflow.IsReplaying(ctx) || len(in.Args) != 1 {
		return res, err
	}
	rin, ok := in.Args[0].(workflows.RotationInput)
	if !ok {
		return res, err
	}
	r, _ := res.(workflows.RotationResult)
	w.m.rotationEnded(rin, r, err, workflow.Now(ctx).Sub(info.WorkflowStartTime))
	return res, err
}

// rotationEnded counts a rotation as the session's feed records it: an
// auto rotation that fell back is a failed compaction and then a handoff.
func (m *Metrics) rotationEnded(in workflows.RotationInput, res workflows.RotationResult, err error, took time.Duration) {
	method, result := res.Method, outcome(err)
	if method == "" {
		method = in.Method
	}
	if err == nil && !res.OK {
		result = OutcomeFailed
	}
	if res.FellBack {
		m.rotations.WithLabelValues(in.Session.Group, in.Spec.Kind, config.ModeCompact, in.Reason, OutcomeFailed).Inc()
	}
	m.rotations.WithLabelValues(in.Session.Group, in.Spec.Kind, method, in.Reason, result).Inc()
	m.rotationSeconds.WithLabelValues(in.Spec.Kind, method, result).Observe(took.Seconds())
}
