package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/clocktest"
	"github.com/instore-dev/instore/internal/protocol"
	"github.com/instore-dev/instore/internal/server"
	"github.com/instore-dev/instore/internal/sim"
	"github.com/instore-dev/instore/internal/testserver"
	"github.com/instore-dev/instore/internal/testwait"
)

// Nothing in flight is forgotten by a restart or a reconnect: what the
// server owes a terminal (a cancel, the reversal of a late approval, a
// print) is stored with the change that makes it owed and sent again after
// every hello until the terminal confirms it (docs/terminal-protocol.md,
// section 7); a print job running when the server stops ends after the
// restart; an update is sent again.

// owedEnv starts a server on the store with short time-outs, without
// virtual terminals of its own: the tests bring theirs, which outlive a
// restart.
func owedEnv(t *testing.T, store func(*server.Config), mutate func(*server.Config)) *sandbox {
	t.Helper()
	e := start(t, func(c *server.Config) {
		store(c)
		// Long enough for a loaded machine; the tests that wait for it
		// to pass set a shorter one.
		c.AckTimeout = 5 * time.Second
		c.TransactionDeadline = 2 * time.Second
		c.RateLimit = 0
		if mutate != nil {
			mutate(c)
		}
	})
	return &sandbox{env: e}
}

// testValidity is the validity of the pre-auths of expiringPreAuth.
const testValidity = 10 * time.Minute

// expiringPreAuth starts owedEnv on the store with the fake clock, a
// pre-auth validity of testValidity and mutate (nil for none), and an
// approved pre-auth of 300.00 on the raw terminal serial; it returns the
// env, its clock, the raw terminal's ID and device and the pre-auth's
// command.
func expiringPreAuth(t *testing.T, store func(*server.Config), serial string, mutate func(*server.Config)) (*sandbox, *clocktest.Clock, string, *rawDevice, protocol.Envelope) {
	t.Helper()
	ck, clock := newClock()
	s := owedEnv(t, store, func(c *server.Config) {
		clock(c)
		c.PreAuthValidity = testValidity
		if mutate != nil {
			mutate(c)
		}
	})
	term, d := s.rawTerminal(t, serial)
	return s, ck, term, d, s.rawPreAuth(t, d, term, 30000)
}

// restart stops the server and starts a new one on the same store (data
// directory or PostgreSQL schema) and addresses, as a crash or a deploy
// does; mutate changes the new configuration.
func (e *env) restart(t *testing.T, mutate func(*server.Config)) {
	t.Helper()
	cfg := e.cfg
	addr := func(name string) string {
		u := e.srv.URL(name)
		return u[strings.Index(u, "://")+3:]
	}
	cfg.ListenOnline, cfg.ListenAccess, cfg.ListenTerminal, cfg.ListenOps = addr("online"), addr("access"), addr("terminal"), addr("ops")
	if cfg.DatabaseURL != "" {
		cfg.DataDir = ""
	}
	if mutate != nil {
		mutate(&cfg)
	}
	must(t, e.srv.Close())
	e.srv, e.cfg = testserver.Start(t, cfg), cfg
}

// next reads the device's next frame, whatever its type (bounded).
func (d *rawDevice) next() protocol.Envelope {
	d.t.Helper()
	d.conn.SetReadDeadline(time.Now().Add(15 * time.Second))
	var env protocol.Envelope
	if err := d.conn.ReadJSON(&env); err != nil {
		d.t.Fatalf("waiting for a message: %v", err)
	}
	return env
}

// confirm tells the server the device has its message env.
func (d *rawDevice) confirm(env protocol.Envelope) {
	d.t.Helper()
	d.send(protocol.TypeConfirm, "", env.ID, env.Ref, nil)
}

// owedNothing checks that the server sends the device no cancel,
// reversal or print (none is owed): it sends a probe, a result for a
// transaction that does not exist, which the server confirms after
// whatever it sent since the hello.
func (d *rawDevice) owedNothing() {
	d.t.Helper()
	probe := d.send(protocol.TypeResult, "", "", "txn_probe", protocol.Result{StatusID: instore.StatusTechnicalError})
	for {
		env := d.next()
		switch {
		case env.Type == protocol.TypeConfirm && env.Re == probe:
			return
		case env.Type == protocol.TypeCancel, env.Type == protocol.TypeReversal, env.Type == protocol.TypePrint:
			d.t.Errorf("after the terminal confirmed everything, the server still sends %s %s for %s", env.Type, env.Data, env.Ref)
		}
	}
}

func (s *sandbox) waitOffline(t *testing.T, serial string) {
	t.Helper()
	testwait.For(t, "the device is offline", func() bool { return !s.srv.Gateway.Online(serial) })
}

func cancelOf(t *testing.T, env protocol.Envelope) protocol.Cancel {
	t.Helper()
	var c protocol.Cancel
	if err := protocol.DecodeData(&env, &c); err != nil {
		t.Fatalf("cancel %+v: %v", env, err)
	}
	return c
}

// TestExpiredTransactionCancelledAfterReconnect: a virtual terminal runs a
// transaction that waits for a cancel (amount 92) and goes offline; the
// deadline passes while it is away, with or without a server restart in
// between. When it comes back it gets the DEADLINE cancel, reports, and
// is idle: the next purchase is approved, not declined TERMINAL_IS_BUSY.
func TestExpiredTransactionCancelledAfterReconnect(t *testing.T) {
	eachBackend(t, func(t *testing.T, store func(*server.Config)) {
		for _, restart := range []bool{false, true} {
			name := "reconnect"
			if restart {
				name = "restart"
			}
			t.Run(name, func(t *testing.T) {
				ck, clock := newClock()
				s := owedEnv(t, store, clock)
				serial := "VT-OWED-" + name
				term, secret := s.provision(t, serial)
				vt, err := sim.New(sim.Config{GatewayURL: s.srv.URL("terminal") + protocol.Path, SerialNumber: serial, Secret: secret,
					BackoffMin: 20 * time.Millisecond, BackoffMax: 200 * time.Millisecond})
				t.Cleanup(func() {
					if t.Failed() {
						t.Log(s.logs.String())
					}
				})
				must(t, err)
				ctx, stop := context.WithCancel(context.Background())
				ran := make(chan error, 1)
				go func() { ran <- vt.Run(ctx) }()
				t.Cleanup(func() { stop(); <-ran })
				testwait.For(t, "the virtual terminal is linked", func() bool { return vt.State().TerminalID == term })

				tx := s.purchase(t, term, 1092).tx(t, 201)
				vt.SetOffline(true)
				s.waitOffline(t, serial)
				if restart {
					s.restart(t, nil)
				}
				advance(t, ck, 2*time.Second) // the deadline
				if final := s.final(t, tx.OnlineAPIRefID); final.StatusID != instore.StatusTechnicalError || final.ErrorCode != "WP36" {
					t.Fatalf("while the terminal is away: %d %v, want TECHNICAL_ERROR with WP36", final.StatusID, final.ErrorCode)
				}
				vt.SetOffline(false)
				// The terminal aborts it: its screen shows the outcome of the
				// DEADLINE cancel, TECHNICAL_ERROR, which it reports (the
				// server's status stands).
				testwait.For(t, "the terminal aborts the ended transaction", func() bool { return vt.State().Screen == "TECHNICAL ERROR" })
				if next := s.final(t, s.purchase(t, term, 1000).tx(t, 201).OnlineAPIRefID); next.StatusID != instore.StatusApproved {
					t.Errorf("next purchase ended %d %s, want APPROVED: the terminal still ran the ended transaction", next.StatusID, next.Status)
				}
				if es, err := s.srv.Store.OpenEffects(context.Background(), serial); err != nil || len(es) != 0 {
					t.Errorf("OpenEffects = %+v, %v; want nothing owed", es, err)
				}
			})
		}
	})
}

// TestAckTimeoutCancelResentUntilConfirmed: a terminal that got a
// purchase and lost its connection before acknowledging it is told, after
// it reconnects, to drop it (ACK_TIMEOUT), after every reconnect, with the
// same message id, until it confirms.
func TestAckTimeoutCancelResentUntilConfirmed(t *testing.T) {
	eachBackend(t, func(t *testing.T, store func(*server.Config)) {
		ck, clock := newClock()
		s := owedEnv(t, store, func(c *server.Config) { clock(c); c.AckTimeout = time.Second })
		term, d := s.rawTerminal(t, "RAW-ACK")
		cmd, done := s.startPurchase(t, d, term, 5000)
		d.conn.Close()
		s.waitOffline(t, "RAW-ACK")
		advance(t, ck, time.Second) // the ack time-out
		if p := (<-done).problem(t, 504, "WP25"); p.OnlineAPIRefID != cmd.Ref {
			t.Fatalf("WP25 names %q, the command was %q", p.OnlineAPIRefID, cmd.Ref)
		}
		var first protocol.Envelope
		for i := range 2 {
			d = s.redial(t, d)
			c := d.expect(protocol.TypeCancel)
			if got := cancelOf(t, c); c.Ref != cmd.Ref || got.Reason != instore.CancelAckTimeout {
				t.Fatalf("after reconnect %d: cancel %s %+v, want ACK_TIMEOUT for %s", i, c.Ref, got, cmd.Ref)
			}
			if i == 0 {
				first = c
			} else if c.ID != first.ID {
				t.Errorf("the cancel sent again has id %q, want the first's %q", c.ID, first.ID)
			}
			d.conn.Close()
			s.waitOffline(t, "RAW-ACK")
		}
		d = s.redial(t, d)
		d.confirm(d.expect(protocol.TypeCancel))
		d.owedNothing()
		d.conn.Close()
		s.waitOffline(t, "RAW-ACK")
		d = s.redial(t, d)
		d.owedNothing()
		e, err := s.srv.Store.Effect(context.Background(), first.ID)
		if err != nil || e.Outcome != instore.EffectConfirmed {
			t.Errorf("Effect(the cancel) = %+v, %v; want CONFIRMED", e, err)
		}
	})
}

// TestECRCancelResentAfterRestart: the cashier's cancel, which the
// terminal did not confirm before the server stopped, reaches it again
// after the restart; its result ends the transaction ABORTED_BY_CASHIER,
// and nothing is owed any more.
func TestECRCancelResentAfterRestart(t *testing.T) {
	eachBackend(t, func(t *testing.T, store func(*server.Config)) {
		s := owedEnv(t, store, func(c *server.Config) { c.TransactionDeadline = 60 * time.Second })
		term, d := s.rawTerminal(t, "RAW-ECR")
		cmd, done := s.startPurchase(t, d, term, 5000)
		d.send(protocol.TypeAck, "", "", cmd.Ref, nil)
		(<-done).tx(t, 201)
		s.post(t, "/in-store/api/v1/cancel", map[string]any{"terminalId": term}, nil).tx(t, 202)
		first := d.expect(protocol.TypeCancel)
		if got := cancelOf(t, first); got.Reason != instore.CancelByECR || first.Ref != cmd.Ref {
			t.Fatalf("cancel %s %+v, want ECR for %s", first.Ref, got, cmd.Ref)
		}
		s.restart(t, nil)

		d = s.redial(t, d)
		again := d.expect(protocol.TypeCancel)
		if again.ID != first.ID || again.Ref != cmd.Ref || cancelOf(t, again).Reason != instore.CancelByECR {
			t.Fatalf("after the restart: cancel %+v, want the first one (id %s) again", again, first.ID)
		}
		d.confirm(again)
		res := d.send(protocol.TypeResult, "", "", cmd.Ref, protocol.Result{StatusID: instore.StatusAbortedByCashier})
		if c := d.expect(protocol.TypeConfirm); c.Re != res {
			t.Fatalf("confirm re %q, want the result's %q", c.Re, res)
		}
		wantStatus(t, s.transaction(t, cmd.Ref), instore.StatusAbortedByCashier, "WP37", "cancelled purchase")
		d.conn.Close()
		s.waitOffline(t, "RAW-ECR")
		d = s.redial(t, d)
		d.owedNothing()
	})
}

// TestLateApprovalReversalResentUntilConfirmed: the reversal of a late
// approval is sent again after a restart, same id, until the terminal
// confirms it.
func TestLateApprovalReversalResentUntilConfirmed(t *testing.T) {
	eachBackend(t, func(t *testing.T, store func(*server.Config)) {
		ck, clock := newClock()
		s := owedEnv(t, store, clock)
		term, d := s.rawTerminal(t, "RAW-LATE")
		cmd, done := s.startPurchase(t, d, term, 5000)
		d.send(protocol.TypeAck, "", "", cmd.Ref, nil)
		(<-done).tx(t, 201)
		advance(t, ck, 2*time.Second)            // the deadline
		d.confirm(d.expect(protocol.TypeCancel)) // DEADLINE
		d.send(protocol.TypeResult, "", "", cmd.Ref, protocol.Result{StatusID: instore.StatusApproved, AuthorizationCode: "LATE1"})
		rev := d.expect(protocol.TypeReversal)
		var r protocol.Reversal
		if err := protocol.DecodeData(&rev, &r); err != nil || rev.Ref != cmd.Ref || r != (protocol.Reversal{Reason: instore.ReversalLateApproval}) {
			t.Fatalf("reversal %+v %+v (%v), want LATE_APPROVAL of %s without originalRef", rev, r, err, cmd.Ref)
		}
		s.restart(t, nil)

		for i := range 2 {
			d = s.redial(t, d)
			again := d.expect(protocol.TypeReversal)
			if again.ID != rev.ID || again.Ref != cmd.Ref {
				t.Fatalf("after reconnect %d: reversal %+v, want the first one (id %s) again", i, again, rev.ID)
			}
			if i == 1 {
				d.confirm(again)
				d.owedNothing()
			}
			d.conn.Close()
			s.waitOffline(t, "RAW-LATE")
		}
		d = s.redial(t, d)
		d.owedNothing()
		final := s.transaction(t, cmd.Ref)
		if final.StatusID != instore.StatusReversed {
			t.Errorf("late approval: %d, want REVERSED", final.StatusID)
		}
	})
}

// printStatus reads a print job's status (nil while it prints).
func (s *sandbox) printStatus(t *testing.T, printID string) *string {
	t.Helper()
	var j instore.PrintJobWire
	r := s.get(t, "/in-store/api/v1/print/"+printID)
	r.decode(t, 200, &j)
	if j.Status == "" {
		return nil
	}
	return (*string)(&j.Status)
}

func (s *sandbox) waitPrint(t *testing.T, printID string) string {
	t.Helper()
	var st *string
	testwait.For(t, "the print job has a final status", func() bool {
		st = s.printStatus(t, printID)
		return st != nil
	})
	return *st
}

// TestReceiptPrintNotLost: a terminal that reports the approval of a
// printReceipt purchase and goes away at once gets the receipt print after
// it comes back to a restarted server, and prints it.
func TestReceiptPrintNotLost(t *testing.T) {
	eachBackend(t, func(t *testing.T, store func(*server.Config)) {
		s := owedEnv(t, store, func(c *server.Config) { c.TransactionDeadline = 60 * time.Second })
		term, d := s.rawTerminal(t, "RAW-RCPT")
		done := make(chan reply, 1)
		go func() {
			done <- s.post(t, "/in-store/api/v1/purchase", map[string]any{"terminalId": term, "amount": 700, "currency": "SEK", "printReceipt": true}, nil)
		}()
		cmd := d.expect(protocol.TypePurchase)
		d.send(protocol.TypeAck, "", "", cmd.Ref, nil)
		(<-done).tx(t, 201)
		receipt := []string{"ACME STORE", "PURCHASE", "SEK 7.00", "APPROVED"}
		d.send(protocol.TypeResult, "", "", cmd.Ref, protocol.Result{StatusID: instore.StatusApproved, CustomerReceipt: receipt, MerchantReceipt: receipt})
		d.conn.Close()
		if final := s.final(t, cmd.Ref); final.StatusID != instore.StatusApproved {
			t.Fatalf("purchase ended %d, want APPROVED", final.StatusID)
		}
		s.waitOffline(t, "RAW-RCPT")
		s.restart(t, nil)

		d = s.redial(t, d)
		pr := d.expect(protocol.TypePrint)
		var p protocol.Print
		if err := protocol.DecodeData(&pr, &p); err != nil || !slices.Equal(p.Lines, receipt) {
			t.Fatalf("print %+v %+v (%v), want the customer receipt %q", pr, p, err, receipt)
		}
		d.confirm(pr)
		d.send(protocol.TypePrintResult, "", "", pr.Ref, protocol.PrintResult{StatusID: instore.PrintSuccess})
		if got := s.waitPrint(t, pr.Ref); got != "SUCCESS" {
			t.Errorf("receipt print job = %s, want SUCCESS", got)
		}
		d.owedNothing()
	})
}

// TestPrintJobRunningAcrossRestart: a print job the terminal had not
// answered when the server stopped ends after the restart: TIMEOUT once
// its print timeout passed, or with the terminal's answer to the print,
// sent again after its hello while the time-out runs.
func TestPrintJobRunningAcrossRestart(t *testing.T) {
	eachBackend(t, func(t *testing.T, store func(*server.Config)) {
		for _, tc := range []struct {
			name    string
			timeout time.Duration
			want    string
		}{
			{"timed out", 100 * time.Millisecond, "TIMEOUT"},
			{"answered", time.Minute, "OUT_OF_PAPER"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				ck, clock := newClock()
				s := owedEnv(t, store, func(c *server.Config) { clock(c); c.PrintTimeout = time.Minute })
				serial := "RAW-PRT-" + strings.ReplaceAll(tc.name, " ", "-")
				term, d := s.rawTerminal(t, serial)
				// The ECR gives up waiting once the print reached the terminal.
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				go func() {
					b, _ := json.Marshal(map[string]any{"terminalId": term, "lines": []string{"Thank you", "See you soon"}})
					req, _ := http.NewRequestWithContext(ctx, "POST", s.online+"/in-store/api/v1/print", strings.NewReader(string(b)))
					for k, v := range s.auth(s.token, s.key) {
						req.Header.Set(k, v)
					}
					req.Header.Set("Content-Type", "application/json")
					if resp, err := http.DefaultClient.Do(req); err == nil {
						resp.Body.Close()
					}
				}()
				first := d.expect(protocol.TypePrint)
				cancel()
				d.conn.Close()
				s.waitOffline(t, serial)
				if st := s.printStatus(t, first.Ref); st != nil {
					t.Fatalf("print job before the restart = %s, want still printing", *st)
				}
				s.restart(t, func(c *server.Config) { c.PrintTimeout = tc.timeout })

				if tc.want == "TIMEOUT" {
					// The restarted server armed what is left of the
					// time-out: all of it, the clock has not moved.
					advance(t, ck, tc.timeout)
					if got := s.waitPrint(t, first.Ref); got != tc.want {
						t.Errorf("print job after the restart = %s, want %s", got, tc.want)
					}
					d = s.redial(t, d)
					d.owedNothing()
					return
				}
				d = s.redial(t, d)
				again := d.expect(protocol.TypePrint)
				if again.ID != first.ID || again.Ref != first.Ref {
					t.Fatalf("after the restart: print %+v, want the first one (id %s) again", again, first.ID)
				}
				d.send(protocol.TypePrintResult, "", "", again.Ref, protocol.PrintResult{StatusID: instore.PrintOutOfPaper})
				if got := s.waitPrint(t, first.Ref); got != tc.want {
					t.Errorf("print job after the restart = %s, want %s", got, tc.want)
				}
				// Its result made the print moot: not sent again.
				d.owedNothing()
			})
		}
	})
}

// TestUpdateResentAfterRestart: an update the terminal has not finished
// is sent again after every hello, also to a restarted server: delivered
// and unanswered, then DOWNLOADING; INSTALLED ends it.
func TestUpdateResentAfterRestart(t *testing.T) {
	eachBackend(t, func(t *testing.T, store func(*server.Config)) {
		s := owedEnv(t, store, func(c *server.Config) { c.AckTimeout = 10 * time.Second })
		s.importCatalogue(t, testCatalogue(s.customer.ID))
		term, secret := s.provision(t, "RAW-UPD-RS")
		d := dialDeviceVersion(t, s.srv.URL("terminal"), "RAW-UPD-RS", secret, "1.0.0")
		u := s.createUpdate(t, map[string]any{"terminalId": term, "packageId": "countertop-1.2.0"})
		if cmd := d.expect(protocol.TypeUpdate); cmd.Ref != u.UpdateID {
			t.Fatalf("update for %q, want %q", cmd.Ref, u.UpdateID)
		}
		for i, report := range []instore.UpdateStatus{protocol.UpdateDownloading, protocol.UpdateInstalled} {
			s.restart(t, nil)
			d = dialDeviceVersion(t, s.srv.URL("terminal"), "RAW-UPD-RS", secret, "1.0.0")
			if cmd := d.expect(protocol.TypeUpdate); cmd.Ref != u.UpdateID {
				t.Fatalf("after restart %d: update for %q, want %q again", i, cmd.Ref, u.UpdateID)
			}
			st := protocol.UpdateStatus{Status: report}
			if report == protocol.UpdateInstalled {
				st.SoftwareVersion = "1.2.0"
			}
			d.send(protocol.TypeUpdateStatus, "", "", u.UpdateID, st)
			d.expect(protocol.TypeConfirm)
		}
		in := s.waitInfo(t, term, "INSTALLED", lastStatus(instore.UpdateInstalled))
		if in.LastUpdate.UpdateID != u.UpdateID || *in.SoftwareVersion != "1.2.0" {
			t.Errorf("after the update: %+v, last %+v", in, in.LastUpdate)
		}
	})
}

// TestOwedMessageDroppedAfterItsBound: a cancel a terminal never comes
// back for is dropped by the sweep once older than the bound (24 h), with
// a log line, and not sent afterwards.
func TestOwedMessageDroppedAfterItsBound(t *testing.T) {
	// The time of day jumps past the bound (Shift) while the time-outs
	// stay on the fake clock: advancing it by 24 h would run the periodic
	// sweeps thousands of times.
	ck, _ := newClock()
	shifted := clocktest.Shift(ck, 0)
	s := owedEnv(t, func(*server.Config) {}, func(c *server.Config) {
		c.Clock = shifted
		c.AckTimeout = time.Second
	})
	term, d := s.rawTerminal(t, "RAW-TTL")
	_, done := s.startPurchase(t, d, term, 5000)
	d.conn.Close()
	s.waitOffline(t, "RAW-TTL")
	advance(t, ck, time.Second) // the ack time-out
	(<-done).problem(t, 504, "WP25")
	ctx := context.Background()
	es, err := s.srv.Store.OpenEffects(ctx, "RAW-TTL")
	if err != nil || len(es) != 1 || es[0].Kind != instore.EffectCancel || es[0].Reason != instore.CancelAckTimeout {
		t.Fatalf("OpenEffects = %+v, %v; want the ACK_TIMEOUT cancel", es, err)
	}
	s.srv.Service.Sweep(ctx)
	if e, err := s.srv.Store.Effect(ctx, es[0].ID); err != nil || e.DoneAt != nil {
		t.Fatalf("Effect after a sweep within the bound = %+v, %v; want still owed", e, err)
	}
	shifted.Shift(instore.DefaultEffectTTL + time.Minute)
	s.srv.Service.Sweep(ctx)
	if e, err := s.srv.Store.Effect(ctx, es[0].ID); err != nil || e.Outcome != instore.EffectExpired {
		t.Errorf("Effect after a sweep past the bound = %+v, %v; want EXPIRED", e, err)
	}
	if !strings.Contains(s.logs.String(), "owed message dropped") {
		t.Errorf("no log line for the dropped message")
	}
	d = s.redial(t, d)
	d.owedNothing()
}

// TestUnacknowledgedCommandResentAfterReconnect: the ECR's reversal that
// a terminal lost with its session before acknowledging it is sent again
// after it reconnects within the ack timeout, and goes on as usual.
func TestUnacknowledgedCommandResentAfterReconnect(t *testing.T) {
	s := owedEnv(t, func(*server.Config) {}, func(c *server.Config) { c.AckTimeout = 10 * time.Second })
	term, d := s.rawTerminal(t, "RAW-CMD")
	cmd, done := s.startPurchase(t, d, term, 5000)
	d.send(protocol.TypeAck, "", "", cmd.Ref, nil)
	(<-done).tx(t, 201)
	d.result(cmd.Ref, instore.StatusApproved, protocol.TypeConfirm)

	rev, revDone := s.startReversal(t, d, cmd.Ref)
	d.conn.Close()
	s.waitOffline(t, "RAW-CMD")
	d = s.redial(t, d)
	again := d.expect(protocol.TypeReversal)
	var r protocol.Reversal
	if err := protocol.DecodeData(&again, &r); err != nil || again.Ref != rev.Ref || r != (protocol.Reversal{Reason: instore.ReversalByECR, OriginalRef: cmd.Ref}) {
		t.Fatalf("after the reconnect: %+v %+v (%v), want the reversal %s of %s again", again, r, err, rev.Ref, cmd.Ref)
	}
	d.send(protocol.TypeAck, "", "", again.Ref, nil)
	(<-revDone).tx(t, 201)
	d.result(again.Ref, instore.StatusApproved, protocol.TypeConfirm)
	if got := s.transaction(t, cmd.Ref); got.StatusID != instore.StatusReversed {
		t.Errorf("purchase after its reversal = %d, want REVERSED", got.StatusID)
	}
}
