package gateway

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/gorilla/websocket"

	"github.com/instore-dev/instore/internal/protocol"
	"github.com/instore-dev/instore/internal/testwait"
)

// The gateway reads and writes WebSocket frames itself (frames.go, on
// gobwas/ws's primitives). These tests write frames byte by byte on a
// session's socket, including the ones a library client would never send,
// and read the gateway's answers with gorilla's client.

// rawFrame is a client frame: fin, rsv bits (0-7), opcode, masked or not,
// any payload length.
func rawFrame(fin bool, rsv, op byte, masked bool, payload []byte) []byte {
	b0 := rsv<<4 | op
	if fin {
		b0 |= 0x80
	}
	b := []byte{b0}
	var m byte
	if masked {
		m = 0x80
	}
	switch n := len(payload); {
	case n < 126:
		b = append(b, m|byte(n))
	case n <= 0xffff:
		b = append(b, m|126)
		b = binary.BigEndian.AppendUint16(b, uint16(n))
	default:
		b = append(b, m|127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	if !masked {
		return append(b, payload...)
	}
	key := [4]byte{0x37, 0xfa, 0x21, 0x3d}
	b = append(b, key[:]...)
	for i, c := range payload {
		b = append(b, c^key[i%4])
	}
	return b
}

// hugeHeader is the header of a final masked frame announcing 2^63-1
// bytes, the most the 64-bit length may say.
func hugeHeader(op byte) []byte {
	b := []byte{0x80 | op, 0x80 | 127}
	b = binary.BigEndian.AppendUint64(b, 1<<63-1)
	return append(b, 1, 2, 3, 4)
}

func closePayload(code uint16, reason string) []byte {
	return append(binary.BigEndian.AppendUint16(nil, code), reason...)
}

// writeRaw writes bytes on the client's socket, bypassing gorilla.
func (c *client) writeRaw(frames ...[]byte) {
	c.t.Helper()
	nc := c.conn.NetConn()
	nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := nc.Write(bytes.Join(frames, nil)); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// A message in fragments, with a ping between them, is one message; the
// ping is answered with a pong of the same payload.
func TestFragmentedMessage(t *testing.T) {
	h := newHarness(t, Config{})
	c := h.connect("SN-FRAG")
	pongs := make(chan string, 1)
	c.conn.SetPongHandler(func(data string) error { pongs <- data; return nil })

	ack := []byte(`{"type":"ack","id":"a-1","ref":"txn_frag"}`)
	c.writeRaw(
		rawFrame(false, 0, 0x1, true, ack[:10]),
		rawFrame(true, 0, 0x9, true, []byte("between")),
		rawFrame(false, 0, 0x0, true, ack[10:20]),
		rawFrame(true, 0, 0x0, true, ack[20:]),
	)
	testwait.For(t, "the ack", func() bool { return h.ev.count("ack SN-FRAG txn_frag") == 1 })

	// The pong is read (and handled) on the way to the next message.
	if err := h.g.SendLinkCode(context.Background(), "SN-FRAG", "123456"); err != nil {
		t.Fatal(err)
	}
	if env := c.next(); env.Type != protocol.TypeLinkCode {
		t.Fatalf("got %+v, want link-code", env)
	}
	select {
	case p := <-pongs:
		if p != "between" {
			t.Errorf("pong payload = %q, want the ping's %q", p, "between")
		}
	default:
		t.Error("no pong to the ping between the fragments")
	}
}

// Frames that break RFC 6455 close only their session, with 1002 (1009
// for a message over the limit in fragments); nothing of them is handled.
func TestProtocolViolations(t *testing.T) {
	h := newHarness(t, Config{})
	ack := []byte(`{"type":"ack","id":"a-1","ref":"txn_1"}`)
	half := bytes.Repeat([]byte("x"), protocol.MaxFrameBytes/2+1)
	tests := []struct {
		name   string
		frames [][]byte
		code   int
	}{
		{"unmasked", [][]byte{rawFrame(true, 0, 0x1, false, ack)}, websocket.CloseProtocolError},
		{"rsv bit", [][]byte{rawFrame(true, 4, 0x1, true, ack)}, websocket.CloseProtocolError},
		{"reserved opcode", [][]byte{rawFrame(true, 0, 0x3, true, ack)}, websocket.CloseProtocolError},
		{"continuation first", [][]byte{rawFrame(true, 0, 0x0, true, ack)}, websocket.CloseProtocolError},
		{"new message inside a fragmented one", [][]byte{rawFrame(false, 0, 0x1, true, ack[:5]), rawFrame(true, 0, 0x1, true, ack)}, websocket.CloseProtocolError},
		{"fragmented ping", [][]byte{rawFrame(false, 0, 0x9, true, nil)}, websocket.CloseProtocolError},
		{"control frame over 125 bytes", [][]byte{rawFrame(true, 0, 0x9, true, bytes.Repeat([]byte("p"), 126))}, websocket.CloseProtocolError},
		{"close of one byte", [][]byte{rawFrame(true, 0, 0x8, true, []byte{3})}, websocket.CloseProtocolError},
		{"close with a code not for the wire", [][]byte{rawFrame(true, 0, 0x8, true, closePayload(1005, ""))}, websocket.CloseProtocolError},
		{"close with a reason not UTF-8", [][]byte{rawFrame(true, 0, 0x8, true, closePayload(4000, "\xff\xfe"))}, websocket.CloseProtocolError},
		{"over the limit in fragments", [][]byte{rawFrame(false, 0, 0x1, true, half), rawFrame(true, 0, 0x0, true, half)}, websocket.CloseMessageTooBig},
		{"binary", [][]byte{rawFrame(true, 0, 0x2, true, ack)}, protocol.CloseMalformed},
		{"a continuation's length near 2^63", [][]byte{rawFrame(false, 0, 0x1, true, ack[:5]), hugeHeader(0x0)}, websocket.CloseMessageTooBig},
		{"a first frame's length near 2^63", [][]byte{hugeHeader(0x1)}, websocket.CloseMessageTooBig},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			serial := fmt.Sprintf("SN-PV%d", i)
			c := h.connect(serial)
			c.writeRaw(tt.frames...)
			c.expectClose(tt.code)
			testwait.For(t, "DeviceDisconnected", func() bool { return h.ev.count("disconnected "+serial) == 1 })
		})
	}
	if got := h.ev.Events("ack "); len(got) != 0 {
		t.Errorf("acks = %q, want none from refused frames", got)
	}
}

// A terminal's close frame is echoed with its code (an empty one empty)
// and ends the session.
func TestTerminalCloses(t *testing.T) {
	h := newHarness(t, Config{})
	for _, tt := range []struct {
		serial  string
		payload []byte
		want    int
	}{
		{"SN-CLOSE1", closePayload(4000, "bye"), 4000},
		{"SN-CLOSE2", nil, websocket.CloseNoStatusReceived},
	} {
		c := h.connect(tt.serial)
		c.writeRaw(rawFrame(true, 0, 0x8, true, tt.payload))
		c.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, _, err := c.conn.ReadMessage()
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != tt.want {
			t.Errorf("%s: read = %v, want the echo of close %d", tt.serial, err, tt.want)
		}
		testwait.For(t, "DeviceDisconnected", func() bool { return h.ev.count("disconnected "+tt.serial) == 1 })
	}
}

// After its close frame the gateway writes nothing more: a command for a
// closing session fails, and the terminal sees the close frame last.
func TestNothingAfterTheCloseFrame(t *testing.T) {
	h := newHarness(t, Config{})
	c := h.connect("SN-LAST")
	s := h.g.session("SN-LAST")
	if err := s.writeClose(4001, "test"); err != nil {
		t.Fatal(err)
	}
	if err := s.writeFrame(0x1, []byte(`{}`), time.Now().Add(time.Second)); !errors.Is(err, errCloseSent) {
		t.Errorf("write after the close frame = %v, want errCloseSent", err)
	}
	c.expectClose(4001)
}

// A panic while a frame is read ends only that session, with 1011; the
// gateway goes on serving the others.
func TestPanicReadingAFrame(t *testing.T) {
	h := newHarness(t, Config{})
	bystander := h.connect("SN-CALM")
	c := h.connect("SN-PANIC")
	hook := func(hd ws.Header) {
		if hd.OpCode == ws.OpBinary {
			panic("reading bug")
		}
	}
	testHookFrame.Store(&hook)
	t.Cleanup(func() { testHookFrame.Store(nil) })
	c.writeRaw(rawFrame(true, 0, 0x2, true, []byte("x")))
	c.expectClose(websocket.CloseInternalServerErr)
	testwait.For(t, "DeviceDisconnected", func() bool { return h.ev.count("disconnected SN-PANIC") == 1 })
	if !strings.Contains(h.logs.String(), "terminal frame reading panicked") {
		t.Error("the panic was not logged")
	}
	if err := h.g.SendLinkCode(context.Background(), "SN-CALM", "654321"); err != nil {
		t.Fatal(err)
	}
	if env := bystander.next(); env.Type != protocol.TypeLinkCode {
		t.Errorf("bystander got %+v, want link-code", env)
	}
}
