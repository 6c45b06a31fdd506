package gateway

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"
)

// FuzzFrames writes arbitrary bytes to a session after its hello, as a
// terminal could: whatever they are, the read loop must end (or wait)
// without a panic, since nothing recovers one there and it would stop the
// whole gateway. The seeds are valid and invalid frames of frames_test.go.
func FuzzFrames(f *testing.F) {
	ack := []byte(`{"type":"ack","id":"a-1","ref":"txn_1"}`)
	f.Add(rawFrame(true, 0, 0x1, true, ack))
	f.Add(bytes.Join([][]byte{rawFrame(false, 0, 0x1, true, ack[:7]), rawFrame(true, 0, 0x9, true, []byte("p")), rawFrame(true, 0, 0x0, true, ack[7:])}, nil))
	f.Add(rawFrame(true, 0, 0x8, true, closePayload(4000, "bye")))
	f.Add(rawFrame(true, 0, 0x8, true, []byte{3}))
	f.Add(rawFrame(true, 4, 0x1, true, ack))
	f.Add(rawFrame(true, 0, 0x1, false, ack))
	f.Add(append(rawFrame(false, 0, 0x1, true, ack[:3]), hugeHeader(0x0)...))
	f.Add(hugeHeader(0x1))
	f.Add(rawFrame(true, 0, 0x9, true, bytes.Repeat([]byte("p"), 126)))

	g := New(Config{Events: &quietEvents{}, HelloTimeout: time.Second, WriteTimeout: time.Second})
	f.Cleanup(func() { g.Close() })
	f.Fuzz(func(t *testing.T, data []byte) {
		server, client := net.Pipe()
		s := newSession(g, server, "SN-FUZZ")
		s.registered = true // past hello: every frame is handled
		g.wg.Add(1)
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.run()
		}()
		// The gateway's answers (pongs, close frames) are read and
		// dropped, so that its writes never block on the pipe.
		go io.Copy(io.Discard, client)
		client.SetWriteDeadline(time.Now().Add(time.Second))
		client.Write(data)
		client.Close()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("the read loop did not end after the connection closed")
		}
	})
}
