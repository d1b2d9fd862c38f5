package agents

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/internal/agenttest"
	"github.com/nid-dev/nid/internal/clip"
)

var lead = SessionRef{Group: "web", Name: "lead", WorkflowID: "nid/web/lead"}

// simSession drives one session's sim the way the session workflow does:
// it remembers the conversation id between turns.
type simSession struct {
	t            *testing.T
	sim          *Sim
	stateDir     string
	cfg          config.Sim
	mcpURL       string
	conversation string
}

func newSimSession(t *testing.T, cfg config.Sim) *simSession {
	return &simSession{t: t, sim: NewSim(), stateDir: t.TempDir(), cfg: cfg}
}

func (s *simSession) turn(kind, prompt string) (TurnReport, error) {
	rep, err := s.sim.Turn(context.Background(), TurnRequest{
		Session:      lead,
		Spec:         AgentSpec{Kind: KindSim, Sim: s.cfg},
		Conversation: s.conversation,
		Prompt:       prompt,
		Kind:         kind,
		MCP:          MCPAccess{URL: s.mcpURL},
		StateDir:     s.stateDir,
	})
	if err == nil {
		s.conversation = rep.Conversation
	}
	return rep, err
}

func (s *simSession) mustTurn(kind, prompt string) TurnReport {
	s.t.Helper()
	rep, err := s.turn(kind, prompt)
	require.NoError(s.t, err)
	return rep
}

func (s *simSession) compact() (CompactReport, error) {
	return s.sim.Compact(context.Background(), CompactRequest{
		Session:      lead,
		Spec:         AgentSpec{Kind: KindSim, Sim: s.cfg},
		Conversation: s.conversation,
		StateDir:     s.stateDir,
	})
}

func TestSimTurnsGrowTheContext(t *testing.T) {
	s := newSimSession(t, config.Sim{Window: 100_000, TokensPerTurn: 1_000})
	prompt := strings.Repeat("x", 40) // 10 tokens
	for i, want := range []struct {
		used   int64
		output string
	}{
		{1_010, `sim turn 1 of conversation sim-1: worked on "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"`},
		{2_010, `sim turn 2 of conversation sim-1: worked on "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"`},
		{3_010, `sim turn 3 of conversation sim-1: worked on "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"`},
	} {
		rep := s.mustTurn(TurnWork, prompt)
		require.Equal(t, "sim-1", rep.Conversation, "turn %d", i+1)
		require.Equal(t, want.output, rep.Output)
		require.Equal(t, Usage{UsedTokens: want.used, WindowTokens: 100_000, Source: SourceReported, Model: "sim"}, rep.Usage)
	}
	require.FileExists(t, filepath.Join(s.stateDir, "sim", "web", "lead", "sim-1.json"))
}

func TestSimFreshConversationStartsAtItsFirstMessage(t *testing.T) {
	for _, tc := range []struct {
		name   string
		prompt string
		used   int64
	}{
		{"one byte is one token", "a", 1 + 100},
		{"four bytes are one token", "abcd", 1 + 100},
		{"five bytes round up", "abcde", 2 + 100},
		{"a long handoff", strings.Repeat("h", 4_001), 1_001 + 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSimSession(t, config.Sim{Window: 10_000, TokensPerTurn: 100})
			rep := s.mustTurn(TurnFresh, tc.prompt)
			require.Equal(t, tc.used, rep.Usage.UsedTokens)
		})
	}
}

// startTokens is what a fresh conversation holds before its first message:
// a real agent's system prompt and tools.
func TestSimFreshConversationStartsAtStartTokens(t *testing.T) {
	s := newSimSession(t, config.Sim{Window: 10_000, TokensPerTurn: 100, StartTokens: 7_000})
	require.Equal(t, int64(7_000+1+100), s.mustTurn(TurnFresh, "abcd").Usage.UsedTokens)
	s = newSimSession(t, config.Sim{Window: 10_000, TokensPerTurn: 100, StartTokens: 10_000})
	require.Equal(t, int64(10_000), s.mustTurn(TurnFresh, "abcd").Usage.UsedTokens, "never past the window")
}

// With compactAt the sim compacts by itself at the start of a turn once
// its context is that full, as Claude Code does, and says so as the
// vendor's compaction; the turn then works on what is left.
func TestSimCompactsItselfAtCompactAt(t *testing.T) {
	s := newSimSession(t, config.Sim{Window: 100_000, TokensPerTurn: 20_000, CompactAt: 60})
	var used []int64
	var vendor []*VendorCompaction
	for range 5 {
		rep := s.mustTurn(TurnWork, "abcd")
		used, vendor = append(used, rep.Usage.UsedTokens), append(vendor, rep.Vendor)
	}
	require.Equal(t, []int64{20_001, 40_001, 60_001, 26_000, 46_000}, used)
	require.Equal(t, []*VendorCompaction{nil, nil, nil, {BeforeTokens: 60_001, AfterTokens: 6_000}, nil}, vendor)

	quiet := newSimSession(t, config.Sim{Window: 100_000, TokensPerTurn: 20_000, CompactAt: 60, Silent: true})
	for range 3 {
		quiet.mustTurn(TurnWork, "abcd")
	}
	require.Equal(t, &VendorCompaction{}, quiet.mustTurn(TurnWork, "abcd").Vendor, "a silent sim says it compacted, not how much")
}

func TestSimOutputQuotesAtMost60Characters(t *testing.T) {
	s := newSimSession(t, config.Sim{})
	rep := s.mustTurn(TurnWork, strings.Repeat("é", 61))
	require.Equal(t, `sim turn 1 of conversation sim-1: worked on "`+strings.Repeat("é", 59)+`…"`, rep.Output)
}

func TestSimDefaultsWhenUnconfigured(t *testing.T) {
	s := newSimSession(t, config.Sim{})
	rep := s.mustTurn(TurnWork, "abcd")
	require.Equal(t, Usage{UsedTokens: 1 + config.DefaultSimTokensPerTurn, WindowTokens: config.DefaultSimWindow, Source: SourceReported, Model: "sim"}, rep.Usage)
}

func TestSimNeverReportsMoreThanItsWindow(t *testing.T) {
	s := newSimSession(t, config.Sim{Window: 2_500, TokensPerTurn: 1_000})
	var used []int64
	for range 4 {
		used = append(used, s.mustTurn(TurnWork, "abcd").Usage.UsedTokens)
	}
	require.Equal(t, []int64{1_001, 2_001, 2_500, 2_500}, used)
}

func TestSimSilentReportsNothing(t *testing.T) {
	s := newSimSession(t, config.Sim{Silent: true, TokensPerTurn: 1_000})
	for range 2 {
		rep := s.mustTurn(TurnWork, "work")
		require.Equal(t, Usage{Source: SourceUnknown}, rep.Usage)
	}
}

func TestSimConversationIDsAreNumberedPerSession(t *testing.T) {
	stateDir := t.TempDir()
	fresh := func(sim *Sim, ref SessionRef) string {
		rep, err := sim.Turn(context.Background(), TurnRequest{
			Session: ref, Spec: AgentSpec{Kind: KindSim}, Prompt: "start", Kind: TurnFresh, StateDir: stateDir,
		})
		require.NoError(t, err)
		return rep.Conversation
	}
	other := SessionRef{Group: "web", Name: "worker"}
	require.Equal(t, "sim-1", fresh(NewSim(), lead))
	require.Equal(t, "sim-2", fresh(NewSim(), lead))
	require.Equal(t, "sim-1", fresh(NewSim(), other))
	// A restarted worker keeps counting where the files say.
	require.Equal(t, "sim-3", fresh(NewSim(), lead))
}

// A session moved to another host hands off into a fresh conversation
// there, where none of its files are: the id goes on from its generation,
// so the move reads sim-2 → sim-3, not sim-2 → sim-1.
func TestSimConversationIDsGoOnAfterAMove(t *testing.T) {
	newHost := t.TempDir()
	rep, err := NewSim().Turn(context.Background(), TurnRequest{
		Session: lead, Spec: AgentSpec{Kind: KindSim}, Prompt: "start", Kind: TurnFresh, StateDir: newHost, Generation: 2,
	})
	require.NoError(t, err)
	require.Equal(t, "sim-3", rep.Conversation)
}

func TestSimStateSurvivesARestart(t *testing.T) {
	s := newSimSession(t, config.Sim{Window: 100_000, TokensPerTurn: 1_000})
	s.mustTurn(TurnWork, "abcd")
	s.mustTurn(TurnWork, "abcd")

	s.sim = NewSim() // the worker restarted; the state directory is the same
	rep := s.mustTurn(TurnWork, "abcd")
	require.Equal(t, "sim-1", rep.Conversation)
	require.Equal(t, int64(3_001), rep.Usage.UsedTokens)
	require.True(t, strings.HasPrefix(rep.Output, "sim turn 3 of conversation sim-1:"), rep.Output)
}

func TestSimUnknownConversation(t *testing.T) {
	s := newSimSession(t, config.Sim{})
	s.mustTurn(TurnWork, "abcd")
	for _, conv := range []string{"sim-9", "../sim-1", "0f8c6e1e-claude"} {
		s.conversation = conv
		_, err := s.turn(TurnWork, "abcd")
		requireErrorType(t, ErrAgentFailed, err)
		_, err = s.compact()
		requireErrorType(t, ErrAgentFailed, err)
	}
}

func TestSimCompact(t *testing.T) {
	for _, tc := range []struct {
		name        string
		failCompact bool
		keeps       int
		want        CompactReport
		nextUsed    int64
	}{
		{
			name:     "shrinks to a tenth",
			want:     CompactReport{OK: true, Conversation: "sim-1", BeforeTokens: 30_001, AfterTokens: 3_000, Usage: Usage{UsedTokens: 3_000, WindowTokens: 100_000, Source: SourceReported, Model: "sim"}},
			nextUsed: 13_000,
		},
		{
			name:     "compactKeeps: a compaction that keeps most",
			keeps:    90,
			want:     CompactReport{OK: true, Conversation: "sim-1", BeforeTokens: 30_001, AfterTokens: 27_000, Usage: Usage{UsedTokens: 27_000, WindowTokens: 100_000, Source: SourceReported, Model: "sim"}},
			nextUsed: 37_000,
		},
		{
			name:        "failCompact refuses and changes nothing",
			failCompact: true,
			want:        CompactReport{OK: false, Conversation: "sim-1", BeforeTokens: 30_001, AfterTokens: 30_001, Usage: Usage{UsedTokens: 30_001, WindowTokens: 100_000, Source: SourceReported, Model: "sim"}, Detail: "sim: compaction refused (failCompact)"},
			nextUsed:    40_001,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSimSession(t, config.Sim{Window: 100_000, TokensPerTurn: 10_000, FailCompact: tc.failCompact, CompactKeeps: tc.keeps})
			for range 3 {
				s.mustTurn(TurnWork, "abcd")
			}
			rep, err := s.compact()
			require.NoError(t, err)
			require.Equal(t, tc.want, rep)

			next := s.mustTurn(TurnWork, "abcd")
			require.Equal(t, "sim-1", next.Conversation, "compaction keeps the conversation")
			require.Equal(t, tc.nextUsed, next.Usage.UsedTokens)
		})
	}
}

func TestSimHandoffRequest(t *testing.T) {
	for _, tc := range []struct {
		name      string
		noHandoff bool
		output    string
		summaries int
	}{
		{"calls handoff_write", false, "sim turn 3 of conversation sim-1: wrote a handoff with handoff_write", 1},
		{"noHandoff only answers", true, "sim turn 3 of conversation sim-1: I will not write a handoff (noHandoff)", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := agenttest.StartHandoffRecorder(t, "")
			s := newSimSession(t, config.Sim{NoHandoff: tc.noHandoff})
			s.mcpURL = rec.URL
			s.mustTurn(TurnWork, "Add dark mode to the settings page")
			s.mustTurn(TurnWork, "Add dark mode to the settings page")

			rep := s.mustTurn(TurnHandoffRequest, "Call handoff_write with a self-contained handoff.")
			require.Equal(t, tc.output, rep.Output)
			got := rec.Summaries()
			require.Len(t, got, tc.summaries)
			if tc.summaries > 0 {
				require.Contains(t, got[0], "Handoff from sim conversation sim-1 of web/lead after 3 turns.")
				require.Contains(t, got[0], `Goal: "Add dark mode to the settings page".`)
				require.Contains(t, got[0], "Next: ")
			}
		})
	}
}

// A fresh conversation's sim answers nid's handoff_ack request as its ack
// switch says; a first message without the request gets no call.
func TestSimHandoffAck(t *testing.T) {
	held := "Handoff: ...\n" + AckRequest([]string{"t3", "t5"})
	for _, tc := range []struct {
		name   string
		ack    string
		prompt string
		acks   [][]string
		output string
	}{
		{"correct by default", "", held, [][]string{{"t3", "t5"}}, "; acknowledged the handoff (handoff_ack: t3, t5)"},
		{"correct", config.SimAckCorrect, held, [][]string{{"t3", "t5"}}, "; acknowledged the handoff (handoff_ack: t3, t5)"},
		{"nothing held", "", AckRequest(nil), [][]string{{}}, "; acknowledged the handoff (handoff_ack: no task)"},
		{"wrong", config.SimAckWrong, held, [][]string{{"t999"}}, "; acknowledged the handoff (handoff_ack: t999)"},
		{"none", config.SimAckNone, held, nil, ""},
		{"not asked", "", "Handoff: ... (an older nid asks nothing)", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := agenttest.StartHandoffRecorder(t, "")
			s := newSimSession(t, config.Sim{Ack: tc.ack})
			s.mcpURL = rec.URL
			rep := s.mustTurn(TurnFresh, tc.prompt)
			require.Equal(t, `sim turn 1 of conversation sim-1: worked on `+strconv.Quote(clip.Runes(tc.prompt, 60))+tc.output, rep.Output)
			require.Equal(t, tc.acks, rec.Acks())
		})
	}
	require.Equal(t, "t1000", wrongTask([]string{"t999"}))
}

func TestSimHandoffRefusedIsAnAgentFailure(t *testing.T) {
	rec := agenttest.StartHandoffRecorder(t, "summary is empty: write a self-contained handoff")
	s := newSimSession(t, config.Sim{})
	s.mcpURL = rec.URL
	s.mustTurn(TurnWork, "abcd")
	_, err := s.turn(TurnHandoffRequest, "Call handoff_write.")
	requireErrorType(t, ErrAgentFailed, err)
	require.ErrorContains(t, err, "summary is empty: write a self-contained handoff")
}

func TestSimHandoffWithoutEndpointIsRetryable(t *testing.T) {
	rec := agenttest.StartHandoffRecorder(t, "")
	s := newSimSession(t, config.Sim{})
	s.mcpURL = rec.URL
	s.mustTurn(TurnWork, "abcd")
	rec.Close()

	_, err := s.turn(TurnHandoffRequest, "Call handoff_write.")
	require.Error(t, err)
	_, typed := errors.AsType[*Error](err)
	require.False(t, typed, "a call that got no answer may succeed on retry: %v", err)

	// The failed turn changed nothing: a retry is turn 2 of the conversation.
	s.mcpURL = agenttest.StartHandoffRecorder(t, "").URL
	rep := s.mustTurn(TurnHandoffRequest, "Call handoff_write.")
	require.Equal(t, "sim turn 2 of conversation sim-1: wrote a handoff with handoff_write", rep.Output)
}

func TestSimHandoffAfterTurns(t *testing.T) {
	rec := agenttest.StartHandoffRecorder(t, "")
	s := newSimSession(t, config.Sim{HandoffAfterTurns: 3})
	s.mcpURL = rec.URL
	var calls []int
	for range 4 {
		s.mustTurn(TurnWork, "abcd")
		calls = append(calls, len(rec.Summaries()))
	}
	require.Equal(t, []int{0, 0, 1, 1}, calls, "handoff_write on the third turn only")
	require.True(t, strings.HasPrefix(rec.Summaries()[0], "My context is cluttered after 3 turns"), rec.Summaries()[0])

	// A compaction uncluttered the context: three more turns until the next.
	_, err := s.compact()
	require.NoError(t, err)
	calls = nil
	for range 3 {
		s.mustTurn(TurnWork, "abcd")
		calls = append(calls, len(rec.Summaries()))
	}
	require.Equal(t, []int{1, 1, 2}, calls)
}

func TestSimTurnHonoursCancellation(t *testing.T) {
	s := newSimSession(t, config.Sim{TurnDelay: config.Duration(1 << 62)})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.sim.Turn(ctx, TurnRequest{Session: lead, Spec: AgentSpec{Kind: KindSim, Sim: s.cfg}, Prompt: "abcd", Kind: TurnWork, StateDir: s.stateDir})
	require.ErrorIs(t, err, context.Canceled)
	entries, err := os.ReadDir(s.stateDir)
	require.NoError(t, err)
	require.Empty(t, entries, "a cancelled fresh turn leaves no conversation behind")
}

func TestSimStopDoesNothing(t *testing.T) {
	s := newSimSession(t, config.Sim{TokensPerTurn: 1_000})
	s.mustTurn(TurnWork, "abcd")
	require.NoError(t, s.sim.Stop(context.Background(), StopRequest{Session: lead, Conversation: s.conversation, StateDir: s.stateDir}))
	require.Equal(t, int64(2_001), s.mustTurn(TurnWork, "abcd").Usage.UsedTokens)
}

func requireErrorType(t *testing.T, want string, err error) {
	t.Helper()
	e, ok := errors.AsType[*Error](err)
	require.True(t, ok, "want a %s error, got %v", want, err)
	require.Equal(t, want, e.Type, err.Error())
}

func TestSimMarksItsTaskDoneAfterTaskTurns(t *testing.T) {
	rec := agenttest.StartHandoffRecorder(t, "")
	s := newSimSession(t, config.Sim{Window: 100_000, TokensPerTurn: 10, TaskTurns: 3})
	s.mcpURL = rec.URL
	s.mustTurn(TurnWork, "Your task: task t1: Dark mode toggle")
	s.mustTurn(TurnWork, "Continue with task t1: Dark mode toggle.")
	require.Empty(t, rec.Done())
	rep := s.mustTurn(TurnWork, "Continue with task t1: Dark mode toggle.")
	require.Equal(t, []string{"t1"}, rec.Done(), "task_done over MCP on the third turn")
	require.Contains(t, rep.Output, "task t1 is done (task_done)")
	// A new task starts the count again.
	s.mustTurn(TurnWork, "Your task: task t2: Settings page")
	s.mustTurn(TurnWork, "Continue with task t2: Settings page.")
	require.Equal(t, []string{"t1"}, rec.Done())
	s.mustTurn(TurnWork, "a message from the human")
	require.Equal(t, []string{"t1"}, rec.Done(), "a prompt naming no task is not task work")
}

func TestSimKeepsItsFirstMessage(t *testing.T) {
	s := newSimSession(t, config.Sim{})
	s.mustTurn(TurnFresh, "Handoff from your previous conversation: done A")
	st, err := loadSim(filepath.Join(s.stateDir, "sim", "web", "lead"), s.conversation)
	require.NoError(t, err)
	require.Equal(t, "Handoff from your previous conversation: done A", st.FirstMessage)
}
