package gateway

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gobwas/ws"
)

// pipeWriter is a ResponseWriter whose Hijack gives one end of a net.Pipe,
// the other end drained: the upgrade alone, without sockets or net/http.
type pipeWriter struct {
	*httptest.ResponseRecorder
	conn net.Conn
}

func (p pipeWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return p.conn, bufio.NewReadWriter(bufio.NewReader(p.conn), bufio.NewWriter(p.conn)), nil
}

// BenchmarkHandshake is the server side of one WebSocket handshake by the
// gateway's upgrader (gorilla's Upgrader, its Conn dropped at once)
// against gobwas/ws's HTTPUpgrader, in the same run: what the one library
// for the handshake and the frames would save per connection (an idle
// session holds neither's state: TestIdleSessionMemory).
//
//	go test -run '^$' -bench Handshake -benchmem -count 6 ./internal/gateway/
func BenchmarkHandshake(b *testing.B) {
	g := New(Config{Events: &quietEvents{}})
	req := httptest.NewRequest(http.MethodGet, "/terminal/v1/connect", nil)
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	req.Header.Set("Sec-WebSocket-Version", "13")
	run := func(b *testing.B, upgrade func(w http.ResponseWriter) (net.Conn, error)) {
		b.ReportAllocs()
		for b.Loop() {
			server, client := net.Pipe()
			go io.Copy(io.Discard, client)
			nc, err := upgrade(pipeWriter{httptest.NewRecorder(), server})
			if err != nil {
				b.Fatal(err)
			}
			nc.Close()
			client.Close()
		}
	}
	b.Run("gorilla", func(b *testing.B) {
		run(b, func(w http.ResponseWriter) (net.Conn, error) {
			c, err := g.upgrader.Upgrade(w, req, nil)
			if err != nil {
				return nil, err
			}
			return c.NetConn(), nil
		})
	})
	b.Run("gobwas", func(b *testing.B) {
		up := ws.HTTPUpgrader{Timeout: g.write}
		run(b, func(w http.ResponseWriter) (net.Conn, error) {
			nc, _, _, err := up.Upgrade(req, w)
			return nc, err
		})
	})
}
