package serverproc

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
)

// Extract writes a server executable a binary carries to the user's cache
// directory, once per version, and returns its path. The file is named by
// its content's hash, so that two nid versions side by side each run their
// own server and a file cut short by a crash is never taken for whole (it is
// written aside and renamed into place).
func Extract(executable []byte) (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	return extractTo(filepath.Join(base, "nid"), executable)
}

func extractTo(dir string, executable []byte) (string, error) {
	if len(executable) == 0 {
		return "", fmt.Errorf("this nid binary carries no Temporal server: build it with make build, or run go build ./cmd/nid for one that links the server itself")
	}
	sum := sha256.Sum256(executable)
	path := filepath.Join(dir, "temporal-server-"+hex.EncodeToString(sum[:12]))
	if info, err := os.Stat(path); err == nil && info.Size() == int64(len(executable)) {
		return path, nil
	}
	// Only the user runs what is in there.
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("the Temporal server's cache directory: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".temporal-server-*")
	if err != nil {
		return "", fmt.Errorf("extract the Temporal server: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(executable); err != nil {
		tmp.Close()
		return "", fmt.Errorf("extract the Temporal server to %s: %w", dir, err)
	}
	if err := tmp.Chmod(0o700); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", fmt.Errorf("extract the Temporal server: %w", err)
	}
	return path, nil
}
