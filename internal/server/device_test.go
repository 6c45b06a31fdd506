package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/logging"
	"github.com/instore-dev/instore/internal/protocol"
	"github.com/instore-dev/instore/internal/server"
	"github.com/instore-dev/instore/internal/testserver"
	"github.com/instore-dev/instore/internal/testwait"
)

// rawDevice is a terminal written in the test from the protocol alone, so
// that a test can choose exactly when it acknowledges and what it reports.
type rawDevice struct {
	t      testing.TB
	conn   *websocket.Conn
	serial string
	secret string
	n      int
}

// provision creates a device, a terminal ID of the env's merchant and links
// them.
func (e *env) provision(t testing.TB, serial string) (terminalID, secret string) {
	t.Helper()
	ctx := context.Background()
	_, secret, err := e.ad.CreateDevice(ctx, serial, instore.ModelCountertop, e.customer.ID)
	must(t, err)
	ts, err := e.ad.AllocateTerminals(ctx, e.merchantRec.ID, 1)
	must(t, err)
	_, _, err = e.srv.Store.LinkTerminal(ctx, ts[0].TerminalID, serial, time.Now())
	must(t, err)
	return ts[0].TerminalID, secret
}

// rawTerminal provisions serial (see provision) and dials it as a raw
// device to the env's gateway.
func (e *env) rawTerminal(t testing.TB, serial string) (terminalID string, d *rawDevice) {
	t.Helper()
	terminalID, secret := e.provision(t, serial)
	return terminalID, dialDevice(t, e.srv.URL("terminal"), serial, secret)
}

// redial dials the gateway again as d's device (after d dropped or the
// server restarted).
func (e *env) redial(t testing.TB, d *rawDevice) *rawDevice {
	t.Helper()
	return dialDevice(t, e.srv.URL("terminal"), d.serial, d.secret)
}

func dialDevice(t testing.TB, gatewayURL, serial, secret string) *rawDevice {
	t.Helper()
	return dialDeviceVersion(t, gatewayURL, serial, secret, "9.9.9")
}

// dialDeviceVersion connects a raw device that says hello with version.
func dialDeviceVersion(t testing.TB, gatewayURL, serial, secret, version string) *rawDevice {
	t.Helper()
	h := http.Header{}
	req, _ := http.NewRequest("GET", "/", nil)
	req.SetBasicAuth(serial, secret)
	h.Set("Authorization", req.Header.Get("Authorization"))
	var conn *websocket.Conn
	testwait.ForNil(t, "a dial to the gateway (it may still be starting after a restart, or the old session ending)", func() (err error) {
		conn, _, err = websocket.DefaultDialer.Dial(gatewayURL+protocol.Path, h)
		return err
	})
	d := &rawDevice{t: t, conn: conn, serial: serial, secret: secret}
	t.Cleanup(func() { conn.Close() })
	d.send(protocol.TypeHello, "", "", "", protocol.Hello{Protocol: 1, Model: instore.ModelCountertop, SoftwareVersion: version})
	linked := d.expect(protocol.TypeLinked)
	var l protocol.Linked
	must(t, json.Unmarshal(linked.Data, &l))
	return d
}

func (d *rawDevice) send(typ, id, re, ref string, data any) string {
	d.t.Helper()
	if id == "" {
		d.n++
		id = d.serial + "-" + time.Now().Format("150405.000000") + "-" + string(rune('a'+d.n%26))
	}
	env := protocol.Envelope{Type: typ, ID: id, Re: re, Ref: ref}
	if data != nil {
		b, _ := json.Marshal(data)
		env.Data = b
	}
	must(d.t, d.conn.WriteJSON(env))
	return id
}

// expect reads frames until one of type typ arrives (bounded).
func (d *rawDevice) expect(typ string) protocol.Envelope {
	d.t.Helper()
	d.conn.SetReadDeadline(time.Now().Add(15 * time.Second))
	for {
		var env protocol.Envelope
		if err := d.conn.ReadJSON(&env); err != nil {
			d.t.Fatalf("waiting for %s: %v", typ, err)
		}
		if env.Type == typ {
			return env
		}
	}
}

// result sends the terminal's result statusID for the transaction ref and
// reads frames until the server's answer of type reply arrives (a confirm;
// a reversal or a void of an approval the service will not keep).
func (d *rawDevice) result(ref string, statusID instore.TransactionStatus, reply string) protocol.Envelope {
	d.t.Helper()
	d.send(protocol.TypeResult, "", "", ref, protocol.Result{StatusID: statusID})
	return d.expect(reply)
}

func rawEnv(t *testing.T, mutate ...func(*server.Config)) *sandbox {
	e := start(t, func(c *server.Config) {
		c.AckTimeout = time.Second
		c.TransactionDeadline = time.Second
		c.RateLimit = 0
		for _, m := range mutate {
			if m != nil {
				m(c)
			}
		}
	})
	return &sandbox{env: e}
}

func TestLateApprovalAfterDeadlineIsReversed(t *testing.T) {
	ck, clock := newClock()
	s := rawEnv(t, clock)
	term, d := s.rawTerminal(t, "RAW-1")
	cmd, done := s.startPurchase(t, d, term, 5000)
	d.send(protocol.TypeAck, "", cmd.ID, cmd.Ref, nil)
	tx := (<-done).tx(t, 201)
	advance(t, ck, time.Second) // the deadline
	cancel := d.expect(protocol.TypeCancel)
	var c protocol.Cancel
	must(t, json.Unmarshal(cancel.Data, &c))
	if cancel.Ref != tx.OnlineAPIRefID || c.Reason != instore.CancelDeadline {
		t.Fatalf("cancel = %+v %+v, want DEADLINE for %s", cancel, c, tx.OnlineAPIRefID)
	}
	// The terminal had approved meanwhile: its result arrives late.
	resID := d.send(protocol.TypeResult, "", "", tx.OnlineAPIRefID, protocol.Result{StatusID: 0, MaskedPAN: "476173******0119", AuthorizationCode: "A1B2C3"})
	rev := d.expect(protocol.TypeReversal)
	if rev.Ref != tx.OnlineAPIRefID {
		t.Errorf("reversal for %q, want %q", rev.Ref, tx.OnlineAPIRefID)
	}
	conf := d.expect(protocol.TypeConfirm)
	if conf.Re != resID {
		t.Errorf("confirm re %q, want %q", conf.Re, resID)
	}
	final := s.transaction(t, tx.OnlineAPIRefID)
	wantStatus(t, final, instore.StatusReversed, "WP36", "late approval")
	// The same result again (a resend): confirmed, nothing changes.
	d.send(protocol.TypeResult, resID, "", tx.OnlineAPIRefID, protocol.Result{StatusID: 0})
	if conf := d.expect(protocol.TypeConfirm); conf.Re != resID {
		t.Errorf("resend confirm re %q", conf.Re)
	}
	again := s.transaction(t, tx.OnlineAPIRefID)
	if again.Version != final.Version || again.StatusID != instore.StatusReversed {
		t.Errorf("a resent result changed the transaction: %+v then %+v", final, again)
	}
}

func TestLateApprovalAfterAckTimeoutIsReversed(t *testing.T) {
	ck, clock := newClock()
	s := rawEnv(t, clock)
	term, d := s.rawTerminal(t, "RAW-2")
	cmd, done := s.startPurchase(t, d, term, 5000)
	advance(t, ck, time.Second) // the ack time-out
	p := (<-done).problem(t, 504, "WP25")
	if p.OnlineAPIRefID != cmd.Ref {
		t.Fatalf("WP25 names %q, command was %q", p.OnlineAPIRefID, cmd.Ref)
	}
	drop := d.expect(protocol.TypeCancel)
	var c protocol.Cancel
	must(t, json.Unmarshal(drop.Data, &c))
	if c.Reason != instore.CancelAckTimeout {
		t.Errorf("cancel reason %q, want ACK_TIMEOUT", c.Reason)
	}
	d.result(cmd.Ref, 0, protocol.TypeReversal)
	wantStatus(t, s.transaction(t, cmd.Ref), instore.StatusReversed, "WP25", "late approval after WP25")
}

// TestCancelRacesResult: the ECR cancels, but the terminal had already
// approved; the terminal's status stands, without WP37.
func TestCancelRacesResult(t *testing.T) {
	s := rawEnv(t, func(c *server.Config) { c.TransactionDeadline = 10 * time.Second })
	term, d := s.rawTerminal(t, "RAW-3")
	cmd := s.ackedPurchase(t, d, term, 5000)
	s.post(t, "/in-store/api/v1/cancel", map[string]any{"terminalId": term}, nil).tx(t, 202)
	d.expect(protocol.TypeCancel)
	d.result(cmd.Ref, 0, protocol.TypeConfirm)
	wantStatus(t, s.transaction(t, cmd.Ref), instore.StatusApproved, "", "cancel racing an approval")
}

// TestCancelDuringAckWait: a cancel sent while the purchase request still
// waits for the terminal's ack, naming the transaction GET /terminal shows,
// reaches the terminal; the purchase request then answers 201 with the
// aborted transaction (ABORTED_BY_CASHIER with WP37), as the contract's
// cancel section says.
func TestCancelDuringAckWait(t *testing.T) {
	s := rawEnv(t, func(c *server.Config) { c.AckTimeout = 10 * time.Second })
	term, d := s.rawTerminal(t, "RAW-CANCEL-ACK")
	cmd, done := s.startPurchase(t, d, term, 5000)
	var view struct {
		Busy    bool    `json:"busy"`
		Current *string `json:"currentOnlineAPIRefId"`
	}
	must(t, json.Unmarshal(s.get(t, "/in-store/api/v1/terminal/"+term).body, &view))
	if !view.Busy || view.Current == nil || *view.Current != cmd.Ref {
		t.Fatalf("terminal during the ack wait = %+v, want busy with %s", view, cmd.Ref)
	}
	c := s.post(t, "/in-store/api/v1/cancel", map[string]any{"terminalId": term, "onlineAPIRefId": cmd.Ref}, nil).tx(t, 202)
	if c.OnlineAPIRefID != cmd.Ref || c.StatusID != instore.StatusPending {
		t.Errorf("cancel answered %+v", c)
	}
	if got := d.expect(protocol.TypeCancel); got.Ref != cmd.Ref {
		t.Errorf("cancel for %q, want %q", got.Ref, cmd.Ref)
	}
	d.result(cmd.Ref, instore.StatusAbortedByCashier, protocol.TypeConfirm)
	tx := (<-done).tx(t, 201)
	wantStatus(t, tx, instore.StatusAbortedByCashier, "WP37", "purchase")
}

// TestRestartMidTransaction: the server stops after the ack; the terminal's
// result, resent to the restarted server, is applied exactly once.
func TestRestartMidTransaction(t *testing.T) {
	s := rawEnv(t, func(c *server.Config) { c.TransactionDeadline = 30 * time.Second })
	term, d := s.rawTerminal(t, "RAW-4")
	cmd := s.ackedPurchase(t, d, term, 5000)
	addrs := map[string]string{}
	for _, n := range []string{"online", "access", "terminal", "ops"} {
		addrs[n] = s.srv.URL(n)[len("http://"):]
	}
	addrs["terminal"] = s.srv.URL("terminal")[len("ws://"):]
	must(t, s.srv.Close())

	srv2 := testserver.Start(t, server.Config{
		ListenOnline: addrs["online"], ListenAccess: addrs["access"], ListenTerminal: addrs["terminal"], ListenOps: addrs["ops"],
		DataDir: s.srv.DataDir(), SQLiteSynchronous: "FULL", TransactionDeadline: 30 * time.Second, AckTimeout: time.Second,
		Logger: logging.New(s.logs, logging.Options{Format: "json"}),
	})
	s.srv = srv2

	d2 := s.redial(t, d)
	id := d2.send(protocol.TypeResult, "", "", cmd.Ref, protocol.Result{StatusID: 0, AuthorizationCode: "ZZ9"})
	if c := d2.expect(protocol.TypeConfirm); c.Re != id {
		t.Fatalf("confirm re %q, want %q", c.Re, id)
	}
	first := s.transaction(t, cmd.Ref)
	d2.send(protocol.TypeResult, id, "", cmd.Ref, protocol.Result{StatusID: 0, AuthorizationCode: "ZZ9"})
	d2.expect(protocol.TypeConfirm)
	again := s.transaction(t, cmd.Ref)
	if first.StatusID != instore.StatusApproved || again.Version != first.Version {
		t.Errorf("after restart: %+v then %+v, want APPROVED applied once", first, again)
	}
	_ = d
}

// TestLateReversalStillReversesTheOriginal: a reversal the service gave up
// on (WP25) that the terminal approves late has returned the money, so the
// original becomes REVERSED; the reversal keeps its final status.
func TestLateReversalStillReversesTheOriginal(t *testing.T) {
	ck, clock := newClock()
	s := rawEnv(t, clock, func(c *server.Config) { c.TransactionDeadline = 10 * time.Second })
	term, d := s.rawTerminal(t, "RAW-5")
	cmd := s.ackedPurchase(t, d, term, 5000)
	d.result(cmd.Ref, 0, protocol.TypeConfirm)

	rev, pc := s.startReversal(t, d, cmd.Ref)
	advance(t, ck, time.Second) // the ack time-out
	p := (<-pc).problem(t, 504, "WP25")
	if p.OnlineAPIRefID != rev.Ref {
		t.Fatalf("WP25 names %q, the reversal command was %q", p.OnlineAPIRefID, rev.Ref)
	}
	d.result(rev.Ref, 0, protocol.TypeConfirm)
	var orig, r txFull
	must(t, json.Unmarshal(s.get(t, "/in-store/api/v1/transaction/"+cmd.Ref).body, &orig))
	must(t, json.Unmarshal(s.get(t, "/in-store/api/v1/transaction/"+rev.Ref).body, &r))
	if orig.StatusID != instore.StatusReversed || orig.ReversedBy == nil || *orig.ReversedBy != rev.Ref {
		t.Errorf("original = %d reversedBy %v, want REVERSED by %s", orig.StatusID, orig.ReversedBy, rev.Ref)
	}
	if r.StatusID != instore.StatusTechnicalError || r.ErrorCode != "WP25" || r.Result == nil {
		t.Errorf("late reversal = %d %v, want TECHNICAL_ERROR with WP25 and its result", r.StatusID, r.ErrorCode)
	}
}

// startPurchase sends the ECR's purchase of amount on term from a
// goroutine and returns the command the device d receives and where the
// purchase's answer arrives.
func (s *sandbox) startPurchase(t *testing.T, d *rawDevice, term string, amount int64) (protocol.Envelope, <-chan reply) {
	t.Helper()
	done := make(chan reply, 1)
	go func() { done <- s.purchase(t, term, amount) }()
	return d.expect(protocol.TypePurchase), done
}

// startReversal posts the reversal of the transaction ref and waits for
// its command on d; it returns the command and the channel the reversal's
// reply arrives on.
func (s *sandbox) startReversal(t *testing.T, d *rawDevice, ref string) (protocol.Envelope, <-chan reply) {
	t.Helper()
	done := make(chan reply, 1)
	go func() { done <- s.post(t, "/in-store/api/v1/reversal", map[string]any{"onlineAPIRefId": ref}, nil) }()
	return d.expect(protocol.TypeReversal), done
}

// ackedPurchase is startPurchase with the device acknowledging the
// command: the purchase answers 201.
func (s *sandbox) ackedPurchase(t *testing.T, d *rawDevice, term string, amount int64) protocol.Envelope {
	t.Helper()
	cmd, done := s.startPurchase(t, d, term, amount)
	d.send(protocol.TypeAck, "", cmd.ID, cmd.Ref, nil)
	(<-done).tx(t, 201)
	return cmd
}
