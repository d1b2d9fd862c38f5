package activities_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/activities"
	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/internal/agenttest"
)

// A move saves the session's work and makes its worktree again on the new
// host: an add of the whole worktree, a checkout of the branch and of the
// salvage. Each would run what a configuration names for the worktree's
// .gitattributes (here: filters and diff drivers for *.go and *.md), and
// git reads the worker's environment, the user's global configuration, the
// worktree's own config.worktree and the repository's config. Whatever is
// planted in any of them runs nothing, and the work arrives; plain git
// runs the same plants.
func TestMoveRunsNothingTheAgentPlanted(t *testing.T) {
	for _, tc := range []struct {
		name  string
		plant func(t *testing.T, w worked, marks string)
	}{
		{"config.worktree in the worktree's git directory", func(t *testing.T, w worked, marks string) {
			agenttest.GitRun(t, w.repo, "config", "extensions.worktreeConfig", "true")
			plant(t, filepath.Join(w.repo, ".git", "worktrees", "lead", "config.worktree"), marks)
		}},
		{"the repository's own config, open to an agent with full permissions", func(t *testing.T, w worked, marks string) {
			plant(t, filepath.Join(w.repo, ".git", "config"), marks)
		}},
		{"the worker's global config and GIT_ variables", func(t *testing.T, w worked, marks string) {
			home := t.TempDir()
			t.Setenv("HOME", home)
			t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
			plant(t, filepath.Join(home, ".gitconfig"), marks)
			t.Setenv("GIT_CONFIG_COUNT", "1")
			t.Setenv("GIT_CONFIG_KEY_0", "core.fsmonitor")
			t.Setenv("GIT_CONFIG_VALUE_0", "touch "+filepath.Join(marks, "env-fsmonitor")+"; true")
			t.Setenv("GIT_EXTERNAL_DIFF", "touch "+filepath.Join(marks, "env-diff")+"; true")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, proof := newWorked(t), newWorked(t)
			proofMarks := t.TempDir()
			tc.plant(t, proof, proofMarks)
			plainGit(t, proof.tree)
			require.NotEmpty(t, marked(t, proofMarks), "plain git runs the plant")

			marks := filepath.Join(t.TempDir(), "marks")
			require.NoError(t, os.MkdirAll(marks, 0o755))
			tc.plant(t, w, marks)
			require.NoError(t, os.Chtimes(filepath.Join(w.tree, "lexer.go"), time0, time0))

			saved, err := w.acts.SaveWork(t.Context(), activities.SaveWorkInput{Session: webLead, Number: 1})
			require.NoError(t, err)
			require.Equal(t, "refs/nid/salvage/web/lead/1", saved.Salvage)
			hostB := &activities.Activities{StateDir: t.TempDir(), Places: placed(w.repo)}
			moved, err := hostB.PrepareWorkspace(t.Context(), activities.WorkspaceInput{Session: webLead, Salvage: saved.Salvage})
			require.NoError(t, err)
			_, err = hostB.GatherFacts(t.Context(), activities.FactsInput{Session: webLead})
			require.NoError(t, err)
			require.Empty(t, marked(t, marks), "nothing the agent planted ran")
			b, err := os.ReadFile(filepath.Join(moved.Worktree, "notes.md"))
			require.NoError(t, err)
			require.Equal(t, "next: tests\n", string(b), "the uncommitted work arrived")
		})
	}
}

// A worktree whose .git file or commondir an agent pointed elsewhere is
// not followed by a move either: the move is refused with what was found,
// nothing runs and the worktree stays where it is for the user to look at.
func TestMoveRefusesAWorktreeThatPointsElsewhere(t *testing.T) {
	w := newWorked(t)
	marks := filepath.Join(t.TempDir(), "marks")
	require.NoError(t, os.MkdirAll(marks, 0o755))
	evil := filepath.Join(t.TempDir(), "common")
	agenttest.GitRun(t, w.repo, "clone", "-q", "--bare", w.repo, evil)
	plant(t, filepath.Join(evil, "config"), marks)
	require.NoError(t, os.WriteFile(filepath.Join(w.repo, ".git", "worktrees", "lead", "commondir"), []byte(evil+"\n"), 0o644))

	_, err := w.acts.SaveWork(t.Context(), activities.SaveWorkInput{Session: webLead, Number: 1})
	agenttest.RequireFinal(t, err, activities.ErrAgentFailed, "nid refused to follow it and ran nothing", "git run there by hand would follow it")
	require.Empty(t, marked(t, marks))
	_, err = os.Stat(filepath.Join(w.tree, "notes.md"))
	require.NoError(t, err, "the worktree is left as it was")
	require.NotContains(t, agenttest.GitRun(t, w.repo, "for-each-ref"), "salvage")
}

// Anything that reaches Temporal can send an activity of nid's a session
// name of its own: one that is no name, or one this worker's nid.yaml does
// not list and nid made nothing for. Each is refused with what was wrong,
// and nothing is made or run.
func TestActivitiesActOnlyOnSessionsTheWorkerKnows(t *testing.T) {
	repo := newRepo(t)
	state := t.TempDir()
	acts := &activities.Activities{StateDir: state, Places: func(ref agents.SessionRef) (string, string, bool) {
		return repo, "", ref == webLead
	}}
	bad := []struct {
		ref  agents.SessionRef
		says string
	}{
		{agents.SessionRef{Group: "..", Name: "lead"}, `group ".." is not a name`},
		{agents.SessionRef{Group: "web", Name: "../../home"}, `session "../../home" is not a name`},
		{agents.SessionRef{Group: "/etc", Name: "lead"}, "is not a name"},
		{agents.SessionRef{Group: "web", Name: "le\x00ad"}, "is not a name"},
		{agents.SessionRef{Group: strings.Repeat("g", 10<<10), Name: "lead"}, "is not a name"},
		{agents.SessionRef{Group: "web", Name: "ghost"}, "this worker's nid.yaml has no session web/ghost"},
	}
	for _, tc := range bad {
		_, err := acts.PrepareWorkspace(t.Context(), activities.WorkspaceInput{Session: tc.ref})
		agenttest.RequireFinal(t, err, activities.ErrBadInput, tc.says)
		_, err = acts.SaveWork(t.Context(), activities.SaveWorkInput{Session: tc.ref, Number: 1})
		agenttest.RequireFinal(t, err, activities.ErrBadInput, tc.says)
		_, err = acts.PushBranch(t.Context(), activities.PushBranchInput{Session: tc.ref})
		agenttest.RequireFinal(t, err, activities.ErrBadInput, tc.says)
		_, err = acts.GatherFacts(t.Context(), activities.FactsInput{Session: tc.ref})
		agenttest.RequireFinal(t, err, activities.ErrBadInput, tc.says)
	}
	entries, err := os.ReadDir(state)
	require.NoError(t, err)
	require.Empty(t, entries, "nothing was made")
	require.Equal(t, "refs/heads/main", agenttest.GitRun(t, repo, "for-each-ref", "--format=%(refname)"), "the repository is as it was")

	_, err = acts.SaveWork(t.Context(), activities.SaveWorkInput{Session: webLead, Number: -1})
	agenttest.RequireFinal(t, err, activities.ErrBadInput, "move number -1")
}

// A session nid.yaml no longer lists (removed, or moved to a host whose
// file names it) keeps what nid recorded when it made its worktree here:
// its work is still saved from there, and no new worktree is made for it.
func TestARemovedSessionIsActedOnFromNidsRecord(t *testing.T) {
	w := newWorked(t)
	w.acts.Places = func(agents.SessionRef) (string, string, bool) { return "", "", false }
	saved, err := w.acts.SaveWork(t.Context(), activities.SaveWorkInput{Session: webLead, Number: 2})
	require.NoError(t, err)
	require.Equal(t, "refs/nid/salvage/web/lead/2", saved.Salvage)
	_, err = os.Stat(w.tree)
	require.True(t, os.IsNotExist(err), "the worktree left the host")

	_, err = w.acts.PrepareWorkspace(t.Context(), activities.WorkspaceInput{Session: webLead})
	agenttest.RequireFinal(t, err, activities.ErrBadInput, "no longer lists session web/lead")
}

// A group's repo git would take as an option or hand to a program is
// refused before git sees it, wherever it came from.
func TestRepositoriesGitWouldRunAreRefused(t *testing.T) {
	marks := t.TempDir()
	for _, repo := range []string{
		"ext::sh -c touch% " + filepath.Join(marks, "ext"),
		"--upload-pack=touch " + filepath.Join(marks, "upload") + ";git-upload-pack",
		"fd::3",
		"http://git.example.com/app.git",
	} {
		acts := &activities.Activities{StateDir: t.TempDir(), Places: placed(repo)}
		_, err := acts.PrepareWorkspace(t.Context(), activities.WorkspaceInput{Session: webLead})
		agenttest.RequireFinal(t, err, activities.ErrBadInput, "a repo is an https://, ssh:// or file:// URL")
	}
	entries, err := os.ReadDir(marks)
	require.NoError(t, err)
	require.Empty(t, entries)
}

// What an agent can write under the repository's git directory (its
// worktree's HEAD, refs, objects, a remotes file) must not make nid, which
// runs git outside any sandbox, push another branch, read another
// repository, push to a place of the agent's choosing, or write through a
// link. Each is refused or has no effect, and nothing is written outside.
func TestTheGitDirectoryAnAgentWritesLeadsNidNowhere(t *testing.T) {
	t.Run("a worktree switched to another branch pushes only the session's", func(t *testing.T) {
		w := newWorked(t)
		bare := filepath.Join(t.TempDir(), "origin.git")
		agenttest.GitRun(t, w.repo, "clone", "-q", "--bare", w.repo, bare)
		agenttest.GitRun(t, w.repo, "remote", "add", "origin", bare)
		mainBefore := agenttest.GitRun(t, bare, "rev-parse", "refs/heads/main")
		agenttest.GitRun(t, w.repo, "update-ref", "refs/heads/main", "refs/heads/nid/web/lead")
		require.NoError(t, os.WriteFile(filepath.Join(w.repo, ".git", "worktrees", "lead", "HEAD"), []byte("ref: refs/heads/main\n"), 0o644))
		saved, err := w.acts.SaveWork(t.Context(), activities.SaveWorkInput{Session: webLead, Number: 1})
		require.NoError(t, err)
		require.Equal(t, "origin", saved.Pushed)
		require.Equal(t, mainBefore, agenttest.GitRun(t, bare, "rev-parse", "refs/heads/main"), "the agent's main was not pushed")
		agenttest.GitRun(t, bare, "rev-parse", "--verify", "refs/heads/nid/web/lead")
	})
	t.Run("a ref linked to another repository's", func(t *testing.T) {
		w := newWorked(t)
		other := newRepo(t)
		commit(t, other, "Secret work of another group")
		heads := filepath.Join(w.repo, ".git", "refs", "heads")
		require.NoError(t, os.Symlink(filepath.Join(other, ".git", "refs", "heads", "main"), filepath.Join(heads, "x")))
		require.NoError(t, os.WriteFile(filepath.Join(w.repo, ".git", "worktrees", "lead", "HEAD"), []byte("ref: refs/heads/x\n"), 0o644))
		_, err := w.acts.GatherFacts(t.Context(), activities.FactsInput{Session: webLead})
		agenttest.RequireFinal(t, err, activities.ErrAgentFailed, "is a symbolic link", "nid refused it and ran nothing")
		require.NotContains(t, err.Error(), "Secret work")
	})
	t.Run("an alternates file lending another repository's objects", func(t *testing.T) {
		w := newWorked(t)
		other := newRepo(t)
		require.NoError(t, os.WriteFile(filepath.Join(w.repo, ".git", "objects", "info", "alternates"), []byte(filepath.Join(other, ".git", "objects")+"\n"), 0o644))
		_, err := w.acts.GatherFacts(t.Context(), activities.FactsInput{Session: webLead})
		agenttest.RequireFinal(t, err, activities.ErrAgentFailed, "alternates is not what it was")
		_, err = w.acts.SaveWork(t.Context(), activities.SaveWorkInput{Session: webLead, Number: 1})
		agenttest.RequireFinal(t, err, activities.ErrAgentFailed, "alternates is not what it was")
	})
	t.Run("a remotes file naming an origin of the agent's", func(t *testing.T) {
		w := newWorked(t)
		evil := filepath.Join(t.TempDir(), "evil.git")
		agenttest.GitRun(t, w.repo, "clone", "-q", "--bare", w.repo, evil)
		marks := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(evil, "hooks", "pre-receive"), []byte("#!/bin/sh\ntouch "+filepath.Join(marks, "pre-receive")+"\n"), 0o755))
		require.NoError(t, os.MkdirAll(filepath.Join(w.repo, ".git", "remotes"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(w.repo, ".git", "remotes", "origin"), []byte("URL: "+evil+"\n"), 0o644))
		saved, err := w.acts.SaveWork(t.Context(), activities.SaveWorkInput{Session: webLead, Number: 1})
		require.NoError(t, err)
		require.Empty(t, saved.Pushed, "only the configuration names an origin")
		require.Empty(t, marked(t, marks))
	})
	t.Run("refs/nid linked out of the repository", func(t *testing.T) {
		w := newWorked(t)
		outside := t.TempDir()
		require.NoError(t, os.Symlink(outside, filepath.Join(w.repo, ".git", "refs", "nid")))
		_, err := w.acts.SaveWork(t.Context(), activities.SaveWorkInput{Session: webLead, Number: 1})
		agenttest.RequireFinal(t, err, activities.ErrAgentFailed, "is a symbolic link")
		require.Empty(t, marked(t, outside), "nothing was written through the link")
	})
}
