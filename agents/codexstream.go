package agents

import (
	"encoding/json"
	"github.com/nid-dev/nid/internal/clip"
	"strings"
)

// CodexMessage is one line of `codex app-server`'s JSON-RPC stream (no
// "jsonrpc" field). With an id and a method it is a request to nid, with an
// id alone a response, with a method alone a notification.
type CodexMessage struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *CodexRPCError  `json:"error,omitempty"`
}

// CodexRPCError is a JSON-RPC error object.
type CodexRPCError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// ParseCodexMessage reads one line; ok is false for anything that is not a
// JSON object with an id or a method.
func ParseCodexMessage(line []byte) (m CodexMessage, ok bool) {
	if err := json.Unmarshal(line, &m); err != nil {
		return CodexMessage{}, false
	}
	if len(m.ID) > 0 && string(m.ID) == "null" {
		m.ID = nil
	}
	return m, len(m.ID) > 0 || m.Method != ""
}

// IsRequest says the server is asking nid something; it waits for the answer.
func (m CodexMessage) IsRequest() bool { return len(m.ID) > 0 && m.Method != "" }

// CodexAnswer is nid's answer to a server-to-client request: an approval
// is granted only when grant says so (a session with permissions: full,
// which has no sandbox to leave), and declined otherwise, because nobody is
// there to judge it and granting it would let a command out of the
// sandbox; an elicitation is accepted, and anything unknown refused with a
// JSON-RPC error, because an unanswered request stalls the turn.
func CodexAnswer(method string, grant bool) (result any, rpcErr *CodexRPCError) {
	switch method {
	case "item/commandExecution/requestApproval", "item/fileChange/requestApproval":
		if !grant {
			return map[string]any{"decision": "decline"}, nil
		}
		return map[string]any{"decision": "accept"}, nil
	case "execCommandApproval", "applyPatchApproval":
		if !grant {
			return map[string]any{"decision": "denied"}, nil
		}
		return map[string]any{"decision": "approved"}, nil
	case "mcpServer/elicitation/request":
		return map[string]any{"action": "accept", "content": map[string]any{}}, nil
	case "item/permissions/requestApproval":
		return map[string]any{"permissions": map[string]any{}, "scope": "turn"}, nil
	case "item/tool/requestUserInput":
		return map[string]any{"answers": map[string]any{}}, nil
	case "item/tool/call":
		return map[string]any{"contentItems": []any{}, "success": false}, nil
	}
	return nil, &CodexRPCError{Code: -32601, Message: "nid does not handle " + method}
}

// CodexTurn folds the notifications of one Codex turn (a prompt or a
// compaction). Feed never fails: notifications it does not know, or cannot
// read, are skipped.
type CodexTurn struct {
	// Used and Window are the last thread/tokenUsage/updated's
	// last.totalTokens and modelContextWindow; UsageSeen says one came.
	Used      int64
	Window    int64
	UsageSeen bool
	// Text is the last agent message.
	Text string
	// Done says turn/completed arrived, with Status completed, interrupted
	// or failed.
	Done   bool
	Status string
	// ErrorMessage and ErrorInfo (codexErrorInfo as compact JSON) come from
	// a failed turn or the last error notification, and Error is that
	// codexErrorInfo read: what nid decides by.
	ErrorMessage string
	ErrorInfo    string
	Error        CodexErrorInfo
	// Retrying says the last error notification was one Codex retries, and
	// RateLimited that it was a rate limit or an overload.
	Retrying    bool
	RateLimited bool
	// Compacted says a contextCompaction item completed; CompactBefore is
	// the context before it and CompactAfter Codex's estimate after it.
	Compacted     bool
	CompactBefore int64
	CompactAfter  int64
	Skipped       int
	// ToolCalls are the tools the agent called, in short: name(arguments).
	ToolCalls []string

	compacting bool
}

type codexTurnError struct {
	Message   string          `json:"message"`
	ErrorInfo json.RawMessage `json:"codexErrorInfo"`
}

type codexParams struct {
	TokenUsage *struct {
		Last struct {
			TotalTokens int64 `json:"totalTokens"`
		} `json:"last"`
		ModelContextWindow *int64 `json:"modelContextWindow"`
	} `json:"tokenUsage"`
	Item *struct {
		Type      string          `json:"type"`
		Text      string          `json:"text"`
		Server    string          `json:"server"`
		Tool      string          `json:"tool"`
		Arguments json.RawMessage `json:"arguments"`
		Command   json.RawMessage `json:"command"`
	} `json:"item"`
	Turn *struct {
		Status string          `json:"status"`
		Error  *codexTurnError `json:"error"`
	} `json:"turn"`
	Error     *codexTurnError `json:"error"`
	WillRetry bool            `json:"willRetry"`
}

// Feed folds one notification.
func (t *CodexTurn) Feed(method string, params json.RawMessage) {
	var p codexParams
	if len(params) == 0 || json.Unmarshal(params, &p) != nil {
		t.Skipped++
		return
	}
	switch method {
	case "thread/tokenUsage/updated":
		if p.TokenUsage == nil {
			t.Skipped++
			return
		}
		t.Used = max(p.TokenUsage.Last.TotalTokens, 0)
		if w := p.TokenUsage.ModelContextWindow; w != nil && *w > 0 {
			t.Window = *w
		}
		t.UsageSeen = true
		// Codex repeats the context before a compaction as its first
		// update, and ends with its estimate of the context after.
		if t.compacting && t.CompactBefore == 0 {
			t.CompactBefore = t.Used
		}
		t.Retrying, t.RateLimited = false, false
	case "item/started":
		if p.Item != nil && p.Item.Type == "contextCompaction" {
			t.compacting = true
			t.CompactBefore = t.Used
		}
	case "item/completed":
		if p.Item == nil {
			return
		}
		switch p.Item.Type {
		case "agentMessage":
			if p.Item.Text != "" {
				t.Text = p.Item.Text
			}
			t.Retrying, t.RateLimited = false, false
		case "contextCompaction":
			t.Compacted, t.compacting = true, false
			t.CompactAfter = t.Used
		case "mcpToolCall":
			t.ToolCalls = append(t.ToolCalls, "mcp__"+p.Item.Server+"__"+p.Item.Tool+"("+clip.Runes(strings.TrimSpace(string(p.Item.Arguments)), 60)+")")
		case "commandExecution":
			t.ToolCalls = append(t.ToolCalls, "shell("+clip.Runes(strings.TrimSpace(string(p.Item.Command)), 60)+")")
		}
	case "error":
		if p.Error != nil {
			t.setError(p.Error)
		}
		t.Retrying = p.WillRetry
		t.RateLimited = p.WillRetry && t.Error.RateLimited()
	case "turn/completed":
		if p.Turn == nil {
			t.Skipped++
			return
		}
		t.Done = true
		t.Status = p.Turn.Status
		if p.Turn.Error != nil {
			t.setError(p.Turn.Error)
		}
	}
}

func (t *CodexTurn) setError(e *codexTurnError) {
	t.ErrorMessage = e.Message
	t.ErrorInfo = ""
	if len(e.ErrorInfo) > 0 && string(e.ErrorInfo) != "null" {
		t.ErrorInfo = string(e.ErrorInfo)
	}
	t.Error = ParseCodexErrorInfo(e.ErrorInfo)
}

// ContextFull says the turn failed because the thread no longer fits the
// model's window.
func (t *CodexTurn) ContextFull() bool { return t.Error.Kind == CodexContextWindowExceeded }

// Variants of codexErrorInfo nid decides by (the app-server protocol's
// CodexErrorInfo, its names in camelCase).
const (
	CodexContextWindowExceeded = "contextWindowExceeded"
	CodexUsageLimitExceeded    = "usageLimitExceeded"
	CodexServerOverloaded      = "serverOverloaded"
	CodexUnauthorized          = "unauthorized"
	CodexBadRequest            = "badRequest"
)

// CodexErrorInfo is a codexErrorInfo read. Codex writes a variant without
// fields as its name ("contextWindowExceeded") and one with fields as an
// object keyed by its name ({"httpConnectionFailed":{"httpStatusCode":401}}).
type CodexErrorInfo struct {
	// Kind is the variant's name; empty when the error carries none.
	Kind string
	// HTTPStatus is what the model's API answered, for the variants that
	// carry it (httpConnectionFailed, responseStreamConnectionFailed,
	// responseStreamDisconnected, responseTooManyFailedAttempts); 0 when
	// unknown.
	HTTPStatus int
}

// ParseCodexErrorInfo reads a codexErrorInfo; anything else (null, a
// shape a later Codex might send) reads as no variant.
func ParseCodexErrorInfo(raw json.RawMessage) CodexErrorInfo {
	var name string
	if json.Unmarshal(raw, &name) == nil {
		return CodexErrorInfo{Kind: name}
	}
	var variant map[string]struct {
		HTTPStatusCode *int `json:"httpStatusCode"`
	}
	if json.Unmarshal(raw, &variant) != nil || len(variant) != 1 {
		return CodexErrorInfo{}
	}
	var info CodexErrorInfo
	for kind, fields := range variant {
		info.Kind = kind
		if fields.HTTPStatusCode != nil {
			info.HTTPStatus = *fields.HTTPStatusCode
		}
	}
	return info
}

// RateLimited says the error is a rate limit, a usage limit or an
// overload: what Codex retries and a later turn gets through.
func (i CodexErrorInfo) RateLimited() bool {
	switch i.Kind {
	case CodexUsageLimitExceeded, CodexServerOverloaded:
		return true
	}
	return RateLimitStatus(i.HTTPStatus)
}

// Refused says the model's API refused the request itself (the key, the
// request, access to the model): a retry is refused the same way.
func (i CodexErrorInfo) Refused() bool {
	switch i.Kind {
	case CodexUnauthorized, CodexBadRequest:
		return true
	}
	return i.HTTPStatus == 401 || i.HTTPStatus == 403
}
