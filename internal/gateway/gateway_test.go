package gateway

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gorilla/websocket"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/httpapi"
	"github.com/instore-dev/instore/internal/logging"
	"github.com/instore-dev/instore/internal/protocol"
	"github.com/instore-dev/instore/internal/testlog"
	"github.com/instore-dev/instore/internal/testwait"
)

// recorder is a TerminalEvents that records what the gateway reports, in
// order, as short lines.
type recorder struct {
	mu           sync.Mutex
	events       []string
	results      []instore.TerminalResult
	failResults  int // how many next TerminalResult calls fail
	failForwards int // how many next TerminalForwarded calls fail
	ackErr       error
	ackPanic     bool
	updateErr    error
	// onConnected runs in DeviceConnected, as the domain sends the link
	// code or terminal ID from there.
	onConnected func(ctx context.Context, serial string) error
}

func secretOf(serial string) string { return "ids_" + serial }

func (r *recorder) add(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, fmt.Sprintf(format, args...))
}

// Events returns the recorded lines that start with prefix.
func (r *recorder) Events(prefix string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events {
		if strings.HasPrefix(e, prefix) {
			out = append(out, e)
		}
	}
	return out
}

func (r *recorder) count(line string) int {
	n := 0
	for _, e := range r.Events("") {
		if e == line {
			n++
		}
	}
	return n
}

func (r *recorder) AuthenticateDevice(ctx context.Context, serial, secret string) (*instore.Device, error) {
	if serial == "ERR" {
		return nil, errors.New("store down")
	}
	if secret != secretOf(serial) || strings.HasPrefix(serial, "UNKNOWN") {
		return nil, instore.Errorf(instore.EUnauthorized, "Unknown device or wrong secret.")
	}
	return &instore.Device{SerialNumber: serial}, nil
}

func (r *recorder) DeviceConnected(ctx context.Context, serial string, h instore.DeviceHello) error {
	r.add("connected %s %s %s", serial, h.Model, h.SoftwareVersion)
	r.mu.Lock()
	f := r.onConnected
	r.mu.Unlock()
	if f != nil {
		return f(ctx, serial)
	}
	return nil
}

func (r *recorder) DeviceDisconnected(serial string) { r.add("disconnected %s", serial) }

func (r *recorder) TerminalAcknowledged(ctx context.Context, serial, ref string) error {
	r.add("ack %s %s", serial, ref)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ackPanic {
		panic("ack handler bug")
	}
	return r.ackErr
}

// set changes the recorder's behaviour while sessions run.
func (r *recorder) set(f func(r *recorder)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(r)
}

func (r *recorder) Results() []instore.TerminalResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]instore.TerminalResult(nil), r.results...)
}

func (r *recorder) TerminalProgress(ctx context.Context, serial, ref string, stage instore.Progress) error {
	r.add("progress %s %s %s", serial, ref, stage)
	return nil
}

func (r *recorder) TerminalResult(ctx context.Context, serial string, res instore.TerminalResult) error {
	r.add("result %s %s %s %d", serial, res.MessageID, res.Ref, res.StatusID)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.results = append(r.results, res)
	if r.failResults > 0 {
		r.failResults--
		return errors.New("store down")
	}
	return nil
}

func (r *recorder) TerminalPrintResult(ctx context.Context, serial, printID string, statusID instore.PrintStatus) error {
	r.add("print-result %s %s %d", serial, printID, statusID)
	return nil
}

func (r *recorder) TerminalConfirmed(ctx context.Context, serial, messageID string) error {
	r.add("confirm %s %s", serial, messageID)
	return nil
}

type harness struct {
	t    *testing.T
	g    *Server
	ev   *recorder
	url  string
	logs *testlog.Buffer
}

// newHarness serves a gateway on loopback behind httpapi.API, as the
// server's terminal listener does.
func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	h := &harness{t: t, ev: &recorder{}, logs: &testlog.Buffer{}}
	cfg.Events = h.ev
	cfg.Logger = logging.New(h.logs, logging.Options{Format: logging.FormatJSON, Level: slog.LevelDebug})
	h.g = New(cfg)
	meta := instore.DefaultMetadata()
	api := httpapi.NewAPI("gateway", cfg.Logger, &meta, nil)
	api.Mux.Handle("GET "+protocol.Path, h.g)
	srv := httptest.NewServer(api)
	h.url = "ws" + strings.TrimPrefix(srv.URL, "http") + protocol.Path
	t.Cleanup(func() {
		h.g.Close()
		srv.Close()
		if t.Failed() {
			t.Logf("gateway log:\n%s", h.logs)
		}
	})
	return h
}

func basic(serial, secret string) http.Header {
	hdr := http.Header{}
	if serial != "" || secret != "" {
		hdr.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(serial+":"+secret)))
	}
	return hdr
}

func (h *harness) dial(serial, secret string) (*websocket.Conn, *http.Response, error) {
	return websocket.DefaultDialer.Dial(h.url, basic(serial, secret))
}

// client is a terminal's end of a session.
type client struct {
	t    *testing.T
	conn *websocket.Conn
}

// open dials as serial without saying hello.
func (h *harness) open(serial string) *client {
	h.t.Helper()
	conn, resp, err := h.dial(serial, secretOf(serial))
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		h.t.Fatalf("dial %s: %v (status %d)", serial, err, status)
	}
	c := &client{t: h.t, conn: conn}
	h.t.Cleanup(func() { conn.Close() })
	return c
}

// connect dials as serial, says hello and waits for DeviceConnected.
func (h *harness) connect(serial string) *client {
	h.t.Helper()
	line := "connected " + serial + " countertop 1.2.3"
	before := h.ev.count(line)
	c := h.open(serial)
	c.send(hello(protocol.Version))
	testwait.For(h.t, "DeviceConnected of "+serial, func() bool { return h.ev.count(line) > before })
	return c
}

func hello(version int) string {
	return fmt.Sprintf(`{"type":"hello","id":"h-1","data":{"protocol":%d,"model":"countertop","softwareVersion":"1.2.3"}}`, version)
}

func (c *client) send(frame string) {
	c.t.Helper()
	c.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if err := c.conn.WriteMessage(websocket.TextMessage, []byte(frame)); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// next reads the next message.
func (c *client) next() *protocol.Envelope {
	c.t.Helper()
	c.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, b, err := c.conn.ReadMessage()
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	env, err := protocol.Decode(b)
	if err != nil {
		c.t.Fatalf("the gateway sent an invalid frame %s: %v", b, err)
	}
	return env
}

// expectClose reads until the gateway closes the session and checks the
// close code. It returns the messages read before the close.
func (c *client) expectClose(code int) []*protocol.Envelope {
	c.t.Helper()
	var got []*protocol.Envelope
	c.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		_, b, err := c.conn.ReadMessage()
		if err != nil {
			var ce *websocket.CloseError
			if !errors.As(err, &ce) {
				c.t.Fatalf("read: %v, want a close frame with code %d", err, code)
			}
			if ce.Code != code {
				c.t.Fatalf("close code = %d (%q), want %d", ce.Code, ce.Text, code)
			}
			return got
		}
		env, err := protocol.Decode(b)
		if err != nil {
			c.t.Fatalf("the gateway sent an invalid frame %s: %v", b, err)
		}
		got = append(got, env)
	}
}

// conns counts the upgraded connections the gateway still holds.
func (g *Server) conns() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.all)
}

func TestAuthentication(t *testing.T) {
	h := newHarness(t, Config{})
	tests := []struct {
		name           string
		serial, secret string
		status         int
		problem        string
	}{
		{"no credentials", "", "", http.StatusUnauthorized, "unauthorized"},
		{"wrong secret", "SN-1", "ids_wrong", http.StatusUnauthorized, "unauthorized"},
		{"unknown device", "UNKNOWN-1", secretOf("UNKNOWN-1"), http.StatusUnauthorized, "unauthorized"},
		{"empty secret", "SN-1", "", http.StatusUnauthorized, "unauthorized"},
		{"check failed", "ERR", secretOf("ERR"), http.StatusServiceUnavailable, "unavailable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn, resp, err := h.dial(tt.serial, tt.secret)
			if err == nil {
				conn.Close()
				t.Fatal("dial succeeded, want the upgrade refused")
			}
			if !errors.Is(err, websocket.ErrBadHandshake) || resp == nil {
				t.Fatalf("dial = %v, want a refused handshake", err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tt.status {
				t.Errorf("status = %d, want %d", resp.StatusCode, tt.status)
			}
			if ct := resp.Header.Get("Content-Type"); ct != httpapi.ProblemContentType {
				t.Errorf("Content-Type = %q, want %q", ct, httpapi.ProblemContentType)
			}
			if tt.status == http.StatusUnauthorized && !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Basic ") {
				t.Errorf("WWW-Authenticate = %q, want Basic", resp.Header.Get("WWW-Authenticate"))
			}
			var p httpapi.Problem
			if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
				t.Fatal(err)
			}
			if want := "urn:instore:problem:" + tt.problem; p.Type != want || p.Status != tt.status {
				t.Errorf("problem = %+v, want type %s status %d", p, want, tt.status)
			}
		})
	}
	if n := h.g.conns(); n != 0 {
		t.Errorf("gateway holds %d connections after refused handshakes, want 0", n)
	}

	t.Run("not a websocket", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, "http"+strings.TrimPrefix(h.url, "ws"), nil)
		req.Header = basic("SN-1", secretOf("SN-1"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Content-Type") != httpapi.ProblemContentType {
			t.Errorf("plain GET = %d %s, want 400 problem", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	})
}

func TestHelloRequired(t *testing.T) {
	h := newHarness(t, Config{})
	tests := []struct {
		name  string
		frame string
		code  int
	}{
		{"ack first", `{"type":"ack","id":"1","ref":"txn_1"}`, protocol.CloseMalformed},
		{"not json", `hello`, protocol.CloseMalformed},
		{"protocol 2", hello(2), protocol.CloseUnsupported},
		{"protocol missing", `{"type":"hello","id":"1","data":{"model":"m","softwareVersion":"1"}}`, protocol.CloseMalformed},
		{"unknown hello field", `{"type":"hello","id":"1","data":{"protocol":1,"model":"m","softwareVersion":"1","x":1}}`, protocol.CloseMalformed},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			serial := fmt.Sprintf("SN-H%d", i)
			c := h.open(serial)
			c.send(tt.frame)
			c.expectClose(tt.code)
			if got := h.ev.Events("connected " + serial); len(got) != 0 {
				t.Errorf("events = %q, want no DeviceConnected", got)
			}
		})
	}
	t.Run("binary frame", func(t *testing.T) {
		c := h.open("SN-HB")
		if err := c.conn.WriteMessage(websocket.BinaryMessage, []byte(hello(1))); err != nil {
			t.Fatal(err)
		}
		c.expectClose(protocol.CloseMalformed)
	})
	testwait.For(t, "the refused sessions to end", func() bool { return h.g.conns() == 0 })
	if got := h.ev.Events(""); len(got) != 0 {
		t.Errorf("events = %q, want none", got)
	}
}

func TestHelloTimeout(t *testing.T) {
	h := newHarness(t, Config{HelloTimeout: 50 * time.Millisecond})
	c := h.open("SN-SLOW")
	c.expectClose(protocol.CloseTimeout)
}

func TestMessagesReachEventsInOrder(t *testing.T) {
	h := newHarness(t, Config{})
	const serial = "SN-ORDER-4711"
	h.ev.set(func(r *recorder) {
		r.onConnected = func(ctx context.Context, s string) error {
			return h.g.SendLinked(ctx, s, "10000001")
		}
	})
	c := h.connect(serial)
	if env := c.next(); env.Type != protocol.TypeLinked || string(env.Data) != `{"terminalId":"10000001"}` {
		t.Fatalf("first message = %+v, want linked", env)
	}
	if !h.g.Online(serial) || h.g.Sessions() != 1 {
		t.Fatalf("Online = %v, Sessions = %d; want true, 1", h.g.Online(serial), h.g.Sessions())
	}

	c.send(`{"type":"ack","id":"t-1","ref":"txn_1"}`)
	for i, stage := range instore.TerminalStages {
		c.send(fmt.Sprintf(`{"type":"progress","id":"t-p%d","ref":"txn_1","data":{"stage":%q}}`, i, stage))
	}
	c.send(`{"type":"print-result","id":"t-x","ref":"prn_1","data":{"statusId":0}}`)
	c.send(`{"type":"result","id":"t-9","ref":"txn_1","data":{"statusId":0,"entryMode":"CONTACTLESS","cardBrand":"VISA",` +
		`"maskedPan":"411111******1111","authorizationCode":"A1B2C3","paymentMethodId":1,` +
		`"customerReceipt":["SALE","SEK 12.50"],"merchantReceipt":["SALE","SEK 12.50","SIGN"]}}`)

	confirm := c.next()
	if confirm.Type != protocol.TypeConfirm || confirm.Re != "t-9" || confirm.Ref != "txn_1" || !strings.HasPrefix(confirm.ID, "s-") {
		t.Errorf("confirm = %+v, want confirm re t-9 ref txn_1", confirm)
	}
	want := []string{
		"connected " + serial + " countertop 1.2.3",
		"ack " + serial + " txn_1",
		"progress " + serial + " txn_1 WAITING_FOR_CARD",
		"progress " + serial + " txn_1 WAITING_FOR_PIN",
		"progress " + serial + " txn_1 AUTHORIZING",
		"print-result " + serial + " prn_1 0",
		"result " + serial + " t-9 txn_1 0",
	}
	if diff := cmp.Diff(want, h.ev.Events("")); diff != "" {
		t.Errorf("events mismatch (-want +got):\n%s", diff)
	}
	one := 1
	wantResult := instore.TerminalResult{MessageID: "t-9", Ref: "txn_1", StatusID: 0, Result: instore.Result{
		EntryMode: "CONTACTLESS", CardBrand: "VISA", MaskedPAN: "411111******1111", AuthorizationCode: "A1B2C3", PaymentMethodID: &one,
		Receipt: instore.Receipt{Customer: []string{"SALE", "SEK 12.50"}, Merchant: []string{"SALE", "SEK 12.50", "SIGN"}},
	}}
	if diff := cmp.Diff([]instore.TerminalResult{wantResult}, h.ev.Results()); diff != "" {
		t.Errorf("results mismatch (-want +got):\n%s", diff)
	}

	c.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
	testwait.For(t, "DeviceDisconnected", func() bool { return h.ev.count("disconnected "+serial) == 1 })
	if h.g.Online(serial) {
		t.Error("Online after the session ended")
	}
	logs := h.logs.String()
	if !strings.Contains(logs, "terminal connected") || strings.Contains(logs, serial) || strings.Contains(logs, "10000001") {
		t.Errorf("the log must show the session without the serial number or terminal ID in clear:\n%s", logs)
	}
}

func TestResultConfirmedOnlyWhenApplied(t *testing.T) {
	h := newHarness(t, Config{})
	const serial = "SN-RESULT"
	const result = `{"type":"result","id":"t-42","ref":"txn_7","data":{"statusId":11,"customerReceipt":["DECLINED"]}}`
	h.ev.set(func(r *recorder) { r.failResults = 1 })

	c := h.connect(serial)
	c.send(result)
	if got := c.expectClose(websocket.CloseInternalServerErr); len(got) != 0 {
		t.Errorf("messages before the close = %+v, want none (no confirm)", got)
	}
	testwait.For(t, "DeviceDisconnected", func() bool { return h.ev.count("disconnected "+serial) == 1 })

	// The terminal reconnects and resends the same result, same id.
	c = h.connect(serial)
	c.send(result)
	confirm := c.next()
	if confirm.Type != protocol.TypeConfirm || confirm.Re != "t-42" {
		t.Errorf("confirm = %+v, want confirm re t-42", confirm)
	}
	if got := h.ev.Events("result "); !cmp.Equal(got, []string{"result SN-RESULT t-42 txn_7 11", "result SN-RESULT t-42 txn_7 11"}) {
		t.Errorf("results = %q, want the same result twice", got)
	}
	if got := h.ev.Results()[1].Result.Receipt; !cmp.Equal(got, instore.Receipt{Customer: []string{"DECLINED"}, Merchant: []string{}}) {
		t.Errorf("receipt = %+v", got)
	}
}

func TestEventErrorsDoNotCloseTheSession(t *testing.T) {
	h := newHarness(t, Config{})
	c := h.connect("SN-EVERR")
	// An ack for an unknown transaction is the domain's error, not a
	// protocol error: logged, the session goes on.
	h.ev.set(func(r *recorder) { r.ackErr = errors.New("no such transaction") })
	c.send(`{"type":"ack","id":"1","ref":"txn_unknown"}`)
	c.send(`{"type":"result","id":"2","ref":"txn_1","data":{"statusId":0}}`)
	if env := c.next(); env.Type != protocol.TypeConfirm || env.Re != "2" {
		t.Errorf("got %+v, want the confirm of the result", env)
	}
	if !strings.Contains(h.logs.String(), "terminal ack not applied") {
		t.Error("the failed ack was not logged")
	}
}

// TestPanicClosesOnlyItsSession: a bug that panics while a frame is
// handled closes that session with 1011 and is logged; the process and the
// other sessions go on.
func TestPanicClosesOnlyItsSession(t *testing.T) {
	h := newHarness(t, Config{})
	other := h.connect("SN-OTHER")
	c := h.connect("SN-PANIC")
	h.ev.set(func(r *recorder) { r.ackPanic = true })
	c.send(`{"type":"ack","id":"1","ref":"txn_1"}`)
	c.expectClose(websocket.CloseInternalServerErr)
	if !strings.Contains(h.logs.String(), "terminal frame handling panicked") {
		t.Error("the panic was not logged")
	}
	h.ev.set(func(r *recorder) { r.ackPanic = false })
	other.send(`{"type":"result","id":"2","ref":"txn_2","data":{"statusId":0}}`)
	if env := other.next(); env.Type != protocol.TypeConfirm || env.Re != "2" {
		t.Errorf("other session got %+v, want the confirm of its result", env)
	}
}

func TestReplacedSession(t *testing.T) {
	h := newHarness(t, Config{})
	const serial = "SN-TWICE"
	old := h.connect(serial)
	cur := h.connect(serial)
	old.expectClose(protocol.CloseReplaced)
	old.conn.Close()
	testwait.For(t, "the old session to end", func() bool { return h.g.conns() == 1 })
	if got := h.ev.Events("disconnected "); len(got) != 0 {
		t.Errorf("DeviceDisconnected = %q after the replaced session ended, want none", got)
	}
	if !h.g.Online(serial) || h.g.Sessions() != 1 {
		t.Fatalf("Online = %v, Sessions = %d; want true, 1", h.g.Online(serial), h.g.Sessions())
	}
	// Commands go to the new session.
	if err := h.g.SendLinkCode(context.Background(), serial, "123456"); err != nil {
		t.Fatal(err)
	}
	if env := cur.next(); env.Type != protocol.TypeLinkCode {
		t.Errorf("new session got %+v, want link-code", env)
	}
	cur.conn.Close()
	testwait.For(t, "DeviceDisconnected", func() bool { return h.ev.count("disconnected "+serial) == 1 })
	testwait.For(t, "no connections", func() bool { return h.g.conns() == 0 })
	if n := h.ev.count("disconnected " + serial); n != 1 {
		t.Errorf("DeviceDisconnected called %d times, want 1", n)
	}
}

func TestSilentTerminalTimesOut(t *testing.T) {
	h := newHarness(t, Config{PingInterval: 50 * time.Millisecond, PongTimeout: 100 * time.Millisecond})
	live := h.connect("SN-LIVE")
	liveDone := make(chan error, 1)
	go func() { // reading answers pings
		for {
			if _, _, err := live.conn.ReadMessage(); err != nil {
				liveDone <- err
				return
			}
		}
	}()

	silent := h.connect("SN-SILENT")
	// The silent terminal reads nothing, so it answers no ping.
	silent.conn.SetPingHandler(func(string) error { return nil })
	testwait.For(t, "the silent terminal to be disconnected", func() bool { return h.ev.count("disconnected SN-SILENT") == 1 })
	if h.g.Online("SN-SILENT") {
		t.Error("the silent terminal is still online")
	}
	silent.expectClose(protocol.CloseTimeout)

	if !h.g.Online("SN-LIVE") {
		t.Error("the terminal answering pings went offline")
	}
	h.g.Close()
	var ce *websocket.CloseError
	if err := <-liveDone; !errors.As(err, &ce) || ce.Code != websocket.CloseGoingAway {
		t.Errorf("live terminal read = %v, want close 1001", err)
	}
}

func TestInvalidFramesCloseOnlyTheirSession(t *testing.T) {
	h := newHarness(t, Config{})
	bystander := h.connect("SN-BYSTANDER")
	tests := []struct {
		name  string
		frame []byte
		code  int
	}{
		{"malformed json", []byte(`{"type":"ack",`), protocol.CloseMalformed},
		{"unknown type", []byte(`{"type":"dance","id":"1"}`), protocol.CloseMalformed},
		{"unknown envelope field", []byte(`{"type":"ack","id":"1","ref":"r","extra":true}`), protocol.CloseMalformed},
		{"bad field", []byte(`{"type":"progress","id":"1","ref":"r","data":{"stage":"DANCING"}}`), protocol.CloseMalformed},
		{"bad result", []byte(`{"type":"result","id":"1","ref":"r","data":{"statusId":0,"maskedPan":"4111111111111111"}}`), protocol.CloseMalformed},
		{"server type", []byte(`{"type":"purchase","id":"1","ref":"r","data":{"amount":1,"currency":"SEK","deadline":"2026-01-01T00:00:00Z"}}`), protocol.CloseMalformed},
		{"second hello", []byte(hello(1)), protocol.CloseMalformed},
		{"oversized", append(append([]byte(`{"type":"ack","id":"1","ref":"r","data":{"x":"`), bytes.Repeat([]byte("x"), protocol.MaxFrameBytes)...), `"}}`...), websocket.CloseMessageTooBig},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			serial := fmt.Sprintf("SN-BAD%d", i)
			c := h.connect(serial)
			if err := c.conn.WriteMessage(websocket.TextMessage, tt.frame); err != nil {
				t.Fatal(err)
			}
			c.expectClose(tt.code)
			testwait.For(t, "DeviceDisconnected", func() bool { return h.ev.count("disconnected "+serial) == 1 })

			// The others are still served.
			if err := h.g.SendLinkCode(context.Background(), "SN-BYSTANDER", fmt.Sprint(100000+i)); err != nil {
				t.Fatalf("SendLinkCode to the bystander: %v", err)
			}
			if env := bystander.next(); env.Type != protocol.TypeLinkCode {
				t.Errorf("bystander got %+v, want link-code", env)
			}
		})
	}
	if got := h.ev.Events("ack "); len(got) != 0 {
		t.Errorf("acks = %q, want none from invalid frames", got)
	}
}

func TestSend(t *testing.T) {
	h := newHarness(t, Config{})
	ctx := context.Background()
	const serial = "SN-SEND"
	c := h.connect(serial)

	deadline := time.Date(2026, 5, 1, 12, 0, 2, 0, time.FixedZone("CEST", 2*3600))
	vat, method := int64(250), 2
	purchase := &instore.Transaction{ID: "txn_p", Type: instore.TypePurchase, Amount: 1250, CashbackAmount: 200, VATAmount: &vat,
		Currency: "SEK", PaymentMethodID: &method, ECRReference: "R-1", DeadlineAt: &deadline}
	refund := &instore.Transaction{ID: "txn_r", Type: instore.TypeRefund, Amount: 500, Currency: "SEK", OriginalID: "txn_p"}
	if err := h.g.SendPayment(ctx, serial, purchase); err != nil {
		t.Fatal(err)
	}
	if err := h.g.SendPayment(ctx, serial, refund); err != nil {
		t.Fatal(err)
	}
	if err := h.g.SendCancel(ctx, serial, "eff_c", "txn_r", instore.CancelByECR); err != nil {
		t.Fatal(err)
	}
	if err := h.g.SendReversal(ctx, serial, "eff_r", "txn_p", instore.ReversalLateApproval); err != nil {
		t.Fatal(err)
	}
	reversal := &instore.Transaction{ID: "txn_v", Type: instore.TypeReversal, Amount: 1250, Currency: "SEK", OriginalID: "txn_p"}
	if err := h.g.SendPayment(ctx, serial, reversal); err != nil {
		t.Fatal(err)
	}
	if err := h.g.SendPrint(ctx, serial, "eff_p", "prt_1", []string{"Thank you", ""}); err != nil {
		t.Fatal(err)
	}

	type msg struct {
		Type, ID, Ref string
		Data          any
	}
	var got []msg
	ids := map[string]bool{}
	for range 6 {
		env := c.next()
		ids[env.ID] = true
		id := env.ID
		if !strings.HasPrefix(id, "eff_") {
			id = "" // the gateway's own
		}
		data := protocol.NewData(env.Type)
		if err := protocol.DecodeData(env, data); err != nil {
			t.Fatal(err)
		}
		got = append(got, msg{env.Type, id, env.Ref, data})
	}
	// The messages owed until confirmed go with the id the domain gives
	// (its effect's), so that every send of one has the same.
	want := []msg{
		{protocol.TypePurchase, "", "txn_p", &protocol.Payment{Amount: 1250, CashbackAmount: 200, VATAmount: &vat, Currency: "SEK",
			PaymentMethodID: &method, ECRReference: "R-1", Deadline: deadline.UTC()}},
		{protocol.TypeRefund, "", "txn_r", &protocol.Payment{Amount: 500, Currency: "SEK", Deadline: time.Time{}.UTC(), OriginalRef: "txn_p"}},
		{protocol.TypeCancel, "eff_c", "txn_r", &protocol.Cancel{Reason: instore.CancelByECR}},
		{protocol.TypeReversal, "eff_r", "txn_p", &protocol.Reversal{Reason: "LATE_APPROVAL"}},
		{protocol.TypeReversal, "", "txn_v", &protocol.Reversal{Reason: "ECR", OriginalRef: "txn_p"}},
		{protocol.TypePrint, "eff_p", "prt_1", &protocol.Print{Lines: []string{"Thank you", ""}}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("messages mismatch (-want +got):\n%s", diff)
	}
	// A print result and a confirm reach the domain.
	c.send(`{"type":"print-result","id":"pr-1","ref":"prt_1","data":{"statusId":2}}`)
	testwait.For(t, "print-result", func() bool { return len(h.ev.Events("print-result "+serial+" prt_1 2")) == 1 })
	c.send(`{"type":"confirm","id":"c-1","re":"eff_c","ref":"txn_r"}`)
	testwait.For(t, "confirm", func() bool { return len(h.ev.Events("confirm "+serial+" eff_c")) == 1 })
	if len(ids) != 6 {
		t.Errorf("message ids %v are not unique", ids)
	}

	if err := h.g.SendPayment(ctx, serial, &instore.Transaction{ID: "txn_x", Type: instore.TypeReversal, Amount: 1, Currency: "SEK"}); err == nil {
		t.Error("SendPayment(REVERSAL without its original) = nil, want an error")
	}
	if err := h.g.SendCancel(ctx, serial, "eff_x", "txn_r", "BORED"); err == nil || errors.Is(err, instore.ErrOffline) {
		t.Errorf("SendCancel(bad reason) = %v, want a validation error", err)
	}
}

func TestSendOffline(t *testing.T) {
	h := newHarness(t, Config{})
	ctx := context.Background()
	tx := &instore.Transaction{ID: "txn_1", Type: instore.TypePurchase, Amount: 1, Currency: "SEK"}
	for name, err := range map[string]error{
		"SendPayment":  h.g.SendPayment(ctx, "SN-NONE", tx),
		"SendCancel":   h.g.SendCancel(ctx, "SN-NONE", "eff_1", "txn_1", instore.CancelDeadline),
		"SendReversal": h.g.SendReversal(ctx, "SN-NONE", "eff_2", "txn_1", instore.ReversalLateApproval),
		"SendPrint":    h.g.SendPrint(ctx, "SN-NONE", "eff_3", "prt_1", []string{"x"}),
		"SendLinked":   h.g.SendLinked(ctx, "SN-NONE", "10000001"),
		"SendLinkCode": h.g.SendLinkCode(ctx, "SN-NONE", "123456"),
	} {
		if !errors.Is(err, instore.ErrOffline) {
			t.Errorf("%s to an offline device = %v, want ErrOffline", name, err)
		}
	}
	// Connected but no hello yet: still offline.
	h.open("SN-NOHELLO")
	if err := h.g.SendLinkCode(ctx, "SN-NOHELLO", "123456"); !errors.Is(err, instore.ErrOffline) {
		t.Errorf("SendLinkCode before hello = %v, want ErrOffline", err)
	}
}

func TestSendDoesNotWaitPastWriteTimeout(t *testing.T) {
	h := newHarness(t, Config{WriteTimeout: 50 * time.Millisecond})
	c := h.connect("SN-STUCK")
	s := h.g.session("SN-STUCK")
	if !s.wslot.tryTake() { // a write that never ends
		t.Fatal("the write slot is taken")
	}
	err := h.g.SendLinkCode(context.Background(), "SN-STUCK", "123456")
	if !errors.Is(err, instore.ErrOffline) {
		t.Errorf("SendLinkCode to a stuck session = %v, want ErrOffline", err)
	}
	s.wslot.release()
	testwait.For(t, "the stuck session to be dropped", func() bool { return h.ev.count("disconnected SN-STUCK") == 1 })
	c.conn.Close()
}

func TestClose(t *testing.T) {
	h := newHarness(t, Config{})
	a, b := h.connect("SN-A"), h.connect("SN-B")
	pending := h.open("SN-PENDING") // no hello yet
	closed := make(chan struct{})
	go func() {
		h.g.Close()
		close(closed)
	}()
	for _, c := range []*client{a, b, pending} {
		c.expectClose(websocket.CloseGoingAway)
	}
	<-closed
	if n := h.g.Sessions(); n != 0 {
		t.Errorf("Sessions after Close = %d, want 0", n)
	}
	_, resp, err := h.dial("SN-A", secretOf("SN-A"))
	if err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("dial after Close = %v, %v; want 503", resp, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "urn:instore:problem:unavailable") {
		t.Errorf("503 body = %s, want the unavailable problem", body)
	}
	if got := len(h.ev.Events("disconnected ")); got != 2 {
		t.Errorf("DeviceDisconnected called %d times, want 2", got)
	}
}

// TestManyIdleSessions opens 500 idle sessions on loopback: all online,
// all closed cleanly by Close.
func TestManyIdleSessions(t *testing.T) {
	if testing.Short() {
		t.Skip("500 connections")
	}
	const n = 500
	h := newHarness(t, Config{})
	clients := make([]*client, n)
	for i := range clients {
		c := h.open(fmt.Sprintf("SN-%04d", i))
		c.send(hello(protocol.Version))
		clients[i] = c
	}
	testwait.For(t, "all sessions", func() bool { return h.g.Sessions() == n })
	for i := range clients {
		if serial := fmt.Sprintf("SN-%04d", i); !h.g.Online(serial) {
			t.Fatalf("Online(%s) = false", serial)
		}
	}

	codes := make(chan int, n)
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				if _, _, err := c.conn.ReadMessage(); err != nil {
					var ce *websocket.CloseError
					if errors.As(err, &ce) {
						codes <- ce.Code
					} else {
						codes <- -1
					}
					return
				}
			}
		}()
	}
	h.g.Close()
	wg.Wait()
	close(codes)
	counts := map[int]int{}
	for code := range codes {
		counts[code]++
	}
	if diff := cmp.Diff(map[int]int{websocket.CloseGoingAway: n}, counts); diff != "" {
		t.Errorf("close codes mismatch (-want +got):\n%s", diff)
	}
	if got := h.g.Sessions(); got != 0 {
		t.Errorf("Sessions after Close = %d, want 0", got)
	}
	if got := len(h.ev.Events("disconnected ")); got != n {
		t.Errorf("DeviceDisconnected called %d times, want %d", got, n)
	}
}

// TerminalUpdateStatus records an update report; updateErr fails it.
func (r *recorder) TerminalUpdateStatus(ctx context.Context, serial, updateID string, u instore.UpdateReport) error {
	r.add("update-status %s %s %s %s %s", serial, updateID, u.Status, u.SoftwareVersion, u.Reason)
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.updateErr
}

// TestSendUpdate: an update command carries the package; linked carries the
// minimum software version the domain gives for the device.
func TestSendUpdate(t *testing.T) {
	minimum := map[string]string{"SN-UPD": "2.0.0"}
	h := newHarness(t, Config{MinSoftwareVersion: func(ctx context.Context, serial string) (string, error) {
		return minimum[serial], nil
	}})
	ctx := context.Background()
	for _, tc := range []struct {
		name, serial, want string
	}{
		{"with a minimum", "SN-UPD", `{"terminalId":"10000001","minSoftwareVersion":"2.0.0"}`},
		{"without a minimum", "SN-NOMIN", `{"terminalId":"10000001"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := h.connect(tc.serial)
			if err := h.g.SendLinked(ctx, tc.serial, "10000001"); err != nil {
				t.Fatal(err)
			}
			if env := c.next(); env.Type != protocol.TypeLinked || string(env.Data) != tc.want {
				t.Errorf("linked = %s %s, want %s", env.Type, env.Data, tc.want)
			}
		})
	}

	c := h.connect("SN-UPD2")
	u := &instore.Update{ID: "upd_1", TerminalID: "10000001", PackageID: "countertop-2.0.0", Status: instore.UpdateScheduled}
	p := &instore.Package{ID: "countertop-2.0.0", Model: instore.ModelCountertop, Name: "Countertop app", Version: "2.0.0",
		Mandatory: true, SizeBytes: 1024, SHA256: strings.Repeat("ab", 32)}
	if err := h.g.SendUpdate(ctx, "SN-UPD2", u, p); err != nil {
		t.Fatal(err)
	}
	env := c.next()
	var got protocol.Update
	if err := protocol.DecodeData(env, &got); err != nil {
		t.Fatalf("DecodeData(%s) = %v", env.Data, err)
	}
	want := protocol.Update{PackageID: p.ID, Name: p.Name, Version: "2.0.0", SizeBytes: 1024, SHA256: p.SHA256, Mandatory: true}
	if env.Type != protocol.TypeUpdate || env.Ref != "upd_1" {
		t.Errorf("message = %s ref %s, want update ref upd_1", env.Type, env.Ref)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("update data (-want +got):\n%s", diff)
	}
	if err := h.g.SendUpdate(ctx, "SN-OFFLINE", u, p); !errors.Is(err, instore.ErrOffline) {
		t.Errorf("SendUpdate(offline) = %v, want ErrOffline", err)
	}
}

// TestUpdateStatus: update-status reports reach the domain and are
// confirmed once recorded; a report the domain refuses is not confirmed
// and leaves the session up; a malformed one closes it.
func TestUpdateStatus(t *testing.T) {
	h := newHarness(t, Config{})
	const serial = "SN-UPSTATUS"
	c := h.connect(serial)
	for _, tc := range []struct {
		name, frame, event string
	}{
		{"downloading", `{"type":"update-status","id":"u-1","ref":"upd_1","data":{"status":"DOWNLOADING"}}`,
			"update-status " + serial + " upd_1 DOWNLOADING  "},
		{"installed", `{"type":"update-status","id":"u-2","ref":"upd_1","data":{"status":"INSTALLED","softwareVersion":"2.0.0"}}`,
			"update-status " + serial + " upd_1 INSTALLED 2.0.0 "},
		{"failed", `{"type":"update-status","id":"u-3","ref":"upd_2","data":{"status":"FAILED","reason":"checksum mismatch"}}`,
			"update-status " + serial + " upd_2 FAILED  checksum mismatch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c.send(tc.frame)
			confirm := c.next()
			if confirm.Type != protocol.TypeConfirm || confirm.Ref == "" {
				t.Errorf("answer = %+v, want a confirm", confirm)
			}
			if got := h.ev.count(tc.event); got != 1 {
				t.Errorf("event %q recorded %d times, want 1; events %q", tc.event, got, h.ev.Events("update-status"))
			}
		})
	}

	// Refused by the domain: no confirm, the session stays.
	h.ev.set(func(r *recorder) { r.updateErr = errors.New("store down") })
	c.send(`{"type":"update-status","id":"u-4","ref":"upd_3","data":{"status":"DOWNLOADING"}}`)
	testwait.For(t, "the refused report", func() bool { return h.ev.count("update-status "+serial+" upd_3 DOWNLOADING  ") == 1 })
	h.ev.set(func(r *recorder) { r.updateErr = nil })
	c.send(`{"type":"update-status","id":"u-5","ref":"upd_3","data":{"status":"DOWNLOADING"}}`)
	if env := c.next(); env.Type != protocol.TypeConfirm || env.Re != "u-5" {
		t.Errorf("after a refused report, answer = %+v, want the confirm of u-5 only", env)
	}

	for _, tc := range []struct{ name, frame string }{
		{"no data", `{"type":"update-status","id":"u-6","ref":"upd_1"}`},
		{"unknown status", `{"type":"update-status","id":"u-7","ref":"upd_1","data":{"status":"DONE"}}`},
		{"installed without version", `{"type":"update-status","id":"u-8","ref":"upd_1","data":{"status":"INSTALLED"}}`},
		{"failed without reason", `{"type":"update-status","id":"u-9","ref":"upd_1","data":{"status":"FAILED"}}`},
		{"no ref", `{"type":"update-status","id":"u-10","data":{"status":"DOWNLOADING"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := h.connect(serial + "-" + strings.ReplaceAll(tc.name, " ", "-"))
			c.send(tc.frame)
			c.expectClose(protocol.CloseMalformed)
		})
	}
}
