package activities

import "github.com/nid-dev/nid/agents"

// The names workflows still spell activities.X while they move to package
// agents; removed once workflows say agents.X.

type (
	AgentSpec        = agents.AgentSpec
	CompactReport    = agents.CompactReport
	Kind             = agents.Kind
	SessionRef       = agents.SessionRef
	TurnReport       = agents.TurnReport
	Usage            = agents.Usage
	VendorCompaction = agents.VendorCompaction
)

var (
	AckRequest        = agents.AckRequest
	AckRequested      = agents.AckRequested
	KindOf            = agents.KindOf
	SessionWorkflowID = agents.SessionWorkflowID
)

const (
	KindClaude         = agents.KindClaude
	KindCodex          = agents.KindCodex
	KindExec           = agents.KindExec
	KindSim            = agents.KindSim
	SourceReported     = agents.SourceReported
	SourceUnknown      = agents.SourceUnknown
	ToolHandoffAck     = agents.ToolHandoffAck
	TurnFresh          = agents.TurnFresh
	TurnHandoffRequest = agents.TurnHandoffRequest
	TurnWork           = agents.TurnWork
)
