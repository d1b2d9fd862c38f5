package serverproc

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
)

// Extract writes a server executable a binary carries to the user's cache
// directory, once per version, and returns its path. The file is named by
// the executable's Go build ID, which the linker derives from its content,
// so that two nid versions side by side each run their own server; a file
// cut short by a crash is never taken for whole (it is written aside and
// renamed into place).
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
	path := filepath.Join(dir, "temporal-server-"+versionKey(executable))
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
	// Writing it read every page of the executable nid carries, and those
	// two hundred megabytes stayed counted in nid up's resident memory for
	// as long as it ran: nid needs them no more.
	release(executable)
	// Each version is two hundred megabytes: the ones before this go. One
	// still running keeps its file until it exits.
	older, _ := filepath.Glob(filepath.Join(dir, "temporal-server-*"))
	for _, old := range older {
		if old != path {
			_ = os.Remove(old)
		}
	}
	return path, nil
}

// versionKey names an executable's version: a hash of its Go build ID and
// size. It reads only the headers and the note that hold the ID: hashing the whole
// executable would read its two hundred megabytes on every nid up, and
// leave them counted in nid up's resident memory. An executable whose ID
// is not found is hashed whole.
func versionKey(executable []byte) string {
	id := goBuildID(executable)
	if id == nil {
		id = executable
	}
	h := sha256.New()
	h.Write(id)
	fmt.Fprintf(h, "\x00%d", len(executable))
	return hex.EncodeToString(h.Sum(nil)[:12])
}

// goBuildID is the Go build ID in an executable: in its ELF note, or (as Go
// writes it on the other systems) marked at the start of its text.
func goBuildID(executable []byte) []byte {
	if f, err := elf.NewFile(bytes.NewReader(executable)); err == nil {
		if note := f.Section(".note.go.buildid"); note != nil {
			if data, err := note.Data(); err == nil && len(data) > 0 {
				return data
			}
		}
		return nil
	}
	head := executable[:min(len(executable), 32<<10)]
	const marker = "\xff Go build ID: \""
	start := bytes.Index(head, []byte(marker))
	if start < 0 {
		return nil
	}
	rest := head[start+len(marker):]
	end := bytes.IndexByte(rest, '"')
	if end <= 0 {
		return nil
	}
	return rest[:end]
}
