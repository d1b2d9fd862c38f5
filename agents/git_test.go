package agents

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// A push or fetch may log in as the user does, and take nothing else of
// the user's configuration: of a global config that also names an
// fsmonitor, a pager and an ssh command, only the credential settings
// come along.
func TestOnlyTheUsersCredentialSettingsComeAlong(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", "")
	global := "[core]\n\tfsmonitor = touch /tmp/x\n\tsshCommand = touch /tmp/y\n\tpager = less\n" +
		"[credential]\n\thelper = store\n[credential \"https://git.example.com\"]\n\tusername = ana\n[include]\n\tpath = other\n"
	require.NoError(t, os.WriteFile(filepath.Join(home, ".gitconfig"), []byte(global), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(home, "other"), []byte("[credential]\n\thelper = !touch /tmp/z\n"), 0o600))
	require.Equal(t, []string{"credential.helper=store", "credential.https://git.example.com.username=ana"}, userCredentials(t.Context()))
}

// Every git command runs with the safe arguments before its own and the
// safe environment after the worker's, less its GIT_ variables.
func TestGitRunsWithoutTheWorkersGitVariables(t *testing.T) {
	t.Setenv("GIT_DIR", "/nonexistent")
	t.Setenv("GIT_CONFIG_PARAMETERS", "'core.fsmonitor'='touch /tmp/x'")
	out, err := RunGit(t.Context(), GitCommand{Dir: t.TempDir(), Args: []string{"config", "--get", "core.fsmonitor"}})
	require.NoError(t, err)
	require.Equal(t, "false", out, "the worker's variables are dropped and the safe setting stands")
}
