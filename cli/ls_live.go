package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/worker"
)

// liveWait is how long nid ls waits for a running nid up's answer before
// asking Temporal itself.
const liveWait = time.Second

// liveSessions asks a running nid up or nid worker of this configuration
// for the session list over its HTTP API: it keeps the list current by
// asking visibility only for what changed (nidclient.Listing), where a list
// of every session costs Temporal tens of milliseconds a thousand. ok is
// false when none answers as this configuration's own (none runs, it
// serves another namespace or server, the token is not this
// configuration's), and then nid ls asks Temporal itself.
//
// The token goes only to a listener on loopback that this user's own
// process holds: any local user can listen on a port nid up is not using.
func liveSessions(ctx context.Context, cfg *config.Config, group string) (list worker.SessionList, ok bool) {
	if !config.LoopbackAddress(cfg.HTTP.Listen) || !ownListener(cfg.HTTP.Listen) {
		return list, false
	}
	token, err := existingAPIToken(cfg)
	if err != nil || token == "" {
		return list, false
	}
	body, err := json.Marshal(map[string]string{"group": group})
	if err != nil {
		return list, false
	}
	ctx, cancel := context.WithTimeout(ctx, liveWait)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+cfg.HTTP.Listen+"/api/"+worker.MethodSessionList, bytes.NewReader(body))
	if err != nil {
		return list, false
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return list, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&list) != nil {
		return list, false
	}
	return list, list.Namespace == cfg.Temporal.Namespace && list.Temporal == cfg.Address()
}

// existingAPIToken is the API token as worker.APIToken finds it, but never
// generates one: none means no nid up has served this state directory.
func existingAPIToken(cfg *config.Config) (string, error) {
	if cfg.HTTP.Token != "" {
		return cfg.HTTP.Token, nil
	}
	b, err := os.ReadFile(filepath.Join(cfg.State, worker.TokenFile))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	return strings.TrimSpace(string(b)), err
}

// ownListener says a process of this user listens on address (a loopback
// host and port).
func ownListener(address string) bool {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return false
	}
	if host == "localhost" {
		host = "127.0.0.1"
	}
	uid, found := listenerUID(net.ParseIP(host), port)
	return found && uid == os.Getuid()
}
