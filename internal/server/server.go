// Package server wires the whole service: store, authentication, the Online
// API, the Access API, the terminal gateway's listener and the ops listener.
// A test starts it on port 0 exactly as the binary does.
package server

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/api"
	"github.com/instore-dev/instore/internal/accessapi"
	"github.com/instore-dev/instore/internal/auth"
	"github.com/instore-dev/instore/internal/cluster"
	"github.com/instore-dev/instore/internal/service"
	"github.com/instore-dev/instore/internal/wallclock"
	"github.com/instore-dev/instore/internal/webhook"

	"github.com/instore-dev/instore/internal/gateway"
	"github.com/instore-dev/instore/internal/httpapi"
	"github.com/instore-dev/instore/internal/ids"
	"github.com/instore-dev/instore/internal/metrics"
	"github.com/instore-dev/instore/internal/onlineapi"
	"github.com/instore-dev/instore/internal/protocol"
	"github.com/instore-dev/instore/internal/sandbox"
	"github.com/instore-dev/instore/internal/sim"
	"github.com/instore-dev/instore/internal/sqlstore"
	"github.com/instore-dev/instore/internal/tlsfiles"
)

// Config is the service's configuration after flags and environment.
type Config struct {
	ListenOnline   string
	ListenAccess   string
	ListenTerminal string
	ListenOps      string

	// DataDir holds the SQLite database (instore.db) when DatabaseURL is empty.
	DataDir string
	// DatabaseURL selects PostgreSQL (postgres://...).
	DatabaseURL string
	// DatabaseMaxConns bounds this node's PostgreSQL connections
	// (sqlstore.Options.MaxConns; 0: sqlstore.DefaultMaxConns).
	DatabaseMaxConns  int
	SQLiteSynchronous string

	// TokenSigningKey signs access tokens; empty: generated once, kept in the store.
	TokenSigningKey []byte
	TokenTTL        time.Duration
	AuthCacheTTL    time.Duration

	// PaymentMethods replaces the default paymentMethods list when set.
	PaymentMethods []instore.Code

	// RateLimit is requests per second per API client (0: off).
	RateLimit float64
	RateBurst int
	// StreamsPerClient and StreamsPerNode bound the event streams open at
	// once per API client and on the node; StreamWriteTimeout how long a
	// write to a stream may wait for its client (onlineapi defaults when
	// 0).
	StreamsPerClient, StreamsPerNode int
	StreamWriteTimeout               time.Duration

	// ShutdownTimeout is how long requests in flight get to finish at
	// Close; 0: DefaultShutdownTimeout (an operation's longest wait for its
	// terminal plus WaitMargin). Status requests and console streams that
	// wait are answered at once at Close (drainer): it need not cover them.
	ShutdownTimeout time.Duration
	Logger          *slog.Logger
	// AccessLogger writes the access log (one line per HTTP request);
	// nil: Logger. The binary gives it a buffered output (--access-log-flush).
	AccessLogger *slog.Logger
	// Version and Commit label instore_build_info (empty: "unknown").
	Version, Commit string

	// AckTimeout is how long a purchase waits for the terminal's ack (WP25).
	AckTimeout time.Duration
	// TransactionDeadline is how long a transaction may stay PENDING after
	// the ack (WP36).
	TransactionDeadline time.Duration
	// PrintTimeout bounds a print job (TIMEOUT).
	PrintTimeout time.Duration
	// CaptureTolerance is how far past its authorised amount a
	// pre-authorisation's capture may go (0: 0.20; negative: none).
	CaptureTolerance float64
	// PreAuthValidity is how long an approved pre-authorisation stays
	// OPEN before the service voids it (0: 7 days).
	PreAuthValidity time.Duration
	// IdempotencyWait bounds how long a retry with an Idempotency-Key waits
	// for the first request with its key (default
	// httpapi.DefaultIdempotencyWait).
	IdempotencyWait time.Duration
	// IdempotencySweep is how often the Idempotency-Key records older than
	// httpapi.IdempotencyTTL are deleted (default
	// DefaultIdempotencySweep).
	IdempotencySweep time.Duration
	// WriteTimeout is the HTTP listeners' write time-out (default 90 s). The
	// Online API's is raised to LongestRequest plus WaitMargin when that is
	// longer, so that no answer a request waits for is cut by it; tests set
	// a short one to prove it.
	WriteTimeout time.Duration

	// Sandbox runs virtual terminals in-process and the sandbox control API.
	// It also lets webhook endpoints be http:// URLs on private addresses.
	Sandbox bool
	// WebhookAllowPrivate lets webhook deliveries reach loopback,
	// link-local and private addresses (on in sandbox mode).
	WebhookAllowPrivate bool
	// SimDelay is how long a built-in virtual terminal "reads a card".
	SimDelay time.Duration
	// PingInterval and PongTimeout tune the gateway's liveness check
	// (defaults 15 s and 10 s).
	PingInterval, PongTimeout time.Duration
	// Clock is the process's one clock (default the wall clock): the
	// time of day of every component (the Service's stamps and listing
	// windows, the tokens' expiry, the webhook deliveries, the sweeps'
	// retention bounds) and the service's time-outs, waits and sweeps;
	// tests drive a fake one (internal/clocktest).
	Clock instore.Clock
	// UpdateSweep is how often the software update sweep runs (default
	// service.DefaultUpdateSweep); InstallTimeout how long an update may
	// stay DOWNLOADING without a report (default
	// service.DefaultInstallTimeout).
	UpdateSweep, InstallTimeout time.Duration
	// InteractiveFirst starts the first virtual terminal in interactive
	// mode: it waits for a person in the console (demo --interactive).
	InteractiveFirst bool
	// SandboxDialGate, when set, is called before every dial of a
	// built-in virtual terminal; an error fails that dial (the terminal
	// retries after its back-off). Tests hold the terminals' connection
	// back with it; nil: they dial at once.
	SandboxDialGate func(ctx context.Context) error
	// Pprof serves net/http/pprof under /debug/pprof/ on the ops listener
	// (serve --pprof; off by default).
	Pprof bool
	// TLS, when set, serves the Online API, the Access API and the
	// gateway (wss://) over TLS with its current certificate (serve
	// --tls-cert, --tls-key); the ops listener stays plain HTTP.
	TLS *tlsfiles.Holder
	// NodeID names this node in a cluster on PostgreSQL (default: random
	// at each start); ClusterHeartbeat, ClusterDead and ClusterRescan tune
	// it (internal/cluster defaults when 0). SQLite has no cluster.
	NodeID                                       string
	ClusterHeartbeat, ClusterDead, ClusterRescan time.Duration
}

// Server is the running service.
type Server struct {
	cfg      Config
	Store    instore.Store
	Auth     *auth.Authenticator
	Metadata *instore.Metadata
	Registry *prometheus.Registry
	Service  *service.Service
	Gateway  *gateway.Server
	// Node is this process's membership of the cluster of nodes sharing
	// the PostgreSQL database; nil on SQLite.
	Node *cluster.Node
	// Webhooks sends the events to the merchants' webhook endpoints.
	Webhooks *webhook.Dispatcher
	// Fleet holds the in-process virtual terminals (sandbox mode).
	Fleet  *sim.Fleet
	logger *slog.Logger

	sandboxDevices []sandbox.Device
	fleetCancel    context.CancelFunc
	// updatesCancel stops the software update sweep (Access API).
	updatesCancel context.CancelFunc
	// expiryCancel stops the sweep of expired idempotency records.
	expiryCancel context.CancelFunc
	// drain is cancelled at Close: the waits of status requests and
	// console streams end, and they answer what they have.
	drain       context.Context
	drainCancel context.CancelFunc
	// opsServer is the ops listener's server, shut down last.
	opsServer    *http.Server
	consoleCreds atomic.Pointer[sandbox.Credentials]

	handlers  map[string]http.Handler
	servers   []*http.Server
	listeners map[string]net.Listener
	wg        sync.WaitGroup
	errc      chan error
	closeOnce sync.Once
}

// DatabaseFile is the SQLite file name inside the data directory.
const DatabaseFile = "instore.db"

// OpenStore opens the configured store: PostgreSQL when DatabaseURL is set,
// SQLite in DataDir otherwise.
func OpenStore(ctx context.Context, cfg Config) (*sqlstore.DB, error) {
	dsn := cfg.DatabaseURL
	if dsn == "" {
		if cfg.DataDir == "" {
			return nil, errors.New("no store configured: set --data DIR (SQLite) or --database-url postgres://...")
		}
		if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
			return nil, fmt.Errorf("data directory: %w", err)
		}
		dsn = filepath.Join(cfg.DataDir, DatabaseFile)
	}
	return sqlstore.Open(ctx, dsn, sqlstore.Options{Synchronous: cfg.SQLiteSynchronous, MaxConns: cfg.DatabaseMaxConns})
}

// New opens the store and builds the service; Start begins serving.
func New(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	st, err := OpenStore(ctx, cfg)
	if err != nil {
		return nil, err
	}
	s, err := NewWithStore(ctx, cfg, st)
	if err != nil {
		st.Close()
		return nil, err
	}
	return s, nil
}

// NewWithStore builds the service on an open store, which it then owns.
func NewWithStore(ctx context.Context, cfg Config, st instore.Store) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = wallclock.Clock{}
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = cfg.DefaultShutdownTimeout()
	}
	meta := instore.DefaultMetadata()
	if cfg.PaymentMethods != nil {
		meta.PaymentMethods = cfg.PaymentMethods
	}
	key, err := auth.LoadSigningKey(ctx, st, cfg.TokenSigningKey)
	if err != nil {
		return nil, err
	}
	authn, err := auth.New(auth.Config{Store: st, SigningKey: key, TokenTTL: cfg.TokenTTL, CacheTTL: cfg.AuthCacheTTL, Clock: cfg.Clock})
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics.RegisterBuildInfo(reg, cfg.Version, cfg.Commit, runtime.Version())
	if p, ok := st.(interface{ Pools() map[string]*sql.DB }); ok {
		metrics.RegisterDB(reg, p.Pools())
	}
	if c, ok := st.(interface{ Commits() (int64, int64) }); ok {
		metrics.RegisterCommits(reg, c.Commits)
	}
	if p, ok := st.(interface {
		Pipelined() (int64, int64, int64)
		ReadsGrouped() (int64, int64)
	}); ok {
		metrics.RegisterPipelined(reg, p.Pipelined, p.ReadsGrouped)
	}
	if f, ok := st.(interface{ ToldFlushes() (int64, int64) }); ok {
		metrics.RegisterToldFlushes(reg, f.ToldFlushes)
	}
	svc := &service.Service{
		Store: st, Metadata: &meta, Logger: cfg.Logger, Clock: cfg.Clock,
		NewRef:     func() string { return ids.New("txn") },
		NewPrintID: func() string { return ids.New("prt") },
		AckTimeout: cfg.AckTimeout, Deadline: cfg.TransactionDeadline, PrintTimeout: cfg.PrintTimeout,
		CaptureTolerance: cfg.CaptureTolerance, PreAuthValidity: cfg.PreAuthValidity,
		Observer: metrics.NewTransactions(reg),
		// Each event is encoded once as the stream's server-sent message.
		EncodeEvent: onlineapi.EncodeStreamMessage,
		// Device secrets are checked like every stored secret.
		SecretMatches: auth.Matches,
		// http:// endpoints for a local receiver in the sandbox.
		WebhookAllowHTTP: cfg.Sandbox,
		// Local receivers: the same rule as the dispatcher's (run.go).
		WebhookAllowPrivate: cfg.WebhookAllowPrivate || cfg.Sandbox,
	}
	var events instore.TerminalEvents = svc
	var node *cluster.Node
	if cfg.DatabaseURL != "" {
		// Any number of nodes may share the database: this one wakes the
		// others after its commits, and sends through them (cluster).
		if node, err = cluster.New(ctx, cluster.Config{DatabaseURL: cfg.DatabaseURL, NodeID: cfg.NodeID, Service: svc, Logger: cfg.Logger,
			Heartbeat: cfg.ClusterHeartbeat, Dead: cfg.ClusterDead, Rescan: cfg.ClusterRescan}); err != nil {
			return nil, err
		}
		svc.Shared = true
		events = node.Events(svc)
	}
	gw := gateway.New(gateway.Config{Events: events, Logger: cfg.Logger, Metadata: &meta, PingInterval: cfg.PingInterval, PongTimeout: cfg.PongTimeout,
		MinSoftwareVersion: svc.MinSoftwareVersion})
	svc.Gateway = gw
	if node != nil {
		svc.Gateway = node.Gateway()
	}
	metrics.RegisterGateway(reg, gw)
	s := &Server{
		cfg: cfg, Store: st, Auth: authn, Metadata: &meta, Registry: reg, Service: svc, Gateway: gw, Node: node, logger: cfg.Logger,
		listeners: map[string]net.Listener{}, errc: make(chan error, 4),
	}
	s.drain, s.drainCancel = context.WithCancel(context.Background())
	if cfg.Sandbox {
		s.Fleet = sim.NewFleet()
		if s.sandboxDevices, err = sandbox.EnsureDevices(ctx, st); err != nil {
			if node != nil {
				node.Close()
			}
			return nil, fmt.Errorf("sandbox devices: %w", err)
		}
	}
	s.handlers = s.buildHandlers()
	return s, nil
}

// Handler returns the handler of a listener ("online", "access",
// "terminal", "ops"), for tests and benchmarks that skip the network.
func (s *Server) Handler(name string) http.Handler { return s.handlers[name] }

// accessLogger returns the logger of the access log.
func (s *Server) accessLogger() *slog.Logger {
	if s.cfg.AccessLogger != nil {
		return s.cfg.AccessLogger
	}
	return s.logger
}

// buildHandlers builds the four surfaces' handlers.
func (s *Server) buildHandlers() map[string]http.Handler {
	m := httpapi.NewMetrics(s.Registry)
	limiter := httpapi.NewRateLimiter(s.cfg.RateLimit, s.cfg.RateBurst)

	// newAPI starts a listener's API, logging to the access log; guard
	// authenticates a surface's requests, rate-limited.
	newAPI := func(name string, m *httpapi.Metrics) *httpapi.API {
		a := httpapi.NewAPI(name, s.logger, s.Metadata, m)
		a.SetAccessLogger(s.accessLogger())
		a.Unavailable, a.UnavailableDetail = sqlstore.Unavailable, "The database has no primary reachable (a failover may be under way); retry later."
		return a
	}
	guard := func(surface instore.Surface) *httpapi.Guard {
		return &httpapi.Guard{Auth: s.Auth, Surface: surface, Limiter: limiter}
	}
	online := newAPI("online", m)
	var holders httpapi.Holders
	if s.Node != nil {
		holders = s.Node
	}
	onlineapi.Register(onlineapi.Config{
		IdempotencyHolders: holders,
		API:                online,
		Guard:              guard(instore.SurfaceOnline),
		Metadata:           s.Metadata,
		Service:            s.Service,
		Store:              s.Store,
		OpenAPI:            api.OnlineYAML,
		Logger:             s.logger,

		IdempotencyWait: s.cfg.IdempotencyWait,
		Streams: onlineapi.StreamLimits{PerClient: s.cfg.StreamsPerClient, PerNode: s.cfg.StreamsPerNode,
			WriteTimeout: s.cfg.StreamWriteTimeout},
	})

	access := newAPI("access", m)
	accessapi.Register(accessapi.Config{
		IdempotencyHolders: holders,
		API:                access,
		Guard:              guard(instore.SurfaceAccess),
		Service:            s.Service,
		Store:              s.Store,
		OpenAPI:            api.AccessYAML,
		Logger:             s.logger,
	})

	gatewayAPI := newAPI("gateway", m)
	gatewayAPI.Mux.Handle("GET "+protocol.Path, s.Gateway)

	if s.Fleet != nil {
		// Sandbox mode: the control API and the console, on the Online
		// API's listener and credentials.
		sandbox.Register(online, guard(instore.SurfaceOnline), s.Service, s.Store, s.Fleet)
		sandbox.RegisterConsole(sandbox.ConsoleConfig{
			API: online, Guard: &httpapi.Guard{Auth: s.Auth, Surface: instore.SurfaceOnline}, Service: s.Service,
			Store: s.Store, Fleet: s.Fleet,
			Defaults: func() *sandbox.Credentials { return s.consoleCreds.Load() },
		})
	}

	ops := newAPI("ops", nil)
	ops.Handle("GET /healthz", func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"status":"ok"}`))
		return nil
	})
	ops.Handle("GET /readyz", func(w http.ResponseWriter, r *http.Request) error {
		if s.drain.Err() != nil {
			// Shutting down: a load balancer stops sending here while what
			// is in flight is answered (the ops listener closes last).
			return &instore.Error{Code: instore.EUnavailable, Detail: "The server is shutting down."}
		}
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := s.storeReady(ctx); err != nil {
			return err
		}
		if s.Node != nil && !s.Node.Healthy() {
			return &instore.Error{Code: instore.EUnavailable, Detail: "This node cannot write its heartbeat: the cluster counts it gone."}
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"status":"ready"}`))
		return nil
	})
	ops.Mux.Handle("GET /metrics", promhttp.HandlerFor(s.Registry, promhttp.HandlerOpts{}))
	if s.cfg.Pprof {
		ops.Mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		ops.Mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		ops.Mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		ops.Mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		ops.Mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}

	return map[string]http.Handler{"online": &drainer{next: online, drain: s.drain}, "access": access, "terminal": gatewayAPI, "ops": ops}
}

// DataDir returns the SQLite data directory ("" with PostgreSQL).
func (s *Server) DataDir() string { return s.cfg.DataDir }

// SetConsoleCredentials offers credentials to the console page (the demo
// offers its own, so the page works without pasting them).
func (s *Server) SetConsoleCredentials(subscriptionKey, accessToken string) {
	s.consoleCreds.Store(&sandbox.Credentials{SubscriptionKey: subscriptionKey, AccessToken: accessToken})
}

// SandboxDevices are the virtual devices of sandbox mode, in model order.
func (s *Server) SandboxDevices() []sandbox.Device { return s.sandboxDevices }

// Err delivers a fatal error of a listener.
func (s *Server) Err() <-chan error { return s.errc }

// URL returns the base URL of a listener ("online", "access", "terminal",
// "ops") with the real port.
func (s *Server) URL(name string) string {
	ln, ok := s.listeners[name]
	if !ok {
		return ""
	}
	scheme := "http"
	if name == "terminal" {
		scheme = "ws"
	}
	if s.tlsOn(name) {
		scheme += "s"
	}
	return scheme + "://" + hostPort(ln.Addr())
}

// tlsOn tells whether a listener serves TLS: every one but ops, when TLS
// is configured.
func (s *Server) tlsOn(name string) bool { return s.cfg.TLS != nil && name != "ops" }

func hostPort(a net.Addr) string {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return a.String()
	}
	if ta.IP.IsUnspecified() {
		return net.JoinHostPort("127.0.0.1", fmt.Sprint(ta.Port))
	}
	return net.JoinHostPort(ta.IP.String(), fmt.Sprint(ta.Port))
}
