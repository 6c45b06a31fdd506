package gateway

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/protocol"
	"github.com/instore-dev/instore/internal/testwait"
)

// The memory of idle sessions: what one idle session costs the gateway, in
// stack and heap, next to a bare gorilla server (the load tool's baseline:
// a goroutine per connection looping on NextReader, the same buffer
// settings). Clients are raw TCP connections that did the handshake and
// sent one frame, with no goroutine and no gorilla state of their own, so
// that the figures are the server's.

// quietEvents is a recorder that only counts connections: recording a line
// per session would be counted as the session's memory.
type quietEvents struct {
	recorder
	connected, acks atomic.Int64
}

func (q *quietEvents) TerminalAcknowledged(ctx context.Context, serial, ref string) error {
	q.acks.Add(1)
	return nil
}

// ackFrame is what the clients send after hello.
const ackFrame = `{"type":"ack","id":"a-1","ref":"txn_1"}`

func (q *quietEvents) DeviceConnected(ctx context.Context, serial string, h instore.DeviceHello) error {
	q.connected.Add(1)
	return nil
}

func (q *quietEvents) DeviceDisconnected(serial string) {}

// memSample is what runtime/metrics says of live memory after collections.
type memSample struct {
	heap, stack, goroutines float64
}

func sampleMemory() memSample {
	// Two collections: the first may leave finalizers and sweeping; stacks
	// shrink at collections too (by half, while less than a quarter is in
	// use).
	runtime.GC()
	runtime.GC()
	s := []metrics.Sample{
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/stacks:bytes"},
		{Name: "/sched/goroutines:goroutines"},
	}
	metrics.Read(s)
	return memSample{float64(s[0].Value.Uint64()), float64(s[1].Value.Uint64()), float64(s[2].Value.Uint64())}
}

func (m memSample) per(before memSample, n int) memSample {
	return memSample{(m.heap - before.heap) / float64(n), (m.stack - before.stack) / float64(n), (m.goroutines - before.goroutines) / float64(n)}
}

// maskedFrame appends a client frame (final, masked) of opcode op.
func maskedFrame(b []byte, op byte, payload []byte) []byte {
	if len(payload) > 125 {
		panic("only short frames")
	}
	b = append(b, 0x80|op, 0x80|byte(len(payload)), 1, 2, 3, 4)
	key := b[len(b)-4:]
	for i, c := range payload {
		b = append(b, c^key[i%4])
	}
	return b
}

// rawSession opens a WebSocket to addr with the given request path and
// Basic credentials by hand and sends frames, each a masked text frame,
// with an unsolicited pong and a ping between the first and the others.
// It holds back the last bytes and returns them, so that the read loop
// waits in the middle of a message once, until the caller sends them.
func rawSession(addr, path, serial, secret string, frames ...string) (net.Conn, []byte, error) {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	key := make([]byte, 16)
	rand.Read(key)
	req := "GET " + path + " HTTP/1.1\r\nHost: " + addr + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: " + base64.StdEncoding.EncodeToString(key) + "\r\nSec-WebSocket-Version: 13\r\n" +
		"Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(serial+":"+secret)) + "\r\n\r\n"
	if _, err := nc.Write([]byte(req)); err != nil {
		nc.Close()
		return nil, nil, err
	}
	// The server says nothing after its 101 until it hears from us, so
	// the buffered reader cannot take anything of the session.
	resp, err := http.ReadResponse(bufio.NewReader(nc), nil)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSwitchingProtocols {
		nc.Close()
		return nil, nil, fmt.Errorf("status %d", resp.StatusCode)
	}
	var out []byte
	for i, f := range frames {
		out = maskedFrame(out, websocket.TextMessage, []byte(f))
		if i == 0 && len(frames) > 1 {
			out = maskedFrame(out, websocket.PongMessage, nil)
			out = maskedFrame(out, websocket.PingMessage, []byte("ping"))
		}
	}
	last := len(out) - 3
	if _, err := nc.Write(out[:last]); err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, out[last:], nil
}

// idleCost opens n sessions with open(i), sends each the tail open
// returned, and once ready() reports them all ready returns the memory
// per session.
//
// No collection runs while the sessions are set up: an allocation during
// one may make the allocating goroutine assist it, deep in the runtime,
// and a read loop that allocated then (reading a message) keeps the stack
// that took for good, which is chance, not the read path's depth: on a
// loaded machine one run in ten had some read loops at 4 KiB that way.
// The figures are read after collections (sampleMemory), as before.
func idleCost(t *testing.T, n int, open func(i int) (net.Conn, []byte, error), ready func() bool) memSample {
	t.Helper()
	before := sampleMemory()
	gc := debug.SetGCPercent(-1)
	restored := false
	restore := func() {
		if !restored {
			debug.SetGCPercent(gc)
			restored = true
		}
	}
	defer restore()
	conns := make([]net.Conn, 0, n)
	tails := make([][]byte, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := range n {
		c, tail, err := open(i)
		if err != nil {
			t.Fatalf("session %d: %v", i, err)
		}
		conns = append(conns, c)
		tails = append(tails, tail)
	}
	for i, c := range conns {
		if _, err := c.Write(tails[i]); err != nil {
			t.Fatalf("session %d: %v", i, err)
		}
	}
	tails = nil
	testwait.For(t, "all sessions ready", ready)
	restore()
	return sampleMemory().per(before, n)
}

// idleGatewayCost measures n idle sessions of a gateway, each after hello,
// a pong, a ping and an ack.
func idleGatewayCost(t *testing.T, n int) memSample {
	ev := &quietEvents{}
	g := New(Config{Events: ev})
	srv := httptest.NewServer(g)
	defer func() {
		g.Close()
		srv.Close()
	}()
	addr := strings.TrimPrefix(srv.URL, "http://")
	return idleCost(t, n, func(i int) (net.Conn, []byte, error) {
		serial := fmt.Sprintf("SN-%05d", i)
		return rawSession(addr, protocol.Path, serial, secretOf(serial), hello(protocol.Version), ackFrame)
	}, func() bool { return ev.acks.Load() == int64(n) && g.Sessions() == n })
}

// idleBareCost measures n idle sessions of the bare gorilla server of the
// load tool's baseline (internal/loadtest, ServeBaselineWS).
func idleBareCost(t *testing.T, n int) memSample {
	var pool sync.Pool
	up := websocket.Upgrader{
		ReadBufferSize: 1024, WriteBufferSize: 1024, WriteBufferPool: &pool,
		CheckOrigin: func(*http.Request) bool { return true },
	}
	var ready atomic.Int64
	var wg sync.WaitGroup
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer conn.Close()
			for {
				if _, _, err := conn.NextReader(); err != nil {
					return
				}
				ready.Add(1)
			}
		}()
	}))
	defer func() {
		srv.Close()
		wg.Wait()
	}()
	addr := strings.TrimPrefix(srv.URL, "http://")
	return idleCost(t, n, func(i int) (net.Conn, []byte, error) {
		return rawSession(addr, "/", "SN", "x", hello(protocol.Version), ackFrame)
	}, func() bool { return ready.Load() == int64(2*n) })
}

// TestIdleSessionMemory reports the stack and heap of an idle session next
// to the bare gorilla server's (heap figures include the clients' end of
// the connections, alike for both), and guards the heap (no buffer held)
// and the stack: after hello, a
// pong, a ping and a message that came in two parts, an idle session's
// read loop must still have the minimum goroutine stack, 2 KiB. A read
// loop that once needs more keeps 4 KiB for good: the runtime halves a
// stack only while less than a quarter of it is in use, and one waiting
// in a read never is (see session.run). The bare server's
// loop grows to 4 KiB here, on the ping or the split message.
func TestIdleSessionMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 1000 connections, twice")
	}
	const n = 1000
	bare := idleBareCost(t, n)
	ours := idleGatewayCost(t, n)
	t.Logf("per idle session: gateway stack %.0f B, heap %.0f B, goroutines %.2f; bare gorilla stack %.0f B, heap %.0f B, goroutines %.2f",
		ours.stack, ours.heap, ours.goroutines, bare.stack, bare.heap, bare.goroutines)
	if raceEnabled {
		return // the race detector's instrumentation makes stacks larger
	}
	// The minimum stack plus a margin for the test's other goroutines and
	// stack pools; a grown read loop shows as some 4 KiB.
	if ours.stack > 2560 {
		t.Errorf("an idle session's stack is %.0f B, want the 2 KiB minimum", ours.stack)
	}
	// An idle session holds no buffer (frames.go): its heap, with the
	// client's end of the socket, is under 1 KiB (896 B when written); a
	// read buffer of the smallest useful size, or gorilla's Conn, would
	// take it past 1.5 KiB.
	if ours.heap > 1536 {
		t.Errorf("an idle session's heap is %.0f B, want < 1.5 KiB (no buffer held while idle)", ours.heap)
	}
}
