package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/protocol"
	"github.com/instore-dev/instore/internal/testlog"
	"github.com/instore-dev/instore/internal/testwait"
)

// waitTimeout bounds every wait for an event; generous, since the race
// detector slows everything down.
const waitTimeout = 10 * time.Second

const (
	testSerial = "VT-TEST-0001"
	testSecret = "s3cr3t-device-key-do-not-log"
)

// gateway plays the terminal gateway: it checks Basic auth and the hello,
// then hands each connection to the test, which scripts the rest.
type gateway struct {
	srv      *httptest.Server
	mu       sync.Mutex
	devices  map[string]string // serial -> secret
	conns    chan *gwConn
	refused  atomic.Int32 // connections refused for bad credentials
	upgrader websocket.Upgrader
}

// gwConn is one terminal session as the gateway sees it.
type gwConn struct {
	t      *testing.T
	ws     *websocket.Conn
	serial string
	hello  protocol.Hello
	in     chan protocol.Envelope // closed when the connection ends
	wmu    sync.Mutex
	seq    atomic.Int64
	// confirms holds the terminal's confirms that next skipped, for
	// expectConfirm; held the other messages expectConfirm read, for next.
	confirms, held []protocol.Envelope
}

func newGateway(t *testing.T) *gateway {
	t.Helper()
	g := &gateway{devices: map[string]string{testSerial: testSecret}, conns: make(chan *gwConn, 16)}
	g.srv = httptest.NewServer(http.HandlerFunc(g.serve(t)))
	t.Cleanup(g.srv.Close)
	return g
}

func (g *gateway) url() string { return "ws" + strings.TrimPrefix(g.srv.URL, "http") + protocol.Path }

func (g *gateway) addDevice(serial, secret string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.devices[serial] = secret
}

func (g *gateway) serve(t *testing.T) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != protocol.Path {
			http.NotFound(w, r)
			return
		}
		user, pass, ok := r.BasicAuth()
		g.mu.Lock()
		want, known := g.devices[user]
		g.mu.Unlock()
		if !ok || !known || pass != want {
			g.refused.Add(1)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		ws, err := g.upgrader.Upgrade(w, r, nil)
		if err != nil {
			return // the terminal gave up; its test sees no session
		}
		c := &gwConn{t: t, ws: ws, serial: user, in: make(chan protocol.Envelope, 64)}
		_ = ws.SetReadDeadline(time.Now().Add(waitTimeout))
		env, err := readEnvelope(ws)
		if err != nil || env.Type != protocol.TypeHello {
			t.Errorf("first message = %+v, %v; want hello", env, err)
			ws.Close()
			return
		}
		if err := json.Unmarshal(env.Data, &c.hello); err != nil {
			t.Errorf("hello data: %v", err)
		}
		_ = ws.SetReadDeadline(time.Time{})
		go func() {
			defer close(c.in)
			for {
				env, err := readEnvelope(ws)
				if err != nil {
					return
				}
				c.in <- env
			}
		}()
		g.conns <- c
	}
}

// typeInvalid marks a frame the real gateway would refuse (close 4400);
// its Ref holds the reason, and expect fails on it.
const typeInvalid = "INVALID-FRAME"

// readEnvelope reads one frame and checks it as the gateway does: strict
// envelope decoding, and the data of hello, progress and result decoded
// and validated.
func readEnvelope(ws *websocket.Conn) (protocol.Envelope, error) {
	_, b, err := ws.ReadMessage()
	if err != nil {
		return protocol.Envelope{}, err
	}
	env, err := protocol.Decode(b)
	if err != nil {
		return protocol.Envelope{Type: typeInvalid, Ref: err.Error() + ": " + string(b)}, nil
	}
	var data any
	switch env.Type {
	case protocol.TypeHello:
		data = &protocol.Hello{}
	case protocol.TypeProgress:
		data = &protocol.Progress{}
	case protocol.TypeResult:
		data = &protocol.Result{}
	}
	if data != nil {
		if err := protocol.DecodeData(env, data); err != nil {
			return protocol.Envelope{Type: typeInvalid, Ref: err.Error() + ": " + string(b)}, nil
		}
	}
	return *env, nil
}

// accept waits for the next session.
func (g *gateway) accept(t *testing.T) *gwConn {
	t.Helper()
	select {
	case c := <-g.conns:
		c.t = t
		return c
	case <-time.After(waitTimeout):
		t.Fatal("no terminal connected")
		return nil
	}
}

// send sends a server message and returns its id.
func (c *gwConn) send(typ, re, ref string, data any) string {
	c.t.Helper()
	env := protocol.Envelope{Type: typ, ID: "gw-" + typ + "-" + itoa(c.seq.Add(1)), Re: re, Ref: ref}
	if data != nil {
		env.Data, _ = json.Marshal(data)
	}
	b, _ := json.Marshal(env)
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.ws.WriteMessage(websocket.TextMessage, b); err != nil {
		c.t.Fatalf("send %s: %v", typ, err)
	}
	return env.ID
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

func (c *gwConn) link(terminalID string) {
	c.t.Helper()
	c.send(protocol.TypeLinked, "", "", protocol.Linked{TerminalID: terminalID})
}

// purchase sends a purchase and returns the command id.
func (c *gwConn) purchase(ref string, p protocol.Payment) string {
	c.t.Helper()
	return c.send(protocol.TypePurchase, "", ref, p)
}

// cancel sends a cancel and returns its message id.
func (c *gwConn) cancel(ref, reason string) string {
	c.t.Helper()
	return c.send(protocol.TypeCancel, "", ref, protocol.Cancel{Reason: reason})
}

func (c *gwConn) confirm(resultID string) {
	c.t.Helper()
	c.send(protocol.TypeConfirm, resultID, "", nil)
}

// next returns the terminal's next message but a confirm: those the
// terminal sends for the gateway's cancels, reversals and prints are kept
// for expectConfirm.
func (c *gwConn) next() protocol.Envelope {
	c.t.Helper()
	for {
		var env protocol.Envelope
		if len(c.held) > 0 {
			env, c.held = c.held[0], c.held[1:]
		} else {
			env = c.nextAny()
		}
		if env.Type != protocol.TypeConfirm {
			return env
		}
		c.confirms = append(c.confirms, env)
	}
}

// nextAny returns the terminal's next message, whatever its type.
func (c *gwConn) nextAny() protocol.Envelope {
	c.t.Helper()
	select {
	case env, ok := <-c.in:
		if !ok {
			c.t.Fatal("the session ended while a message was expected")
		}
		if env.Type == typeInvalid {
			c.t.Fatalf("the gateway would refuse this frame: %s", env.Ref)
		}
		return env
	case <-time.After(waitTimeout):
		c.t.Fatal("no message from the terminal")
	}
	return protocol.Envelope{}
}

// expectConfirm waits for the terminal's confirm of the gateway's message
// id, for ref; messages of other types that come first are kept for next.
func (c *gwConn) expectConfirm(id, ref string) {
	c.t.Helper()
	for {
		for i, env := range c.confirms {
			if env.Re == id {
				if env.Ref != ref {
					c.t.Errorf("confirm of %s names ref %q, want %q", id, env.Ref, ref)
				}
				c.confirms = append(c.confirms[:i], c.confirms[i+1:]...)
				return
			}
		}
		env := c.nextAny()
		if env.Type != protocol.TypeConfirm {
			c.held = append(c.held, env)
			continue
		}
		c.confirms = append(c.confirms, env)
	}
}

// expect returns the next message, which must be of type typ.
func (c *gwConn) expect(typ string) protocol.Envelope {
	c.t.Helper()
	env := c.next()
	if env.Type != typ {
		c.t.Fatalf("got %s message %+v, want %s", env.Type, env, typ)
	}
	return env
}

// expectAck checks that the next message acknowledges command id for ref.
func (c *gwConn) expectAck(id, ref string) {
	c.t.Helper()
	env := c.expect(protocol.TypeAck)
	if env.Re != id || env.Ref != ref {
		c.t.Fatalf("ack re=%q ref=%q, want re=%q ref=%q", env.Re, env.Ref, id, ref)
	}
}

// result skips progress messages up to the result for ref and returns the
// result message, its data and the stages seen.
func (c *gwConn) result(ref string) (protocol.Envelope, protocol.Result, []instore.Progress) {
	c.t.Helper()
	var stages []instore.Progress
	for {
		env := c.next()
		switch env.Type {
		case protocol.TypeProgress:
			var p protocol.Progress
			_ = json.Unmarshal(env.Data, &p)
			if env.Ref != ref {
				c.t.Fatalf("progress for %q, want %q", env.Ref, ref)
			}
			stages = append(stages, p.Stage)
			continue
		case protocol.TypeResult:
			if env.Ref != ref {
				c.t.Fatalf("result for %q, want %q", env.Ref, ref)
			}
			return env, decodeResult(c.t, env), stages
		default:
			c.t.Fatalf("got %s message %+v, want progress or result", env.Type, env)
		}
	}
}

func decodeResult(t *testing.T, env protocol.Envelope) protocol.Result {
	t.Helper()
	return *decodeData[protocol.Result](t, env)
}

// decodeData decodes the data of env, a message whose data is a T.
func decodeData[T any](t *testing.T, env protocol.Envelope) *T {
	t.Helper()
	var v T
	if err := json.Unmarshal(env.Data, &v); err != nil {
		t.Fatalf("%s data %s: %v", env.Type, env.Data, err)
	}
	return &v
}

// waitClosed waits until the session ends and returns what came before.
func (c *gwConn) waitClosed() []protocol.Envelope {
	c.t.Helper()
	var got []protocol.Envelope
	timeout := time.After(waitTimeout)
	for {
		select {
		case env, ok := <-c.in:
			if !ok {
				return got
			}
			if env.Type == typeInvalid {
				c.t.Errorf("the gateway would refuse this frame: %s", env.Ref)
			}
			got = append(got, env)
		case <-timeout:
			c.t.Fatal("the session did not end")
			return got
		}
	}
}

// payment is a purchase payload of amount SEK minor units with a deadline
// far enough away.
func payment(amount int64) protocol.Payment {
	return protocol.Payment{Amount: amount, Currency: "SEK", Deadline: time.Now().Add(2 * time.Minute)}
}

// running is a terminal under test.
type running struct {
	*Terminal
	log    *testlog.Buffer
	exited chan struct{} // closed when Run returned
	err    error         // what Run returned, once exited
}

// waitExit waits for Run to return and returns its error.
func (r *running) waitExit(t *testing.T) error {
	t.Helper()
	select {
	case <-r.exited:
		return r.err
	case <-time.After(waitTimeout):
		t.Fatal("Run did not return")
		return nil
	}
}

// startTerminal runs a terminal against g until the test ends; mod
// adjusts its configuration.
func startTerminal(t *testing.T, g *gateway, mod func(*Config)) *running {
	t.Helper()
	return startTerminalWith(t, g, mod, nil)
}

// startTerminalWith is startTerminal with a hook that sees the terminal
// before it runs (to replace its sleep); g may be nil if mod sets the
// URLs.
func startTerminalWith(t *testing.T, g *gateway, mod func(*Config), hook func(*Terminal)) *running {
	t.Helper()
	logs := &testlog.Buffer{}
	gw := ""
	if g != nil {
		gw = g.url()
	}
	cfg := Config{
		GatewayURL:   gw,
		SerialNumber: testSerial,
		Secret:       testSecret,
		BackoffMin:   5 * time.Millisecond,
		BackoffMax:   50 * time.Millisecond,
		Logger:       slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if mod != nil {
		mod(&cfg)
	}
	term, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if hook != nil {
		hook(term)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{Terminal: term, log: logs, exited: make(chan struct{})}
	go func() {
		r.err = term.Run(ctx)
		close(r.exited)
	}()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("terminal log:\n%s", logs.String())
		}
	})
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.exited:
			if r.err != nil && r.err != ErrRevoked && r.err != ErrUnsupported {
				t.Errorf("Run = %v, want nil", r.err)
			}
		case <-time.After(waitTimeout):
			t.Error("Run did not return after cancellation")
		}
	})
	return r
}

// waitState polls the terminal's state until ok accepts it.
func waitState(t *testing.T, term *Terminal, what string, ok func(State) bool) State {
	t.Helper()
	var st State
	testwait.ForNil(t, "the terminal's state "+what, func() error {
		if st = term.State(); !ok(st) {
			return fmt.Errorf("state %+v", st)
		}
		return nil
	})
	return st
}

// cardWaits is a Config of linked whose card read takes an hour: a
// transaction stays at its card prompt until the test cancels or
// decides it.
func cardWaits(c *Config) { c.Delay = time.Hour }

// linked marks t parallel (every test of a linked terminal runs beside
// the others: each has its own gateway) and links a terminal (link).
func linked(t *testing.T, mod func(*Config)) (*gateway, *running, *gwConn) {
	t.Helper()
	t.Parallel()
	return link(t, mod)
}

// link starts a terminal, accepts its session and links it.
func link(t *testing.T, mod func(*Config)) (*gateway, *running, *gwConn) {
	t.Helper()
	g := newGateway(t)
	r := startTerminal(t, g, mod)
	c := g.accept(t)
	c.link("10000001")
	waitState(t, r.Terminal, "linked", func(s State) bool { return s.TerminalID == "10000001" })
	return g, r, c
}
