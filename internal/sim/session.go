package sim

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/instore-dev/instore/internal/protocol"
)

const (
	// writeTimeout bounds every frame the terminal writes.
	writeTimeout = 10 * time.Second
	// idleTimeout ends a session on which nothing, not even a ping, came
	// for that long: the gateway pings far more often.
	idleTimeout = 2 * time.Minute
	// dialTimeout bounds one connection attempt (TCP, TLS and the
	// WebSocket handshake), so that a node that does not answer at all
	// holds up the failover to the next URL no longer than that.
	dialTimeout = 10 * time.Second
)

// closeServiceRestart is WebSocket close code 1012 (Service Restart, RFC
// 6455 section 7.4 via the IANA registry), which gorilla/websocket names
// too: what a node sends while it drains for a restart.
const closeServiceRestart = websocket.CloseServiceRestart

// session is one WebSocket connection to the gateway. Writes are
// serialised by wmu; drop and Close may be called from any goroutine.
type session struct {
	conn *websocket.Conn
	wmu  sync.Mutex
}

func (s *session) write(env protocol.Envelope) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.writeLocked(env)
}

func (s *session) writeLocked(env protocol.Envelope) error {
	b, err := protocol.Encode(&env)
	if err != nil {
		return err
	}
	if err := s.conn.SetWriteDeadline(time.Now().Add(writeTimeout)); err != nil {
		return err
	}
	return s.conn.WriteMessage(websocket.TextMessage, b)
}

// drop ends the session without a close frame, as a lost network would.
func (s *session) drop() { _ = s.conn.Close() }

// Run connects the terminal to the gateway, serves its commands and
// reconnects after every close until ctx is done; it returns nil then. It
// returns ErrRevoked or ErrUnsupported when the gateway closes the session
// with 4401 or 4426, which reconnecting cannot cure.
//
// After a session ends or a dial fails, Run goes on with the next gateway
// URL at once (see after); it waits a backoff step only when a full round
// of URLs failed in a row, or after a close 4409.
func (t *Terminal) Run(ctx context.Context) error {
	t.mu.Lock()
	if t.running {
		t.mu.Unlock()
		return ErrRunning
	}
	t.running = true
	t.mu.Unlock()

	ctx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		t.txWG.Wait()
		t.mu.Lock()
		t.running = false
		t.mu.Unlock()
	}()

	r := reconnect{min: t.cfg.BackoffMin, step: t.cfg.BackoffMin}
	for next := 0; ; {
		if !t.waitAllowed(ctx) {
			return nil
		}
		gw := t.urls[next]
		established, err := t.serve(ctx, gw)
		if ctx.Err() != nil {
			return nil
		}
		code := closeCode(err)
		switch code {
		case protocol.CloseRevoked:
			t.log.Error("sim: the gateway revoked the device; stopping", "gateway", gw)
			return ErrRevoked
		case protocol.CloseUnsupported:
			t.log.Error("sim: the gateway does not support this protocol version; stopping", "gateway", gw)
			return ErrUnsupported
		}
		if t.heldOrOffline() {
			// Dropped on purpose (SetOffline, sandbox outcome 93):
			// waitAllowed decides when to come back, to the same URL.
			continue
		}
		next = (next + 1) % len(t.urls)
		wait, ok := r.after(established, code, len(t.urls), t.cfg.BackoffMax)
		if !ok {
			t.log.Info("sim: session ended; trying the next gateway at once", "gateway", gw, "err", err)
			continue
		}
		t.log.Info("sim: session ended; reconnecting", "gateway", gw, "err", err, "in", wait.Round(time.Millisecond))
		if !t.sleep(ctx, wait) {
			return nil
		}
	}
}

// reconnect is Run's backoff state: the current step and the attempts
// that failed in a row since the last success or wait.
type reconnect struct {
	min, step time.Duration
	failed    int
}

// after records how an attempt ended (whether it got as far as hello, and
// the close code, 0 for none) and says whether to wait before the next
// URL, and how long. Of n URLs:
//
//   - 1012 (Service Restart) and 1001 (Going Away): the node drains or
//     shuts down; the next URL at once, and the step starts over.
//   - 4409 (replaced): another connection of the serial number took over;
//     never at once, so that two devices wrongly sharing a serial number
//     do not evict each other in a loop: wait a step.
//   - A session that got as far as hello and was not closed for a fault
//     (see faultClose): a success; the next URL at once, the step starts
//     over.
//   - Anything else (a failed dial or handshake, a fault): a failure; the
//     next URL at once, unless the last n attempts all failed (a full
//     round), when the terminal waits a step.
//
// Every wait is drawn between half the step and the whole step (jitter,
// so that terminals dropped together do not come back together), and
// doubles the step up to maxStep.
func (r *reconnect) after(established bool, code, n int, maxStep time.Duration) (time.Duration, bool) {
	switch {
	case code == closeServiceRestart || code == websocket.CloseGoingAway:
		r.step, r.failed = r.min, 0
		return 0, false
	case code == protocol.CloseReplaced:
	case established && !faultClose(code):
		r.step, r.failed = r.min, 0
		return 0, false
	default:
		r.failed++
		if r.failed < n {
			return 0, false
		}
	}
	r.failed = 0
	wait := r.step/2 + rand.N(r.step/2+1)
	r.step = min(r.step*2, maxStep)
	return wait, true
}

// faultClose reports whether a close code blames the session: a frame
// the server refused (1002, 1007, 1009, 4400), a server error (1011: a result
// the terminal resends after every hello could cause it again) or a
// liveness time-out (4408). Reconnecting at once after those could loop.
func faultClose(code int) bool {
	switch code {
	case websocket.CloseProtocolError, websocket.CloseInvalidFramePayloadData, websocket.CloseMessageTooBig,
		websocket.CloseInternalServerErr, protocol.CloseMalformed, protocol.CloseTimeout:
		return true
	}
	return false
}

// closeCode returns the code of the close frame that ended a session, or
// 0 when it ended otherwise.
func closeCode(err error) int {
	if ce := (*websocket.CloseError)(nil); errors.As(err, &ce) {
		return ce.Code
	}
	return 0
}

func (t *Terminal) heldOrOffline() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.offline || time.Now().Before(t.holdUntil)
}

// waitAllowed waits while the terminal is set offline or holds its session
// down; it reports false when ctx ends first.
func (t *Terminal) waitAllowed(ctx context.Context) bool {
	for {
		if ctx.Err() != nil {
			return false
		}
		t.mu.Lock()
		offline, hold := t.offline, time.Until(t.holdUntil)
		t.mu.Unlock()
		if !offline && hold <= 0 {
			return true
		}
		var timer *time.Timer
		var timeout <-chan time.Time
		if !offline {
			timer = time.NewTimer(hold)
			timeout = timer.C
		}
		select {
		case <-ctx.Done():
		case <-t.wake:
		case <-timeout:
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// serve runs one session with the gateway at URL gw: dial, hello, resend the unconfirmed results, then
// read and handle messages until the connection ends. established reports
// whether the session got as far as hello.
func (t *Terminal) serve(ctx context.Context, gw string) (established bool, err error) {
	h := http.Header{}
	h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(t.cfg.SerialNumber+":"+t.cfg.Secret)))
	dctx, dcancel := context.WithTimeout(ctx, dialTimeout)
	conn, resp, err := t.cfg.Dialer.DialContext(dctx, gw, h)
	dcancel()
	if err != nil {
		if resp != nil {
			t.log.Warn("sim: the gateway refused the connection", "gateway", gw, "status", resp.StatusCode)
		}
		return false, err
	}
	s := &session{conn: conn}
	defer s.drop()
	stop := context.AfterFunc(ctx, func() {
		_ = conn.WriteControl(websocket.CloseMessage,
			websocket.FormatCloseMessage(websocket.CloseNormalClosure, "terminal shutting down"),
			time.Now().Add(time.Second))
		s.drop()
	})
	defer stop()
	conn.SetReadLimit(protocol.MaxFrameBytes)
	conn.SetPingHandler(func(data string) error {
		_ = conn.SetReadDeadline(time.Now().Add(idleTimeout))
		// A failed pong means a broken connection, which the read loop
		// reports by itself.
		_ = conn.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(writeTimeout))
		return nil
	})

	// hello first, then register the session and resend what is pending,
	// all while holding the write lock: a result finished meanwhile either
	// is in the snapshot or is written after it, never before hello.
	s.wmu.Lock()
	hello := t.envelope(protocol.TypeHello, "", "", protocol.Hello{Protocol: protocol.Version, Model: t.cfg.Model, SoftwareVersion: t.SoftwareVersion()})
	if err := s.writeLocked(hello); err != nil {
		s.wmu.Unlock()
		return false, err
	}
	var pending []protocol.Envelope
	refused := false
	t.update(func() {
		if t.offline || time.Now().Before(t.holdUntil) {
			refused = true
			return
		}
		t.sess = s
		for _, r := range t.results {
			if !r.confirmed {
				pending = append(pending, r.env)
			}
		}
		pending = append(pending, t.forwardsLocked()...) // offline.go
	})
	if refused {
		s.wmu.Unlock()
		return false, errors.New("sim: went offline while connecting")
	}
	defer t.update(func() {
		if t.sess == s {
			t.sess = nil
		}
	})
	t.log.Info("sim: connected", "gateway", gw, "resending", len(pending))
	for _, env := range pending {
		if err := s.writeLocked(env); err != nil {
			s.wmu.Unlock()
			return true, err
		}
	}
	s.wmu.Unlock()

	for {
		_ = conn.SetReadDeadline(time.Now().Add(idleTimeout))
		typ, b, err := conn.ReadMessage()
		if err != nil {
			return true, err
		}
		if typ != websocket.TextMessage {
			continue
		}
		var env protocol.Envelope
		if err := json.Unmarshal(b, &env); err != nil {
			t.log.Warn("sim: ignoring a malformed message", "err", err)
			continue
		}
		t.handle(ctx, s, env)
	}
}

// handle acts on one message from the gateway. It runs on the session's
// read loop, so messages are handled in the order they came.
func (t *Terminal) handle(ctx context.Context, s *session, env protocol.Envelope) {
	switch env.Type {
	case protocol.TypeLinkCode:
		var d protocol.LinkCode
		if err := json.Unmarshal(env.Data, &d); err != nil || d.Code == "" {
			t.log.Warn("sim: ignoring a malformed link-code message")
			return
		}
		t.update(func() { t.linkCode, t.terminalID = d.Code, "" })
		t.log.Info("sim: unlinked; showing the link code", "linkCode", d.Code)
	case protocol.TypeLinked:
		var d protocol.Linked
		if err := json.Unmarshal(env.Data, &d); err != nil || d.TerminalID == "" {
			t.log.Warn("sim: ignoring a malformed linked message")
			return
		}
		t.update(func() { t.terminalID, t.linkCode, t.minVersion = d.TerminalID, "", d.MinSoftwareVersion })
		t.log.Info("sim: linked", "terminalId", d.TerminalID)
	case protocol.TypePurchase, protocol.TypeRefund, protocol.TypePreAuth,
		protocol.TypeIncrement, protocol.TypeCapture, protocol.TypeVoid:
		t.command(ctx, s, env)
	case protocol.TypeCancel:
		t.cancel(s, env)
	case protocol.TypeReversal:
		t.reversal(s, env)
	case protocol.TypePrint:
		t.print(s, env)
	case protocol.TypeUpdate:
		t.install(ctx, s, env)
	case protocol.TypeClose:
		t.closeBatch(s, env)
	case protocol.TypeConfirm:
		t.confirm(env.Re)
		t.forwardConfirmed(env.Re) // offline.go
	default:
		t.log.Debug("sim: ignoring a message", "type", env.Type)
	}
}

// send writes env on the current session, if any. Acks and progress
// reports written while disconnected are lost, as on a real device;
// results are kept in t.results and resent.
func (t *Terminal) send(env protocol.Envelope) {
	t.mu.Lock()
	s := t.sess
	t.mu.Unlock()
	t.sendOn(s, env)
}

// sendOn writes env on s and reports whether it went out.
func (t *Terminal) sendOn(s *session, env protocol.Envelope) bool {
	if s == nil {
		return false
	}
	if err := s.write(env); err != nil {
		t.log.Debug("sim: write failed; dropping the session", "type", env.Type, "err", err)
		s.drop()
		return false
	}
	return true
}

// confirmOn tells the gateway, on s, that the terminal has the server
// message env and acted on it: a cancel, a reversal or a print, which the
// gateway sends again after every reconnect until confirmed.
func (t *Terminal) confirmOn(s *session, env protocol.Envelope) {
	t.sendOn(s, protocol.Envelope{Type: protocol.TypeConfirm, ID: t.newID(), Re: env.ID, Ref: env.Ref})
}

// envelope builds a message with a new id, checked by the protocol's own
// rules, which the gateway applies too.
func (t *Terminal) envelope(typ, re, ref string, data any) protocol.Envelope {
	env, err := protocol.NewEnvelope(typ, t.newID(), ref, data)
	if err != nil {
		// A bug in this package: the gateway will refuse the frame.
		t.log.Error("sim: invalid message", "type", typ, "err", err)
		env = &protocol.Envelope{Type: typ, ID: t.newID(), Ref: ref}
		if data != nil {
			env.Data, _ = json.Marshal(data)
		}
	}
	env.Re = re
	return *env
}
