package activities_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/activities"
	"github.com/nid-dev/nid/config"
)

// The tests in this file hold every agent CLI nid drives to the same
// promises, one case per CLI: what an agent may change under each
// permissions setting, that a commit works in its git worktree, what its
// network setting does, that nid refuses to start it where its sandbox
// cannot work, and that nid's secrets stay out of its reach.

// realCLIs are the agent kinds whose real CLI these tests run.
var realCLIs = []string{config.AgentClaude, config.AgentCodex}

// realRig returns the world of one session of the given kind, and its
// adapter.
func realRig(t *testing.T, kind string) (*agentRig, activities.Agent) {
	t.Helper()
	switch kind {
	case config.AgentClaude:
		return claudeRig(t)
	case config.AgentCodex:
		return codexRig(t)
	}
	t.Fatalf("no rig for %s", kind)
	return nil, nil
}

// exists says whether path is there.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// An agent edits and runs commands in its worktree without approval, and
// its writes elsewhere ($HOME here) are refused, with both its shell and
// its edit tool; readonly changes nothing; full can write anywhere.
func TestAgentPermissions(t *testing.T) {
	for _, kind := range realCLIs {
		for _, tc := range []struct {
			permissions    string
			inside, others bool
		}{
			{"", true, false}, // the default: workspace
			{config.PermissionsReadonly, false, false},
			{config.PermissionsFull, true, true},
		} {
			t.Run(kind+"/"+cmpOr(tc.permissions, "default"), func(t *testing.T) {
				r, ag := realRig(t, kind)
				r.proc.Permissions = tc.permissions
				wt, home := r.proc.WorkDir, r.home
				r.model.Script(
					fakeReply{Shell: "echo agent > " + filepath.Join(wt, "shell-inside.txt"), Input: 100, Output: 5},
					fakeReply{Shell: "echo agent > " + filepath.Join(home, "shell-outside.txt"), Input: 100, Output: 5},
					fakeReply{WriteFile: filepath.Join(wt, "edit-inside.txt"), WriteText: "agent", Input: 100, Output: 5},
					fakeReply{WriteFile: filepath.Join(home, "edit-outside.txt"), WriteText: "agent", Input: 100, Output: 5},
					fakeReply{Text: "done", Input: 100, Output: 5},
				)
				rep, _, err := r.turn(ag, "", "write four files", activities.TurnWork)
				require.NoError(t, err)
				require.Equal(t, "done", rep.Output)
				require.Equal(t, tc.inside, exists(filepath.Join(wt, "shell-inside.txt")), "a shell command writing in the worktree")
				require.Equal(t, tc.inside, exists(filepath.Join(wt, "edit-inside.txt")), "an edit in the worktree")
				require.Equal(t, tc.others, exists(filepath.Join(home, "shell-outside.txt")), "a shell command writing in $HOME")
				require.Equal(t, tc.others, exists(filepath.Join(home, "edit-outside.txt")), "an edit in $HOME")
			})
		}
	}
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// gitRun runs git in dir and returns its output.
func gitRun(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	require.NoError(t, err, "git %s: %s", strings.Join(args, " "), out)
	return strings.TrimSpace(string(out))
}

// A session's worktree is a linked git worktree, whose commits go into the
// repository's own git directory: a commit there works under the sandbox
// (and not in readonly), while the repository's hooks and config, which
// would run or be read when the user next uses git, stay out of reach.
func TestAgentCommitsInItsWorktree(t *testing.T) {
	for _, kind := range realCLIs {
		for _, tc := range []struct {
			permissions string
			committed   bool
		}{
			{"", true},
			{config.PermissionsReadonly, false},
		} {
			t.Run(kind+"/"+cmpOr(tc.permissions, "default"), func(t *testing.T) {
				r, ag := realRig(t, kind)
				r.proc.Permissions = tc.permissions
				repo := t.TempDir()
				gitRun(t, repo, "init", "-q")
				gitRun(t, repo, "config", "user.name", "nid test")
				gitRun(t, repo, "config", "user.email", "nid@example.com")
				gitRun(t, repo, "commit", "-q", "--allow-empty", "-m", "start")
				r.proc.WorkDir = filepath.Join(t.TempDir(), "lead")
				r.proc.GitDirs = filepath.Join(t.TempDir(), "gitdirs.json")
				gitRun(t, repo, "worktree", "add", "-q", "-b", "nid/web/lead", r.proc.WorkDir)
				hook := filepath.Join(repo, ".git", "hooks", "post-commit")
				r.model.Script(
					fakeReply{Shell: "git commit -q --allow-empty -m 'work from the agent'", Input: 100, Output: 5},
					fakeReply{Shell: "printf '#!/bin/sh\\necho pwned\\n' > " + hook + "; git config --local core.hooksPath /tmp", Input: 100, Output: 5},
					fakeReply{Text: "committed", Input: 100, Output: 5},
				)
				rep, _, err := r.turn(ag, "", "commit your work", activities.TurnWork)
				require.NoError(t, err)
				require.Equal(t, "committed", rep.Output)
				want := "start"
				if tc.committed {
					want = "work from the agent"
				}
				require.Equal(t, want, gitRun(t, repo, "log", "-1", "--format=%s", "nid/web/lead"))
				require.Equal(t, "start", gitRun(t, repo, "log", "-1", "--format=%s", "HEAD"), "the main checkout did not move")
				require.NoFileExists(t, hook)
				_, err = exec.Command("git", "-C", repo, "config", "--local", "core.hooksPath").Output()
				require.Error(t, err, "the repository's config is unchanged")
			})
		}
	}
}

// Network access is off by default (both vendors' sandbox default) and on
// with network: true.
func TestAgentNetwork(t *testing.T) {
	for _, kind := range realCLIs {
		for _, network := range []*bool{nil, ptr(true)} {
			name := "default"
			if network != nil {
				name = "on"
			}
			t.Run(kind+"/"+name, func(t *testing.T) {
				var hits atomic.Int32
				site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { hits.Add(1) }))
				t.Cleanup(site.Close)
				r, ag := realRig(t, kind)
				r.proc.Network = network
				// The empty --noproxy sends even a loopback request through
				// the proxy Claude Code's sandbox gives commands, as a request
				// to any other host would go.
				r.model.Script(
					fakeReply{Shell: "curl --noproxy '' -sS -m 10 " + site.URL + "/probe", Input: 100, Output: 5},
					fakeReply{Text: "fetched", Input: 100, Output: 5},
				)
				_, _, err := r.turn(ag, "", "fetch the page", activities.TurnWork)
				require.NoError(t, err)
				require.Equal(t, network != nil, hits.Load() > 0, "the command reached the site")
			})
		}
	}
}

func ptr[T any](v T) *T { return &v }

// fakeBwrap returns a directory holding a bwrap that fails the way
// bubblewrap does where user namespaces are refused (it still answers
// --version, as a real one would, so that the CLIs pick it).
func fakeBwrap(t *testing.T) string {
	t.Helper()
	real, err := exec.LookPath("bwrap")
	require.NoError(t, err, "bubblewrap is not installed: run `make deps`")
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bwrap"), []byte(`#!/bin/sh
case "$1" in --version|--help) exec `+real+` "$@";; esac
echo "bwrap: setting up uid map: Permission denied" >&2
exit 1
`), 0o755))
	return dir
}

// Where the sandbox cannot work, nid does not run the agent unsandboxed:
// the turn fails with ErrSandboxUnavailable, which says what to do, and
// nothing the agent asked for ran.
func TestAgentSandboxUnavailable(t *testing.T) {
	for _, tc := range []struct {
		kind, name string
		// path is the PATH the agent gets.
		path func(t *testing.T) string
		want string
	}{
		// Codex brings its own bubblewrap; Claude Code needs the host's.
		{config.AgentClaude, "no bubblewrap", func(t *testing.T) string { return t.TempDir() }, "apt-get install bubblewrap socat"},
		{config.AgentClaude, "user namespaces refused", func(t *testing.T) string { return fakeBwrap(t) + ":" + os.Getenv("PATH") }, "user namespace"},
		{config.AgentCodex, "user namespaces refused", func(t *testing.T) string { return fakeBwrap(t) + ":" + os.Getenv("PATH") }, "user namespace"},
	} {
		t.Run(tc.kind+"/"+tc.name, func(t *testing.T) {
			path := tc.path(t)
			turn := func(permissions string) (inside string, err error) {
				r, ag := realRig(t, tc.kind)
				r.proc.Env["PATH"] = path
				r.proc.Permissions = permissions
				inside = filepath.Join(r.proc.WorkDir, "inside.txt")
				r.model.Script(fakeReply{Shell: "echo agent > " + inside, Input: 100, Output: 5})
				_, _, err = r.turn(ag, "", "write a file", activities.TurnWork)
				return inside, err
			}
			inside, err := turn("")
			require.Error(t, err)
			require.Equal(t, activities.ErrSandboxUnavailable, errType(err), "%v", err)
			require.Contains(t, err.Error(), tc.want)
			require.Contains(t, err.Error(), "permissions: full")
			require.NoFileExists(t, inside)

			// The user's way out works.
			inside, err = turn(config.PermissionsFull)
			require.NoError(t, err)
			require.FileExists(t, inside)
		})
	}
}

// An agent never sees the worker's NID_* and TEMPORAL_* variables, and its
// MCP token is in no process's command line (which every local user can
// read), while nid's tools still work through the real CLI.
func TestAgentSecrets(t *testing.T) {
	t.Setenv("NID_HTTP_TOKEN", "worker-http-secret")
	t.Setenv("TEMPORAL_API_KEY", "worker-temporal-secret")
	for _, kind := range realCLIs {
		t.Run(kind, func(t *testing.T) {
			r, ag := realRig(t, kind)
			envFile := filepath.Join(r.proc.WorkDir, "env.txt")
			var argvs []string
			r.model.Script(
				fakeReply{Shell: "env > " + envFile, Input: 100, Output: 5},
				fakeReply{Tool: activities.ToolBoardRead, ToolInput: map[string]any{}, Input: 100, Output: 5},
				fakeReply{Text: "read it", Input: 100, Output: 5},
			)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			rep, err := ag.Turn(ctx, activities.TurnRequest{
				Session: r.ref, Prompt: "read the board", Kind: activities.TurnWork,
				MCP: r.mcp, StateDir: r.state, Process: r.proc,
				// The agent is running while it calls a tool: read every
				// process's command line then.
				ToolCalled: func(string) { argvs = append(argvs, commandLines(t)...) },
			})
			require.NoError(t, err)
			require.Equal(t, "read it", rep.Output)
			require.Contains(t, lastRequest(t, r.model).Body, testBoard, "the tool answered through the real CLI")

			require.NotEmpty(t, argvs)
			require.True(t, containsAny(argvs, r.mcp.URL), "the agent's process was running when the command lines were read")
			for _, argv := range argvs {
				require.NotContains(t, argv, r.mcp.Token)
			}
			env, err := os.ReadFile(envFile)
			require.NoError(t, err)
			require.NotContains(t, string(env), "worker-http-secret")
			require.NotContains(t, string(env), "worker-temporal-secret")
		})
	}
}

// commandLines returns the command line of every process on the host.
func commandLines(t *testing.T) []string {
	t.Helper()
	procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	require.NoError(t, err)
	var lines []string
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err == nil && len(b) > 0 {
			lines = append(lines, strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return lines
}

func containsAny(lines []string, s string) bool {
	for _, l := range lines {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}

// A prompt reaches the model whole whatever it holds: one that starts
// with "-" is a prompt, not an option, and one over 128 KiB (a long handoff
// and a big board; Linux refuses a single argument that long) works.
func TestAgentPrompts(t *testing.T) {
	long := "HANDOFF START " + strings.Repeat("the board and the handoff go on. ", 200<<10/33) + " HANDOFF END"
	for _, kind := range realCLIs {
		for _, tc := range []struct{ name, prompt string }{
			{"dash", "--help me with the parser"},
			{"over 128 KiB", long},
		} {
			t.Run(kind+"/"+tc.name, func(t *testing.T) {
				r, ag := realRig(t, kind)
				r.model.Script(fakeReply{Text: "on it", Input: 100, Output: 5})
				rep, _, err := r.turn(ag, "", tc.prompt, activities.TurnWork)
				require.NoError(t, err)
				require.Equal(t, "on it", rep.Output)
				body := lastRequest(t, r.model).Body
				head, tail := tc.prompt[:min(len(tc.prompt), 40)], tc.prompt[max(0, len(tc.prompt)-40):]
				require.Contains(t, body, head)
				require.Contains(t, body, tail)
			})
		}
	}
}
