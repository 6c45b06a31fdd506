package loadtest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/gorilla/websocket"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/protocol"
)

// dialers is how many sessions connect at once.
const dialers = 32

func runSessions(ctx context.Context, o *Options) (*Result, error) {
	e, r, err := seededEnv(ctx, o, "sessions", o.Sessions)
	if err != nil {
		return nil, err
	}
	defer e.close()
	r.Sessions = o.Sessions
	r.HoldSeconds = o.Duration.Seconds()

	b, err := e.startBaseline("ws")
	if err != nil {
		return nil, err
	}
	e.logf("sessions baseline: bare gorilla WebSocket server, %d idle connections held %s, then a reconnect storm", o.Sessions, o.Duration)
	bset := e.newSessionSet("ws://"+b.addr+"/", false)
	bf, err := e.holdSessions(ctx, "bare gorilla", bset, b.stats)
	var bstorm Side
	if err == nil {
		bstorm, err = e.storm(ctx, "bare gorilla storm", bset, b.stats)
	}
	bset.close()
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
	e.logf("sessions: instore, %d idle terminal sessions held %s, then a reconnect storm", o.Sessions, o.Duration)
	set := e.newSessionSet(e.srv.terminal+protocol.Path, true)
	defer set.close()
	f, err := e.holdSessions(ctx, "instore", set, e.srv.stats)
	if err != nil {
		return nil, err
	}
	r.Ours, r.BytesPerSession = f.side, f.bytesPerSession
	r.SessionHeapBytes, r.SessionStackBytes, r.SessionGoroutines = f.heap, f.stack, f.goroutines
	r.SessionFDs = f.fds
	if r.BytesPerSession > 0 {
		r.Ratio = r.BaselineBytesPerSession / r.BytesPerSession
	}
	// Rates are of session set-up; the verdict is on memory and the storm.
	r.BaselineRate = r.Baseline.Rate
	// A CPU profile (with --profile) over about the storm: as long as the
	// set-up of as many sessions took, at most 30 s.
	stop := e.profileCPU(ctx, min(int(r.Ours.Seconds)+1, 30))
	ours, err := e.storm(ctx, "instore storm", set, e.srv.stats)
	stop()
	if err != nil {
		return nil, err
	}
	r.Storm = &stormFigures{Ours: ours, Baseline: bstorm, Target: stormTarget}
	if bstorm.Rate > 0 {
		r.Storm.Ratio = ours.Rate / bstorm.Rate
	}
	return r, nil
}

// sessionFigures are what holdSessions measured; heap, stack and
// goroutines per session come from the server's /metrics (ours only).
type sessionFigures struct {
	side                    Side
	bytesPerSession         float64
	heap, stack, goroutines float64
	fds                     float64
}

// holdSessions opens one session per device on url (each says hello and
// waits for the answer: `linked` from the gateway), holds them all idle
// for the duration and returns the set-up figures and the server's RSS
// increase per session: (RSS at the end of the hold - RSS before the first
// connection) / sessions. The sessions stay open: the caller closes them
// (or storms them first).
func (e *env) holdSessions(ctx context.Context, name string, set *sessionSet, stats func() (procStats, error)) (sessionFigures, error) {
	var out sessionFigures
	n := len(e.devices)
	time.Sleep(500 * time.Millisecond) // let the server settle after its start
	before, err := stats()
	if err != nil {
		return out, err
	}
	var m0 map[string]float64
	if set.gateway && e.srv.ops != "" {
		m0, _ = scrapeMetrics(ctx, e.srv.ops)
	}
	c0, _ := readProc(0)
	o := set.open(ctx, dialers)
	c1, _ := readProc(0)

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
			out.fds = per("process_open_fds")
		}
	}
	if e.o.ProfileDir != "" && set.gateway {
		e.saveProfile(ctx, "heap", 0)
	}
	s := o.side(name, c1.CPU-c0.CPU)
	s.ServerRSSBytes = after.RSS
	// The server's CPU while it holds the idle sessions.
	s.ServerCPU = 100 * (after.CPU - holdStart.CPU).Seconds() / held.Seconds()
	out.side = s
	if o.ok == 0 {
		return out, fmt.Errorf("%s: no session opened: %s", name, s.FirstError)
	}
	out.bytesPerSession = float64(after.RSS-before.RSS) / float64(o.ok)
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
