package loadtest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// stormDialers is how many terminals of a reconnect storm dial at once:
// every terminal of a dropped node comes back within a second or two, far
// more at once than the set-up's dialers, but under the listen backlog
// (somaxconn, 4,096 here) so that the kernel drops no SYN of either
// server.
const stormDialers = 256

// sessionSet is one session per device on one server (the gateway, or the
// bare WebSocket server), each with a reader that answers the server's
// pings.
type sessionSet struct {
	e       *env
	url     string
	gateway bool
	dialer  *websocket.Dialer
	conns   []*websocket.Conn
	readers sync.WaitGroup
}

func (e *env) newSessionSet(url string, gateway bool) *sessionSet {
	return &sessionSet{
		e: e, url: url, gateway: gateway,
		dialer: &websocket.Dialer{HandshakeTimeout: 30 * time.Second, ReadBufferSize: 1024, WriteBufferSize: 1024},
		conns:  make([]*websocket.Conn, len(e.devices)),
	}
}

// openFigures are what one open of a sessionSet measured: the sessions
// opened and failed, the time from the start (start) to the last one up,
// and each one's latency from its own dial.
type openFigures struct {
	ok, failed int64
	firstErr   string
	elapsed    time.Duration
	h          hist
}

// open opens a session for every device without one, concurrency at a
// time; start is when the clock of the figures started (the drop of a
// storm, or now).
func (s *sessionSet) open(ctx context.Context, concurrency int) openFigures {
	return s.openFrom(ctx, concurrency, time.Now())
}

func (s *sessionSet) openFrom(ctx context.Context, concurrency int, start time.Time) openFigures {
	n := len(s.conns)
	lat := make([]time.Duration, n)
	var failed atomic.Int64
	var firstErr atomic.Pointer[string]
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				t0 := time.Now()
				conn, err := s.e.openSession(ctx, s.dialer, s.url, s.e.devices[i], s.gateway)
				if err != nil {
					failed.Add(1)
					msg := err.Error()
					firstErr.CompareAndSwap(nil, &msg)
					continue
				}
				lat[i], s.conns[i] = time.Since(t0), conn
				s.readers.Add(1)
				go func() {
					defer s.readers.Done()
					// Reading answers the server's pings; it ends at close.
					for {
						if _, _, err := conn.NextReader(); err != nil {
							return
						}
					}
				}()
			}
		}()
	}
	for i := range n {
		if s.conns[i] == nil {
			jobs <- i
		}
	}
	close(jobs)
	wg.Wait()
	o := openFigures{elapsed: time.Since(start), failed: failed.Load()}
	for i, c := range s.conns {
		if c != nil && lat[i] > 0 {
			o.h.record(lat[i])
			o.ok++
		}
	}
	if p := firstErr.Load(); p != nil {
		o.firstErr = *p
	}
	return o
}

// side is o as a Side (rate: sessions up per second of elapsed), with the
// load generator's CPU over it.
func (o *openFigures) side(name string, clientCPU time.Duration) Side {
	h := &o.h
	return Side{
		Name: name, Unit: "sessions/s", Count: o.ok, Seconds: o.elapsed.Seconds(),
		Rate:  float64(o.ok) / o.elapsed.Seconds(),
		P50Ms: ms(h.quantile(0.5)), P90Ms: ms(h.quantile(0.9)), P99Ms: ms(h.quantile(0.99)), P999Ms: ms(h.quantile(0.999)),
		MeanMs: ms(h.mean()), MaxMs: ms(h.max), Errors: o.failed, FirstError: o.firstErr,
		ClientCPU: 100 * clientCPU.Seconds() / o.elapsed.Seconds(),
	}
}

// drop closes every session at once, as a terminal whose node died sees
// it: the connection ends with no close frame.
func (s *sessionSet) drop() {
	for i, c := range s.conns {
		if c != nil {
			c.NetConn().Close()
			s.conns[i] = nil
		}
	}
	s.readers.Wait()
}

// storm drops every session of set at once and opens them all again,
// stormDialers at a time, through the whole hello. Its rate is the
// sessions re-established per second, from the drop to the last one up;
// the latencies are of each reconnect from its dial; the server's CPU is
// over the storm.
func (e *env) storm(ctx context.Context, name string, set *sessionSet, stats func() (procStats, error)) (Side, error) {
	s0, err := stats()
	if err != nil {
		return Side{}, err
	}
	c0, _ := readProc(0)
	start := time.Now()
	set.drop()
	o := set.openFrom(ctx, stormDialers, start)
	c1, _ := readProc(0)
	s1, err := stats()
	if err != nil {
		return Side{}, err
	}
	s := o.side(name, c1.CPU-c0.CPU)
	s.ServerRSSBytes = s1.RSS
	s.ServerCPU = 100 * (s1.CPU - s0.CPU).Seconds() / o.elapsed.Seconds()
	if o.ok == 0 {
		return s, fmt.Errorf("%s: no session came back from the storm: %s", name, s.FirstError)
	}
	return s, nil
}

// stormFigures are the reconnect storm of the sessions scenario: ours
// against the bare WebSocket server's, and the ratio of their rates.
type stormFigures struct {
	Ours     Side    `json:"ours"`
	Baseline Side    `json:"baseline"`
	Ratio    float64 `json:"ratio"`
	Target   float64 `json:"target"`
}

// stormTarget is issue 28's least ratio of sessions re-established per
// second to the bare server's.
const stormTarget = 0.5

// close ends every session.
func (s *sessionSet) close() {
	for _, c := range s.conns {
		if c != nil {
			c.Close()
		}
	}
	s.readers.Wait()
}
