package activities_test

import (
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
)

// gitRun runs git in dir and returns its output.
func gitRun(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	require.NoError(t, err, "git %s: %s", strings.Join(args, " "), out)
	return strings.TrimSpace(string(out))
}

// requireFinal checks that err is a failure of type typ that Temporal does
// not retry, and that its message says each of says.
func requireFinal(t *testing.T, err error, typ string, says ...string) {
	t.Helper()
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app), "want an application error, got %v", err)
	require.Equal(t, typ, app.Type(), "%v", err)
	require.True(t, app.NonRetryable(), "%v", err)
	for _, s := range says {
		require.Contains(t, err.Error(), s)
	}
}
