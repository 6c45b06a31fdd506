package loadtest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/protocol"
)

// dialers is how many sessions connect at once.
const dialers = 32

func runSessions(ctx context.Context, o *Options) (*Result, error) {
	e, err := newEnv(ctx, o)
	if err != nil {
		return nil, err
	}
	defer e.close()
	r := e.newResult("sessions")
	r.Sessions = o.Sessions
	r.HoldSeconds = o.Duration.Seconds()
	if err := e.seed(ctx, o.Sessions); err != nil {
		return nil, err
	}

	b, err := e.startBaseline("ws")
	if err != nil {
		return nil, err
	}
	e.logf("sessions baseline: bare gorilla WebSocket server, %d idle connections held %s", o.Sessions, o.Duration)
	bf, err := e.holdSessions(ctx, "bare gorilla", "ws://"+b.addr+"/", false, b.stats)
	b.child.stop(10 * time.Second)
	if err != nil {
		return nil, err
	}
	r.Baseline, r.BaselineBytesPerSession = bf.side, bf.bytesPerSession

	if err := e.startServer(ctx); err != nil {
		return nil, err
	}
	if e.srv.terminal == "" {
		return nil, fmt.Errorf("this scenario needs the terminal gateway's URL (target terminal=ws://...)")
	}
	e.logf("sessions: instore, %d idle terminal sessions held %s", o.Sessions, o.Duration)
	f, err := e.holdSessions(ctx, "instore", e.srv.terminal+protocol.Path, true, e.srv.stats)
	if err != nil {
		return nil, err
	}
	r.Ours, r.BytesPerSession = f.side, f.bytesPerSession
	r.SessionHeapBytes, r.SessionStackBytes, r.SessionGoroutines = f.heap, f.stack, f.goroutines
	if r.BytesPerSession > 0 {
		r.Ratio = r.BaselineBytesPerSession / r.BytesPerSession
	}
	// Rates are of session set-up; the verdict is on memory.
	r.BaselineRate = r.Baseline.Rate
	return r, nil
}

// sessionFigures are what holdSessions measured; heap, stack and
// goroutines per session come from the server's /metrics (ours only).
type sessionFigures struct {
	side                    Side
	bytesPerSession         float64
	heap, stack, goroutines float64
}

// holdSessions opens one session per device on url (each says hello and
// waits for the answer: `linked` from the gateway), holds them all idle
// for the duration and returns the set-up figures and the server's RSS
// increase per session: (RSS at the end of the hold - RSS before the first
// connection) / sessions.
func (e *env) holdSessions(ctx context.Context, name, url string, gateway bool, stats func() (procStats, error)) (sessionFigures, error) {
	var out sessionFigures
	n := len(e.devices)
	time.Sleep(500 * time.Millisecond) // let the server settle after its start
	before, err := stats()
	if err != nil {
		return out, err
	}
	var m0 map[string]float64
	if gateway && e.srv.ops != "" {
		m0, _ = scrapeMetrics(ctx, e.srv.ops)
	}
	dialer := &websocket.Dialer{HandshakeTimeout: 30 * time.Second, ReadBufferSize: 1024, WriteBufferSize: 1024}
	conns := make([]*websocket.Conn, n)
	lat := make([]time.Duration, n)
	var failed atomic.Int64
	var firstErr atomic.Pointer[string]
	jobs := make(chan int)
	var wg, readers sync.WaitGroup
	c0, _ := readProc(0)
	start := time.Now()
	for range dialers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				t0 := time.Now()
				conn, err := e.openSession(ctx, dialer, url, e.devices[i], gateway)
				if err != nil {
					failed.Add(1)
					msg := err.Error()
					firstErr.CompareAndSwap(nil, &msg)
					continue
				}
				lat[i], conns[i] = time.Since(t0), conn
				readers.Add(1)
				go func() {
					defer readers.Done()
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
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	setup := time.Since(start)
	c1, _ := readProc(0)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
		readers.Wait()
	}()

	holdStart, err := stats()
	if err != nil {
		return out, err
	}
	t0 := time.Now()
	select {
	case <-time.After(e.o.Duration):
	case <-ctx.Done():
		return out, ctx.Err()
	}
	after, err := stats()
	if err != nil {
		return out, err
	}
	held := time.Since(t0)
	if m0 != nil {
		if m1, err := scrapeMetrics(ctx, e.srv.ops); err == nil {
			per := func(name string) float64 { return (m1[name] - m0[name]) / float64(n) }
			out.heap, out.stack, out.goroutines = per("go_memstats_heap_inuse_bytes"), per("go_memstats_stack_inuse_bytes"), per("go_goroutines")
		}
	}
	if e.o.ProfileDir != "" && gateway {
		e.saveProfile(ctx, "heap", 0)
	}

	var h hist
	var ok int64
	for i, c := range conns {
		if c != nil {
			h.record(lat[i])
			ok++
		}
	}
	s := Side{
		Name: name, Unit: "sessions/s", Count: ok, Seconds: setup.Seconds(),
		Rate:  float64(ok) / setup.Seconds(),
		P50Ms: ms(h.quantile(0.5)), P90Ms: ms(h.quantile(0.9)), P99Ms: ms(h.quantile(0.99)), P999Ms: ms(h.quantile(0.999)),
		MeanMs: ms(h.mean()), MaxMs: ms(h.max), Errors: failed.Load(),
		ServerRSSBytes: after.RSS,
		// The server's CPU while it holds the idle sessions.
		ServerCPU: 100 * (after.CPU - holdStart.CPU).Seconds() / held.Seconds(),
		ClientCPU: 100 * (c1.CPU - c0.CPU).Seconds() / setup.Seconds(),
	}
	if p := firstErr.Load(); p != nil {
		s.FirstError = *p
	}
	out.side = s
	if ok == 0 {
		return out, fmt.Errorf("%s: no session opened: %s", name, s.FirstError)
	}
	out.bytesPerSession = float64(after.RSS-before.RSS) / float64(ok)
	return out, nil
}

// openSession dials, says hello and waits for the answer: `linked` from
// the gateway, any message from the bare server.
func (e *env) openSession(ctx context.Context, dialer *websocket.Dialer, url string, d device, gateway bool) (*websocket.Conn, error) {
	h := http.Header{}
	h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(d.serial+":"+d.secret)))
	conn, resp, err := dialer.DialContext(ctx, url, h)
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("dial: %w (HTTP %d)", err, resp.StatusCode)
		}
		return nil, fmt.Errorf("dial: %w", err)
	}
	hello, _ := protocol.NewEnvelope(protocol.TypeHello, "hello-"+d.serial, "",
		&protocol.Hello{Protocol: protocol.Version, Model: instore.ModelCountertop, SoftwareVersion: "1.0.0"})
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	if err := conn.WriteJSON(hello); err != nil {
		conn.Close()
		return nil, fmt.Errorf("hello: %w", err)
	}
	for range 8 {
		_, msg, err := conn.ReadMessage()
		if err != nil {
			conn.Close()
			return nil, fmt.Errorf("waiting for linked: %w", err)
		}
		var env protocol.Envelope
		if !gateway || (json.Unmarshal(msg, &env) == nil && env.Type == protocol.TypeLinked) {
			conn.SetReadDeadline(time.Time{})
			return conn, nil
		}
	}
	conn.Close()
	return nil, fmt.Errorf("no linked message after hello")
}
