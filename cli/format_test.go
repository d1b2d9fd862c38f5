package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/workflows"
)

func TestFormatTokens(t *testing.T) {
	tests := []struct {
		n    int64
		want string
	}{
		{0, "0"},
		{999, "999"},
		{1000, "1k"},
		{1500, "1.5k"},
		{1250, "1.3k"},
		{3200, "3.2k"},
		{171_000, "171k"},
		{200_000, "200k"},
		{258_400, "258.4k"},
		{999_949, "999.9k"},
		{999_950, "1M"},
		{1_000_000, "1M"},
		{1_048_576, "1M"},
		{2_500_000, "2.5M"},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, formatTokens(tt.n), "formatTokens(%d)", tt.n)
	}
}

func TestContextText(t *testing.T) {
	yellow := func(s string) string { return ansiYellow + s + ansiReset }
	tests := []struct {
		name      string
		percent   *float64
		window    int64
		rotations int
		color     bool
		want      string
	}{
		{"percent rounds down", pct(62.9), 200_000, 0, true, "62% of 200k"},
		{"rotations follow", pct(62), 200_000, 2, false, "62% of 200k ↻2"},
		{"large window", pct(10), 1_000_000, 0, false, "10% of 1M"},
		{"percent without its window, as visibility lists a session before its memo", pct(80.4), 0, 2, false, "80% ↻2"},
		{"unknown", nil, 0, 0, true, "—"},
		{"unknown still counts rotations", nil, 0, 3, true, "— ↻3"},
		{"yellow at 75 exactly", pct(75), 200_000, 0, true, yellow("75% of 200k")},
		{"not yellow just under 75", pct(74.99), 200_000, 0, true, "74% of 200k"},
		{"not yellow at 74", pct(74), 200_000, 0, true, "74% of 200k"},
		{"yellow above, rotations uncoloured", pct(91.2), 258_400, 1, true, yellow("91% of 258.4k") + " ↻1"},
		{"no colour when not asked", pct(95), 200_000, 0, false, "95% of 200k"},
		{"over the window says so", pct(740), 200_000, 0, false, "740% of 200k (more than the window, as the agent reports it)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := workflows.ContextRecord{Usage: agents.Usage{WindowTokens: tt.window}, Percent: tt.percent, Rotations: tt.rotations}
			require.Equal(t, tt.want, contextText(rec, tt.color))
		})
	}
}

func TestWriteTableAlignsByVisibleWidth(t *testing.T) {
	var b bytes.Buffer
	err := writeTable(&b, [][]string{
		{"SESSION", "STATUS", "CONTEXT"},
		{"web/lead", "idle", ansiYellow + "80% of 200k" + ansiReset + " ↻2"},
		{"web/w", "working", "—"},
		{"api/a-long-name", "—", "1% of 1M"},
		{"api/blank", "", ""},
	})
	require.NoError(t, err)
	want := "" +
		"SESSION          STATUS   CONTEXT\n" +
		"web/lead         idle     " + ansiYellow + "80% of 200k" + ansiReset + " ↻2\n" +
		"web/w            working  —\n" +
		"api/a-long-name  —        1% of 1M\n" +
		"api/blank\n"
	require.Equal(t, want, b.String())
}

func TestEventLine(t *testing.T) {
	at := time.Date(2025, 6, 1, 15, 4, 5, 0, time.UTC)
	ev := func(kind, text string) workflows.Event {
		return workflows.Event{At: at, Group: "web", Session: "lead", Kind: kind, Text: text}
	}
	withContext := func(e workflows.Event, rec workflows.ContextRecord) workflows.Event {
		e.Context = &rec
		return e
	}
	withRotation := func(e workflows.Event, r workflows.RotationEvent) workflows.Event {
		e.Rotation = &r
		return e
	}
	long := "Refactored the settings page into three components; next: wire the theme toggle to the store"
	tests := []struct {
		name  string
		ev    workflows.Event
		width int
		want  string
	}{
		{
			"turn with context",
			withContext(ev(workflows.EventTurn, "turn 12"), workflows.ContextRecord{Usage: agents.Usage{WindowTokens: 200_000}, Percent: pct(62.5)}),
			0,
			"15:04:05 web/lead  turn 12  62% of 200k",
		},
		{
			"turn of an agent that reports nothing",
			withContext(ev(workflows.EventTurn, "turn 3"), workflows.ContextRecord{}),
			0,
			"15:04:05 web/lead  turn 3",
		},
		{
			"session padded to the widest",
			ev(workflows.EventMessage, "message queued: run the tests"),
			12,
			"15:04:05 web/lead      message queued: run the tests",
		},
		{
			"handoff",
			withRotation(ev(workflows.EventRotation, "↻ handoff (context)"), workflows.RotationEvent{
				Method: "handoff", Reason: "context", OK: true, BeforeTokens: 171_000, AfterTokens: 3_200,
				OldConversation: "sim-1", NewConversation: "sim-2", Summary: long, SummarySource: workflows.SummaryFromAgent,
			}),
			0,
			`15:04:05 web/lead  ↻ handoff (context) 171k → 3.2k  sim-1 → sim-2  "Refactored the settings page into three components; next: wi…"`,
		},
		{
			"handoff without a summary from the agent",
			withRotation(ev(workflows.EventRotation, ""), workflows.RotationEvent{
				Method: "handoff", Reason: "manual", OK: true, BeforeTokens: 50_000, AfterTokens: 900,
				OldConversation: "sim-2", NewConversation: "sim-3", Summary: "done:\n  the toggle", SummarySource: workflows.SummaryFromLastOutput,
			}),
			0,
			`15:04:05 web/lead  ↻ handoff (manual) 50k → 900  sim-2 → sim-3  no handoff, last output: "done: the toggle"`,
		},
		{
			"handoff nid built, unverified",
			withRotation(ev(workflows.EventRotation, ""), workflows.RotationEvent{
				Method: "handoff", Reason: "context-full", OK: true, BeforeTokens: 199_000, AfterTokens: 4_000,
				OldConversation: "sim-3", NewConversation: "sim-4", Summary: "nid wrote this handoff", SummarySource: workflows.SummaryFromNid,
				Verified: workflows.VerifiedFalse,
			}),
			0,
			`15:04:05 web/lead  ↻ handoff (context-full) 199k → 4k  sim-3 → sim-4  handoff built by nid: "nid wrote this handoff"  verified: false`,
		},
		{
			"compaction keeps the conversation",
			withRotation(ev(workflows.EventRotation, ""), workflows.RotationEvent{
				Method: "compact", Reason: "maxTurns", OK: true, BeforeTokens: 120_000, AfterTokens: 12_000,
				OldConversation: "sim-1", NewConversation: "sim-1",
			}),
			0,
			"15:04:05 web/lead  ↻ compact (maxTurns) 120k → 12k",
		},
		{
			"auto fell back to handoff",
			withRotation(ev(workflows.EventRotation, ""), workflows.RotationEvent{
				Method: "handoff", Reason: "context", OK: true, FellBack: true, BeforeTokens: 180_000, AfterTokens: 2_000,
				OldConversation: "sim-1", NewConversation: "sim-2",
			}),
			0,
			"15:04:05 web/lead  ↻ handoff (context, compact failed) 180k → 2k  sim-1 → sim-2",
		},
		{
			"failed rotation",
			withRotation(ev(workflows.EventRotationFailed, "✗ compact rotation failed (manual): boom"), workflows.RotationEvent{
				Method: "compact", Reason: "manual", Error: "vendor refused to compact",
			}),
			0,
			"15:04:05 web/lead  ✗ rotation failed: compact (manual): vendor refused to compact",
		},
		{
			"other events print their text",
			ev(workflows.EventRotateQueued, "rotate (handoff) requested: runs when the current turn ends"),
			0,
			"15:04:05 web/lead  rotate (handoff) requested: runs when the current turn ends",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, eventLine(tt.ev, tt.width))
		})
	}
}

func TestClipCountsCharactersNotBytes(t *testing.T) {
	s := strings.Repeat("é", 70)
	require.Equal(t, strings.Repeat("é", 60)+"…", oneLine(s, 60))
	require.Equal(t, "short", oneLine("short", 60))
}

func pct(p float64) *float64 { return &p }

func TestPrintable(t *testing.T) {
	tests := []struct {
		name, in, lines, oneLine string
	}{
		{"nid's own text is left alone", "62% of 200k ↻2 — “quoted”", "62% of 200k ↻2 — “quoted”", "62% of 200k ↻2 — “quoted”"},
		{"escape sequences show", "a\x1b[31mb\x1b]52;c;eA==\x07", "a␛[31mb␛]52;c;eA==␇", "a␛[31mb␛]52;c;eA==␇"},
		{"line layout", "one\r\ntwo\tcols\n", "one\ntwo\tcols\n", "one␍␊two cols␊"},
		{"a lone carriage return", "safe\rforged", "safe␍forged", "safe␍forged"},
		{"DEL and NUL", "x\x7fy\x00", "x␡y␀", "x␡y␀"},
		{"C1 controls, overrides, broken UTF-8", "\u009b2J\u202eab\u2066\xff", "�2J�ab��", "�2J�ab��"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.lines, printable(tt.in, false))
			require.Equal(t, tt.oneLine, printable(tt.in, true))
		})
	}
}

func TestPrintableJSONIsTheSameJSON(t *testing.T) {
	text := "a\u009b31m\u202e\x7f\x1b\u2028é"
	var b bytes.Buffer
	require.NoError(t, writeJSON(&b, map[string]string{"text": text}))
	require.Equal(t, "{\n  \"text\": \"a\\u009b31m\\u202e\\u007f\\u001b\\u2028é\"\n}\n", b.String())
	var back map[string]string
	require.NoError(t, json.Unmarshal(b.Bytes(), &back))
	require.Equal(t, text, back["text"])
}
