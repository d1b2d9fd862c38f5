package worker

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/statedir"
)

// temporalTokenBytes is the credential's randomness: 256 bits, beyond any
// guessing through a frontend that answers each try.
const temporalTokenBytes = 32

// TemporalTokenPath is where the embedded Temporal server's credential
// lives under the state directory stateDir.
func TemporalTokenPath(stateDir string) string {
	return filepath.Join(stateDir, statedir.TemporalToken)
}

// MakeTemporalToken returns the embedded Temporal server's credential,
// writing a new one (0600) on the server's first start and keeping it
// across restarts, so that workers and other hosts configured with it stay
// accepted. Whatever starts the embedded server calls it, after
// statedir.Prepare.
func MakeTemporalToken(stateDir string) (string, error) {
	file := TemporalTokenPath(stateDir)
	token, err := ReadTemporalToken(stateDir)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return token, err
	}
	raw := make([]byte, temporalTokenBytes)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	token = hex.EncodeToString(raw)
	// O_EXCL: two starts at once on the same state must agree on one
	// credential, so the one that loses the race reads the winner's.
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, statedir.FileMode)
	if errors.Is(err, fs.ErrExist) {
		return ReadTemporalToken(stateDir)
	}
	if err != nil {
		return "", fmt.Errorf("temporal credential: %w", err)
	}
	_, err = f.WriteString(token + "\n")
	if err = errors.Join(err, f.Close()); err != nil {
		_ = os.Remove(file)
		return "", fmt.Errorf("temporal credential %s: %w", file, err)
	}
	return token, nil
}

// ReadTemporalToken reads the credential the embedded Temporal server in
// stateDir requires; an error wrapping fs.ErrNotExist when no server has
// started there yet.
func ReadTemporalToken(stateDir string) (string, error) {
	file := TemporalTokenPath(stateDir)
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("temporal credential: %w", err)
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return "", fmt.Errorf("temporal credential %s is empty: remove it and start nid up or nid server again to make a new one", file)
	}
	return token, nil
}

// temporalCredential is the bearer credential nid presents to Temporal, and
// where it comes from for error messages: temporal.apiKey when set (a
// cluster's key, or another host's copy of a nid server's credential),
// else the state directory's credential when the server is nid's own (the
// embedded one, or `nid server` on this host), else none. A missing file
// is no error here: the server's refusal says what is missing.
func temporalCredential(cfg *config.Config) (token, source string) {
	if cfg.Temporal.APIKey != "" {
		return cfg.Temporal.APIKey, "temporal.apiKey"
	}
	if !ownServer(cfg) {
		return "", ""
	}
	token, err := ReadTemporalToken(cfg.State)
	if err != nil {
		return "", ""
	}
	return token, TemporalTokenPath(cfg.State)
}

// ownServer reports whether the configuration points at a Temporal server
// nid itself runs on this host: the embedded one, or `nid server`, which
// listens on loopback only.
func ownServer(cfg *config.Config) bool {
	return cfg.Embedded() || config.LoopbackAddress(cfg.Temporal.Address)
}
