package agents

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/internal/agenttest"
)

func execTurn(t *testing.T, ctx context.Context, cmd, conv string, timeout time.Duration) (TurnReport, error) {
	t.Helper()
	return NewExec().Turn(ctx, TurnRequest{
		Session:      SessionRef{Group: "web", Name: "worker", WorkflowID: "nid/web/worker"},
		Conversation: conv, Prompt: "add dark mode", Kind: TurnWork,
		MCP: MCPAccess{URL: "http://127.0.0.1:1/mcp/web/worker", Token: "tok"}, StateDir: t.TempDir(),
		Process: Process{Command: cmd, Env: map[string]string{"GREETING": "hello"}, Timeout: timeout, Permissions: config.PermissionsFull},
	})
}

func TestExecTurn(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		output string
		usage  Usage
	}{
		{"usage lines are not output, the last wins",
			`read p; echo "$GREETING, I got: $p"; echo '{"nid":"usage","used":100,"window":1000}'; echo "$NIDAGENT_SESSION $NIDAGENT_TURN_KIND $NIDAGENT_MCP_URL"; echo '{"nid":"usage","used":1234,"window":200000}'`,
			"hello, I got: add dark mode\nweb/worker work http://127.0.0.1:1/mcp/web/worker/tok", Usage{UsedTokens: 1234, WindowTokens: 200000, Source: SourceReported}},
		{"no usage is an unknown context", `cat`, "add dark mode", Usage{Source: SourceUnknown}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep, err := execTurn(t, context.Background(), agenttest.Script(t, tt.body), "", 0)
			require.NoError(t, err)
			require.Equal(t, "exec-1", rep.Conversation)
			require.Equal(t, tt.output, rep.Output)
			require.Equal(t, tt.usage, rep.Usage)
		})
	}
}

func TestExecConversations(t *testing.T) {
	state := t.TempDir()
	ref := SessionRef{Group: "web", Name: "worker"}
	cmd := agenttest.Script(t, `echo "$NIDAGENT_CONVERSATION"`)
	run := func(conv string) string {
		rep, err := NewExec().Turn(context.Background(), TurnRequest{Session: ref, Conversation: conv, Prompt: "p", Kind: TurnWork, StateDir: state, Process: Process{Command: cmd, Permissions: config.PermissionsFull}})
		require.NoError(t, err)
		require.Equal(t, rep.Conversation, rep.Output)
		return rep.Conversation
	}
	require.Equal(t, "exec-1", run(""))
	require.Equal(t, "exec-1", run("exec-1"))
	// A handoff's fresh conversation is the next number, also after a restart.
	require.Equal(t, "exec-2", run(""))

	rep, err := NewExec().Compact(context.Background(), CompactRequest{Session: ref, Conversation: "exec-2"})
	require.NoError(t, err)
	require.False(t, rep.OK)
	require.Contains(t, rep.Detail, "cannot compact")
}

func TestExecFailures(t *testing.T) {
	t.Run("missing command", func(t *testing.T) {
		_, err := execTurn(t, context.Background(), "/nonexistent/agent", "", 0)
		requireType(t, err, ErrAgentFailed)
		require.Contains(t, err.Error(), "not found")
	})
	t.Run("non-zero exit quotes stderr", func(t *testing.T) {
		_, err := execTurn(t, context.Background(), agenttest.Script(t, `echo "unknown flag --frobnicate" >&2; exit 2`), "", 0)
		requireType(t, err, ErrAgentFailed)
		require.Contains(t, err.Error(), "status 2")
		require.Contains(t, err.Error(), "unknown flag --frobnicate")
	})
	t.Run("killed mid-turn is retryable", func(t *testing.T) {
		_, err := execTurn(t, context.Background(), agenttest.Script(t, `echo working; kill -9 $$`), "", 0)
		require.Error(t, err)
		var e *Error
		require.False(t, errors.As(err, &e), "a crash may be retried: %v", err)
		require.Contains(t, err.Error(), "killed")
	})
}

// A turn past its timeout, or cancelled, kills the agent and everything it
// started.
func TestExecKillsProcessGroup(t *testing.T) {
	for _, how := range []string{"timeout", "cancel"} {
		t.Run(how, func(t *testing.T) {
			pidFile := filepath.Join(t.TempDir(), "child.pid")
			cmd := agenttest.Script(t, "sleep 300 &\necho $! > "+pidFile+"\nwait\n")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			timeout := time.Duration(0)
			if how == "timeout" {
				timeout = 500 * time.Millisecond
			} else {
				go func() {
					for {
						if _, err := os.Stat(pidFile); err == nil {
							cancel()
							return
						}
						time.Sleep(20 * time.Millisecond)
					}
				}()
			}
			_, err := execTurn(t, ctx, cmd, "", timeout)
			require.Error(t, err)
			if how == "timeout" {
				requireType(t, err, ErrAgentFailed)
				require.Contains(t, err.Error(), "timeout")
			} else {
				require.ErrorIs(t, err, context.Canceled)
			}
			b, err := os.ReadFile(pidFile)
			require.NoError(t, err)
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			require.NoError(t, err)
			require.Eventually(t, func() bool {
				return syscall.Kill(pid, 0) != nil
			}, 5*time.Second, 20*time.Millisecond, "the agent's child outlived the turn")
		})
	}
}

func requireType(t *testing.T, err error, typ string) {
	t.Helper()
	var e *Error
	require.True(t, errors.As(err, &e), "want a %s error, got %v", typ, err)
	require.Equal(t, typ, e.Type, err.Error())
}

// Whatever an exec agent prints, the turn ends with a clear answer and the
// worker keeps a bounded amount of it.
func TestExecBadOutput(t *testing.T) {
	const fiftyMB = "head -c 50000000 /dev/zero | tr '\\0' a"
	tests := []struct {
		name    string
		body    string
		timeout time.Duration
		check   func(t *testing.T, rep TurnReport, err error)
	}{
		{"binary garbage and broken usage lines", `head -c 100000 /dev/urandom; echo
echo '{"nid":"usage","used":"lots"}'
echo '{"nid":"usage","used":-5,"window":100}'
echo '{"nid":"usage"'
echo still here`, 0, func(t *testing.T, rep TurnReport, err error) {
			require.NoError(t, err)
			require.Equal(t, SourceUnknown, rep.Usage.Source, "no broken line is taken for a report")
			require.True(t, strings.HasSuffix(rep.Output, "still here"))
		}},
		{"truncated mid-line", `echo '{"nid":"usage","used":10,"window":100}'; printf '{"nid":"usage","used":90,"win'`, 0, func(t *testing.T, rep TurnReport, err error) {
			require.NoError(t, err)
			require.Equal(t, int64(10), rep.Usage.UsedTokens, "the cut report is not read")
			require.Equal(t, `{"nid":"usage","used":90,"win`, rep.Output)
		}},
		{"a 50 MB line", fiftyMB + `; echo; echo '{"nid":"usage","used":7,"window":100}'; echo after`, 0, func(t *testing.T, rep TurnReport, err error) {
			require.NoError(t, err)
			require.Equal(t, int64(7), rep.Usage.UsedTokens, "lines after the long one are still read")
			require.LessOrEqual(t, len(rep.Output), MaxExecOutputBytes+100)
			require.Contains(t, rep.Output, "more bytes of output were not kept")
		}},
		{"output that never ends", `yes 'all work and no play'`, time.Second, func(t *testing.T, rep TurnReport, err error) {
			requireType(t, err, ErrAgentFailed)
			require.Contains(t, err.Error(), "timeout")
		}},
		{"a line that never ends", `tr '\0' a < /dev/zero`, time.Second, func(t *testing.T, rep TurnReport, err error) {
			requireType(t, err, ErrAgentFailed)
			require.Contains(t, err.Error(), "timeout")
		}},
		{"hangs without output", `sleep 300`, 500 * time.Millisecond, func(t *testing.T, rep TurnReport, err error) {
			requireType(t, err, ErrAgentFailed)
			require.Contains(t, err.Error(), "its process group was killed")
		}},
		{"floods stderr", `head -c 20000000 /dev/zero | tr '\0' e >&2; echo done`, 0, func(t *testing.T, rep TurnReport, err error) {
			require.NoError(t, err)
			require.Equal(t, "done", rep.Output)
		}},
		{"floods stderr then fails", `head -c 20000000 /dev/zero | tr '\0' e >&2; echo 'the last words' >&2; exit 3`, 0, func(t *testing.T, rep TurnReport, err error) {
			requireType(t, err, ErrAgentFailed)
			require.Contains(t, err.Error(), "status 3")
			require.True(t, strings.HasSuffix(err.Error(), "the last words"), "the error quotes the end of stderr")
			require.Less(t, len(err.Error()), 3<<10, "and only the end")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep, err := execTurn(t, context.Background(), agenttest.Script(t, tt.body), "", tt.timeout)
			tt.check(t, rep, err)
		})
	}
}
