package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/clocktest"
	"github.com/instore-dev/instore/internal/protocol"
	sandboxapi "github.com/instore-dev/instore/internal/sandbox"
	"github.com/instore-dev/instore/internal/server"
	"github.com/instore-dev/instore/internal/testwait"
	"github.com/instore-dev/instore/lifecycle"
)

// TestLateVoidApprovalReleases: a VOID the service ended WP25 (its ack
// came too late) and the terminal approved after all is not reversed (that
// would hold the cardholder's money again): the VOID keeps WP25 and gets
// the result, the pre-auth is VOIDED in the same write, and the terminal
// is sent a confirm, no reversal. A CAPTURE approved late, by contrast, is
// reversed like a late sale and leaves the pre-auth OPEN.
func TestLateVoidApprovalReleases(t *testing.T) {
	ck, s, d, term, pre := rawPreAuthSandbox(t, "RAW-VOID", 40000)
	done := make(chan reply, 1)

	// A CAPTURE whose ack comes too late, approved afterwards: reversed.
	go func() { done <- s.preAuthOp(t, "capture", pre, map[string]any{"amount": 40000}) }()
	capture := d.expect(protocol.TypeCapture)
	advance(t, ck, time.Second)
	(<-done).problem(t, 504, "WP25")
	d.expect(protocol.TypeCancel)
	d.send(protocol.TypeResult, "", "", capture.Ref, protocol.Result{StatusID: instore.StatusApproved})
	if rev := d.expect(protocol.TypeReversal); rev.Ref != capture.Ref {
		t.Fatalf("reversal of %q, want the late capture %q", rev.Ref, capture.Ref)
	}
	if c := s.get(t, "/in-store/api/v1/transaction/"+capture.Ref).tx(t, 200); c.StatusID != instore.StatusReversed {
		t.Errorf("late-approved capture: status %d, want REVERSED", c.StatusID)
	}
	if a := s.authorization(t, pre); a.State != instore.AuthOpen {
		t.Fatalf("after a reversed late capture: %+v, want OPEN", a)
	}

	// A VOID whose ack comes too late, approved afterwards: it applies.
	void := s.unansweredVoid(t, ck, d, pre)
	resID := d.send(protocol.TypeResult, "", "", void.Ref, protocol.Result{StatusID: instore.StatusApproved})
	for {
		env := d.expect(protocol.TypeConfirm)
		if env.Re == resID {
			break
		}
	}
	v := s.get(t, "/in-store/api/v1/transaction/"+void.Ref).tx(t, 200)
	if v.StatusID != instore.StatusTechnicalError || v.ErrorCode != "WP25" {
		t.Errorf("late-approved void: status %d %s, want TECHNICAL_ERROR keeping WP25", v.StatusID, v.ErrorCode)
	}
	if a := s.authorization(t, pre); a.State != instore.AuthVoided {
		t.Errorf("after a late-approved void: %+v, want VOIDED", a)
	}
	// No reversal of the void reaches the terminal: the next message it
	// gets is a new command's.
	go func() { done <- s.purchase(t, term, 100) }()
	for {
		env := d.next()
		if env.Type == protocol.TypeReversal {
			t.Fatalf("a reversal after a late-approved void: %+v", env)
		}
		if env.Type == protocol.TypePurchase {
			d.send(protocol.TypeAck, "", env.ID, env.Ref, nil)
			break
		}
	}
	(<-done).tx(t, 201)
}

// TestUnknownVoidBlocksCapture: while a VOID's outcome is unknown (the
// service ended it WP25: the terminal may approve it still, and a void's
// late approval releases the hold) the pre-auth takes no CAPTURE or
// INCREMENT (409 conflict naming the VOID), so that no capture charges
// money no longer held; another VOID is taken. Once the terminal reports
// the VOID declined, a capture is taken again.
func TestUnknownVoidBlocksCapture(t *testing.T) {
	ck, s, d, _, pre := rawPreAuthSandbox(t, "RAW-UVOID", 40000)
	void := s.unansweredVoid(t, ck, d, pre)
	for _, op := range []struct {
		path string
		body map[string]any
	}{{"capture", map[string]any{"amount": 40000}}, {"increment", map[string]any{"amount": 100}}} {
		r := s.preAuthOp(t, op.path, pre, op.body)
		r.problem(t, 409, "conflict")
		if ref := r.problemRef(t); ref != void.Ref {
			t.Errorf("%s refused naming %q, want the VOID %q", op.path, ref, void.Ref)
		}
	}

	// The terminal declines the VOID late: the hold stands, a capture is
	// taken (and approved: the pre-auth is CAPTURED).
	d.send(protocol.TypeResult, "", "", void.Ref, protocol.Result{StatusID: instore.StatusTransactionDeclined})
	d.expect(protocol.TypeConfirm)
	done := make(chan reply, 1)
	go func() { done <- s.preAuthOp(t, "capture", pre, map[string]any{"amount": 40000}) }()
	capture := d.expect(protocol.TypeCapture)
	d.send(protocol.TypeAck, "", "", capture.Ref, nil)
	(<-done).tx(t, 201)
	d.send(protocol.TypeResult, "", "", capture.Ref, protocol.Result{StatusID: instore.StatusApproved})
	d.expect(protocol.TypeConfirm)
	if c := s.final(t, capture.Ref); c.StatusID != instore.StatusApproved {
		t.Errorf("capture after the void declined: status %d, want APPROVED", c.StatusID)
	}
	if a := s.authorization(t, pre); a.State != instore.AuthCaptured || a.CapturedAmount != 40000 {
		t.Errorf("after the capture: %+v, want CAPTURED 40000", a)
	}
}

// TestVoidOfTheLargestAuthorization: a pre-auth's increments may take its
// authorised amount past MaxAmount, up to MaxAuthorizedAmount and no
// further (400 on /amount); its VOID, which carries the authorised amount,
// is still sent and releases it (before, the protocol refused the frame,
// and the VOID ended WP23 with the terminal online, its hold never
// released).
func TestVoidOfTheLargestAuthorization(t *testing.T) {
	_, s, d, _, pre := rawPreAuthSandbox(t, "RAW-BIGVOID", instore.MaxAmount)
	done := make(chan reply, 1)

	go func() { done <- s.preAuthOp(t, "increment", pre, map[string]any{"amount": instore.MaxAmount}) }()
	inc := d.expect(protocol.TypeIncrement)
	d.send(protocol.TypeAck, "", "", inc.Ref, nil)
	(<-done).tx(t, 201)
	d.send(protocol.TypeResult, "", "", inc.Ref, protocol.Result{StatusID: instore.StatusApproved})
	d.expect(protocol.TypeConfirm)
	if a := s.authorization(t, pre); a.AuthorizedAmount != instore.MaxAuthorizedAmount {
		t.Fatalf("after the increment: %+v, want authorized %d", a, instore.MaxAuthorizedAmount)
	}
	s.preAuthOp(t, "increment", pre, map[string]any{"amount": 1}).problem(t, 400, "validation")

	go func() { done <- s.preAuthOp(t, "void", pre, nil) }()
	void := d.expect(protocol.TypeVoid)
	var data protocol.Payment
	if err := json.Unmarshal(void.Data, &data); err != nil || data.Amount != instore.MaxAuthorizedAmount {
		t.Fatalf("void's amount %d (%v), want %d", data.Amount, err, instore.MaxAuthorizedAmount)
	}
	d.send(protocol.TypeAck, "", "", void.Ref, nil)
	(<-done).tx(t, 201)
	d.send(protocol.TypeResult, "", "", void.Ref, protocol.Result{StatusID: instore.StatusApproved})
	d.expect(protocol.TypeConfirm)
	if a := s.authorization(t, pre); a.State != instore.AuthVoided {
		t.Errorf("after the void: %+v, want VOIDED", a)
	}
}

// TestExpiryVoidDeclinedRetried: the expiry's VOID declined leaves the
// pre-auth OPEN, and the service tries again a minute after (then two,
// four, ... at most an hour apart: lifecycle.ExpiryDue), not at every
// sweep, until one is approved and the pre-auth ends EXPIRED.
func TestExpiryVoidDeclinedRetried(t *testing.T) {
	eachBackend(t, func(t *testing.T, store func(*server.Config)) {
		s, ck, _, d, cmd := expiringPreAuth(t, store, "RAW-EXP", nil)
		first := s.declinedExpiryVoid(t, ck, d)
		if a := s.authorization(t, cmd.Ref); a.State != instore.AuthOpen {
			t.Fatalf("after a declined expiry void: %+v, want OPEN", a)
		}
		advance(t, ck, lifecycle.ExpiryRetryFirst)
		second := d.expect(protocol.TypeVoid)
		if second.Ref == first.Ref {
			t.Fatalf("the retry resent %s, want a new VOID", first.Ref)
		}
		d.send(protocol.TypeAck, "", "", second.Ref, nil)
		d.send(protocol.TypeResult, "", "", second.Ref, protocol.Result{StatusID: instore.StatusApproved})
		if v := s.final(t, second.Ref); v.StatusID != instore.StatusApproved || v.PreAuthorization != cmd.Ref {
			t.Errorf("the retried expiry void: %+v", v)
		}
		if a := s.authorization(t, cmd.Ref); a.State != instore.AuthExpired {
			t.Errorf("after the retried expiry void: %+v, want EXPIRED", a)
		}
	})
}

// TestExpiryWaitsForBusyTerminal: a pre-auth expires while a purchase
// runs on its terminal (the expiry's VOID answers WP09); the VOID goes as
// soon as the purchase ends, without waiting for a sweep (the clock does
// not move).
func TestExpiryWaitsForBusyTerminal(t *testing.T) {
	s, ck, term, d, cmd := expiringPreAuth(t, func(*server.Config) {}, "RAW-BUSY", func(c *server.Config) { c.TransactionDeadline = time.Hour })

	sale := s.ackedPurchase(t, d, term, 1200) // the terminal is busy with it
	advance(t, ck, testValidity)
	// The expiry found the terminal busy; the sale ends now.
	void := d.result(sale.Ref, instore.StatusApproved, protocol.TypeVoid)
	var p protocol.Payment
	must(t, json.Unmarshal(void.Data, &p))
	if p.OriginalRef != cmd.Ref {
		t.Fatalf("a void of %q, want the expired pre-auth %q", p.OriginalRef, cmd.Ref)
	}
	d.send(protocol.TypeAck, "", "", void.Ref, nil)
	d.send(protocol.TypeResult, "", "", void.Ref, protocol.Result{StatusID: instore.StatusApproved})
	s.final(t, void.Ref)
	if a := s.authorization(t, cmd.Ref); a.State != instore.AuthExpired {
		t.Errorf("after the expiry: %+v, want EXPIRED", a)
	}
}

// rawPreAuthSandbox is a sandbox on a fake clock (ck) with a raw device d
// of the terminal ID term, and an approved pre-auth pre of amount SEK on
// it (rawPreAuth).
func rawPreAuthSandbox(t *testing.T, serial string, amount int64) (ck *clocktest.Clock, s *sandbox, d *rawDevice, term, pre string) {
	t.Helper()
	ck, clock := newClock()
	s = rawEnv(t, clock)
	term, d = s.rawTerminal(t, serial)
	return ck, s, d, term, s.rawPreAuth(t, d, term, amount).Ref
}

// unansweredVoid sends a VOID of pre that the raw device d never
// acknowledges: the service answers 504 WP25 once the ack time-out passes
// on ck, and sends the device a cancel. It returns the VOID's command: its
// outcome is unknown.
func (s *sandbox) unansweredVoid(t *testing.T, ck *clocktest.Clock, d *rawDevice, pre string) protocol.Envelope {
	t.Helper()
	done := make(chan reply, 1)
	go func() { done <- s.preAuthOp(t, "void", pre, nil) }()
	void := d.expect(protocol.TypeVoid)
	advance(t, ck, time.Second)
	(<-done).problem(t, 504, "WP25")
	d.expect(protocol.TypeCancel)
	return void
}

// rawPreAuth makes an approved pre-auth of amount SEK on the raw device d
// of term (the device acks and approves it) and returns its command.
func (s *sandbox) rawPreAuth(t *testing.T, d *rawDevice, term string, amount int64) protocol.Envelope {
	t.Helper()
	done := make(chan reply, 1)
	go func() {
		done <- s.post(t, "/in-store/api/v1/preauthorization", map[string]any{"terminalId": term, "amount": amount, "currency": "SEK"}, nil)
	}()
	cmd := d.expect(protocol.TypePreAuth)
	d.send(protocol.TypeAck, "", "", cmd.Ref, nil)
	(<-done).tx(t, 201)
	d.send(protocol.TypeResult, "", "", cmd.Ref, protocol.Result{StatusID: instore.StatusApproved, AuthorizationCode: "H1"})
	if pre := s.final(t, cmd.Ref); pre.Authorization == nil || pre.Authorization.State != instore.AuthOpen {
		t.Fatalf("pre-auth: %+v", pre.Authorization)
	}
	d.expect(protocol.TypeConfirm)
	return cmd
}

// TestHeldByTheDeviceThatMadeIt: a pre-auth and a sale made on terminal
// ID a, whose device is then replaced (a unlinked, linked to another
// device): a capture, an increment, a void of the pre-auth are 409
// conflict, a reversal of the sale 409 not-reversible, and nothing is
// created or sent (the new device does not hold them, and would answer
// TECHNICAL_ERROR); a refund of the sale, a card transaction, is taken.
func TestHeldByTheDeviceThatMadeIt(t *testing.T) {
	s := startSandbox(t)
	a, b := s.terminals[0], s.terminals[1]
	pre := s.approvedPreAuth(t, 10000)
	sale := s.final(t, s.purchase(t, a, 2500).tx(t, 201).OnlineAPIRefID)
	if sale.StatusID != instore.StatusApproved {
		t.Fatalf("sale ended %d", sale.StatusID)
	}
	// b's device becomes a's: b unlinked, its device's code links a.
	s.post(t, "/in-store/api/v1/terminal/unlink", map[string]any{"terminalId": a}, nil).tx(t, 200)
	s.post(t, "/in-store/api/v1/terminal/unlink", map[string]any{"terminalId": b}, nil).tx(t, 200)
	devs := s.waitDevices(t, func(ds []sandboxapi.DeviceJSON) bool { return ds[1].LinkCode != nil && ds[1].TerminalID == nil })
	s.post(t, "/in-store/api/v1/terminal/link", map[string]any{"terminalId": a, "linkCode": *devs[1].LinkCode}, nil).tx(t, 200)
	s.waitDevices(t, func(ds []sandboxapi.DeviceJSON) bool {
		return ds[1].TerminalID != nil && *ds[1].TerminalID == a && ds[1].Online
	})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	must(t, s.srv.WaitSandboxReady(ctx))
	before := s.listTotal(t)
	s.preAuthOp(t, "capture", pre.OnlineAPIRefID, map[string]any{"amount": 10000}).problem(t, 409, "conflict")
	s.preAuthOp(t, "increment", pre.OnlineAPIRefID, map[string]any{"amount": 500}).problem(t, 409, "conflict")
	s.preAuthOp(t, "void", pre.OnlineAPIRefID, nil).problem(t, 409, "conflict")
	s.post(t, "/in-store/api/v1/reversal", map[string]any{"onlineAPIRefId": sale.OnlineAPIRefID}, nil).problem(t, 409, "not-reversible")
	if after := s.listTotal(t); after != before {
		t.Fatalf("refused operations created %d transactions", after-before)
	}
	if got := s.authorization(t, pre.OnlineAPIRefID); got.State != instore.AuthOpen || got.AuthorizedAmount != 10000 {
		t.Errorf("pre-auth after the refusals: %+v, want OPEN 10000", got)
	}
	refund := s.post(t, "/in-store/api/v1/refund", map[string]any{"terminalId": a, "amount": 2500, "currency": "SEK",
		"originalOnlineAPIRefId": sale.OnlineAPIRefID}, nil).tx(t, 201)
	if got := s.final(t, refund.OnlineAPIRefID); got.StatusID != instore.StatusApproved {
		t.Errorf("refund on the new device ended %d, want APPROVED", got.StatusID)
	}
}

// listTotal counts the merchant's transactions (GET /transactions, at most
// 100: the tests that count make a few).
func (s *sandbox) listTotal(t *testing.T) int {
	t.Helper()
	var list struct {
		Transactions []json.RawMessage `json:"transactions"`
	}
	r := s.get(t, "/in-store/api/v1/transactions?limit=100")
	if r.resp.StatusCode != 200 {
		t.Fatalf("GET /transactions = %d %s", r.resp.StatusCode, r.body)
	}
	must(t, json.Unmarshal(r.body, &list))
	return len(list.Transactions)
}

// TestExpiryOfAPreAuthNoDeviceHolds: an OPEN pre-auth whose terminal ID
// was linked to another device since reaches its expiry: no device can
// void it (the new one holds nothing of it), so it ends EXPIRED without a
// VOID, by the TIMER, with its transaction.authorization event, instead
// of staying OPEN for ever (found by review). Both backends, raw
// terminals and the fake clock.
func TestExpiryOfAPreAuthNoDeviceHolds(t *testing.T) {
	eachBackend(t, func(t *testing.T, store func(*server.Config)) {
		s, ck, term, _, cmd := expiringPreAuth(t, store, "RAW-LAPSE", nil)
		s.rawTerminal(t, "RAW-LAPSE-2")
		_, _, err := s.srv.Store.LinkTerminal(context.Background(), term, "RAW-LAPSE-2", time.Now())
		must(t, err)
		advance(t, ck, testValidity)
		testwait.ForNil(t, "the pre-auth to expire without a void", func() error {
			if a := s.authorization(t, cmd.Ref); a.State != instore.AuthExpired {
				return fmt.Errorf("authorization %+v", a)
			}
			return nil
		})
		if r := s.get(t, "/in-store/api/v1/transactions?type=VOID"); !strings.Contains(string(r.body), `"transactions":[]`) {
			t.Errorf("VOIDs after the expiry: %s; want none (no VOID to a device that does not hold it)", r.body)
		}
		if !slices.ContainsFunc(s.timeline(t, cmd.Ref), func(e instore.TransactionEvent) bool {
			return e.Kind == instore.EventAuthorization && e.Actor == instore.ActorTimer && strings.Contains(e.Detail, "without a void")
		}) {
			t.Errorf("the pre-auth's timeline lacks its lapse: %+v", s.timeline(t, cmd.Ref))
		}
		// The event is listed once the sequencer numbered it (the stream
		// shows events in commit order, after the commit).
		testwait.ForNil(t, "the pre-auth's transaction.authorization EXPIRED in the events", func() error {
			var evs struct {
				Events []instore.EventWire `json:"events"`
			}
			r := s.get(t, "/in-store/api/v1/events?types=transaction.authorization")
			must(t, json.Unmarshal(r.body, &evs))
			if len(evs.Events) == 0 || !strings.Contains(string(evs.Events[len(evs.Events)-1].Data), `"state":"EXPIRED"`) {
				return fmt.Errorf("events %s", r.body)
			}
			return nil
		})
	})
}

// relinkOnCreate links the terminal ID terminalID to the device serial
// just before the next creation reaches the store (once armed), as a link
// racing the request commits between the service's read of the terminal
// and the creation.
type relinkOnCreate struct {
	instore.Store
	t                  *testing.T
	terminalID, serial string
	armed              atomic.Bool
}

func (r *relinkOnCreate) arm(terminalID, serial string) {
	r.terminalID, r.serial = terminalID, serial
	r.armed.Store(true)
}

func (r *relinkOnCreate) relink(ctx context.Context) {
	if r.armed.CompareAndSwap(true, false) {
		if _, _, err := r.Store.LinkTerminal(ctx, r.terminalID, r.serial, time.Now()); err != nil {
			r.t.Errorf("the racing link: %v", err)
		}
	}
}

func (r *relinkOnCreate) CreateTransaction(ctx context.Context, ch *instore.Change) error {
	r.relink(ctx)
	return r.Store.CreateTransaction(ctx, ch)
}

func (r *relinkOnCreate) CreateOnOriginal(ctx context.Context, ch *instore.Change) error {
	r.relink(ctx)
	return r.Store.CreateOnOriginal(ctx, ch)
}

// TestLinkRacingACreation: a link of the terminal ID to another device
// that commits between the service's read of the terminal and the
// creation of its transaction (found by the black-box review on
// PostgreSQL) does not send the command to the device the ID was linked
// to before. A purchase runs again on the ID's new link: its command goes
// to the new device, which approves it. A capture of a pre-auth the old
// device holds is refused as one made after the link is (409 conflict,
// instore.CheckHeldByDevice), and nothing is created. Both backends.
func TestLinkRacingACreation(t *testing.T) {
	eachBackend(t, func(t *testing.T, store func(*server.Config)) {
		r := &relinkOnCreate{t: t}
		s := &sandbox{env: startWrapped(t, func(c *server.Config) {
			store(c)
			c.RateLimit = 0
		}, func(st instore.Store) instore.Store { r.Store = st; return r })}
		a, old := s.rawTerminal(t, "RAW-RACE-OLD")
		_, repl := s.rawTerminal(t, "RAW-RACE-NEW")
		pre := s.rawPreAuth(t, old, a, 10000)

		r.arm(a, "RAW-RACE-NEW")
		cmd, done := s.startPurchase(t, repl, a, 2500)
		repl.send(protocol.TypeAck, "", cmd.ID, cmd.Ref, nil)
		if got := (<-done).tx(t, 201); got.OnlineAPIRefID != cmd.Ref {
			t.Fatalf("the purchase answered %s; its command on the new device was %s", got.OnlineAPIRefID, cmd.Ref)
		}
		repl.send(protocol.TypeResult, "", "", cmd.Ref, protocol.Result{StatusID: instore.StatusApproved})
		if got := s.final(t, cmd.Ref); got.StatusID != instore.StatusApproved {
			t.Fatalf("the purchase on the new device ended %d, want APPROVED", got.StatusID)
		}

		// a back on the old device, then moved again while a capture runs.
		_, _, err := s.srv.Store.LinkTerminal(context.Background(), a, "RAW-RACE-OLD", time.Now())
		must(t, err)
		before := s.listTotal(t)
		r.arm(a, "RAW-RACE-NEW")
		s.preAuthOp(t, "capture", pre.Ref, map[string]any{"amount": 10000}).problem(t, 409, "conflict")
		if after := s.listTotal(t); after != before {
			t.Errorf("the refused capture created %d transactions", after-before)
		}
		if got := s.authorization(t, pre.Ref); got.State != instore.AuthOpen {
			t.Errorf("the pre-auth after the refused capture: %+v, want OPEN", got)
		}
	})
}

// TestExpiryVoidRacingALink: the pre-auth's terminal ID is linked to
// another device between the expiry's read of it and the creation of its
// VOID (found by review: the path had no test). The creation refuses
// (the ID is no longer linked to the device the VOID goes to), the expiry
// is decided again at once, on the new link, and the pre-auth lapses:
// EXPIRED without a VOID. Before, the VOID went to the old device; no
// answer came, and the pre-auth stayed OPEN. Both backends, the fake
// clock.
func TestExpiryVoidRacingALink(t *testing.T) {
	eachBackend(t, func(t *testing.T, store func(*server.Config)) {
		ck, clock := newClock()
		r := &relinkOnCreate{t: t}
		s := &sandbox{env: startWrapped(t, func(c *server.Config) {
			store(c)
			clock(c)
			c.AckTimeout, c.TransactionDeadline, c.RateLimit = 5*time.Second, 2*time.Second, 0
			c.PreAuthValidity = testValidity
		}, func(st instore.Store) instore.Store { r.Store = st; return r })}
		term, d := s.rawTerminal(t, "RAW-EXP-OLD")
		s.rawTerminal(t, "RAW-EXP-NEW")
		cmd := s.rawPreAuth(t, d, term, 30000)
		r.arm(term, "RAW-EXP-NEW")
		advance(t, ck, testValidity)
		testwait.ForNil(t, "the pre-auth to lapse", func() error {
			if a := s.authorization(t, cmd.Ref); a.State != instore.AuthExpired {
				return fmt.Errorf("authorization %+v", a)
			}
			return nil
		})
		if r.armed.Load() {
			t.Fatal("the expiry created nothing: the race was not run")
		}
		if got := s.get(t, "/in-store/api/v1/transactions?type=VOID"); !strings.Contains(string(got.body), `"transactions":[]`) {
			t.Errorf("VOIDs after the expiry: %s; want none", got.body)
		}
	})
}

// TestExpiryOfAPreAuthOnAnUnlinkedID: the pre-auth's terminal ID is
// unlinked before its expiry. Its device is reached through the ID only,
// so no VOID can go; the pre-auth lapses at its expiry (EXPIRED without a
// VOID) instead of a VOID answering WP01 at every sweep for ever (found
// by the simulation's relinks). Both backends, the fake clock.
func TestExpiryOfAPreAuthOnAnUnlinkedID(t *testing.T) {
	eachBackend(t, func(t *testing.T, store func(*server.Config)) {
		s, ck, term, _, cmd := expiringPreAuth(t, store, "RAW-UNLINKED", nil)
		s.post(t, "/in-store/api/v1/terminal/unlink", map[string]any{"terminalId": term}, nil).tx(t, 200)
		advance(t, ck, testValidity)
		s.wantLapsed(t, cmd.Ref)
	})
}

// TestLapseDoesNotWaitForTheVoidsRetry: the expiry's VOID is declined,
// so the next is due a minute later (lifecycle.ExpiryDue); meanwhile the
// terminal ID is linked to another device. The next sweep, well before
// that minute, ends the pre-auth by its lapse: before, it stayed OPEN
// until the retry's time, up to an hour after several (found by the
// simulation's relinks).
func TestLapseDoesNotWaitForTheVoidsRetry(t *testing.T) {
	eachBackend(t, func(t *testing.T, store func(*server.Config)) {
		s, ck, term, d, cmd := expiringPreAuth(t, store, "RAW-RETRY", nil)
		s.declinedExpiryVoid(t, ck, d)
		s.rawTerminal(t, "RAW-RETRY-2")
		_, _, err := s.srv.Store.LinkTerminal(context.Background(), term, "RAW-RETRY-2", time.Now())
		must(t, err)
		advance(t, ck, instore.DefaultSweep) // a sweep, half the retry's minute
		s.wantLapsed(t, cmd.Ref)
	})
}

// wantLapsed waits until the pre-auth ref ended EXPIRED by its lapse (an
// AUTHORIZATION entry by the TIMER, "without a void").
func (s *sandbox) wantLapsed(t *testing.T, ref string) {
	t.Helper()
	testwait.ForNil(t, "the pre-auth to lapse", func() error {
		if a := s.authorization(t, ref); a.State != instore.AuthExpired {
			return fmt.Errorf("authorization %+v", a)
		}
		return nil
	})
	if !slices.ContainsFunc(s.timeline(t, ref), func(e instore.TransactionEvent) bool {
		return e.Kind == instore.EventAuthorization && e.Actor == instore.ActorTimer && strings.Contains(e.Detail, "without a void")
	}) {
		t.Errorf("the pre-auth's timeline lacks its lapse: %+v", s.timeline(t, ref))
	}
}

// declinedExpiryVoid moves the clock to the expiry of expiringPreAuth's
// pre-auth and has its device d decline the expiry's VOID, which it
// returns.
func (s *sandbox) declinedExpiryVoid(t *testing.T, ck *clocktest.Clock, d *rawDevice) protocol.Envelope {
	t.Helper()
	advance(t, ck, testValidity)
	void := d.expect(protocol.TypeVoid)
	d.send(protocol.TypeAck, "", "", void.Ref, nil)
	d.send(protocol.TypeResult, "", "", void.Ref, protocol.Result{StatusID: instore.StatusTransactionDeclined})
	if v := s.final(t, void.Ref); v.StatusID != instore.StatusTransactionDeclined {
		t.Fatalf("the expiry void: status %d", v.StatusID)
	}
	return void
}
