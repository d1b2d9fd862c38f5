package config_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/agents"
	"github.com/nid-dev/nid/config"
)

// A partial load hands back what it read with the problems, one by one,
// for nid doctor to report beside its other checks.
func TestLoadPartial(t *testing.T) {
	file := filepath.Join(t.TempDir(), "nid.yaml")
	require.NoError(t, os.WriteFile(file, []byte("state: st\ngroups:\n  web:\n    rotate: {mode: sometimes}\n    sessions:\n      - {agent: sim, name: lead}\n"), 0o600))
	opts := config.LoadOptions{File: file, Environ: []string{}, Kinds: agents.ConfigKinds()}
	cfg, err := config.Load(opts)
	require.Nil(t, cfg, "an invalid configuration is not handed back unless asked")
	require.Error(t, err)

	opts.Partial = true
	cfg, err = config.Load(opts)
	require.Error(t, err)
	require.Equal(t, []string{`groups.web.rotate.mode: "sometimes" is not one of auto, compact, handoff, off`}, config.Problems(err))
	require.Equal(t, filepath.Join(filepath.Dir(file), "st"), cfg.State)
	require.Equal(t, "lead", cfg.Groups["web"].Sessions[0].Name)

	_, err = config.Load(config.LoadOptions{File: filepath.Join(t.TempDir(), "none.yaml"), Partial: true})
	require.Error(t, err)
	require.Nil(t, config.Problems(err), "a file that cannot be read lists no problems of its own")
	require.Nil(t, config.Problems(nil))
}
