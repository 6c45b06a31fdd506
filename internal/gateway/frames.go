package gateway

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/gobwas/ws"

	"github.com/instore-dev/instore/internal/protocol"
)

// The WebSocket framing of a session, on gobwas/ws's frame primitives
// (header reading and checking, unmasking, close frames) over the raw
// connection. gorilla still does the handshake (its Upgrader, with the
// problem answers of upgradeError); its Conn is dropped right after, with
// the buffers it would have kept. A gorilla Conn holds a read buffer, a
// bufio.Reader, a write mutex channel and its own state for the whole life
// of the connection, ~1.9 KiB per idle session; reading frames straight
// from the socket, an idle session holds nothing but its goroutine's stack,
// the socket and the session itself (docs/benchmarks.md, sessions).

// Close codes of RFC 6455 (7.4.1) that the gateway sends or reports; the
// protocol's own are in package protocol.
const (
	closeGoingAway      = int(ws.StatusGoingAway)               // 1001
	closeRestart        = 1012                                  // service restart: reconnect (to another node) at once
	closeProtocolError  = int(ws.StatusProtocolError)           // 1002
	closeNoStatus       = int(ws.StatusNoStatusRcvd)            // 1005
	closeAbnormal       = int(ws.StatusAbnormalClosure)         // 1006
	closeInvalidPayload = int(ws.StatusInvalidFramePayloadData) // 1007
	closeTooBig         = int(ws.StatusMessageTooBig)           // 1009
	closeInternal       = int(ws.StatusInternalServerError)     // 1011
)

// closeError is the terminal's close frame: it closed, or answered ours.
type closeError struct {
	code int
	text string
}

func (e *closeError) Error() string { return fmt.Sprintf("websocket: close %d %s", e.code, e.text) }

// frameError is a frame the gateway refused; the close frame with code
// was sent when it was returned.
type frameError struct {
	code int
	err  error
}

func (e *frameError) Error() string { return "websocket: " + e.err.Error() }
func (e *frameError) Unwrap() error { return e.err }

// readStep is the most of a frame's payload read into the message buffer
// at once. A message may be protocol.MaxFrameBytes long (~312 KiB, a
// result with two receipts of 200 lines of 64 characters, escaped at their
// longest); a buffer of that size made from a header alone would let a
// peer that announces the limit and sends nothing more hold it per
// session. Read in steps, the buffer holds at most about twice what
// actually arrived (slices.Grow's growth), and a session holds no buffer
// between messages.
const readStep = 16 << 10

// errTooBig is a message larger than protocol.MaxFrameBytes.
var errTooBig = fmt.Errorf("message larger than %d bytes", protocol.MaxFrameBytes)

// maxHelloBytes bounds what a connection may send before its hello is
// answered: a hello is a few hundred bytes, so a connection that has not
// said hello yet holds at most this much, not a result's
// protocol.MaxFrameBytes (1009 as for any message too large).
const maxHelloBytes = 16 << 10

// errHelloTooBig is a message before hello larger than maxHelloBytes.
var errHelloTooBig = fmt.Errorf("message before hello larger than %d bytes", maxHelloBytes)

// errNotUTF8 is a text message that is not valid UTF-8 (RFC 6455 8.1).
var errNotUTF8 = errors.New("text message not valid UTF-8")

// errCloseSent refuses a frame after the close frame.
var errCloseSent = errors.New("websocket: close frame sent")

// refuse sends a close frame with code and the error as its reason and
// returns the frameError that ends the read loop.
func (s *session) refuse(code int, err error) error {
	s.writeClose(code, err.Error())
	return &frameError{code: code, err: err}
}

// message reads the data message that begins with the frame of header h
// (its payload, then any continuation frames, answering control frames
// that come between them) and returns its opcode and payload.
//
//go:noinline
func (s *session) message(h ws.Header) (ws.OpCode, []byte, error) {
	op := h.OpCode
	state := ws.StateServerSide
	var msg []byte
	limit, tooBig := int64(protocol.MaxFrameBytes), errTooBig
	if !s.registered {
		limit, tooBig = maxHelloBytes, errHelloTooBig
	}
	for {
		if err := ws.CheckHeader(h, state); err != nil {
			return 0, nil, s.refuse(closeProtocolError, err)
		}
		if h.OpCode.IsControl() {
			if err := s.control(h); err != nil {
				return 0, nil, err
			}
		} else {
			// Not len(msg)+h.Length: a length near 2^63 would overflow.
			if h.Length > limit-int64(len(msg)) {
				return 0, nil, s.refuse(closeTooBig, tooBig)
			}
			// In steps of readStep: the buffer grows with what arrives,
			// not with what the header announces.
			start := len(msg)
			for left := int(h.Length); left > 0; {
				k := min(left, readStep)
				n := len(msg)
				msg = slices.Grow(msg, k)[:n+k]
				if _, err := io.ReadFull(s.nc, msg[n:]); err != nil {
					return 0, nil, err
				}
				left -= k
			}
			ws.Cipher(msg[start:], h.Mask, 0)
			if h.Fin {
				return op, msg, nil
			}
			state |= ws.StateFragmented
		}
		var err error
		if h, err = ws.ReadHeader(s.nc); err != nil {
			return 0, nil, s.headerError(err)
		}
	}
}

// headerError is what reading a frame header that failed with err ends
// the read loop with: a 64-bit length with its most significant bit set
// breaks RFC 6455 (5.2) and is refused with 1002; anything else is the
// connection's own error.
//
//go:noinline
func (s *session) headerError(err error) error {
	if errors.Is(err, ws.ErrHeaderLengthMSB) {
		return s.refuse(closeProtocolError, errors.New("frame length with its most significant bit set"))
	}
	return err
}

// control reads and answers the control frame of header h: a ping gets a
// pong (queuePong), a ping or pong extends the liveness deadline, a close
// frame is echoed and ends the read loop with a closeError.
//
//go:noinline
func (s *session) control(h ws.Header) error {
	if err := ws.CheckHeader(h, ws.StateServerSide); err != nil {
		return s.refuse(closeProtocolError, err)
	}
	p := make([]byte, h.Length) // at most 125 bytes (CheckHeader)
	if _, err := io.ReadFull(s.nc, p); err != nil {
		return err
	}
	ws.Cipher(p, h.Mask, 0)
	switch h.OpCode {
	case ws.OpPing:
		if s.registered {
			s.extend()
		}
		s.queuePong(string(p))
	case ws.OpPong:
		if s.registered {
			s.extend()
		}
	case ws.OpClose:
		if len(p) == 0 {
			// No status: echoed empty (RFC 6455 5.5.1).
			s.writeFrame(ws.OpClose, nil, time.Now().Add(s.g.write))
			return &closeError{code: closeNoStatus}
		}
		code, reason := ws.ParseCloseFrameData(p)
		if len(p) == 1 {
			return s.refuse(closeProtocolError, errors.New("close frame payload of one byte"))
		}
		if err := ws.CheckCloseFrameData(code, reason); err != nil {
			return s.refuse(closeProtocolError, err)
		}
		// Echo the code; after our own close frame this is refused
		// (errCloseSent), as it should be.
		s.writeFrame(ws.OpClose, ws.NewCloseFrameBody(code, ""), time.Now().Add(s.g.write))
		return &closeError{code: int(code), text: reason}
	}
	return nil
}

// framePool holds the buffers frames are composed in: a frame is written
// with one write, and an idle session holds no buffer.
var framePool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// appender is an io.Writer appending to a byte slice, for ws.WriteHeader.
type appender struct{ b []byte }

func (a *appender) Write(p []byte) (int, error) {
	a.b = append(a.b, p...)
	return len(p), nil
}

// writeFrame writes one unfragmented frame of opcode op within deadline.
// Frames go out one at a time (wmu), whichever goroutine writes them;
// nothing goes after the close frame.
func (s *session) writeFrame(op ws.OpCode, payload []byte, deadline time.Time) error {
	bp := framePool.Get().(*[]byte)
	a := appender{b: (*bp)[:0]}
	ws.WriteHeader(&a, ws.Header{Fin: true, OpCode: op, Length: int64(len(payload))})
	a.b = append(a.b, payload...)
	s.wmu.Lock()
	err := errCloseSent
	if !s.closeSent {
		s.closeSent = op == ws.OpClose
		s.nc.SetWriteDeadline(deadline)
		_, err = s.nc.Write(a.b)
	}
	s.wmu.Unlock()
	if cap(a.b) <= 64<<10 {
		*bp = a.b
		framePool.Put(bp)
	}
	return err
}
