package agents

import (
	"encoding/json"
	"fmt"
	"github.com/nid-dev/nid/internal/clip"
	"strings"
)

// ClaudeStream folds the lines `claude -p --output-format stream-json
// --verbose` prints into what nid needs from a turn. Feed it every line in
// order; it never fails: a line that is not JSON, or of a type it does not
// know, is counted in Skipped and otherwise ignored, because the CLI adds
// line types between releases.
type ClaudeStream struct {
	// SessionID is the newest conversation id any line named.
	SessionID string
	// Model is the model system/init named.
	Model string
	// MCPStatus is the status system/init gave nid's MCP server, if listed.
	MCPStatus string
	// Used is the context of the last top-level assistant message: its
	// input, cache-creation and cache-read tokens. UsageSeen says there was
	// one.
	Used      int64
	UsageSeen bool
	// Assistants counts top-level assistant lines.
	Assistants int
	// Window is the context window from the result's modelUsage.
	Window int64
	// Text is the final text: the result's, else the last assistant text.
	Text string
	// Result says a result line arrived; the fields after it come from it.
	Result         bool
	IsError        bool
	TerminalReason string
	APIErrorStatus int
	// RetryStatus is the error_status of the last api_retry line, and
	// Retries how many there were.
	RetryStatus int
	RetryError  string
	Retries     int
	// ToolCalls are the tools the agent called, in short: name(input).
	ToolCalls []string
	// CostUSD and Billed are the result's total_cost_usd and the tokens of
	// its usage (every API call of the run, summed).
	CostUSD float64
	Billed  int64
	// Compactions are the compact_boundary lines, in order.
	Compactions []ClaudeCompaction
	// StartupFailure is the result's startup_failure_reason: why Claude Code
	// refused to start (sandbox_required_unavailable, ...). Errors are the
	// result's errors, which say more.
	StartupFailure string
	Errors         []string
	// SandboxFailure is bubblewrap's complaint when a command failed
	// because the sandbox could not start (user namespaces refused, say):
	// Claude Code then runs no command at all.
	SandboxFailure string
	// Skipped counts lines that were not JSON objects nid could read.
	Skipped int
}

// ClaudeCompaction is one compact_boundary line.
type ClaudeCompaction struct {
	Trigger string // manual or auto
	Pre     int64
	Post    int64
}

type claudeLine struct {
	Type            string  `json:"type"`
	Subtype         string  `json:"subtype"`
	SessionID       string  `json:"session_id"`
	Model           string  `json:"model"`
	ParentToolUseID *string `json:"parent_tool_use_id"`
	Message         *struct {
		ID string `json:"id"`
		// Content is a list of blocks for the assistant, sometimes a
		// plain string for the user.
		Content json.RawMessage `json:"content"`
		Usage   *struct {
			Input         int64 `json:"input_tokens"`
			CacheCreation int64 `json:"cache_creation_input_tokens"`
			CacheRead     int64 `json:"cache_read_input_tokens"`
		} `json:"usage"`
	} `json:"message"`
	MCPServers []struct {
		Name   string `json:"name"`
		Status string `json:"status"`
	} `json:"mcp_servers"`
	Result         *string  `json:"result"`
	IsError        bool     `json:"is_error"`
	StartupFailure string   `json:"startup_failure_reason"`
	Errors         []string `json:"errors"`
	TerminalReason string   `json:"terminal_reason"`
	APIErrorStatus any      `json:"api_error_status"`
	TotalCostUSD   float64  `json:"total_cost_usd"`
	Usage          *struct {
		Input         int64 `json:"input_tokens"`
		CacheCreation int64 `json:"cache_creation_input_tokens"`
		CacheRead     int64 `json:"cache_read_input_tokens"`
		Output        int64 `json:"output_tokens"`
	} `json:"usage"`
	ModelUsage map[string]struct {
		ContextWindow int64 `json:"contextWindow"`
	} `json:"modelUsage"`
	ErrorStatus     any    `json:"error_status"`
	Error           string `json:"error"`
	CompactMetadata *struct {
		Trigger    string `json:"trigger"`
		PreTokens  int64  `json:"pre_tokens"`
		PostTokens int64  `json:"post_tokens"`
	} `json:"compact_metadata"`
}

// Feed folds one line.
func (s *ClaudeStream) Feed(line []byte) {
	var l claudeLine
	if err := json.Unmarshal(line, &l); err != nil || l.Type == "" {
		s.Skipped++
		return
	}
	if l.SessionID != "" {
		s.SessionID = l.SessionID
	}
	switch {
	case l.Type == "system" && l.Subtype == "init":
		s.Model = l.Model
		for _, m := range l.MCPServers {
			if m.Name == "nid" {
				s.MCPStatus = m.Status
			}
		}
	case l.Type == "system" && l.Subtype == "api_retry":
		s.Retries++
		s.RetryStatus = statusCode(l.ErrorStatus)
		s.RetryError = l.Error
	case l.Type == "system" && l.Subtype == "compact_boundary" && l.CompactMetadata != nil:
		m := l.CompactMetadata
		s.Compactions = append(s.Compactions, ClaudeCompaction{Trigger: m.Trigger, Pre: max(m.PreTokens, 0), Post: max(m.PostTokens, 0)})
	case l.Type == "assistant" && l.Message != nil:
		// A subagent's messages are its own context, not this one's.
		if l.ParentToolUseID != nil && *l.ParentToolUseID != "" {
			return
		}
		s.Assistants++
		if u := l.Message.Usage; u != nil {
			s.Used = max(u.Input, 0) + max(u.CacheCreation, 0) + max(u.CacheRead, 0)
			s.UsageSeen = true
		}
		var blocks []struct {
			Type  string          `json:"type"`
			Text  string          `json:"text"`
			Name  string          `json:"name"`
			Input json.RawMessage `json:"input"`
		}
		_ = json.Unmarshal(l.Message.Content, &blocks)
		var text []string
		for _, c := range blocks {
			switch {
			case c.Type == "text" && c.Text != "":
				text = append(text, c.Text)
			case c.Type == "tool_use" && c.Name != "":
				s.ToolCalls = append(s.ToolCalls, c.Name+"("+clip.Runes(strings.TrimSpace(string(c.Input)), 60)+")")
			}
		}
		if len(text) > 0 {
			s.Text = strings.Join(text, "\n")
		}
	case l.Type == "user" && l.Message != nil:
		if f := sandboxFailure(l.Message.Content); f != "" && s.SandboxFailure == "" {
			s.SandboxFailure = f
		}
	case l.Type == "result":
		s.Result = true
		s.IsError = l.IsError
		s.TerminalReason = l.TerminalReason
		s.APIErrorStatus = statusCode(l.APIErrorStatus)
		s.StartupFailure = l.StartupFailure
		s.Errors = l.Errors
		if l.Result != nil && *l.Result != "" {
			s.Text = *l.Result
		}
		s.Window = claudeWindow(l.ModelUsage, s.Model)
		s.CostUSD = max(l.TotalCostUSD, 0)
		if u := l.Usage; u != nil {
			s.Billed = max(u.Input, 0) + max(u.CacheCreation, 0) + max(u.CacheRead, 0) + max(u.Output, 0)
		}
	}
}

// sandboxFailure finds, in a user message's content, a failed tool result
// that says the sandbox could not start: Claude Code's own "Sandbox is
// required but failed to initialize: ...", or bubblewrap's "Exit code
// 1\nbwrap: setting up uid map: Permission denied". A command's own errors
// never start that way, since bubblewrap runs before the command does.
func sandboxFailure(content json.RawMessage) string {
	var blocks []struct {
		Type    string          `json:"type"`
		IsError bool            `json:"is_error"`
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(content, &blocks) != nil {
		return ""
	}
	for _, b := range blocks {
		var text string
		if b.Type != "tool_result" || !b.IsError || json.Unmarshal(b.Content, &text) != nil {
			continue
		}
		if strings.HasPrefix(text, "Sandbox is required but failed to initialize") {
			line, _, _ := strings.Cut(text, "\n")
			return line
		}
		first, rest, _ := strings.Cut(text, "\n")
		if !strings.HasPrefix(first, "Exit code ") {
			rest = text
		}
		if line, _, _ := strings.Cut(rest, "\n"); strings.HasPrefix(line, "bwrap: ") {
			return line
		}
	}
	return ""
}

// claudeWindow is the window of the conversation's model, else the largest
// one listed (a turn may also use a small model for chores).
func claudeWindow(usage map[string]struct {
	ContextWindow int64 `json:"contextWindow"`
}, model string) int64 {
	if u, ok := usage[model]; ok && u.ContextWindow > 0 {
		return u.ContextWindow
	}
	var w int64
	for _, u := range usage {
		w = max(w, u.ContextWindow)
	}
	return w
}

// statusCode reads an HTTP status the CLI prints as a number or a string.
func statusCode(v any) int {
	switch x := v.(type) {
	case float64:
		if x > 0 && x < 1000 {
			return int(x)
		}
	case string:
		var n int
		if _, err := fmt.Sscanf(x, "%d", &n); err == nil && n > 0 && n < 1000 {
			return n
		}
	}
	return 0
}

// AuthStatus reports whether an HTTP status means the credentials were
// refused: retrying them, as Claude Code does, cannot help.
func AuthStatus(status int) bool { return status == 401 || status == 403 }

// RateLimitStatus reports whether an HTTP status means the vendor is
// overloaded (529) or rate limiting (429).
func RateLimitStatus(status int) bool { return status == 429 || status == 529 }

// claudeTurnStarts says whether line is where Claude Code takes up the
// message nid sent with uuid id: its command_lifecycle line "started", or,
// should a release stop printing those, the message's replay.
func claudeTurnStarts(line []byte, id string) bool {
	var l struct {
		Type        string `json:"type"`
		CommandUUID string `json:"command_uuid"`
		State       string `json:"state"`
		UUID        string `json:"uuid"`
		IsReplay    bool   `json:"isReplay"`
	}
	if json.Unmarshal(line, &l) != nil {
		return false
	}
	switch l.Type {
	case "command_lifecycle":
		return l.CommandUUID == id && l.State == "started"
	case "user":
		return l.UUID == id && l.IsReplay
	}
	return false
}
