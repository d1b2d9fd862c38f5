package embedded

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdkclient "go.temporal.io/sdk/client"

	"github.com/nid-dev/nid/cli"
	"github.com/nid-dev/nid/internal/freeport"
	"github.com/nid-dev/nid/internal/temporaltest"
	"github.com/nid-dev/nid/internal/testtls"
	"github.com/nid-dev/nid/worker"
	"github.com/nid-dev/nid/workflows"
)

// startTest starts an embedded server on free ports, stopped when t ends.
func startTest(t *testing.T, uiPort int, writeActions bool, ftls *frontendTLS) *Server {
	t.Helper()
	return startTestIn(t, t.TempDir(), uiPort, writeActions, ftls)
}

// startTestIn is startTest with the state in stateDir.
func startTestIn(t *testing.T, stateDir string, uiPort int, writeActions bool, ftls *frontendTLS) *Server {
	t.Helper()
	return startTestWith(t, worker.EmbeddedOptions{StateDir: stateDir, UIPort: uiPort, UIWriteActions: writeActions}, ftls)
}

// startTestWith starts an embedded server as opts says, on a free port
// with nid's namespace and search attributes, stopped when t ends.
func startTestWith(t *testing.T, opts worker.EmbeddedOptions, ftls *frontendTLS) *Server {
	t.Helper()
	port, err := freeport.Find()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	opts.Namespace, opts.Port, opts.SearchAttributes = "default", port, workflows.SearchAttributes()
	srv, err := start(ctx, opts, ftls)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, srv.Stop()) })
	return srv.(*Server)
}

// uiCall makes one request of the Web UI as the UI's own page does: with
// the CSRF cookie and the header that must match it, and the login cookie
// login when there is one.
func uiCall(t *testing.T, port int, login *http.Cookie, hostHeader, method, path string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://127.0.0.1:"+strconv.Itoa(port)+path, strings.NewReader("{}"))
	require.NoError(t, err)
	req.Host = hostHeader
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-CSRF-Token", "token")
	req.AddCookie(&http.Cookie{Name: "_csrf", Value: "token"})
	if login != nil {
		req.AddCookie(login)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// The Web UI can steer every session (signal, terminate, reset), so it only
// reads unless the user enables writes, and it answers only requests
// addressed to loopback, which a page using DNS rebinding cannot forge.
func TestWebUIIsReadOnlyByDefaultAndAnswersOnlyLoopback(t *testing.T) {
	for _, tt := range []struct {
		name         string
		writeActions bool
		signalStatus int
	}{
		{"read-only by default", false, http.StatusMethodNotAllowed},
		{"temporal.ui.writeActions", true, http.StatusOK},
	} {
		t.Run(tt.name, func(t *testing.T) {
			uiPort, err := freeport.Find()
			require.NoError(t, err)
			state := t.TempDir()
			srv := startTestIn(t, state, uiPort, tt.writeActions, nil)
			c := trustedClient(t, srv, state)
			// No worker serves it: the workflow just stays open to be signalled.
			_, err = c.ExecuteWorkflow(context.Background(), sdkclient.StartWorkflowOptions{ID: "target", TaskQueue: "nobody"}, "Target")
			require.NoError(t, err)
			local := "localhost:" + strconv.Itoa(uiPort)
			login := uiLogin(t, srv)
			signal := "/api/v1/namespaces/default/workflows/target/signal/message"

			status, body := uiCall(t, uiPort, login, "evil.example:"+strconv.Itoa(uiPort), http.MethodPost, signal)
			require.Equal(t, http.StatusMisdirectedRequest, status, body)
			require.Contains(t, body, "answers only at localhost:"+strconv.Itoa(uiPort))
			for _, h := range []string{"evil.example", "localhost:1", "127.0.0.1.evil.example:" + strconv.Itoa(uiPort)} {
				status, _ := uiCall(t, uiPort, login, h, http.MethodGet, "/")
				require.Equal(t, http.StatusMisdirectedRequest, status, "Host %s", h)
			}
			require.Zero(t, temporaltest.Signals(t, c, "target", ""), "a request for another host signals nothing")

			for _, h := range []string{local, "127.0.0.1:" + strconv.Itoa(uiPort), "[::1]:" + strconv.Itoa(uiPort)} {
				status, body := uiCall(t, uiPort, login, h, http.MethodGet, "/api/v1/namespaces/default/workflows")
				require.Equal(t, http.StatusOK, status, "Host %s: %s", h, body)
				require.Contains(t, body, `"target"`, "the UI reads workflows")
			}

			status, body = uiCall(t, uiPort, login, local, http.MethodPost, signal)
			require.Equal(t, tt.signalStatus, status, body)
			want := 0
			if tt.writeActions {
				want = 1
			}
			require.Equal(t, want, temporaltest.Signals(t, c, "target", ""))
		})
	}
}

// A cluster may require mutual TLS. nid ls dials it through temporal.tls:
// without TLS, the CA or a client certificate it fails saying what to set,
// and with all three it lists.
func TestNidLsOverMutualTLS(t *testing.T) {
	pki := testtls.Write(t)
	srv := startTest(t, 0, false, &frontendTLS{certFile: pki.ServerCert, keyFile: pki.ServerKey, caFile: pki.CA, serverName: "localhost"})
	for _, tt := range []struct {
		name string
		tls  string
		want string // in the error; empty: nid ls works
	}{
		{"plain TCP", "", "it serves TLS: set temporal.tls"},
		{"without the CA", fmt.Sprintf("{certFile: %s, keyFile: %s}", pki.ClientCert, pki.ClientKey),
			"signed by an authority this host does not trust: set temporal.tls.caFile to the CA that signed the server's certificate"},
		{"without a client certificate", fmt.Sprintf("{caFile: %s}", pki.CA),
			"asks for a client certificate: set temporal.tls.certFile and temporal.tls.keyFile"},
		{"with the CA and a client certificate", fmt.Sprintf("{caFile: %s, certFile: %s, keyFile: %s}", pki.CA, pki.ClientCert, pki.ClientKey), ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			yaml := "state: " + t.TempDir() + "\ntemporal:\n  address: " + srv.FrontendAddress() + "\n  apiKey: " + srv.token + "\n"
			if tt.tls != "" {
				yaml += "  tls: " + tt.tls + "\n"
			}
			file := filepath.Join(t.TempDir(), "nid.yaml")
			require.NoError(t, os.WriteFile(file, []byte(yaml), 0o600))
			var out, errOut bytes.Buffer
			app := cli.NewApp(cli.Deps{Stdout: &out, Stderr: &errOut, Environ: []string{"NO_COLOR=1"}})
			err := app.RunContext(context.Background(), []string{"nid", "--config", file, "ls"})
			if tt.want != "" {
				require.ErrorContains(t, err, tt.want)
				return
			}
			require.NoError(t, err, errOut.String())
			require.Regexp(t, `^SESSION\s+AGENT\s+STATUS`, out.String())
		})
	}
}
