// Package worker runs nid's side of Temporal: it connects (or starts the
// embedded server through an injected StartEmbedded), registers the workflows
// and activities under their stable names, serves the HTTP endpoints agents
// and humans use, and starts or resumes the groups of a config.
//
// Start returns a Node; Stop shuts it down. Nothing here links the Temporal
// server itself: only worker/embedded and cmd/nid do.
package worker

import (
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/workflow"

	"github.com/nid-dev/nid/activities"
	"github.com/nid-dev/nid/workflows"
)

// Registry is the part of a Temporal worker that takes registrations.
type Registry interface {
	RegisterWorkflowWithOptions(w interface{}, options workflow.RegisterOptions)
	RegisterActivityWithOptions(a interface{}, options activity.RegisterOptions)
}

// RegisterWorkflows registers every workflow under its stable type name.
func RegisterWorkflows(r Registry) {
	r.RegisterWorkflowWithOptions(workflows.SessionWorkflow, workflow.RegisterOptions{Name: workflows.SessionWorkflowName})
	r.RegisterWorkflowWithOptions(workflows.RotationWorkflow, workflow.RegisterOptions{Name: workflows.RotationWorkflowName})
	r.RegisterWorkflowWithOptions(workflows.GroupWorkflow, workflow.RegisterOptions{Name: workflows.GroupWorkflowName})
	r.RegisterWorkflowWithOptions(workflows.HostsWorkflow, workflow.RegisterOptions{Name: workflows.HostsWorkflowName})
}

// RegisterActivities registers every activity under its stable type name.
func RegisterActivities(r Registry, a *activities.Activities) {
	r.RegisterActivityWithOptions(a.RunTurn, activity.RegisterOptions{Name: activities.RunTurnName})
	r.RegisterActivityWithOptions(a.Compact, activity.RegisterOptions{Name: activities.CompactName})
	r.RegisterActivityWithOptions(a.StopAgent, activity.RegisterOptions{Name: activities.StopAgentName})
	r.RegisterActivityWithOptions(a.PrepareWorkspace, activity.RegisterOptions{Name: activities.PrepareWorkspaceName})
	r.RegisterActivityWithOptions(a.GatherFacts, activity.RegisterOptions{Name: activities.FactsName})
	r.RegisterActivityWithOptions(a.RescueHandoff, activity.RegisterOptions{Name: activities.RescueName})
	r.RegisterActivityWithOptions(a.SaveWork, activity.RegisterOptions{Name: activities.SaveWorkName})
	r.RegisterActivityWithOptions(a.PushBranch, activity.RegisterOptions{Name: activities.PushBranchName})
	r.RegisterActivityWithOptions(a.Handback, activity.RegisterOptions{Name: activities.HandbackName})
}
