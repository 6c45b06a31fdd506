package server

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/cluster"
	"github.com/instore-dev/instore/internal/httpapi"
	"github.com/instore-dev/instore/internal/protocol"
	"github.com/instore-dev/instore/internal/service"
	"github.com/instore-dev/instore/internal/sim"
	"github.com/instore-dev/instore/internal/webhook"
)

// Start binds the four listeners and serves until Close. It returns once
// every listener accepts connections.
func (s *Server) Start() error {
	hs := s.handlers
	writeTimeout := s.cfg.WriteTimeout
	if writeTimeout <= 0 {
		writeTimeout = DefaultWriteTimeout
	}
	// The node first: a timer Recover arms may fire at once (a deadline
	// that passed while the server was down) and send through the node's
	// gateway, which needs its local gateway.
	if s.Node != nil {
		if err := s.Node.Start(context.Background(), s.Gateway); err != nil {
			s.Close()
			return err
		}
	}
	// The timers the store implies are armed before a terminal can connect
	// and acknowledge: an ack recorded first would otherwise have its
	// deadline timer replaced by the ack timer Recover read.
	if err := s.Service.Recover(context.Background()); err != nil {
		s.Close()
		return err
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
			// net/http reads up to 4096 bytes past MaxHeaderBytes: the
			// request line and headers together are at most 16 KiB, as
			// documented (docs/decisions.md, Limits).
			MaxHeaderBytes: 16<<10 - 4096,
			ErrorLog:       slog.NewLogLogger(s.logger.Handler(), slog.LevelWarn),
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
	// A pre-auth validity shorter than the sweep's interval (seconds, in
	// the sandbox) is matched: an expiry's VOID that failed (the terminal
	// busy or offline, the process killed) is retried within a validity.
	if v := s.cfg.PreAuthValidity; v > 0 && v < cmp.Or(sweep, instore.DefaultSweep) {
		sweep = v
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.Service.RunSweep(updCtx, sweep)
	}()
	// Events for integrators: numbered after each commit that wrote some,
	// and every second (another node's, a lost poke).
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.Service.RunSequencer(updCtx, time.Second)
	}()
	s.Webhooks = webhook.New(webhook.Config{Store: s.Store, Logger: s.logger, Clock: s.cfg.Clock,
		AllowPrivate: s.cfg.WebhookAllowPrivate || s.cfg.Sandbox})
	s.Service.OnEventsSequenced(s.Webhooks.Poke)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.Webhooks.Run(updCtx)
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
	if s.cfg.TLS == nil && s.cfg.SandboxDialGate == nil {
		return nil
	}
	d := *websocket.DefaultDialer
	if s.cfg.TLS != nil {
		d.TLSClientConfig = s.cfg.TLS.PinnedClientConfig()
	}
	if gate := s.cfg.SandboxDialGate; gate != nil {
		d.NetDialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			if err := gate(ctx); err != nil {
				return nil, err
			}
			var nd net.Dialer
			return nd.DialContext(ctx, network, addr)
		}
	}
	return &d
}

// WaitSandboxReady waits until every virtual terminal of sandbox mode is
// ready for a command (instore.Gateway.Ready: it has a session and was
// sent what its hello called for), or ctx ends (its error then). A
// purchase sent after it returns finds its terminal ready, never WP23.
// Without sandbox mode it returns at once.
func (s *Server) WaitSandboxReady(ctx context.Context) error {
	if s.Fleet == nil {
		return nil
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for _, d := range s.sandboxDevices {
		// Ready itself waits (briefly) for a session that said hello; a
		// terminal with no session yet is looked at again on the tick.
		for !s.Service.Gateway.Ready(d.SerialNumber) {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-tick.C:
			}
		}
	}
	return nil
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
	expire := func() {
		n, err := s.Store.ExpireIdempotency(ctx, s.cfg.Clock.Now().Add(-httpapi.IdempotencyTTL))
		switch {
		case err != nil && ctx.Err() == nil:
			s.logger.Warn("expire idempotency records", "error", err)
		case n > 0:
			s.logger.Info("idempotency records expired", "count", n)
		}
		n, err = s.Store.ExpireEvents(ctx, s.cfg.Clock.Now().Add(-instore.DefaultEventRetention))
		switch {
		case err != nil && ctx.Err() == nil:
			s.logger.Warn("expire events", "error", err)
		case n > 0:
			s.logger.Info("events expired", "count", n)
		}
	}
	expire()
	service.Every(ctx, s.Service.Clock, interval, expire)
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
