package gateway

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
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
	h.resendAfterFailure(t, serial, result, "t-42", func(r *recorder) { r.failResults = 1 })
	if got := h.ev.Events("result "); !cmp.Equal(got, []string{"result SN-RESULT t-42 txn_7 11", "result SN-RESULT t-42 txn_7 11"}) {
		t.Errorf("results = %q, want the same result twice", got)
	}
	if got := h.ev.Results()[1].Result.Receipt; !cmp.Equal(got, instore.Receipt{Customer: []string{"DECLINED"}, Merchant: []string{}}) {
		t.Errorf("receipt = %+v", got)
	}
}

// resendAfterFailure sends msg (of id) as serial while fail, set on the
// recorder, makes the service fail to store it: the session closes (1011)
// with no confirm; the terminal reconnects and resends the same message,
// same id, which is confirmed.
func (h *harness) resendAfterFailure(t *testing.T, serial, msg, id string, fail func(*recorder)) {
	t.Helper()
	h.ev.set(fail)
	c := h.connect(serial)
	c.send(msg)
	if got := c.expectClose(websocket.CloseInternalServerErr); len(got) != 0 {
		t.Errorf("messages before the close = %+v, want none (no confirm)", got)
	}
	testwait.For(t, "DeviceDisconnected", func() bool { return h.ev.count("disconnected "+serial) == 1 })

	c = h.connect(serial)
	c.send(msg)
	if confirm := c.next(); confirm.Type != protocol.TypeConfirm || confirm.Re != id {
		t.Errorf("confirm = %+v, want confirm re %s", confirm, id)
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
