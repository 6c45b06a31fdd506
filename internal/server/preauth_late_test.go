package server_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/protocol"
	"github.com/instore-dev/instore/internal/server"
	"github.com/instore-dev/instore/lifecycle"
)

// TestLateVoidApprovalReleases: a VOID the service ended WP25 (its ack
// came too late) and the terminal approved after all is not reversed (that
// would hold the cardholder's money again): the VOID keeps WP25 and gets
// the result, the pre-auth is VOIDED in the same write, and the terminal
// is sent a confirm, no reversal. A CAPTURE approved late, by contrast, is
// reversed like a late sale and leaves the pre-auth OPEN.
func TestLateVoidApprovalReleases(t *testing.T) {
	ck, clock := newClock()
	s := rawEnv(t, clock)
	term, d := s.rawTerminal(t, "RAW-VOID")

	// An approved pre-auth on the raw device.
	pre := s.rawPreAuth(t, d, term, 40000).Ref
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
	go func() { done <- s.preAuthOp(t, "void", pre, nil) }()
	void := d.expect(protocol.TypeVoid)
	advance(t, ck, time.Second)
	(<-done).problem(t, 504, "WP25")
	d.expect(protocol.TypeCancel)
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

// TestExpiryVoidDeclinedRetried: the expiry's VOID declined leaves the
// pre-auth OPEN, and the service tries again a minute after (then two,
// four, ... at most an hour apart: lifecycle.ExpiryDue), not at every
// sweep, until one is approved and the pre-auth ends EXPIRED.
func TestExpiryVoidDeclinedRetried(t *testing.T) {
	eachBackend(t, func(t *testing.T, store func(*server.Config)) {
		s, ck, _, d, cmd := expiringPreAuth(t, store, "RAW-EXP", nil)

		advance(t, ck, testValidity)
		first := d.expect(protocol.TypeVoid)
		d.send(protocol.TypeAck, "", "", first.Ref, nil)
		d.send(protocol.TypeResult, "", "", first.Ref, protocol.Result{StatusID: instore.StatusTransactionDeclined})
		if v := s.final(t, first.Ref); v.StatusID != instore.StatusTransactionDeclined {
			t.Fatalf("the first expiry void: status %d", v.StatusID)
		}
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
