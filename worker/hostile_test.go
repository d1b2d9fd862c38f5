package worker

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/nid-dev/nid/activities"
	"github.com/nid-dev/nid/internal/temporaltest"
	"github.com/nid-dev/nid/nidclient"
	"github.com/nid-dev/nid/workflows"
)

// registered is a Registry that keeps the names registered with it.
type registered struct{ workflows, activities []string }

func (r *registered) RegisterWorkflowWithOptions(_ interface{}, o workflow.RegisterOptions) {
	r.workflows = append(r.workflows, o.Name)
}

func (r *registered) RegisterActivityWithOptions(_ interface{}, o activity.RegisterOptions) {
	r.activities = append(r.activities, o.Name)
}

// hostileActivity is a workflow of the attacker's own, run by the
// attacker's own worker, that schedules one of nid's activities on a
// host's queue with whatever input it likes: a host's worker takes any
// task on its queue.
func hostileActivity(ctx workflow.Context, queue, name string, input map[string]any) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue: queue, StartToCloseTimeout: time.Minute,
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	return workflow.ExecuteActivity(ctx, name, input).Get(ctx, nil)
}

// A client that holds the credential (a host's own user, or anything that
// stole it) can send every workflow and activity nid registers input of
// its own: names with .. and /, absolute paths, NUL, 10 KB names, repos
// that are options or remote helpers, a file:// repository of its own with
// an fsmonitor and hooks planted, working directories and worktrees
// outside nid's, huge payloads. None of it makes a worker write outside
// its directories or run what was planted, and each is refused with what
// was wrong. The names come from the worker's own registration, so a new
// activity or workflow is covered without editing this test.
func TestHostileClientCannotMakeAWorkerAct(t *testing.T) {
	env := temporaltest.New(t)
	c := env.Client(t)
	outside := t.TempDir()
	marks := filepath.Join(outside, "marks")
	require.NoError(t, os.MkdirAll(marks, 0o755))
	evil := filepath.Join(outside, "evil.git")
	for _, args := range [][]string{
		{"init", "-q", "--bare", evil},
		{"-C", evil, "config", "core.fsmonitor", "touch " + filepath.Join(marks, "fsmonitor") + "; true"},
		{"-C", evil, "config", "core.hooksPath", filepath.Join(evil, "hooks")},
	} {
		out, err := exec.Command("git", args...).CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	for _, hook := range []string{"post-checkout", "pre-push", "post-update", "reference-transaction"} {
		require.NoError(t, os.WriteFile(filepath.Join(evil, "hooks", hook), []byte("#!/bin/sh\ntouch "+filepath.Join(marks, hook)+"\n"), 0o755))
	}
	repo := t.TempDir()
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "start"}} {
		out, err := exec.Command("git", append([]string{"-C", repo}, args...)...).CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	cfg := env.Config(t, fmt.Sprintf("  web:\n    repo: %s\n    sessions:\n      - {agent: sim, name: lead, sim: {turnDelay: 0s}}\n", repo))
	n, err := Start(t.Context(), Options{Config: cfg, Logger: temporaltest.Logger()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = n.Stop() })

	var names registered
	RegisterWorkflows(&names)
	RegisterActivities(&names, &activities.Activities{})
	require.NotEmpty(t, names.activities)

	big := strings.Repeat("x", 10<<10)
	sessions := []map[string]any{
		{"group": "..", "name": "lead"},
		{"group": "../../home/.config/git", "name": "lead"},
		{"group": "web", "name": "../../../" + outside},
		{"group": outside, "name": "lead"},
		{"group": "web", "name": "le\x00ad"},
		{"group": big, "name": "lead"},
		{"group": "web", "name": "ghost", "workflowID": "nid/hosts"},
		// The session nid.yaml lists, with everything else the
		// attacker's.
		{"group": "web", "name": "lead", "workflowID": "nid/hosts"},
	}
	repos := []string{"file://" + evil, evil, "--upload-pack=touch " + filepath.Join(marks, "upload") + ";:", "ext::sh -c touch% " + filepath.Join(marks, "ext")}
	queue := "hostile"
	w := sdkworker.New(c, queue, sdkworker.Options{})
	w.RegisterWorkflowWithOptions(hostileActivity, workflow.RegisterOptions{Name: "hostile"})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)

	simAndStop := []string{activities.RunTurnName, activities.StopAgentName, activities.RescueName}
	for _, name := range names.activities {
		for i, session := range sessions {
			input := map[string]any{
				"session":  session,
				"repo":     repos[i%len(repos)],
				"workdir":  outside,
				"worktree": outside,
				"salvage":  "refs/heads/main",
				"number":   1,
				"spec":     map[string]any{"kind": "sim", "command": "/bin/sh"},
				"prompt":   strings.Repeat("p", 256<<10),
				"kind":     "work",
			}
			run, err := c.ExecuteWorkflow(t.Context(), client.StartWorkflowOptions{TaskQueue: queue, WorkflowExecutionTimeout: 2 * time.Minute},
				"hostile", workflows.HostQueue(temporaltest.Host), name, input)
			require.NoError(t, err)
			err = run.Get(t.Context(), nil)
			if err == nil && (i == len(sessions)-1 || (session["name"] == "ghost" && slices.Contains(simAndStop, name))) {
				// The listed session's own places are what it may
				// act on. A session the file does not list may be
				// stopped (stopping starts nothing), and nid's own
				// sim, which runs nothing and writes only under the
				// state directory, may take its turns and have its
				// transcript read (nid up --keep-removed).
				continue
			}
			appErr, ok := errors.AsType[*temporal.ApplicationError](err)
			require.True(t, ok, "%s with session %q: want a refusal, got %v", name, session, err)
			require.True(t, appErr.NonRetryable(), "%s: %v", name, err)
			require.True(t, slices.Contains([]string{activities.ErrBadInput, activities.ErrUnknownAgent}, appErr.Type()), "%s: %v", name, err)
			require.Regexp(t, `is not a name|has no session web/ghost|asks for|no longer lists|salvage|no conversation|no interactive CLI`, appErr.Error(), name)
		}
	}

	// A hand-back reads the vendor's records where the session's own agent,
	// as this worker's nid.yaml runs it, writes them: a kind the file does
	// not give the session, a conversation or a time of the attacker's
	// choosing make it read nothing else.
	for _, spec := range []string{"claude", "codex", "exec"} {
		input := map[string]any{
			"session":      map[string]any{"group": "web", "name": "lead"},
			"spec":         map[string]any{"kind": spec, "command": "/bin/cat"},
			"conversation": "../../../../" + outside + "/secret",
			"since":        time.Time{},
		}
		run, err := c.ExecuteWorkflow(t.Context(), client.StartWorkflowOptions{TaskQueue: queue, WorkflowExecutionTimeout: 2 * time.Minute},
			"hostile", workflows.HostQueue(temporaltest.Host), activities.HandbackName, input)
		require.NoError(t, err)
		err = run.Get(t.Context(), nil)
		appErr, ok := errors.AsType[*temporal.ApplicationError](err)
		require.True(t, ok, "a hand-back of kind %s: want a refusal, got %v", spec, err)
		require.Equal(t, activities.ErrBadInput, appErr.Type(), "%v", err)
		require.Contains(t, appErr.Error(), `nid.yaml gives it "sim"`)
	}

	// Started all at once, then waited for. A session, group or rotation
	// named by a name that is not one fails at once, having scheduled
	// nothing; one that takes no names (the hosts registry) runs until its
	// timeout, and nothing it does may leave a mark.
	type started struct {
		name string
		run  client.WorkflowRun
	}
	var runs []started
	for _, name := range names.workflows {
		for i, session := range sessions[:6] {
			input := map[string]any{"group": session["group"], "name": session["name"], "session": session, "repo": "file://" + evil, "workdir": outside}
			if name == workflows.GroupWorkflowName {
				input["name"], input["sessions"] = session["group"], []any{session["name"]}
			}
			run, err := c.ExecuteWorkflow(t.Context(), client.StartWorkflowOptions{ID: fmt.Sprintf("hostile/%s/%d", name, i), TaskQueue: workflows.TaskQueue,
				WorkflowExecutionTimeout: 5 * time.Second}, name, input)
			require.NoError(t, err)
			runs = append(runs, started{name, run})
		}
	}
	for _, r := range runs {
		err := r.run.Get(t.Context(), nil)
		if r.name == workflows.HostsWorkflowName {
			continue
		}
		appErr, ok := errors.AsType[*temporal.ApplicationError](err)
		require.True(t, ok, "%s: want a refusal, got %v", r.name, err)
		require.Equal(t, activities.ErrBadInput, appErr.Type(), "%s: %v", r.name, err)
		require.Contains(t, appErr.Error(), "is not a name", r.name)
	}

	entries, err := os.ReadDir(marks)
	require.NoError(t, err)
	require.Empty(t, entries, "nothing planted ran")
	left, err := os.ReadDir(outside)
	require.NoError(t, err)
	var found []string
	for _, e := range left {
		found = append(found, e.Name())
	}
	require.ElementsMatch(t, []string{"marks", "evil.git"}, found, "nothing was written outside nid's directories")
	refs, err := exec.Command("git", "-C", repo, "for-each-ref", "--format=%(refname)").Output()
	require.NoError(t, err)
	require.Equal(t, "refs/heads/main", strings.TrimSpace(string(refs)), "the repository is as it was")
}

// A conversation id reaches the vendor CLI's command line: a hostile
// client's turn on one that reads as an option (for Claude Code, an MCP
// server to start outside any sandbox) is refused and runs nothing, the
// agent's command included.
func TestHostileConversationIdRunsNothing(t *testing.T) {
	env := temporaltest.New(t)
	c := env.Client(t)
	marks := t.TempDir()
	agent := filepath.Join(t.TempDir(), "claude")
	require.NoError(t, os.WriteFile(agent, []byte("#!/bin/sh\ntouch "+filepath.Join(marks, "agent")+"\n"), 0o755))
	cfg := env.Config(t, fmt.Sprintf("  web:\n    sessions:\n      - {agent: claude, name: lead, command: %s, permissions: full, env: {ANTHROPIC_API_KEY: not-a-key}}\n", agent))
	n, err := Start(t.Context(), Options{Config: cfg, Logger: temporaltest.Logger()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = n.Stop() })
	queue := "hostile-conversation"
	w := sdkworker.New(c, queue, sdkworker.Options{})
	w.RegisterWorkflowWithOptions(hostileActivity, workflow.RegisterOptions{Name: "hostile"})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)

	planted := `--mcp-config={"mcpServers":{"x":{"type":"stdio","command":"/bin/sh","args":["-c","touch ` + filepath.Join(marks, "mcp") + `"]}}}`
	input := map[string]any{
		"session":      map[string]any{"group": "web", "name": "lead"},
		"spec":         map[string]any{"kind": "claude"},
		"conversation": planted,
		"prompt":       "hello",
		"kind":         "work",
	}
	run, err := c.ExecuteWorkflow(t.Context(), client.StartWorkflowOptions{TaskQueue: queue, WorkflowExecutionTimeout: 2 * time.Minute},
		"hostile", workflows.HostQueue(temporaltest.Host), activities.RunTurnName, input)
	require.NoError(t, err)
	err = run.Get(t.Context(), nil)
	appErr, ok := errors.AsType[*temporal.ApplicationError](err)
	require.True(t, ok, "want a refusal, got %v", err)
	require.Equal(t, activities.ErrBadInput, appErr.Type(), "%v", err)
	require.Contains(t, appErr.Error(), "is not a conversation id")
	entries, err := os.ReadDir(marks)
	require.NoError(t, err)
	require.Empty(t, entries, "nothing ran")
}

// A client holding the credential can beat for hosts of its own making:
// names that are paths or carry NUL, a period of nothing, an HTTP address
// of megabytes. Each beat is refused, naming what was wrong, and the
// registry keeps the one host it had as it was.
func TestHostileBeatsAreRefused(t *testing.T) {
	c, before := registryOfOneHost(t)

	host := before.Hosts[0].Name
	beats := map[string]workflows.HostBeat{
		`host "../../etc": a host name is`:       {Host: "../../etc", MaxSessions: 1000, Every: time.Second},
		`host "a\x00b": a host name is`:          {Host: "a\x00b", MaxSessions: 1000, Every: time.Second},
		"beats every -1s: the period must be":    {Host: host, MaxSessions: 1000, Every: -time.Second},
		"gives an HTTP address of 1048576 bytes": {Host: host, MaxSessions: 1000, Every: time.Second, HTTP: strings.Repeat("h", 1<<20)},
	}
	for want, b := range beats {
		requireRegistryRefuses(t, c, workflows.UpdateHeartbeat, b, want)
	}
	after, err := nidclient.Hosts(t.Context(), c)
	require.NoError(t, err)
	require.Equal(t, before.Hosts[0].HostRecord.Name, after.Hosts[0].Name)
	require.Len(t, after.Hosts, 1, "no refused beat made a host")
	require.Equal(t, before.Hosts[0].MaxSessions, after.Hosts[0].MaxSessions)
	require.Equal(t, before.Hosts[0].Every, after.Hosts[0].Every)
	require.Equal(t, before.Hosts[0].HTTP, after.Hosts[0].HTTP)
}

// A client holding the credential can send the hosts registry a batch of
// placements of its own: past the cap, with names that are not sessions
// (paths, NUL, 10 KB) or hosts that are not host names, hidden among good
// ones. Each batch is refused whole, naming the entry, and the registry
// places none of it and keeps what it had.
func TestHostileBatchPlacementPlacesNothing(t *testing.T) {
	c, before := registryOfOneHost(t)
	require.Equal(t, []string{"web/lead"}, before.Hosts[0].Sessions)

	good := workflows.PlaceRequest{Session: "web/good"}
	batches := map[string][]workflows.PlaceRequest{
		"the most one batch places is":                     slices.Repeat([]workflows.PlaceRequest{good}, workflows.MaxPlaceBatch+1),
		`session 2 of 3 in the batch ("../../etc/passwd")`: {good, {Session: "../../etc/passwd"}, good},
		"session 2 of 2 in the batch":                      {good, {Session: "web/le\x00ad"}},
		"session 1 of 2 in the batch":                      {{Session: "web/" + strings.Repeat("x", 10<<10)}, good},
		`session 2 of 2 in the batch ("web/other"): host`:  {good, {Session: "web/other", Want: "../host"}},
		"the batch places no session":                      {},
	}
	for want, batch := range batches {
		requireRegistryRefuses(t, c, workflows.UpdatePlaceAll, workflows.PlaceBatch{Sessions: batch}, want)
	}
	after, err := nidclient.Hosts(t.Context(), c)
	require.NoError(t, err)
	require.Len(t, after.Hosts, 1)
	require.Equal(t, []string{"web/lead"}, after.Hosts[0].Sessions, "no batch placed anything, web/good included")
}

// registryOfOneHost starts a node with one session, and returns a client
// and the hosts registry's view: the one host.
func registryOfOneHost(t *testing.T) (client.Client, workflows.HostsView) {
	env := temporaltest.New(t)
	c := env.Client(t)
	startNode(t, env.Config(t, "  web:\n    sessions:\n      - {agent: sim, name: lead}\n"))
	v, err := nidclient.Hosts(t.Context(), c)
	require.NoError(t, err)
	require.Len(t, v.Hosts, 1)
	return c, v
}

// requireRegistryRefuses sends the hosts registry the update name with
// arg, straight through Temporal, and requires it refused in words that
// hold want.
func requireRegistryRefuses(t *testing.T, c client.Client, name string, arg any, want string) {
	t.Helper()
	h, err := c.UpdateWorkflow(t.Context(), client.UpdateWorkflowOptions{
		WorkflowID: workflows.HostsID, UpdateName: name, Args: []interface{}{arg}, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err == nil {
		err = h.Get(t.Context(), nil)
	}
	require.ErrorContains(t, err, want)
}
