// Package embedded runs a Temporal server and its Web UI inside the nid
// process, persisted in one SQLite file, so that `nid up` needs nothing else
// installed. Start follows the recipe of the Temporal CLI's dev server.
// Unlike the dev server, its frontend refuses every client without the
// credential nid keeps in the state directory (see auth.go).
//
// This package and cmd/nid are the only ones that link the Temporal server;
// everything else reaches Start through worker.StartEmbedded, so that its
// tests build in seconds.
package embedded

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	sdkclient "go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/log/tag"
	"go.temporal.io/server/common/membership/static"
	"go.temporal.io/server/common/metrics"
	"go.temporal.io/server/common/persistence/sql"
	"go.temporal.io/server/common/persistence/sql/sqlplugin"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/common/primitives"
	"go.temporal.io/server/common/resolver"
	sqliteschema "go.temporal.io/server/schema/sqlite"
	"go.temporal.io/server/temporal"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"

	nidconfig "github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/internal/freeport"
	"github.com/nid-dev/nid/statedir"
	"github.com/nid-dev/nid/worker"
)

const (
	host        = "127.0.0.1"
	clusterName = "active"
	// Retention is how long closed workflows stay visible. A session's runs
	// close at every continue-as-new and its rotations are child workflows;
	// sessions live for weeks, so their history must outlast the server's 24 h
	// default to stay inspectable in the Web UI.
	Retention = 30 * 24 * time.Hour
	// readyTimeout bounds the wait for a fresh server to answer; a cold start
	// on a slow disk takes a few seconds.
	readyTimeout = time.Minute
)

var _ worker.StartEmbedded = Start

// Server is a running embedded Temporal server and, optionally, its Web UI.
type Server struct {
	frontend string
	uiURL    string
	server   temporal.Server
	ui       *webUI
	tls      *frontendTLS
	// token is the credential the frontend requires (see auth.go).
	token string
	// internal are the other services' gRPC addresses, which take only
	// the internode certificate.
	internal []string
	stop     sync.Once
	stopErr  error
}

// frontendTLS serves the frontend over mutual TLS, as a cluster may; nid's
// tests of TLS clusters start the server so. The server's own clients of
// that frontend (the Web UI, the readiness check) present its certificate.
type frontendTLS struct {
	certFile, keyFile string
	// caFile signs the server's certificate and the client certificates
	// it requires.
	caFile string
	// serverName is a name the server's certificate carries.
	serverName string
}

// Start starts the server on 127.0.0.1:opts.Port with its state in
// opts.StateDir/temporal.db; the frontend refuses every request without
// the credential in opts.StateDir/temporal-token, made on the first start
// (worker.MakeTemporalToken). It starts the Web UI on opts.UIPort unless it
// is 0: read-only unless opts.UIWriteActions, only for requests addressed
// to a loopback name, and only to a browser logged in with a link
// (UILoginLink), the credential or opts.APIToken. It returns once the
// frontend answers and opts.Namespace has every search attribute in
// opts.SearchAttributes; ctx bounds only that wait.
func Start(ctx context.Context, opts worker.EmbeddedOptions) (worker.EmbeddedServer, error) {
	return start(ctx, opts, nil)
}

func start(ctx context.Context, opts worker.EmbeddedOptions, ftls *frontendTLS) (worker.EmbeddedServer, error) {
	if err := checkPortFree(opts.Port, "temporal.port"); err != nil {
		return nil, err
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	sqlConf, err := prepareDB(opts)
	if err != nil {
		return nil, err
	}
	token, err := worker.MakeTemporalToken(opts.StateDir)
	if err != nil {
		return nil, err
	}
	conf, err := serverConfig(opts.Port, sqlConf)
	if err != nil {
		return nil, err
	}
	if conf.Global.TLS.Internode, err = internodeTLS(); err != nil {
		return nil, fmt.Errorf("internode TLS: %w", err)
	}
	if ftls != nil {
		conf.Global.TLS.Frontend.Server = config.ServerTLS{
			CertFile: ftls.certFile, KeyFile: ftls.keyFile,
			ClientCAFiles: []string{ftls.caFile}, RequireClientAuth: true,
		}
	}
	hosts := map[primitives.ServiceName]static.Hosts{}
	var internal []string
	for name, svc := range conf.Services {
		addr := net.JoinHostPort(host, strconv.Itoa(svc.RPC.GRPCPort))
		hosts[primitives.ServiceName(name)] = static.SingleLocalHost(addr)
		if name != string(primitives.FrontendService) {
			internal = append(internal, addr)
		}
	}
	srv, err := temporal.NewServer(
		temporal.WithConfig(conf),
		temporal.ForServices(services()),
		temporal.WithStaticHosts(hosts),
		// After WithConfig: WithClaimMapper hands the mapper the config.
		temporal.WithClaimMapper(func(*config.Config) authorization.ClaimMapper { return newTokenClaims(token) }),
		temporal.WithAuthorizer(authorization.NewDefaultAuthorizer()),
		temporal.WithLogger(errorLogger{log: logger.With("component", "temporal")}),
		temporal.WithDynamicConfigClient(dynamicConfig()),
	)
	if err != nil {
		return nil, fmt.Errorf("configure temporal server: %w", err)
	}
	if err := srv.Start(); err != nil {
		return nil, fmt.Errorf("start temporal server: %w", err)
	}
	s := &Server{frontend: net.JoinHostPort(host, strconv.Itoa(opts.Port)), server: srv, tls: ftls, token: token, internal: internal}
	if opts.UIPort != 0 {
		var uiTLS uiconfig.TLS
		if ftls != nil {
			uiTLS = uiconfig.TLS{CaFile: ftls.caFile, CertFile: ftls.certFile, KeyFile: ftls.keyFile,
				ServerName: ftls.serverName, EnableHostVerification: true}
		}
		s.ui, err = startWebUI(webUIOptions{
			port: opts.UIPort, frontend: s.frontend, namespace: opts.Namespace, tls: uiTLS,
			credential: token, credentialFile: worker.TemporalTokenPath(opts.StateDir), apiToken: opts.APIToken,
			writeActions: opts.UIWriteActions,
		}, logger)
		if err != nil {
			return nil, errors.Join(err, s.Stop())
		}
		s.uiURL = "http://" + net.JoinHostPort(host, strconv.Itoa(opts.UIPort))
	}
	if err := s.waitReady(ctx, opts); err != nil {
		return nil, errors.Join(err, s.Stop())
	}
	return s, nil
}

// FrontendAddress is host:port of the gRPC frontend.
func (s *Server) FrontendAddress() string { return s.frontend }

// UIAddress is the Web UI's URL, empty when the UI was not started.
func (s *Server) UIAddress() string { return s.uiURL }

// UILoginLink is a one-time login link to the Web UI: opened within
// worker.LoginLinkTTL, once, it logs the browser in. It is empty when the
// UI was not started.
func (s *Server) UILoginLink() string {
	if s.ui == nil {
		return ""
	}
	return s.uiURL + s.ui.gate.loginLink()
}

// Stop shuts the Web UI down, then the server. Calling it again does nothing.
func (s *Server) Stop() error {
	s.stop.Do(func() {
		if s.ui != nil {
			s.ui.Stop()
		}
		s.stopErr = s.server.Stop()
	})
	return s.stopErr
}

// prepareDB creates the state directory and, on first start, the schema and
// the namespace, and returns the persistence config pointing at the file.
func prepareDB(opts worker.EmbeddedOptions) (*config.SQL, error) {
	dir, err := filepath.Abs(opts.StateDir)
	if err != nil {
		return nil, fmt.Errorf("state directory %s: %w", opts.StateDir, err)
	}
	if err := statedir.Prepare(dir); err != nil {
		return nil, err
	}
	file := filepath.Join(dir, "temporal.db")
	// SQLite creates a database readable by all, and its WAL and shared
	// memory files with the database's mode: an empty file made first is
	// a new database, and private.
	f, err := os.OpenFile(file, os.O_CREATE|os.O_RDONLY, statedir.FileMode)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", file, err)
	}
	_ = f.Close()
	conf := sqliteConfig(file)
	if err := setupSchemaOnce(conf); err != nil {
		return nil, err
	}
	if err := dropUnusedVisibilityIndexes(file); err != nil {
		return nil, fmt.Errorf("visibility indexes in %s: %w", file, err)
	}
	// Creating the namespace in the database before the server starts, as the
	// dev server does, makes it usable at once rather than after the
	// namespace cache's next refresh. An existing namespace is left as it is.
	ns, err := sqliteschema.NewNamespaceConfig(clusterName, opts.Namespace, false, opts.SearchAttributes)
	if err != nil {
		return nil, fmt.Errorf("namespace %s: %w", opts.Namespace, err)
	}
	ns.Detail.Config.Retention = durationpb.New(Retention)
	if err := sqliteschema.CreateNamespaces(conf, ns); err != nil {
		return nil, fmt.Errorf("create namespace %s: %w", opts.Namespace, err)
	}
	return conf, nil
}

// sqliteConfig is the server's persistence config for the SQLite file.
func sqliteConfig(file string) *config.SQL {
	return &config.SQL{
		PluginName:   sqliteplugin.PluginName,
		DatabaseName: file,
		// WAL with synchronous=NORMAL survives SIGKILL (only a power loss can
		// drop the last commits) and runs about three times faster than the
		// default rollback journal. One connection: SQLite has one writer.
		ConnectAttributes: map[string]string{"mode": "rwc", "journal_mode": "wal", "synchronous": "normal"},
		MaxConns:          1,
		MaxIdleConns:      1,
	}
}

// setupSchemaOnce creates the server's schema in a database that has no
// tables yet (setupSchema), and leaves one that has them as it is.
func setupSchemaOnce(conf *config.SQL) error {
	db, err := sql.NewSQLAdminDB(sqlplugin.DbKindUnknown, conf, resolver.NewNoopResolver(), log.NewNoopLogger(), metrics.NoopMetricsHandler)
	if err != nil {
		return fmt.Errorf("open %s: %w", conf.DatabaseName, err)
	}
	defer func() { _ = db.Close() }()
	tables, err := db.ListTables(conf.DatabaseName)
	if err != nil {
		return fmt.Errorf("read %s: %w", conf.DatabaseName, err)
	}
	if len(tables) > 0 {
		return nil
	}
	if err := setupSchema(db); err != nil {
		return fmt.Errorf("set up schema in %s: %w", conf.DatabaseName, err)
	}
	return nil
}

// setupSchema creates every table in one transaction, so that a kill during
// the first start leaves an empty file to set up again rather than half a
// schema. A transaction over plain Exec calls holds because the pool has
// exactly one connection.
func setupSchema(db sqlplugin.AdminDB) error {
	if err := db.Exec("BEGIN"); err != nil {
		return err
	}
	if err := sqliteschema.SetupSchemaOnDB(db); err != nil {
		return errors.Join(err, db.Exec("ROLLBACK"))
	}
	return db.Exec("COMMIT")
}

func serverConfig(port int, sqlConf *config.SQL) (*config.Config, error) {
	var conf config.Config
	conf.Global.Membership.MaxJoinDuration = 30 * time.Second
	conf.Global.Membership.BroadcastAddress = host
	conf.Persistence.DefaultStore = "sqlite"
	conf.Persistence.VisibilityStore = "sqlite"
	conf.Persistence.NumHistoryShards = 1
	conf.Persistence.DataStores = map[string]config.DataStore{"sqlite": {SQL: sqlConf}}
	frontend := net.JoinHostPort(host, strconv.Itoa(port))
	conf.ClusterMetadata = &cluster.Config{
		FailoverVersionIncrement: 10,
		MasterClusterName:        clusterName,
		CurrentClusterName:       clusterName,
		ClusterInformation: map[string]cluster.ClusterInformation{clusterName: {
			Enabled:                true,
			InitialFailoverVersion: 1,
			RPCAddress:             frontend,
			// Used on first start only: from then on the id stored in the
			// database wins, so the cluster keeps it across restarts.
			ClusterID: uuid.NewString(),
		}},
	}
	conf.DCRedirectionPolicy.Policy = "noop"
	conf.Services = map[string]config.Service{}
	for _, name := range services() {
		svcPort := port
		if name != string(primitives.FrontendService) {
			p, err := freeport.Find()
			if err != nil {
				return nil, err
			}
			svcPort = p
		}
		conf.Services[name] = config.Service{RPC: config.RPC{GRPCPort: svcPort, BindOnIP: host}}
	}
	conf.Archival.History.State = "disabled"
	conf.Archival.Visibility.State = "disabled"
	conf.NamespaceDefaults.Archival.History.State = "disabled"
	conf.NamespaceDefaults.Archival.Visibility.State = "disabled"
	// No PublicClient: with an internal frontend configured, the server's
	// own clients (its system worker, history's calls) go to that one.
	return &conf, nil
}

// services are the server's services: the default ones and an internal
// frontend, which serves the server's own calls (see auth.go).
func services() []string {
	return append(slices.Clone(temporal.DefaultServices), string(primitives.InternalFrontendService))
}

// maxInFlightUpdates is how many updates one workflow may have in flight:
// as many as a group of a thousand sessions sends, each session one at a
// time. The server's limit on their payloads in flight (20 MB) still
// bounds the memory they take.
const maxInFlightUpdates = 1000

func dynamicConfig() dynamicconfig.StaticClient {
	return dynamicconfig.StaticClient{
		// The server's default host cache holds 128k workflows; one machine's
		// sessions need far fewer, and the memory is the user's.
		dynamicconfig.HistoryCacheHostLevelMaxSize.Key(): 8096,
		// nid ls, nid watch and the dashboard all list through visibility;
		// the default of 10 per second would throttle them.
		dynamicconfig.FrontendMaxNamespaceVisibilityRPSPerInstance.Key(): 100,
		// A thousand sessions starting at once, and the pollers the SDK
		// adds for them, pass the frontend's default 2,400 calls a second
		// and matching's 1,200: the server then refuses polls, and logs
		// each refusal as an error in the user's terminal, to protect a
		// cluster this machine does not have.
		dynamicconfig.FrontendRPS.Key():                        10_000,
		dynamicconfig.FrontendMaxNamespaceRPSPerInstance.Key(): 10_000,
		dynamicconfig.MatchingRPS.Key():                        10_000,
		// Every turn of every session goes through the shard's transfer
		// queue; its reader's default of 20 polls a second adds up to 50 ms
		// before each workflow and activity task is dispatched. One host's
		// SQLite file has no cluster to protect from that load.
		dynamicconfig.TransferProcessorMaxPollRPS.Key():   1000,
		dynamicconfig.VisibilityProcessorMaxPollRPS.Key(): 1000,
		// On, the history service walks every new event's payloads for
		// references to an external store after each update, to count
		// them; nid never stores payloads outside history, and the walk
		// was a thirtieth of the server's work a turn.
		dynamicconfig.ExternalPayloadsEnabled.Key(): false,
		// nid ls lists every session; past the default page of 1,000 it
		// took a second query, and the list is one host's sessions.
		dynamicconfig.FrontendVisibilityMaxPageSize.Key(): 10_000,
		// nid's shared workflows take an update from every session of a
		// group (locks, tasks, reservations) and from every host (beats,
		// placements). Past the default of 10 in flight a workflow's
		// updates are refused, and their clients back off and try again
		// for seconds: the registry, placing 200 sessions a second, did
		// 10 a second, and a hundred nid ups placing at once took 3 to 10
		// s (docs/scale.md).
		dynamicconfig.WorkflowExecutionMaxInFlightUpdates.Key(): maxInFlightUpdates,
	}
}

// waitReady polls until the frontend answers and every search attribute
// resolves in a visibility query, adding any that a newer nid introduced
// since the namespace was created.
func (s *Server) waitReady(ctx context.Context, opts worker.EmbeddedOptions) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	tlsConf, err := s.tls.client()
	if err != nil {
		return err
	}
	var c sdkclient.Client
	err = retry(ctx, func() (err error) {
		c, err = sdkclient.DialContext(ctx, sdkclient.Options{
			HostPort:          s.frontend,
			Namespace:         opts.Namespace,
			Logger:            sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)),
			Credentials:       sdkclient.NewAPIKeyStaticCredentials(s.token),
			ConnectionOptions: sdkclient.ConnectionOptions{TLS: tlsConf, TLSDisabled: tlsConf == nil},
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("temporal server at %s did not answer: %w", s.frontend, err)
	}
	defer c.Close()
	if err := retry(ctx, func() error { return searchAttributesReady(ctx, c, opts) }); err != nil {
		return fmt.Errorf("namespace %s not ready: %w", opts.Namespace, err)
	}
	return nil
}

// client is the TLS configuration of the server's own clients, as nid
// would dial it; nil for a plain frontend.
func (t *frontendTLS) client() (*tls.Config, error) {
	if t == nil {
		return nil, nil
	}
	return nidconfig.Temporal{TLS: nidconfig.TLS{CAFile: t.caFile, CertFile: t.certFile, KeyFile: t.keyFile, ServerName: t.serverName}}.ClientTLS()
}

func searchAttributesReady(ctx context.Context, c sdkclient.Client, opts worker.EmbeddedOptions) error {
	list, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: opts.Namespace})
	if err != nil {
		return err
	}
	missing := map[string]enumspb.IndexedValueType{}
	var probe []string
	for name, typ := range opts.SearchAttributes {
		if _, ok := list.GetCustomAttributes()[name]; !ok {
			missing[name] = typ
		}
		probe = append(probe, name+" IS NULL")
	}
	if len(missing) > 0 {
		_, err := c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
			Namespace: opts.Namespace, SearchAttributes: missing,
		})
		if err != nil {
			return fmt.Errorf("add search attributes: %w", err)
		}
	}
	// The server resolves names through its namespace cache, which sees new
	// attributes only at its next refresh; a query naming them all tells.
	_, err = c.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{
		Namespace: opts.Namespace, Query: strings.Join(probe, " OR "),
	})
	return err
}

// retry calls try every 100 ms until it succeeds or ctx ends, and then
// returns its last error.
func retry(ctx context.Context, try func() error) error {
	for {
		err := try()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func checkPortFree(port int, key string) error {
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s: cannot listen on %s (is another nid up or Temporal server running?): %w", key, addr, err)
	}
	return l.Close()
}

// errorLogger passes the server's errors to slog and drops the rest: the
// server logs several lines a second at info level even when idle. With
// keeps its tags as they are until a line is written: the server derives a
// logger for every request and task, and formatting their tags at once
// (slog.Logger.With does) was a twentieth of its CPU for lines it never
// writes.
type errorLogger struct {
	log  *slog.Logger
	tags []tag.Tag
}

func (l errorLogger) Debug(string, ...tag.Tag)           {}
func (l errorLogger) Info(string, ...tag.Tag)            {}
func (l errorLogger) Warn(string, ...tag.Tag)            {}
func (l errorLogger) Error(msg string, tags ...tag.Tag)  { l.emit(msg, tags) }
func (l errorLogger) DPanic(msg string, tags ...tag.Tag) { l.emit(msg, tags) }
func (l errorLogger) Panic(msg string, tags ...tag.Tag)  { l.emit(msg, tags) }
func (l errorLogger) Fatal(msg string, tags ...tag.Tag)  { l.fatal(msg, tags) }
func (l errorLogger) With(tags ...tag.Tag) log.Logger {
	return errorLogger{log: l.log, tags: l.and(tags)}
}

// and is the logger's tags followed by a line's own, in a new slice: two
// loggers derived from one must not write into each other's tags.
func (l errorLogger) and(tags []tag.Tag) []tag.Tag {
	return append(l.tags[:len(l.tags):len(l.tags)], tags...)
}

func (l errorLogger) emit(msg string, tags []tag.Tag) {
	tags = l.and(tags)
	if notAFault(msg, tags) {
		return
	}
	l.log.Error(msg, attrs(tags)...)
}

// notAFault tells the server's error lines that report no fault of its own.
func notAFault(msg string, tags []tag.Tag) bool {
	for _, t := range tags {
		switch {
		// Every time a worker stops, the server logs its abandoned long
		// polls as errors. It flattens the cause into the message, so only
		// the text tells a caller going away from a fault.
		case t.Key() == "error" && strings.Contains(fmt.Sprint(t.Value()), context.Canceled.Error()):
			return true
		// The server means to leave "busy, try again" answers to the caller
		// (nid sends a placement again when the hosts registry was
		// continuing as new), but its check misses them when they come
		// wrapped in an update-with-start's answer, so a fleet's first
		// start printed errors for work that then went through.
		case msg == "service failures" && t.Key() == "grpc_code" && fmt.Sprint(t.Value()) == codes.ResourceExhausted.String():
			return true
		}
	}
	return false
}

// fatal stops the process as the server expects of its logger: it goes on
// after a fatal error, and crashes on what it could not set up (a port it
// could not bind gives a nil listener) with a message that hides the cause.
func (l errorLogger) fatal(msg string, tags []tag.Tag) {
	tags = l.and(tags)
	l.log.Error(msg, attrs(tags)...)
	fmt.Fprintf(os.Stderr, "temporal server: %s %v\n", msg, attrs(tags))
	os.Exit(1)
}

func attrs(tags []tag.Tag) []any {
	out := make([]any, len(tags))
	for i, t := range tags {
		out[i] = slog.Any(t.Key(), t.Value())
	}
	return out
}
