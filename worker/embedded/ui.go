package embedded

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/temporalio/ui-server/v2/server/api"
	"github.com/temporalio/ui-server/v2/server/auth"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	"github.com/temporalio/ui-server/v2/server/cors"
	"github.com/temporalio/ui-server/v2/server/csrf"
	"github.com/temporalio/ui-server/v2/server/headers"
	"github.com/temporalio/ui-server/v2/server/route"
	"github.com/temporalio/ui-server/v2/ui"
	"google.golang.org/grpc/metadata"

	"github.com/nid-dev/nid/worker"
)

// webUI is the Temporal Web UI, served on loopback by nid's own HTTP server.
type webUI struct {
	http *http.Server
	cfg  *uiconfig.ConfigProviderWithRefresh
	gate *uiGate
}

// webUIOptions configures the Web UI startWebUI serves.
type webUIOptions struct {
	port int
	// frontend is the Temporal frontend's address, namespace the one the
	// UI opens on.
	frontend, namespace string
	tls                 uiconfig.TLS
	// credential is the Temporal credential: the UI's server presents it
	// on each of its calls, and its login form takes it.
	credential string
	// credentialFile is where credential is kept, to tell a person.
	credentialFile string
	// apiToken is nid's API token, which the login form takes too; empty
	// where the process serves no API (nid server).
	apiToken     string
	writeActions bool
}

// startWebUI serves the Web UI for the frontend at opts.frontend on
// 127.0.0.1:opts.port, presenting the credential on each of its calls
// there. It lets on only a browser logged in (see uiGate). Unless
// opts.writeActions, it refuses every request that would change a
// workflow (signal, terminate, cancel, reset, start), so that what reaches
// the UI can only read. It answers only requests addressed to a loopback
// name (see loopbackOnly).
//
// The UI server's own NewServer builds the same routes but keeps its
// handler to itself and ends the process when its port is taken; building
// them here lets nid wrap the handler and report a taken port as an error.
// Keep it in step with uiserver.NewServer when upgrading ui-server.
func startWebUI(opts webUIOptions, logger *slog.Logger) (*webUI, error) {
	port := opts.port
	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("temporal.ui.port: cannot listen on %s:%d (is another nid up or Temporal server running?): %w", host, port, err)
	}
	cfg, err := uiconfig.NewConfigProviderWithRefresh(&uiconfig.Config{
		Host:                host,
		Port:                port,
		TemporalGRPCAddress: opts.frontend,
		TLS:                 opts.tls,
		EnableUI:            true,
		DefaultNamespace:    opts.namespace,
		// The UI is plain HTTP on loopback; a Secure cookie would never
		// come back.
		CORS:                uiconfig.CORS{CookieInsecure: true},
		HideLogs:            true,
		DisableNewsFetch:    true,
		DisableWriteActions: !opts.writeActions,
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("web UI: %w", err), ln.Close())
	}
	e, err := uiRoutes(cfg, opts.credential)
	if err != nil {
		cfg.Close()
		return nil, errors.Join(fmt.Errorf("web UI: %w", err), ln.Close())
	}
	gate := &uiGate{
		logins:         worker.NewLogins(uiCookie, nil),
		tokens:         []string{opts.credential, opts.apiToken},
		credentialFile: opts.credentialFile,
		next:           e,
	}
	w := &webUI{
		http: &http.Server{Handler: loopbackOnly(port, gate), ReadHeaderTimeout: 10 * time.Second},
		cfg:  cfg,
		gate: gate,
	}
	go func() {
		if err := w.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("Temporal Web UI stopped", "error", err)
		}
	}()
	return w, nil
}

// uiRoutes is uiserver.NewServer's echo instance, less its request log,
// with the credential token on every call to the frontend.
func uiRoutes(cfg *uiconfig.ConfigProviderWithRefresh, token string) (*echo.Echo, error) {
	c, err := cfg.GetConfig()
	if err != nil {
		return nil, err
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.Use(middleware.Recover())
	e.Use(middleware.Gzip())
	e.Use(cors.CORSMiddleware(cors.CORSConfig{
		AllowHeaders: []string{
			echo.HeaderOrigin, echo.HeaderContentType, echo.HeaderAccept,
			echo.HeaderXCSRFToken, echo.HeaderAuthorization, auth.AuthorizationExtrasHeader,
			"Caller-Type",
		},
		AllowCredentials: true,
		ConfigProvider:   cfg,
	}))
	e.Use(middleware.Secure())
	e.Use(csrf.EnsureTokenCookie(!c.CORS.CookieInsecure))
	e.Use(middleware.CSRFWithConfig(csrf.MiddlewareConfig(cfg, !c.CORS.CookieInsecure)))
	e.Pre(route.PublicPath(c.PublicPath))
	route.SetHealthRoute(e)
	forward := headers.WithForwardHeaders([]string{auth.AuthorizationExtrasHeader, "Caller-Type"})
	if err := route.SetAPIRoutes(e, cfg, []api.Middleware{forward, presentToken(token)}); err != nil {
		return nil, err
	}
	route.SetAuthRoutes(e, cfg)
	assets, err := ui.Assets()
	if err != nil {
		return nil, err
	}
	if assets, err = fs.Sub(assets, "local"); err != nil {
		return nil, err
	}
	route.SetUIRoutes(e, c.PublicPath, assets, cfg)
	route.SetRenderRoute(e, "/")
	return e, nil
}

// presentToken sends the credential as the authorization of every call the
// UI server makes for the page. The UI server's configuration has no key
// for a fixed credential (its auth settings are for an OIDC login), but
// its API middleware adds gRPC metadata. Whatever Authorization header the
// browser sent is dropped first: grpc-gateway would forward it too, and the
// frontend reads the first value.
func presentToken(token string) api.Middleware {
	return func(c echo.Context) runtime.ServeMuxOption {
		c.Request().Header.Del(echo.HeaderAuthorization)
		return runtime.WithMetadata(func(context.Context, *http.Request) metadata.MD {
			return metadata.Pairs("authorization", "Bearer "+token)
		})
	}
}

// loopbackOnly answers only requests whose Host names this machine's
// loopback on port. A web page the user visits can point a name it owns
// at 127.0.0.1 (DNS rebinding) and then reach the UI as the same origin,
// cookies and all; its requests still carry that name as their Host.
func loopbackOnly(port int, next http.Handler) http.Handler {
	p := strconv.Itoa(port)
	allowed := map[string]bool{}
	for _, h := range []string{"localhost", "127.0.0.1", "::1"} {
		allowed[net.JoinHostPort(h, p)] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !allowed[r.Host] {
			http.Error(w, fmt.Sprintf("nid's Temporal Web UI answers only at localhost:%s, 127.0.0.1:%s or [::1]:%s, not %q", p, p, p, r.Host),
				http.StatusMisdirectedRequest)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Stop closes the UI's connections and stops reloading its config.
func (w *webUI) Stop() {
	_ = w.http.Close()
	w.cfg.Close()
}
