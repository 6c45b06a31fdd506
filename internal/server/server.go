// Package server wires the whole service: store, authentication, the Online
// API, the Access API, the terminal gateway's listener and the ops listener.
// A test starts it on port 0 exactly as the binary does.
package server

import (
	"context"
	"crypto/tls"
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

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/api"
	"github.com/instore-dev/instore/internal/accessapi"
	"github.com/instore-dev/instore/internal/auth"
	"github.com/instore-dev/instore/internal/cluster"

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
	DatabaseURL       string
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
	Sandbox bool
	// SimDelay is how long a built-in virtual terminal "reads a card".
	SimDelay time.Duration
	// PingInterval and PongTimeout tune the gateway's liveness check
	// (defaults 15 s and 10 s).
	PingInterval, PongTimeout time.Duration
	// Now is the service's clock (default time.Now); tests set it to check
	// the 30- and 90-day listing rules.
	Now func() time.Time
	// UpdateSweep is how often the software update sweep runs (default
	// instore.DefaultUpdateSweep); InstallTimeout how long an update may
	// stay DOWNLOADING without a report (default
	// instore.DefaultInstallTimeout).
	UpdateSweep, InstallTimeout time.Duration
	// InteractiveFirst starts the first virtual terminal in interactive
	// mode: it waits for a person in the console (demo --interactive).
	InteractiveFirst bool
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
	Service  *instore.Service
	Gateway  *gateway.Server
	// Node is this process's membership of the cluster of nodes sharing
	// the PostgreSQL database; nil on SQLite.
	Node *cluster.Node
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
	return sqlstore.Open(ctx, dsn, sqlstore.Options{Synchronous: cfg.SQLiteSynchronous})
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
	if cfg.Now == nil {
		cfg.Now = time.Now
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
	authn, err := auth.New(auth.Config{Store: st, SigningKey: key, TokenTTL: cfg.TokenTTL, CacheTTL: cfg.AuthCacheTTL})
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics.RegisterBuildInfo(reg, cfg.Version, cfg.Commit, runtime.Version())
	if p, ok := st.(interface{ Pools() map[string]*sql.DB }); ok {
		metrics.RegisterDB(reg, p.Pools())
	}
	svc := &instore.Service{
		Store: st, Metadata: &meta, Logger: cfg.Logger, Now: cfg.Now,
		NewRef:     func() string { return ids.New("txn") },
		NewPrintID: func() string { return ids.New("prt") },
		AckTimeout: cfg.AckTimeout, Deadline: cfg.TransactionDeadline, PrintTimeout: cfg.PrintTimeout,
		Observer: metrics.NewTransactions(reg),
		// Device secrets are checked like every stored secret.
		SecretMatches: auth.Matches,
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

	online := httpapi.NewAPI("online", s.logger, s.Metadata, m)
	online.SetAccessLogger(s.accessLogger())
	var holders httpapi.Holders
	if s.Node != nil {
		holders = s.Node
	}
	onlineapi.Register(onlineapi.Config{
		IdempotencyHolders: holders,
		API:                online,
		Guard:              &httpapi.Guard{Auth: s.Auth, Surface: instore.SurfaceOnline, Limiter: limiter},
		Metadata:           s.Metadata,
		Service:            s.Service,
		Store:              s.Store,
		OpenAPI:            api.OnlineYAML,
		Logger:             s.logger,

		IdempotencyWait: s.cfg.IdempotencyWait,
	})

	access := httpapi.NewAPI("access", s.logger, s.Metadata, m)
	access.SetAccessLogger(s.accessLogger())
	accessapi.Register(accessapi.Config{
		IdempotencyHolders: holders,
		API:                access,
		Guard:              &httpapi.Guard{Auth: s.Auth, Surface: instore.SurfaceAccess, Limiter: limiter},
		Service:            s.Service,
		Store:              s.Store,
		OpenAPI:            api.AccessYAML,
		Logger:             s.logger,
	})

	gatewayAPI := httpapi.NewAPI("gateway", s.logger, s.Metadata, m)
	gatewayAPI.SetAccessLogger(s.accessLogger())
	gatewayAPI.Mux.Handle("GET "+protocol.Path, s.Gateway)

	if s.Fleet != nil {
		// Sandbox mode: the control API and the console, on the Online
		// API's listener and credentials.
		sandbox.Register(online, &httpapi.Guard{Auth: s.Auth, Surface: instore.SurfaceOnline, Limiter: limiter}, s.Service, s.Store, s.Fleet)
		sandbox.RegisterConsole(sandbox.ConsoleConfig{
			API: online, Guard: &httpapi.Guard{Auth: s.Auth, Surface: instore.SurfaceOnline}, Service: s.Service,
			Store: s.Store, Fleet: s.Fleet, Metadata: s.Metadata, Logger: s.logger,
			Defaults: func() *sandbox.Credentials { return s.consoleCreds.Load() },
		})
	}

	ops := httpapi.NewAPI("ops", s.logger, s.Metadata, nil)
	ops.SetAccessLogger(s.accessLogger())
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
		if err := s.Store.Ping(ctx); err != nil {
			return &instore.Error{Code: instore.EUnavailable, Detail: "The store is not reachable.", Err: err}
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

// Start binds the four listeners and serves until Close. It returns once
// every listener accepts connections.
func (s *Server) Start() error {
	hs := s.handlers
	writeTimeout := s.cfg.WriteTimeout
	if writeTimeout <= 0 {
		writeTimeout = DefaultWriteTimeout
	}
	// The timers the store implies are armed before a terminal can connect
	// and acknowledge: an ack recorded first would otherwise have its
	// deadline timer replaced by the ack timer Recover read.
	if err := s.Service.Recover(context.Background()); err != nil {
		s.Close()
		return err
	}
	if s.Node != nil {
		if err := s.Node.Start(context.Background(), s.Gateway); err != nil {
			s.Close()
			return err
		}
	}
	addrs := map[string]string{
		"online": s.cfg.ListenOnline, "access": s.cfg.ListenAccess,
		"terminal": s.cfg.ListenTerminal, "ops": s.cfg.ListenOps,
	}
	for _, name := range []string{"online", "access", "terminal", "ops"} {
		ln, err := net.Listen("tcp", addrs[name])
		if err != nil {
			s.Close()
			return fmt.Errorf("listen %s on %s: %w", name, addrs[name], err)
		}
		s.listeners[name] = ln
		srv := &http.Server{
			Handler:           hs[name],
			ReadHeaderTimeout: 10 * time.Second,
			ReadTimeout:       30 * time.Second,
			WriteTimeout:      writeTimeout,
			IdleTimeout:       120 * time.Second,
			MaxHeaderBytes:    16 << 10,
			ErrorLog:          slog.NewLogLogger(s.logger.Handler(), slog.LevelWarn),
		}
		switch name {
		case "online":
			// Every wait a request can make ends before its write
			// deadline, which counts from the request's headers (waits.go).
			// The read deadline needs no room: it ends with the body.
			srv.WriteTimeout = s.cfg.OnlineWriteTimeout()
		case "terminal":
			// Sessions live for days; the gateway sets its own deadlines.
			srv.ReadTimeout, srv.WriteTimeout = 0, 0
		}
		s.servers = append(s.servers, srv)
		if name == "ops" {
			s.opsServer = srv
		}
		serve := srv.Serve
		if s.tlsOn(name) {
			srv.TLSConfig = s.cfg.TLS.ServerConfig()
			if name == "terminal" {
				// A WebSocket upgrades an HTTP/1.1 request (RFC 6455):
				// no HTTP/2 on the gateway.
				srv.TLSConfig.NextProtos = []string{"http/1.1"}
				srv.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
			}
			// The certificate comes from TLSConfig.GetCertificate; HTTP/2
			// is offered on the two APIs.
			serve = func(ln net.Listener) error { return srv.ServeTLS(ln, "", "") }
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if err := serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.errc <- fmt.Errorf("%s listener: %w", name, err)
			}
		}()
		s.logger.Info("listening", "surface", name, "addr", ln.Addr().String(), "tls", s.tlsOn(name))
	}
	// A proxy in front of the Online API must wait at least as long.
	s.logger.Info("time-outs", "onlineWrite", s.cfg.OnlineWriteTimeout().String(), "shutdown", s.cfg.ShutdownTimeout.String())
	// Access API: deliver due software updates, end stalled installations,
	// announce a new package catalogue's minimum versions.
	updCtx, updCancel := context.WithCancel(context.Background())
	s.updatesCancel = updCancel
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.Service.RunUpdates(updCtx, s.cfg.UpdateSweep, s.cfg.InstallTimeout)
	}()
	expCtx, expCancel := context.WithCancel(context.Background())
	s.expiryCancel = expCancel
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.expireIdempotency(expCtx)
	}()
	// Print jobs past their time-out, messages owed to terminals past
	// their bound (a lost timer, another node).
	// On several nodes, a node that dies takes its timers with it: the
	// others' sweep ends what they would have, within a rescan interval.
	var sweep time.Duration
	if s.Node != nil {
		sweep = s.cfg.ClusterRescan
		if sweep <= 0 {
			sweep = cluster.DefaultRescan
		}
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.Service.RunSweep(updCtx, sweep)
	}()
	if s.Fleet != nil {
		for _, d := range s.sandboxDevices {
			version := d.SoftwareVersion
			// A virtual device restarts with the version it last installed.
			if dev, err := s.Store.Device(context.Background(), d.SerialNumber); err == nil && dev.SoftwareVersion != "" {
				version = dev.SoftwareVersion
			}
			if _, err := s.Fleet.Add(sim.Config{
				GatewayURL: s.URL("terminal") + protocol.Path, SerialNumber: d.SerialNumber, Secret: d.Secret,
				Model: d.Model, SoftwareVersion: version, Delay: s.cfg.SimDelay, Logger: s.logger,
				BackoffMin: 50 * time.Millisecond, BackoffMax: 2 * time.Second, Dialer: s.fleetDialer(),
			}); err != nil {
				s.Close()
				return fmt.Errorf("virtual terminal: %w", err)
			}
		}
		if s.cfg.InteractiveFirst && len(s.sandboxDevices) > 0 {
			if t, ok := s.Fleet.Get(s.sandboxDevices[0].SerialNumber); ok {
				t.SetInteractive(true)
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		s.fleetCancel = cancel
		s.Fleet.Start(ctx)
	}
	return nil
}

// fleetDialer is the WebSocket dialer of the in-process virtual terminals:
// the default one, or over TLS one that trusts exactly the certificate this
// server serves (they dial it by its loopback address, which the
// certificate need not name).
func (s *Server) fleetDialer() *websocket.Dialer {
	if s.cfg.TLS == nil {
		return nil
	}
	d := *websocket.DefaultDialer
	d.TLSClientConfig = s.cfg.TLS.PinnedClientConfig()
	return &d
}

// DefaultIdempotencySweep is how often the idempotency records past their
// window are deleted.
const DefaultIdempotencySweep = 10 * time.Minute

// expireIdempotency deletes the Idempotency-Key records older than
// httpapi.IdempotencyTTL at start and then every IdempotencySweep, until
// ctx ends; without it the table grows with every keyed request. (A record
// past its window that is not deleted yet is already ignored by the
// middleware: a request with its key runs as new.)
func (s *Server) expireIdempotency(ctx context.Context) {
	interval := s.cfg.IdempotencySweep
	if interval <= 0 {
		interval = DefaultIdempotencySweep
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		n, err := s.Store.ExpireIdempotency(ctx, s.cfg.Now().Add(-httpapi.IdempotencyTTL))
		switch {
		case err != nil && ctx.Err() == nil:
			s.logger.Warn("expire idempotency records", "error", err)
		case n > 0:
			s.logger.Info("idempotency records expired", "count", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
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

// Close stops accepting, answers the requests that wait for a change (a
// status request's long-poll, the console's stream) with what they have,
// lets operations in flight finish within the shutdown timeout, and closes
// the store.
func (s *Server) Close() error {
	var err error
	s.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
		defer cancel()
		// Draining: /readyz answers 503 from now on, and the terminals'
		// sessions are handed off at once (closed with 1012: reconnect,
		// to another node when there is one), not after what is in
		// flight is answered.
		s.drainCancel()
		if s.Node != nil {
			s.Node.Drain()
		}
		s.Gateway.Drain()
		if s.Fleet != nil {
			s.Fleet.Stop()
		}
		if s.updatesCancel != nil {
			s.updatesCancel()
		}
		if s.expiryCancel != nil {
			s.expiryCancel()
		}
		// Every listener but ops stops taking requests and answers what is
		// in flight; ops goes last, so that /readyz answers 503 while they
		// drain.
		shutdown := func(srvs []*http.Server) {
			var wg sync.WaitGroup
			for _, srv := range srvs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if e := srv.Shutdown(ctx); e != nil {
						srv.Close()
					}
				}()
			}
			wg.Wait()
		}
		var ops *http.Server
		others := make([]*http.Server, 0, len(s.servers))
		for _, srv := range s.servers {
			if s.opsServer == srv {
				ops = srv
			} else {
				others = append(others, srv)
			}
		}
		shutdown(others)
		if ops != nil {
			shutdown([]*http.Server{ops})
		}
		for _, ln := range s.listeners {
			ln.Close()
		}
		s.wg.Wait()
		// Sessions were hijacked from the HTTP server: close them with a
		// reconnect hint, then stop the time-outs.
		s.Gateway.Close()
		s.Service.Close()
		if s.Node != nil {
			s.Node.Close()
		}
		err = s.Store.Close()
	})
	return err
}
