package gateway

import (
	"bufio"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/instore-dev/instore/internal/httpapi"
	"github.com/instore-dev/instore/internal/testwait"
)

// An upgrade request of HTTP/1.0 is not a WebSocket handshake (RFC 6455
// 4.1: HTTP/1.1 or higher): it is answered 400 with a problem, and no
// session starts.
func TestHTTP10UpgradeRefused(t *testing.T) {
	h := newHarness(t, Config{})
	addr := strings.TrimPrefix(strings.TrimSuffix(h.url, "/terminal/v1/connect"), "ws://")
	for _, proto := range []string{"HTTP/1.0", "HTTP/1.1"} {
		t.Run(proto, func(t *testing.T) {
			nc, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			nc.SetDeadline(time.Now().Add(10 * time.Second))
			req := "GET /terminal/v1/connect " + proto + "\r\nHost: " + addr + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
				"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n" +
				"Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("SN-PROTO:"+secretOf("SN-PROTO"))) + "\r\n\r\n"
			if _, err := nc.Write([]byte(req)); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(nc), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if proto == "HTTP/1.1" { // the control: the same request upgrades
				if resp.StatusCode != http.StatusSwitchingProtocols {
					t.Fatalf("status = %d, want 101", resp.StatusCode)
				}
				return
			}
			if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Content-Type") != httpapi.ProblemContentType {
				t.Fatalf("status = %d %s, want 400 problem", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			var p httpapi.Problem
			if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(p.Detail, "HTTP/1.1") {
				t.Errorf("detail = %q, want it to name HTTP/1.1", p.Detail)
			}
		})
	}
	testwait.For(t, "the HTTP/1.1 session to end", func() bool { return h.g.conns() == 0 })
	if got := h.ev.Events("connected "); len(got) != 0 {
		t.Errorf("events = %q, want no session", got)
	}
}

// lengthMSBHeader is the header of a final masked frame whose 64-bit
// length has its most significant bit set, which RFC 6455 (5.2) forbids.
func lengthMSBHeader(op byte) []byte {
	b := []byte{0x80 | op, 0x80 | 127}
	b = binary.BigEndian.AppendUint64(b, 1<<63|5)
	return append(b, 1, 2, 3, 4)
}

// A text message that is not UTF-8 is refused with 1007 (RFC 6455 8.1),
// before hello as after; a 64-bit length with its top bit set with 1002.
// Neither is handled, and the session ends with the close frame, not a
// dropped connection.
func TestInvalidUTF8AndLengthRefused(t *testing.T) {
	h := newHarness(t, Config{})
	badHello := []byte(`{"type":"hello","id":"h-1","data":{"protocol":1,"model":"count` + "\xff\xfe" + `","softwareVersion":"1.2.3"}}`)
	badAck := []byte(`{"type":"ack","id":"a-` + "\xc3\x28" + `","ref":"txn_1"}`)
	tests := []struct {
		name   string
		hello  bool
		frames [][]byte
		code   int
	}{
		{"hello not UTF-8", false, [][]byte{rawFrame(true, 0, 0x1, true, badHello)}, websocket.CloseInvalidFramePayloadData},
		{"hello not UTF-8 in fragments", false, [][]byte{rawFrame(false, 0, 0x1, true, badHello[:60]), rawFrame(true, 0, 0x0, true, badHello[60:])}, websocket.CloseInvalidFramePayloadData},
		{"message not UTF-8", true, [][]byte{rawFrame(true, 0, 0x1, true, badAck)}, websocket.CloseInvalidFramePayloadData},
		{"length with its top bit set before hello", false, [][]byte{lengthMSBHeader(0x1)}, websocket.CloseProtocolError},
		{"length with its top bit set", true, [][]byte{lengthMSBHeader(0x1)}, websocket.CloseProtocolError},
		{"a continuation's length with its top bit set", true, [][]byte{rawFrame(false, 0, 0x1, true, badAck[:5]), lengthMSBHeader(0x0)}, websocket.CloseProtocolError},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			serial := fmt.Sprintf("SN-UTF%d", i)
			var c *client
			if tt.hello {
				c = h.connect(serial)
			} else {
				c = h.open(serial)
			}
			c.t = t
			c.writeRaw(tt.frames...)
			c.expectClose(tt.code)
			if tt.hello {
				testwait.For(t, "DeviceDisconnected", func() bool { return h.ev.count("disconnected "+serial) == 1 })
			} else if got := h.ev.Events("connected " + serial); len(got) != 0 {
				t.Errorf("events = %q, want no DeviceConnected", got)
			}
		})
	}
	testwait.For(t, "the refused sessions to end", func() bool { return h.g.conns() == 0 })
	if got := h.ev.Events("ack "); len(got) != 0 {
		t.Errorf("acks = %q, want none from refused frames", got)
	}
}

// Before its hello a connection may send a message of maxHelloBytes, not
// a result's protocol.MaxFrameBytes: a larger one is refused with 1009
// (so a connection that never says hello holds little), and after hello
// a message of that size is taken.
func TestMessageBeforeHelloBounded(t *testing.T) {
	h := newHarness(t, Config{})
	big := []byte(`{"type":"hello","id":"h-1","data":{"protocol":1,"model":"countertop","softwareVersion":"1.2.3","x":"` +
		strings.Repeat("a", maxHelloBytes) + `"}}`)
	c := h.open("SN-BIGHELLO")
	c.t = t
	c.writeRaw(rawFrame(true, 0, 0x1, true, big))
	c.expectClose(websocket.CloseMessageTooBig)
	if got := h.ev.Events("connected SN-BIGHELLO"); len(got) != 0 {
		t.Errorf("events = %q, want no DeviceConnected", got)
	}
	testwait.For(t, "the refused session to end", func() bool { return h.g.conns() == 0 })
	// The control: after hello the same size is no reason to close.
	ok := h.connect("SN-BIGAFTER")
	ok.t = t
	lines := make([]string, 0, 300) // two receipts of 150 lines: over maxHelloBytes
	for range cap(lines) {
		lines = append(lines, strings.Repeat("a", 64))
	}
	data, _ := json.Marshal(map[string]any{"statusId": 0, "customerReceipt": lines[:len(lines)/2], "merchantReceipt": lines[len(lines)/2:]})
	result, _ := json.Marshal(map[string]any{"type": "result", "id": "r-big", "ref": "txn_1", "data": json.RawMessage(data)})
	if len(result) <= maxHelloBytes {
		t.Fatalf("the result is %d bytes, want more than %d", len(result), maxHelloBytes)
	}
	ok.writeRaw(rawFrame(true, 0, 0x1, true, result))
	testwait.For(t, "the large result", func() bool { return len(h.ev.Events("result SN-BIGAFTER")) > 0 || h.g.conns() < 1 })
	if h.g.conns() != 1 {
		t.Errorf("a result of %d bytes after hello closed the session", len(result))
	}
}
