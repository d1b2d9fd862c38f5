package config_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/nid-dev/nid/config"
)

// FuzzLoad feeds arbitrary bytes to Load as nid.yaml. Whatever the file
// holds, Load must not panic, must say what is wrong when it refuses the
// file, and must only accept a configuration that validates and that nid up
// can pass on.
func FuzzLoad(f *testing.F) {
	sample, err := os.ReadFile("../nid.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(sample)
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "nid.yaml")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		// An empty environment keeps the process's NID_* variables out.
		c, err := config.Load(config.LoadOptions{Kinds: kinds(), File: path, Environ: []string{}})
		if err != nil {
			if c != nil {
				t.Fatalf("Load returned a configuration with its error %q", err)
			}
			if err.Error() == "" {
				t.Fatalf("Load refused %q with an empty error", data)
			}
			return
		}
		if err := c.Validate(kinds()); err != nil {
			t.Fatalf("Load accepted %q, which does not validate: %v", data, err)
		}
		// nid up hands the configuration to workflows as JSON.
		if _, err := json.Marshal(c); err != nil {
			t.Fatalf("Load accepted %q, which cannot be encoded: %v", data, err)
		}
	})
}
