package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/gobwas/ws"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/protocol"
)

// maxCloseGrace bounds how long a closing session waits for the
// terminal's close frame before dropping the connection.
const maxCloseGrace = 2 * time.Second

// session is one terminal connection. Its read loop (run) is its only
// long-lived goroutine: it handles frames one at a time, in order. Writes
// come from any goroutine and take the write slot (wslot), so at most one
// data frame is written at a time and nobody waits for it longer than the
// write timeout; pings are control frames sent from the Server's ping
// queue. Frames are read and written on the raw connection (frames.go).
//
// Every idle terminal holds one: TestIdleSessionMemory reports the heap
// per session.
type session struct {
	g      *Server
	nc     net.Conn
	serial string
	wslot  writeSlot
	// wmu puts frames on the wire one at a time; closeSent, guarded by
	// it, is set once the close frame is written.
	wmu       sync.Mutex
	closeSent bool
	// pingAt is when the session is next pinged, on the Server's
	// pingQueue clock, and pingIdx (below) its place in the queue (-1:
	// not queued); both are guarded by the queue's lock.
	pingAt int64
	// pong holds the data of the latest ping of the terminal while its
	// pong is not yet written (queuePong).
	pong    atomic.Pointer[string]
	pingIdx int32
	// closing is set once the session is on its way out: a close frame
	// was or is being sent, or the connection is to be dropped. Frames
	// read after it are not handled.
	closing   atomic.Bool
	closeCode atomic.Int32
	// ended is set when the read loop has finished.
	ended atomic.Bool
	// registered is set by the read loop after hello; only it reads it.
	registered bool
	// ready is set once DeviceConnected ran: the device was told what it
	// shows and sent what it is owed (cancels of transactions the server
	// ended). Until then it takes messages but is not Ready for a new
	// command, so that none overtakes what it is owed.
	ready atomic.Bool
}

func newSession(g *Server, nc net.Conn, serial string) *session {
	return &session{g: g, nc: nc, serial: serial, pingIdx: -1}
}

func (g *Server) closeGrace() time.Duration { return min(maxCloseGrace, g.write) }

// run is the session's read loop. It waits for the next frame header
// with as little as possible of its own on the stack: a goroutine starts
// with 2 KiB, and one that once needs more keeps 4 KiB for good, as the
// runtime halves a stack at a collection only while less than a quarter
// of it is in use (counting an 800-byte guard), which a goroutine waiting
// in a read never is. With gorilla's read path (NextReader, advanceFrame,
// bufio), io.ReadAll's large frame, or a frame's handling inline, the
// read loop went past 2 KiB, doubling every idle session's stack. So run
// only loops: setting up (start), reading and handling a message (frame)
// and ending (finish) are calls of their own, off the stack while it
// waits. A ping is answered by another goroutine (queuePong).
// TestIdleSessionMemory guards this.
func (s *session) run() {
	s.start()
	var err error
	for err == nil {
		var h ws.Header
		if h, err = ws.ReadHeader(s.nc); err == nil {
			err = s.frame(h)
		} else {
			err = s.headerError(err)
		}
	}
	s.finish(err)
	s.g.wg.Done() // the Server's count of running sessions (ServeHTTP)
}

// start sets the connection up for the read loop: the hello deadline.
//
//go:noinline
func (s *session) start() {
	s.nc.SetReadDeadline(time.Now().Add(s.g.hello))
	if s.closing.Load() { // closed before it started (Close)
		s.nc.SetReadDeadline(time.Now().Add(s.g.closeGrace()))
	}
}

// queuePong has the pong to a ping of the terminal written by a
// short-lived goroutine. Written by the read loop, the write (net, poll,
// syscall) would take it past its 2 KiB stack for good (see run). One
// writer at a time: pings that come while it is on its way are answered
// by one pong, to the latest, as RFC 6455 (5.5.3) allows.
func (s *session) queuePong(data string) {
	if s.pong.Swap(&data) == nil {
		s.g.wg.Add(1) // Close waits for it; the read loop holds a count
		go s.writePongs()
	}
}

func (s *session) writePongs() {
	defer s.g.wg.Done()
	for {
		p := s.pong.Load()
		// A failed pong shows as a failed read or write soon enough.
		s.writeFrame(ws.OpPong, []byte(*p), time.Now().Add(s.g.write))
		if s.pong.CompareAndSwap(p, nil) {
			return
		}
	}
}

// frame reads the rest of the frame of header h, and of its message, and
// handles it. It returns an error only when reading failed or the frame
// was refused, which ends the read loop. A panic while reading the frame
// ends only this session, with 1011, like one while handling it (offload):
// nothing above the read loop would recover it, and the whole process
// would stop.
//
//go:noinline
func (s *session) frame(h ws.Header) (err error) {
	defer func() {
		if p := recover(); p != nil {
			s.g.log.Error("terminal frame reading panicked", "serialNumber", s.serial, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			err = s.refuse(closeInternal, errors.New("internal error"))
		}
	}()
	if hook := testHookFrame.Load(); hook != nil {
		(*hook)(h)
	}
	if h.OpCode.IsControl() {
		return s.control(h)
	}
	op, frame, err := s.message(h)
	if err != nil {
		return err
	}
	if s.closing.Load() {
		return nil // waiting for the terminal's close frame
	}
	if op == ws.OpText && !utf8.Valid(frame) {
		return s.refuse(closeInvalidPayload, errNotUTF8)
	}
	if s.registered {
		s.extend()
	}
	var code int
	var reason string
	switch {
	case op != ws.OpText:
		code, reason = protocol.CloseMalformed, "frames must be JSON text frames"
	case !s.registered:
		code, reason = s.offload(func() (int, string) { return s.hello(frame) })
	default:
		code, reason = s.offload(func() (int, string) { return s.handle(frame) })
	}
	if code != 0 {
		s.close(code, reason, true)
		return nil
	}
	if s.registered {
		s.extend()
	}
	return nil
}

// offload runs fn, a frame's handling, on a goroutine of its own and waits
// for it. The store work a frame causes (SQLite's driver is transpiled C
// with large frames) grows the stack of whichever goroutine runs it; run
// here, it would leave every idle session's long-lived read loop with a
// stack many times what reading needs, shrunk only by halves at later
// collections. The helper's stack goes when it ends, and the read loop
// stays at the minimum (docs/benchmarks.md, sessions).
//
// A panic in fn is logged and closes the session (1011) instead of
// stopping the process.
func (s *session) offload(fn func() (int, string)) (int, string) {
	type answer struct {
		code   int
		reason string
	}
	done := make(chan answer, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				s.g.log.Error("terminal frame handling panicked", "serialNumber", s.serial, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
				done <- answer{closeInternal, "internal error"}
			}
		}()
		code, reason := fn()
		done <- answer{code, reason}
	}()
	a := <-done
	return a.code, a.reason
}

// testHookFrame, when set by a test, runs at the start of every frame.
var testHookFrame atomic.Pointer[func(ws.Header)]

// extend moves the liveness deadline. A close in progress keeps its own,
// shorter deadline: the second check covers a close that raced with the
// first.
func (s *session) extend() {
	if s.closing.Load() {
		return
	}
	s.nc.SetReadDeadline(time.Now().Add(s.g.liveness))
	if s.closing.Load() {
		s.nc.SetReadDeadline(time.Now().Add(s.g.closeGrace()))
	}
}

// close starts closing the session with a close frame of code and reason,
// or, with code 0, drops the connection at once. The first call wins. From
// the read loop (sync) the frame is written at once; from elsewhere by a
// short-lived goroutine, so that the caller never waits on the terminal.
// The read loop then reads on, ignoring frames, until the terminal's
// close frame or the close grace period.
func (s *session) close(code int, reason string, sync bool) {
	if !s.closing.CompareAndSwap(false, true) {
		return
	}
	s.closeCode.Store(int32(code))
	if code == 0 {
		s.nc.SetReadDeadline(time.Now())
		return
	}
	send := func() {
		deadline := time.Now().Add(s.g.closeGrace())
		if err := s.writeClose(code, reason); err != nil {
			deadline = time.Now()
		}
		s.nc.SetReadDeadline(deadline)
	}
	if sync {
		send()
	} else {
		go send()
	}
}

func (s *session) writeClose(code int, reason string) error {
	const maxReason = 123 // a control frame's payload is at most 125 bytes
	if len(reason) > maxReason {
		reason = reason[:maxReason]
	}
	return s.writeFrame(ws.OpClose, ws.NewCloseFrameBody(ws.StatusCode(code), reason), time.Now().Add(s.g.write))
}

// finish ends the session after its read loop stopped with err: it sends
// the close frame the situation calls for, unregisters the session, lets
// the terminal read the close frame, and closes the connection.
func (s *session) finish(err error) {
	s.ended.Store(true)
	s.g.pings.remove(s)
	level, msg := slog.LevelInfo, "terminal session ended"
	drain := false
	var ce *closeError
	var fe *frameError
	switch {
	case errors.As(err, &ce):
		// The terminal closed, or answered our close; control echoed it.
		if !s.closing.Load() {
			s.closeCode.Store(int32(ce.code))
		}
	case s.closing.Load():
		// We closed: the grace period passed, or the connection broke.
	case errors.As(err, &fe):
		// A frame refused: its close frame was sent (refuse).
		s.closing.Store(true)
		s.closeCode.Store(int32(fe.code))
		level, msg, drain = slog.LevelWarn, "terminal broke the WebSocket protocol", true
		if fe.code == closeTooBig {
			msg = "terminal sent a frame larger than the limit"
		}
	case isTimeout(err):
		s.closing.Store(true)
		reason := "no pong or message within the liveness deadline"
		if !s.registered {
			reason = "no hello in time"
		}
		s.closeCode.Store(protocol.CloseTimeout)
		s.writeClose(protocol.CloseTimeout, reason)
		msg, drain = "terminal session timed out", true
	default:
		// The connection broke.
		s.closeCode.Store(int32(closeAbnormal))
		level = slog.LevelDebug
		if !isNetClosed(err) {
			level = slog.LevelInfo
		}
	}
	if s.g.log.Enabled(context.Background(), level) {
		attrs := []slog.Attr{slog.String("serialNumber", s.serial), slog.Int("closeCode", int(s.closeCode.Load()))}
		if ce == nil && err != nil && (!s.closing.Load() || fe != nil) {
			attrs = append(attrs, slog.String("error", err.Error()))
		}
		s.g.log.LogAttrs(context.Background(), level, msg, attrs...)
	}
	s.g.unregister(s, s.registered)
	if drain {
		// Read what the terminal still sends, so that closing does not
		// reset the connection before it has read our close frame.
		s.nc.SetReadDeadline(time.Now().Add(s.g.closeGrace()))
		io.Copy(io.Discard, s.nc)
	}
	s.nc.Close()
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func isNetClosed(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed)
}

// sendPing runs on a goroutine of its own when the session's ping is due
// (pingQueue.fire).
func (s *session) sendPing() {
	if s.closing.Load() || s.ended.Load() {
		return
	}
	// Pings take the write token like messages, so that a message never
	// waits behind a ping stuck on a dead connection. While a message is
	// being written, that write is the test of the connection.
	if s.wslot.tryTake() {
		err := s.writeFrame(ws.OpPing, nil, time.Now().Add(s.g.write))
		s.wslot.release()
		if err != nil {
			s.close(0, "", false)
			return
		}
	}
	s.g.pings.add(s, s.g.ping) // unless the session ended
}

// write sends one frame within the write timeout. A terminal that cannot
// take it in time is dropped: the command did not reach it, so the error
// is ErrOffline.
func (s *session) write(ctx context.Context, frame []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	deadline := time.Now().Add(s.g.write)
	if w := s.wslot.take(); w != nil {
		t := time.NewTimer(s.g.write)
		select {
		case <-w.ch:
			t.Stop()
		case <-ctx.Done():
			t.Stop()
			s.wslot.leave(w)
			return ctx.Err()
		case <-t.C:
			s.wslot.leave(w)
			s.close(0, "", false)
			return fmt.Errorf("%w: the session did not take a message within %v", instore.ErrOffline, s.g.write)
		}
	}
	defer s.wslot.release()
	if s.closing.Load() {
		return instore.ErrOffline
	}
	if err := s.writeFrame(ws.OpText, frame, deadline); err != nil {
		s.close(0, "", false)
		return fmt.Errorf("%w: write: %v", instore.ErrOffline, err)
	}
	return nil
}

// hello handles the first frame: it must be a hello of a supported
// protocol version. The device is then registered and reported connected.
func (s *session) hello(frame []byte) (int, string) {
	env, err := protocol.Decode(frame)
	if err != nil {
		s.logMalformed(err)
		return protocol.CloseMalformed, err.Error()
	}
	if env.Type != protocol.TypeHello {
		return protocol.CloseMalformed, "the first message must be hello"
	}
	// The version first, leniently: a newer hello may have other fields.
	var peek struct {
		Protocol int `json:"protocol"`
	}
	if json.Unmarshal(env.Data, &peek) == nil && peek.Protocol >= 1 && peek.Protocol != protocol.Version {
		s.g.log.LogAttrs(context.Background(), slog.LevelWarn, "terminal speaks an unsupported protocol version",
			slog.String("serialNumber", s.serial), slog.Int("protocol", peek.Protocol))
		return protocol.CloseUnsupported, fmt.Sprintf("protocol %d is not supported; this server speaks %d", peek.Protocol, protocol.Version)
	}
	var h protocol.Hello
	if err := protocol.DecodeData(env, &h); err != nil {
		s.logMalformed(err)
		return protocol.CloseMalformed, err.Error()
	}

	s.g.register(s)
	s.registered = true
	s.extend()
	s.g.pings.add(s, s.g.ping)
	s.g.log.LogAttrs(context.Background(), slog.LevelInfo, "terminal connected",
		slog.String("serialNumber", s.serial), slog.String("model", h.Model), slog.String("softwareVersion", h.SoftwareVersion))

	ctx, cancel := context.WithTimeout(context.Background(), eventTimeout)
	defer cancel()
	if err := s.g.events.DeviceConnected(ctx, s.serial, instore.DeviceHello{Model: h.Model, SoftwareVersion: h.SoftwareVersion}); err != nil {
		s.g.log.LogAttrs(ctx, slog.LevelError, "device connected: event failed",
			slog.String("serialNumber", s.serial), slog.String("error", err.Error()))
		return closeInternal, "internal error; reconnect"
	}
	s.g.markReady(s)
	return 0, ""
}

// handle handles one frame after hello. It returns a close code and reason
// when the session must end.
func (s *session) handle(frame []byte) (int, string) {
	env, err := protocol.Decode(frame)
	if err != nil {
		s.logMalformed(err)
		return protocol.CloseMalformed, err.Error()
	}
	if !protocol.FromTerminal(env.Type) {
		return protocol.CloseMalformed, "a terminal does not send " + env.Type
	}
	if env.Type == protocol.TypeHello {
		return protocol.CloseMalformed, "hello was already received"
	}
	data := protocol.NewData(env.Type) // nil for ack and confirm
	if data != nil {
		if err := protocol.DecodeData(env, data); err != nil {
			s.logMalformed(err)
			return protocol.CloseMalformed, err.Error()
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), eventTimeout)
	defer cancel()
	ev := s.g.events
	switch env.Type {
	case protocol.TypeAck:
		s.logEventError("ack", env.Ref, ev.TerminalAcknowledged(ctx, s.serial, env.Ref))
	case protocol.TypeProgress:
		s.logEventError("progress", env.Ref, ev.TerminalProgress(ctx, s.serial, env.Ref, data.(*protocol.Progress).Stage))
	case protocol.TypeResult:
		r := data.(*protocol.Result)
		if err := ev.TerminalResult(ctx, s.serial, terminalResult(env, r)); err != nil {
			// Not committed: no confirm. The terminal keeps the result and
			// resends it after it reconnects, which the close makes it do.
			s.g.log.LogAttrs(ctx, slog.LevelError, "terminal result not applied",
				slog.String("serialNumber", s.serial), slog.String("ref", env.Ref), slog.String("error", err.Error()))
			return closeInternal, "result not stored; reconnect and resend it"
		}
		confirm, err := protocol.Encode(&protocol.Envelope{Type: protocol.TypeConfirm, ID: s.g.newID(), Re: env.ID, Ref: env.Ref})
		if err != nil { // cannot happen: the ids were validated
			return closeInternal, "internal error; reconnect"
		}
		if err := s.write(ctx, confirm); err != nil {
			s.g.log.LogAttrs(ctx, slog.LevelDebug, "confirm not sent",
				slog.String("serialNumber", s.serial), slog.String("ref", env.Ref), slog.String("error", err.Error()))
		}
	case protocol.TypePrintResult:
		s.logEventError("print-result", env.Ref, ev.TerminalPrintResult(ctx, s.serial, env.Ref, data.(*protocol.PrintResult).StatusID))
	case protocol.TypeUpdateStatus:
		u := data.(*protocol.UpdateStatus)
		r := instore.UpdateReport{Status: u.Status, SoftwareVersion: u.SoftwareVersion, Reason: u.Reason}
		if s.logEventError("update-status", env.Ref, ev.TerminalUpdateStatus(ctx, s.serial, env.Ref, r)) {
			break // not recorded: no confirm; the terminal may report again
		}
		s.confirm(ctx, env)
	case protocol.TypeForwarded:
		f := data.(*protocol.Forwarded)
		r := instore.ForwardReport{MessageID: env.ID, Ref: env.Ref, Declined: *f.Declined, ForwardedAt: f.ForwardedAt}
		if err := ev.TerminalForwarded(ctx, s.serial, r); err != nil {
			// Not recorded: no confirm. As for a result, the close makes
			// the terminal reconnect and resend it now, not at its next
			// reconnect, whenever that is.
			s.logEventError("forwarded", env.Ref, err)
			return closeInternal, "forwarded report not stored; reconnect and resend it"
		}
		s.confirm(ctx, env)
	case protocol.TypeBatch:
		// A closed batch: stored, then confirmed, as a result (batch.go).
		err := errNoBatches
		if be, ok := ev.(instore.BatchEvents); ok {
			err = be.TerminalBatch(ctx, s.serial, data.(*protocol.Batch).Report(env))
		}
		if err != nil {
			s.logEventError("batch", env.Ref, err)
			return closeInternal, "batch not stored; reconnect and resend it"
		}
		s.confirm(ctx, env)
	case protocol.TypeConfirm:
		// The terminal has a message the server owes it until confirmed
		// (cancel, reversal, print): not sent again.
		s.logEventError("confirm", env.Ref, ev.TerminalConfirmed(ctx, s.serial, env.Re))
	}
	return 0, ""
}

func terminalResult(env *protocol.Envelope, r *protocol.Result) instore.TerminalResult {
	receipt := instore.Receipt{Customer: r.CustomerReceipt, Merchant: r.MerchantReceipt}
	if receipt.Customer == nil {
		receipt.Customer = []string{}
	}
	if receipt.Merchant == nil {
		receipt.Merchant = []string{}
	}
	return instore.TerminalResult{
		MessageID: env.ID,
		Ref:       env.Ref,
		StatusID:  r.StatusID,
		TipAmount: r.TipAmount,
		Result: instore.Result{
			EntryMode:         r.EntryMode,
			CardBrand:         r.CardBrand,
			MaskedPAN:         r.MaskedPAN,
			AuthorizationCode: r.AuthorizationCode,
			PaymentMethodID:   r.PaymentMethodID,
			Receipt:           receipt,
			Offline:           r.Offline,
		},
	}
}

func (s *session) logMalformed(err error) {
	s.g.log.LogAttrs(context.Background(), slog.LevelWarn, "terminal sent a malformed message",
		slog.String("serialNumber", s.serial), slog.String("error", err.Error()))
}

// logEventError logs err, the error of applying a terminal's report, if
// there is one, and says whether there was.
func (s *session) logEventError(what, ref string, err error) bool {
	if err == nil {
		return false
	}
	s.g.log.LogAttrs(context.Background(), slog.LevelWarn, "terminal "+what+" not applied",
		slog.String("serialNumber", s.serial), slog.String("ref", ref), slog.String("error", err.Error()))
	return true
}

// confirm tells the terminal that the report env is recorded.
func (s *session) confirm(ctx context.Context, env *protocol.Envelope) {
	frame, err := protocol.Encode(&protocol.Envelope{Type: protocol.TypeConfirm, ID: s.g.newID(), Re: env.ID, Ref: env.Ref})
	if err != nil { // cannot happen: the ids were validated
		return
	}
	if err := s.write(ctx, frame); err != nil {
		s.g.log.LogAttrs(ctx, slog.LevelDebug, "confirm not sent",
			slog.String("serialNumber", s.serial), slog.String("ref", env.Ref), slog.String("error", err.Error()))
	}
}
