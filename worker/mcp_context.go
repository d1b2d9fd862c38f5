package worker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/workflows"
)

// ContextStatus is what the context_status tool answers, as structured
// content: the session's context record as nid keeps it (the same numbers
// nid ls and the dashboard show) and where its policy rotates it. Claude
// Code and Codex show their model the structured content alone, so it
// carries the one-line summary too.
type ContextStatus struct {
	// Summary says it all in one line (see NewContextStatus).
	Summary string `json:"summary" jsonschema:"the status in one line"`
	Session string `json:"session" jsonschema:"the session, group/name"`
	// Usage is the context record's: the agent's report of its context as
	// nid keeps it, in the same shape from the agent to here. Its fields'
	// descriptions are in usageDescriptions.
	agents.Usage
	Percent *float64 `json:"percent,omitempty" jsonschema:"usedTokens as a percent of windowTokens; absent when either is unknown"`
	// Threshold is where the policy rotates the conversation.
	Threshold ThresholdStatus `json:"threshold" jsonschema:"where nid's policy rotates this conversation"`
	// Mode is the policy's rotate mode; MaxTurns its turn limit (0: none).
	Mode     string `json:"mode" jsonschema:"the rotate policy's mode: auto, compact, handoff, or off (nid rotates only when asked)"`
	MaxTurns int    `json:"maxTurns,omitempty" jsonschema:"the policy also rotates after this many turns since the last rotation; absent: never"`
	// TurnsSinceRotation counts turns since the last rotation.
	TurnsSinceRotation int `json:"turnsSinceRotation" jsonschema:"turns since the last rotation"`
	Rotations          int `json:"rotations" jsonschema:"how many rotations the session has had"`
	// PolicyHalted says why the policy no longer rotates the session
	// (nid rotate still does); HandoffNext that its next rotation is a
	// handoff.
	PolicyHalted string `json:"policyHalted,omitempty" jsonschema:"why nid's policy no longer rotates this session; absent while it does"`
	HandoffNext  bool   `json:"handoffNext,omitempty" jsonschema:"the next policy rotation is a handoff, a compaction having not helped"`
}

// ThresholdStatus is the effective threshold in both units.
type ThresholdStatus struct {
	Tokens  int64   `json:"tokens,omitempty" jsonschema:"the threshold in tokens; absent when unknown"`
	Percent float64 `json:"percent,omitempty" jsonschema:"the threshold in percent of the window; absent without a window"`
	By      string  `json:"by,omitempty" jsonschema:"what set it: contextPercent, contextTokens or learned (a margin below where the vendor was seen to compact by itself)"`
	Text    string  `json:"text" jsonschema:"the threshold in words"`
}

// NewContextStatus is what context_status answers for the session v.
func NewContextStatus(v workflows.SessionView) ContextStatus {
	c := v.Context
	var t workflows.Threshold
	if c.Threshold != nil {
		t = *c.Threshold
	}
	st := ContextStatus{
		Session: v.Group + "/" + v.Name,
		Usage:   c.Usage,
		Threshold: ThresholdStatus{Tokens: t.Tokens, Percent: tenth(t.Percent), By: t.By,
			Text: t.Text(c.WindowTokens)},
		Mode:               v.Policy.Mode,
		MaxTurns:           v.Policy.MaxTurns,
		TurnsSinceRotation: c.Turns,
		Rotations:          c.Rotations,
		PolicyHalted:       v.PolicyHalted,
		HandoffNext:        v.HandoffNext,
	}
	if c.Percent != nil {
		p := tenth(*c.Percent)
		st.Percent = &p
	}
	st.Summary = st.line()
	return st
}

// usageDescriptions describe the fields ContextStatus takes from
// agents.Usage, which carries no schema of its own, for the agent
// reading context_status's output schema.
var usageDescriptions = map[string]string{
	"usedTokens":   "tokens in the context after the last turn",
	"windowTokens": "the context window in tokens; 0 when unknown",
	"source":       "where the numbers came from: reported (by the agent), configured (the window from nid.yaml) or unknown",
	"model":        "the model the conversation runs on; absent when unknown",
}

// contextStatusSchema is context_status's output schema: ContextStatus's,
// with the usage fields described.
func contextStatusSchema() *jsonschema.Schema {
	s, err := jsonschema.For[ContextStatus](nil)
	if err != nil {
		// A fixed type: this fails only when the type itself is wrong,
		// as mcp.AddTool panics on a schema it cannot make.
		panic("context_status has no output schema: " + err.Error())
	}
	for name, d := range usageDescriptions {
		if p := s.Properties[name]; p != nil {
			p.Description = d
		}
	}
	return s
}

func tenth(f float64) float64 { return math.Round(f*10) / 10 }

// line says the status in one line: "web/lead: context 62% full (124k of
// 200k tokens, reported); nid rotates at 80% = 160k of 200k
// (contextPercent); 7 turns since the last rotation, 2 rotations."
func (st ContextStatus) line() string {
	var b strings.Builder
	b.WriteString(st.Session + ": ")
	switch {
	case st.Source == agents.SourceUnknown:
		b.WriteString("context size unknown (the agent reports no token numbers)")
	case st.Percent != nil:
		fmt.Fprintf(&b, "context %.0f%% full (%s of %s tokens, %s)", math.Floor(*st.Percent),
			workflows.TokensText(st.UsedTokens), workflows.TokensText(st.WindowTokens), st.Source)
	default:
		fmt.Fprintf(&b, "context %s tokens of a window of unknown size (%s)", workflows.TokensText(st.UsedTokens), st.Source)
	}
	b.WriteString("; ")
	switch {
	case st.Mode == config.ModeOff:
		b.WriteString("nid's policy is off: it rotates only when the human asks or you call " + agents.ToolHandoffWrite)
	case st.PolicyHalted != "":
		b.WriteString("nid's policy rotations are halted: " + st.PolicyHalted)
	default:
		b.WriteString("nid rotates at " + st.Threshold.Text)
		if st.MaxTurns > 0 {
			fmt.Fprintf(&b, " or after %d turns", st.MaxTurns)
		}
		if st.HandoffNext {
			b.WriteString(", by handoff next time")
		}
	}
	fmt.Fprintf(&b, "; %d turns since the last rotation, %d rotations.", st.TurnsSinceRotation, st.Rotations)
	return b.String()
}

// contextStatus answers context_status from the session's view the call
// was checked against (see currentOnly).
func contextStatus(ctx context.Context, _ *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, ContextStatus, error) {
	v, ok := ctx.Value(viewKey{}).(workflows.SessionView)
	if !ok {
		return nil, ContextStatus{}, errors.New("nid has no view of this session to answer from")
	}
	st := NewContextStatus(v)
	return textResult(st.Summary), st, nil
}
