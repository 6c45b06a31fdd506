package loadtest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"testing"

	"github.com/instore-dev/instore/internal/testwait"
)

// TestSessionSetStorm: a storm drops every session of a set at once and
// opens each again, counting each that came back once, against the bare
// WebSocket server.
func TestSessionSetStorm(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	go ServeBaselineWS(ctx, addr, slog.New(slog.DiscardHandler))
	testwait.ForNil(t, "the bare server listening", func() error {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err
	})
	e := &env{o: &Options{Log: io.Discard}}
	const n = 50
	e.devices = make([]device, n)
	for i := range e.devices {
		e.devices[i] = device{serial: fmt.Sprintf("SN-%d", i), secret: "s"}
	}
	set := e.newSessionSet("ws://"+addr+"/", false)
	defer set.close()
	if o := set.open(ctx, 8); o.ok != n || o.failed != 0 {
		t.Fatalf("open: %d up, %d failed (%s); want %d, 0", o.ok, o.failed, o.firstErr, n)
	}
	s, err := e.storm(ctx, "bare", set, func() (procStats, error) { return readProc(0) })
	if err != nil {
		t.Fatal(err)
	}
	if s.Count != n || s.Errors != 0 || !(s.Rate > 0) || s.P50Ms <= 0 {
		t.Errorf("storm: %+v; want %d back, no errors, a rate and latencies", s, n)
	}
	for i, c := range set.conns {
		if c == nil {
			t.Errorf("session %d not back after the storm", i)
		}
	}
}
