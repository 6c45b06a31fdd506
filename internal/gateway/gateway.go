// Package gateway is the terminal gateway: the WebSocket endpoint devices
// dial out to (/terminal/v1/connect), their authentication, and the hub of
// live sessions by serial number through which the domain sends commands.
// It speaks the protocol of internal/protocol, described for terminal
// vendors in docs/terminal-protocol.md.
//
// A session costs one goroutine (its read loop), gorilla's 1 KiB read
// buffer and a few hundred bytes of state; write buffers come from a shared
// pool and pings from one timer for all sessions, so tens of thousands of
// idle terminals fit in a node.
package gateway

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/httpapi"
	"github.com/instore-dev/instore/internal/protocol"
)

// Defaults of Config.
const (
	DefaultPingInterval = 15 * time.Second
	DefaultPongTimeout  = 10 * time.Second
	DefaultWriteTimeout = 10 * time.Second
	DefaultHelloTimeout = 10 * time.Second
)

// Config configures a Server. Durations left zero take their defaults.
type Config struct {
	// Events receives what terminals report; required.
	Events instore.TerminalEvents
	Logger *slog.Logger
	// PingInterval is how often the server pings a session.
	PingInterval time.Duration
	// PongTimeout is how long past a ping interval a session may stay
	// silent: with no pong or message for PingInterval+PongTimeout it is
	// closed (protocol.CloseTimeout) and the device is offline.
	PongTimeout time.Duration
	// WriteTimeout bounds every write to a terminal, and so how long a
	// Send method can block on a slow or dead one.
	WriteTimeout time.Duration
	// HelloTimeout is how long a new connection has to say hello.
	HelloTimeout time.Duration
	// Metadata names payment methods in commands (optional).
	Metadata *instore.Metadata
	// MinSoftwareVersion returns the minimum software version of a
	// device, which every `linked` message carries (optional: none).
	MinSoftwareVersion func(ctx context.Context, serial string) (string, error)
}

// eventTimeout bounds each call into Events.
const eventTimeout = 30 * time.Second

// Server is the gateway. It serves the WebSocket endpoint and implements
// instore.Gateway.
type Server struct {
	meta     *instore.Metadata
	minVer   func(ctx context.Context, serial string) (string, error)
	events   instore.TerminalEvents
	log      *slog.Logger
	ping     time.Duration
	liveness time.Duration // PingInterval + PongTimeout
	write    time.Duration
	hello    time.Duration
	// upgrader does the handshake only: the session reads and writes the
	// frames itself (frames.go).
	upgrader websocket.Upgrader
	// pings times the pings of all sessions on one timer.
	pings pingQueue

	idPrefix string
	idSeq    atomic.Uint64

	mu sync.Mutex
	// sessions holds the session of each serial that said hello.
	sessions map[string]*session
	// all holds every upgraded connection, hello or not, for Close.
	all map[*session]struct{}
	// leaving holds, per serial whose last session is ending, a channel
	// closed once Events.DeviceDisconnected returned, so that a new
	// session's DeviceConnected always comes after it.
	leaving map[string]chan struct{}
	// readied is closed (and dropped) when a session becomes ready; Ready
	// waits on it.
	readied chan struct{}
	closed  bool
	wg      sync.WaitGroup
}

// readyWait bounds how long Ready waits for a session that said hello to
// become ready: DeviceConnected takes a few store round trips.
const readyWait = 3 * time.Second

var (
	_ instore.Gateway = (*Server)(nil)
	_ http.Handler    = (*Server)(nil)
)

// New returns a gateway serving terminals for cfg.Events.
func New(cfg Config) *Server {
	if cfg.Events == nil {
		panic("gateway: Config.Events is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	g := &Server{
		meta:     cfg.Metadata,
		minVer:   cfg.MinSoftwareVersion,
		events:   cfg.Events,
		log:      cfg.Logger,
		ping:     orDefault(cfg.PingInterval, DefaultPingInterval),
		write:    orDefault(cfg.WriteTimeout, DefaultWriteTimeout),
		hello:    orDefault(cfg.HelloTimeout, DefaultHelloTimeout),
		sessions: map[string]*session{},
		all:      map[*session]struct{}{},
		leaving:  map[string]chan struct{}{},
		pings:    pingQueue{epoch: time.Now()},
	}
	g.liveness = g.ping + orDefault(cfg.PongTimeout, DefaultPongTimeout)
	g.upgrader = websocket.Upgrader{
		HandshakeTimeout: g.write,
		// No buffer sizes: gorilla then takes net/http's hijacked buffers
		// for its Conn instead of allocating its own, and the Conn and
		// they are dropped once the handshake is written.
		// Terminals are not browsers: the device secret authenticates
		// them, the Origin header means nothing.
		CheckOrigin: func(*http.Request) bool { return true },
		Error:       upgradeError,
	}
	var b [4]byte
	rand.Read(b[:])
	g.idPrefix = "s-" + hex.EncodeToString(b[:]) + "-"
	return g
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// noMetadata stands in for the code lists: the gateway's problems
// (unauthorized, unavailable) carry no WP code.
var noMetadata = &instore.Metadata{}

// ServeHTTP serves GET /terminal/v1/connect: HTTP Basic authentication of
// the device (serial number and device secret) before anything else, then
// the upgrade to a WebSocket and the session, which runs on its own
// goroutine.
func (g *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rid := httpapi.RequestID(w)
	if r.URL.Path != protocol.Path {
		httpapi.WriteProblem(w, httpapi.NewProblem(instore.Errorf(instore.ENotFound, "No such resource."), rid, noMetadata))
		return
	}
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		w.Header().Set("Retry-After", "5")
		httpapi.WriteProblem(w, httpapi.NewProblem(
			instore.Errorf(instore.EUnavailable, "The gateway is shutting down; connect again."), rid, noMetadata))
		return
	}
	g.wg.Add(1)
	g.mu.Unlock()
	started := false
	defer func() {
		if !started {
			g.wg.Done()
		}
	}()

	serial, ok := g.authenticate(w, r, rid)
	if !ok {
		return
	}
	if !r.ProtoAtLeast(1, 1) {
		// gorilla's Upgrader does not look at the version; RFC 6455 (4.1)
		// asks for HTTP/1.1 or higher.
		httpapi.WriteProblem(w, httpapi.NewProblem(
			instore.Errorf(instore.EValidation, "A WebSocket handshake needs HTTP/1.1 or higher, not %s.", r.Proto), rid, noMetadata))
		return
	}
	if _, isHijacker := w.(http.Hijacker); !isHijacker {
		w = hijacker{w}
	}
	conn, err := g.upgrader.Upgrade(w, r, nil)
	if err != nil { // the upgrader answered the request
		g.log.LogAttrs(r.Context(), slog.LevelDebug, "terminal upgrade failed",
			slog.String("serialNumber", serial), slog.String("error", err.Error()))
		return
	}
	s := newSession(g, conn.NetConn(), serial)
	g.mu.Lock()
	g.all[s] = struct{}{}
	closed := g.closed
	g.mu.Unlock()
	if closed {
		s.close(closeGoingAway, "server shutting down", false)
	}
	started = true
	// Not go func() { defer g.wg.Done(); s.run() }(): that closure would
	// stay reachable for the whole session, for its deferred call; run
	// calls g.wg.Done itself.
	go s.run()
}

// authenticate checks the request's Basic credentials with Events and
// answers 401 (or 503 when the check itself failed) if they do not pass.
func (g *Server) authenticate(w http.ResponseWriter, r *http.Request, rid string) (string, bool) {
	serial, secret, ok := r.BasicAuth()
	var err error
	if !ok || serial == "" || secret == "" {
		err = instore.Errorf(instore.EUnauthorized, "Device credentials are required.")
	} else {
		var d *instore.Device
		d, err = g.events.AuthenticateDevice(r.Context(), serial, secret)
		if err == nil && d == nil {
			err = instore.Errorf(instore.EUnauthorized, "Unknown device.")
		}
	}
	if err == nil {
		// A copy: the decoded header holds the secret next to the serial
		// number, and the session keeps the serial for its whole life.
		return strings.Clone(serial), true
	}
	if code := instore.ErrorCode(err); code != instore.EUnauthorized && !errors.Is(err, instore.ErrNotFound) {
		// The check failed, not the device: it should retry, not give up.
		g.log.LogAttrs(r.Context(), slog.LevelError, "device authentication error",
			slog.String("serialNumber", serial), slog.String("requestId", rid), slog.String("error", err.Error()))
		w.Header().Set("Retry-After", "5")
		httpapi.WriteProblem(w, httpapi.NewProblem(
			instore.Errorf(instore.EUnavailable, "Device authentication is unavailable; try again."), rid, noMetadata))
		return "", false
	}
	g.log.LogAttrs(r.Context(), slog.LevelInfo, "device authentication failed",
		slog.String("serialNumber", serial), slog.String("requestId", rid))
	w.Header().Set("WWW-Authenticate", `Basic realm="instore terminal gateway", charset="UTF-8"`)
	httpapi.WriteProblem(w, httpapi.NewProblem(
		instore.Errorf(instore.EUnauthorized, "Unknown device or wrong secret."), rid, noMetadata))
	return "", false
}

// upgradeError answers a request that is not a valid WebSocket handshake
// with a problem instead of gorilla's plain text.
func upgradeError(w http.ResponseWriter, r *http.Request, status int, reason error) {
	code := instore.EValidation
	switch status {
	case http.StatusMethodNotAllowed:
		code = instore.EMethodNotAllowed
		w.Header().Set("Allow", http.MethodGet)
	case http.StatusForbidden:
		code = instore.EForbidden
	case http.StatusInternalServerError:
		code = instore.EInternal
	}
	p := httpapi.NewProblem(instore.Errorf(code, "A WebSocket handshake is required."), httpapi.RequestID(w), noMetadata)
	p.Status = status
	httpapi.WriteProblem(w, p)
}

// hijacker gives gorilla, which asks the ResponseWriter itself for
// http.Hijacker, the connection of a wrapped writer.
type hijacker struct{ http.ResponseWriter }

func (h hijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(h.ResponseWriter).Hijack()
}

// register makes s the session of its serial, replacing (and closing) an
// older one. It returns once a DeviceDisconnected of an earlier session of
// that serial has returned.
func (g *Server) register(s *session) {
	g.mu.Lock()
	old := g.sessions[s.serial]
	g.sessions[s.serial] = s
	wait := g.leaving[s.serial]
	g.mu.Unlock()
	if old != nil {
		old.close(protocol.CloseReplaced, "replaced by a new connection of the device", false)
	}
	if wait != nil {
		<-wait
	}
}

// unregister removes s; when s was its serial's session (not replaced),
// the device is offline and DeviceDisconnected runs.
func (g *Server) unregister(s *session, registered bool) {
	g.mu.Lock()
	delete(g.all, s)
	last := registered && g.sessions[s.serial] == s
	var done chan struct{}
	if last {
		delete(g.sessions, s.serial)
		done = make(chan struct{})
		g.leaving[s.serial] = done
	}
	g.mu.Unlock()
	if !last {
		return
	}
	defer func() {
		g.mu.Lock()
		if g.leaving[s.serial] == done {
			delete(g.leaving, s.serial)
		}
		g.mu.Unlock()
		close(done)
	}()
	g.events.DeviceDisconnected(s.serial)
}

func (g *Server) session(serial string) *session {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.sessions[serial]
}

// Online reports whether the device has a session (it said hello).
func (g *Server) Online(serial string) bool { return g.session(serial) != nil }

// Ready reports whether the device's session is ready for a new command:
// DeviceConnected ran, so what the device is owed went first. A session
// that said hello and is not ready yet is waited for, up to readyWait, so
// that a command sent the moment a terminal reconnects goes right after
// what the terminal is owed instead of being refused.
func (g *Server) Ready(serial string) bool {
	var timer *time.Timer
	for {
		s := g.session(serial)
		if s == nil {
			return false
		}
		if s.ready.Load() {
			return true
		}
		g.mu.Lock()
		if g.readied == nil {
			g.readied = make(chan struct{})
		}
		ch := g.readied
		g.mu.Unlock()
		if s.ready.Load() { // readied while the channel was taken
			return true
		}
		if timer == nil {
			timer = time.NewTimer(readyWait)
			defer timer.Stop()
		}
		select {
		case <-ch:
		case <-timer.C:
			return false
		}
	}
}

// markReady makes s ready and wakes whoever waits in Ready.
func (g *Server) markReady(s *session) {
	s.ready.Store(true)
	g.mu.Lock()
	if g.readied != nil {
		close(g.readied)
		g.readied = nil
	}
	g.mu.Unlock()
}

// Serials lists the devices with a session here.
func (g *Server) Serials() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]string, 0, len(g.sessions))
	for serial := range g.sessions {
		out = append(out, serial)
	}
	return out
}

// Sessions returns the number of devices online.
func (g *Server) Sessions() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.sessions)
}

// Connections returns the number of open WebSocket connections, those
// that have not said hello yet included.
func (g *Server) Connections() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.all)
}

// Drain hands the sessions off at the start of a shutdown: it closes every
// session with 1012 (service restart: the device reconnects at once, to
// another node when there is one) and answers new connections 503 from
// then on. It does not wait; Close does.
func (g *Server) Drain() {
	g.closeAll(closeRestart, "server restarting: connect again")
}

// closeAll closes every session with code and reason, and has new
// connections answered 503 from then on.
func (g *Server) closeAll(code int, reason string) {
	g.mu.Lock()
	g.closed = true
	all := make([]*session, 0, len(g.all))
	for s := range g.all {
		all = append(all, s)
	}
	g.mu.Unlock()
	for _, s := range all {
		s.close(code, reason, false)
	}
}

// Drop closes the session of serial, if this gateway holds one, as
// replaced: the device has a newer session elsewhere (another node).
func (g *Server) Drop(serial string) {
	if s := g.session(serial); s != nil {
		s.close(protocol.CloseReplaced, "replaced by a newer connection of the device", false)
	}
}

// Close closes every session with 1001 (going away: reconnect), waits for
// their goroutines, and answers new connections 503 from then on.
func (g *Server) Close() error {
	g.closeAll(closeGoingAway, "server shutting down")
	g.wg.Wait()
	g.pings.stop()
	return nil
}

// newID returns a server message id: unique within this process and, by
// its random prefix, unlikely to repeat across restarts.
func (g *Server) newID() string {
	return g.idPrefix + strconv.FormatUint(g.idSeq.Add(1), 36)
}

// send encodes a message and hands it to the serial's session, with id as
// its message id ("" for a new one).
func (g *Server) send(ctx context.Context, serial, typ, id, ref string, data any) error {
	s := g.session(serial)
	if s == nil {
		return instore.ErrOffline
	}
	if id == "" {
		id = g.newID()
	}
	env, err := protocol.NewEnvelope(typ, id, ref, data)
	if err != nil {
		return fmt.Errorf("gateway: %s: %w", typ, err)
	}
	frame, err := protocol.Encode(env)
	if err != nil {
		return fmt.Errorf("gateway: %s: %w", typ, err)
	}
	return s.write(ctx, frame)
}

// SendPayment sends the command of t: a purchase, a refund, a
// pre-authorisation or an increment, capture or void of one, or the ECR's
// reversal (a REVERSAL transaction, sent as a reversal with reason ECR and
// the purchase it reverses).
func (g *Server) SendPayment(ctx context.Context, serial string, t *instore.Transaction) error {
	var typ string
	switch t.Type {
	case instore.TypePurchase:
		typ = protocol.TypePurchase
	case instore.TypeRefund:
		typ = protocol.TypeRefund
	case instore.TypeReversal:
		return g.send(ctx, serial, protocol.TypeReversal, "", t.ID,
			&protocol.Reversal{Reason: instore.ReversalByECR, OriginalRef: t.OriginalID})
	case instore.TypePreAuth:
		typ = protocol.TypePreAuth
	case instore.TypeIncrement:
		typ = protocol.TypeIncrement
	case instore.TypeCapture:
		typ = protocol.TypeCapture
	case instore.TypeVoid:
		typ = protocol.TypeVoid
	default:
		return fmt.Errorf("gateway: a %s transaction has no command", t.Type)
	}
	p := &protocol.Payment{
		Amount:          t.Amount,
		CashbackAmount:  t.CashbackAmount,
		VATAmount:       t.VATAmount,
		Currency:        t.Currency,
		PaymentMethodID: t.PaymentMethodID,
		ECRReference:    t.ECRReference,
		OriginalRef:     t.OriginalID,
		Tip:             t.Tip,
	}
	if t.Type == instore.TypeCapture {
		// The final total, and the part of it that is tip.
		p.Amount, p.TipAmount = t.TotalAmount(), t.TipAmount
	}
	if t.PaymentMethodID != nil && g.meta != nil {
		if c, ok := g.meta.PaymentMethod(*t.PaymentMethodID); ok {
			p.PaymentMethodCode = c.Code
		}
	}
	if t.DeadlineAt != nil {
		p.Deadline = t.DeadlineAt.UTC()
	}
	return g.send(ctx, serial, typ, "", t.ID, p)
}

// SendCancel asks the device to stop the transaction ref for reason (one
// of instore.CancelByECR, CancelDeadline, CancelAckTimeout), as message id.
func (g *Server) SendCancel(ctx context.Context, serial, id, ref, reason string) error {
	return g.send(ctx, serial, protocol.TypeCancel, id, ref, &protocol.Cancel{Reason: reason})
}

// SendReversal asks the device to reverse the approved transaction ref
// (a late approval the service reversed on its own), as message id.
func (g *Server) SendReversal(ctx context.Context, serial, id, ref, reason string) error {
	return g.send(ctx, serial, protocol.TypeReversal, id, ref, &protocol.Reversal{Reason: reason})
}

// SendPrint asks the device to print lines for the print job printID, as
// message id.
func (g *Server) SendPrint(ctx context.Context, serial, id, printID string, lines []string) error {
	return g.send(ctx, serial, protocol.TypePrint, id, printID, &protocol.Print{Lines: lines})
}

// SendLinked tells the device the terminal ID it is linked to and the
// minimum software version of its model.
func (g *Server) SendLinked(ctx context.Context, serial, terminalID string) error {
	l := &protocol.Linked{TerminalID: terminalID}
	if g.minVer != nil && g.session(serial) != nil {
		v, err := g.minVer(ctx, serial)
		if err != nil {
			return fmt.Errorf("gateway: minimum software version: %w", err)
		}
		l.MinSoftwareVersion = v
	}
	return g.send(ctx, serial, protocol.TypeLinked, "", "", l)
}

// SendUpdate asks the device to install the package of update u.
func (g *Server) SendUpdate(ctx context.Context, serial string, u *instore.Update, p *instore.Package) error {
	return g.send(ctx, serial, protocol.TypeUpdate, "", u.ID, &protocol.Update{
		PackageID: p.ID, Name: p.Name, Version: p.Version, SizeBytes: p.SizeBytes, SHA256: p.SHA256, Mandatory: p.Mandatory,
	})
}

// SendLinkCode tells an unlinked device the code to show.
func (g *Server) SendLinkCode(ctx context.Context, serial, code string) error {
	return g.send(ctx, serial, protocol.TypeLinkCode, "", "", &protocol.LinkCode{Code: code})
}
