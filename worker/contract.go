package worker

import (
	"context"
	"log/slog"

	enumspb "go.temporal.io/api/enums/v1"
)

// EmbeddedOptions configures the in-process Temporal server nid up starts.
type EmbeddedOptions struct {
	// StateDir holds the SQLite file (temporal.db).
	StateDir  string
	Namespace string
	// Port is the frontend gRPC port on 127.0.0.1; UIPort the Web UI's (0:
	// no Web UI).
	Port   int
	UIPort int
	// UIWriteActions lets the Web UI signal, terminate, cancel, reset and
	// start workflows; without it the UI only reads.
	UIWriteActions bool
	// APIToken is nid's API token, which the Web UI's login form takes
	// besides the Temporal credential; empty, it takes the credential only.
	APIToken string
	// SearchAttributes are registered on the namespace.
	SearchAttributes map[string]enumspb.IndexedValueType
	Logger           *slog.Logger
}

// EmbeddedServer is a running in-process Temporal server.
type EmbeddedServer interface {
	// FrontendAddress is host:port of the gRPC frontend.
	FrontendAddress() string
	// UIAddress is the Web UI's URL.
	UIAddress() string
	// UILoginLink is a one-time login link to the Web UI (a URL good for
	// one use within LoginLinkTTL), empty when there is no Web UI.
	UILoginLink() string
	// Stop shuts the server and the UI down.
	Stop() error
}

// StartEmbedded starts an embedded server. Only cmd/nid provides one, so that
// nothing else links the Temporal server.
type StartEmbedded func(ctx context.Context, opts EmbeddedOptions) (EmbeddedServer, error)
