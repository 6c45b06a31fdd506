package server_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/instore-dev/instore/internal/server"
)

// TestDrainHandsOffSessionsFirst: at the start of a shutdown /readyz turns
// 503 and the terminals' sessions are closed with 1012 (reconnect, to
// another node) while a request is still in flight, which is then
// answered.
func TestDrainHandsOffSessionsFirst(t *testing.T) {
	ck, clock := newClock()
	s := rawEnv(t, clock, func(c *server.Config) { c.AckTimeout = 3 * time.Second })
	term, d := s.rawTerminal(t, "RAW-DRAIN")

	// A purchase the device never acknowledges: in flight until WP25.
	answered := make(chan int, 1)
	go func() {
		r := s.purchase(t, term, 1000)
		answered <- r.resp.StatusCode
	}()
	d.expect("purchase")

	closed := make(chan error, 1)
	go func() { closed <- s.srv.Close() }()

	// The session is closed with 1012 while the purchase still waits.
	d.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	var code int
	for {
		_, _, err := d.conn.ReadMessage()
		var ce *websocket.CloseError
		if errors.As(err, &ce) {
			code = ce.Code
			break
		}
		if err != nil {
			t.Fatalf("session ended without a close frame: %v", err)
		}
	}
	if code != 1012 {
		t.Errorf("session closed with %d, want 1012 (service restart: reconnect elsewhere)", code)
	}
	select {
	case st := <-answered:
		t.Fatalf("the purchase was answered (%d) before the session was handed off", st)
	default:
	}
	resp, err := http.Get(s.srv.URL("ops") + "/readyz")
	if err != nil {
		t.Fatalf("/readyz while draining: %v (it must answer 503, not stop answering)", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("/readyz while draining = %d, want 503", resp.StatusCode)
	}
	// Answered as a purchase the terminal never acknowledged is: 504 WP25.
	advance(t, ck, 3*time.Second)
	if st := <-answered; st != http.StatusGatewayTimeout {
		t.Errorf("the purchase in flight was answered %d, want 504 WP25", st)
	}
	must(t, <-closed)
}
