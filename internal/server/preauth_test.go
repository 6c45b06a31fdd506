package server_test

import (
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/protocol"
	"github.com/instore-dev/instore/internal/server"
)

// preAuthOp posts an increment, capture or void (path) of the pre-auth ref
// with the members of body.
func (s *sandbox) preAuthOp(t *testing.T, path, ref string, body map[string]any) reply {
	t.Helper()
	b := map[string]any{"onlineAPIRefId": ref}
	for k, v := range body {
		b[k] = v
	}
	return s.post(t, "/in-store/api/v1/"+path, b, nil)
}

// approvedPreAuth runs a pre-authorisation of amount on the first terminal
// to its approval and returns it.
func (s *sandbox) approvedPreAuth(t *testing.T, amount int64) txJSON {
	t.Helper()
	created := s.post(t, "/in-store/api/v1/preauthorization", map[string]any{"terminalId": s.terminals[0], "amount": amount,
		"currency": "SEK", "ecrReference": "ROOM-204"}, nil).tx(t, 201)
	pre := s.final(t, created.OnlineAPIRefID)
	if pre.Type != instore.TypePreAuth || pre.StatusID != instore.StatusApproved || pre.Authorization == nil ||
		pre.Authorization.State != instore.AuthOpen || pre.Authorization.AuthorizedAmount != amount {
		t.Fatalf("pre-authorisation: type %s status %d authorization %+v", pre.Type, pre.StatusID, pre.Authorization)
	}
	return pre
}

// approvedOp runs an increment, capture or void of ref to its approval.
func (s *sandbox) approvedOp(t *testing.T, path, ref string, body map[string]any) txJSON {
	t.Helper()
	created := s.preAuthOp(t, path, ref, body).tx(t, 201)
	tx := s.final(t, created.OnlineAPIRefID)
	if tx.StatusID != instore.StatusApproved || tx.PreAuthorization != ref {
		t.Fatalf("%s: status %d, preAuthorization %q", path, tx.StatusID, tx.PreAuthorization)
	}
	return tx
}

// authorization reads the pre-auth ref's authorisation.
func (s *sandbox) authorization(t *testing.T, ref string) instore.Authorization {
	t.Helper()
	tx := s.transaction(t, ref)
	if tx.Authorization == nil {
		t.Fatalf("pre-auth %s has no authorization", ref)
	}
	return *tx.Authorization
}

// TestPreAuthHotel drives a hotel stay end to end on both backends with
// the virtual terminals: a pre-authorisation at check-in, an increment, a
// capture with a tip at check-out and a refund of part of it; what the
// rules refuse on the way (a reversal, a refund of an open pre-auth, a
// capture past the tolerance, a second capture, a void of a captured one),
// the listing's filters, the timeline and the events.
func TestPreAuthHotel(t *testing.T) {
	sandboxes(t, func(t *testing.T, s *sandbox) {
		pre := s.approvedPreAuth(t, 50000)
		if exp := pre.Authorization.ExpiresAt; pre.CompletedAt == nil || exp.Sub(*pre.CompletedAt) != instore.DefaultPreAuthValidity {
			t.Errorf("expiresAt %s, want the approval (%v) plus 7 days", exp, pre.CompletedAt)
		}
		ref := pre.OnlineAPIRefID
		s.post(t, "/in-store/api/v1/reversal", map[string]any{"onlineAPIRefId": ref}, nil).problem(t, 409, "not-reversible")
		s.post(t, "/in-store/api/v1/refund", map[string]any{"terminalId": s.terminals[1], "amount": 100, "currency": "SEK",
			"originalOnlineAPIRefId": ref}, nil).problem(t, 409, "conflict")
		s.post(t, "/in-store/api/v1/preauthorization", map[string]any{"terminalId": s.terminals[0], "amount": 100, "currency": "SEK",
			"cashbackAmount": 10}, nil).problem(t, 400, "validation")
		if pr := s.post(t, "/in-store/api/v1/preauthorization", map[string]any{"terminalId": s.terminals[0], "amount": 100, "currency": "SEK",
			"paymentMethodId": 1}, nil).problem(t, 400, "validation"); len(pr.Errors) != 1 || pr.Errors[0].Field != "/paymentMethodId" {
			t.Errorf("a pre-auth with a payment method: errors %+v, want one on /paymentMethodId", pr.Errors)
		}

		s.approvedOp(t, "increment", ref, map[string]any{"amount": 15000})
		if a := s.authorization(t, ref); a.State != instore.AuthOpen || a.AuthorizedAmount != 65000 {
			t.Errorf("after the increment: %+v, want OPEN, 65000", a)
		}
		// 65000 × 1.2 = 78000 at most.
		s.preAuthOp(t, "capture", ref, map[string]any{"amount": 78001}).problem(t, 400, "validation")
		s.preAuthOp(t, "increment", ref, map[string]any{"amount": 100, "tipAmount": 1}).problem(t, 400, "validation")
		capture := s.approvedOp(t, "capture", ref, map[string]any{"amount": 66000, "tipAmount": 1000})
		if capture.Amount != 65000 || capture.TipAmount != 1000 || capture.TotalAmount != 66000 {
			t.Errorf("capture: amount %d tipAmount %d totalAmount %d, want 65000, 1000, 66000", capture.Amount, capture.TipAmount, capture.TotalAmount)
		}
		if a := s.authorization(t, ref); a.State != instore.AuthCaptured || a.CapturedAmount != 66000 || a.AuthorizedAmount != 65000 {
			t.Errorf("after the capture: %+v, want CAPTURED, 66000 of 65000", a)
		}
		s.preAuthOp(t, "capture", ref, map[string]any{"amount": 100}).problem(t, 409, "conflict")
		s.preAuthOp(t, "void", ref, nil).problem(t, 409, "conflict")
		s.preAuthOp(t, "increment", ref, map[string]any{"amount": 100}).problem(t, 409, "conflict")

		refund := func(amount int64) reply {
			return s.post(t, "/in-store/api/v1/refund", map[string]any{"terminalId": s.terminals[1], "amount": amount,
				"currency": "SEK", "originalOnlineAPIRefId": ref}, nil)
		}
		refund(66001).problem(t, 400, "validation")
		if r := s.final(t, refund(20000).tx(t, 201).OnlineAPIRefID); r.StatusID != instore.StatusApproved {
			t.Errorf("refund of 20000: status %d", r.StatusID)
		}
		refund(46001).problem(t, 400, "validation")

		var l struct{ Transactions []txJSON }
		s.get(t, "/in-store/api/v1/transactions?type=PRE_AUTH,CAPTURE&authorizationState=CAPTURED").decode(t, 200, &l)
		if len(l.Transactions) != 1 || l.Transactions[0].OnlineAPIRefID != ref {
			t.Errorf("listing of CAPTURED pre-auths: %+v", l.Transactions)
		}
		s.get(t, "/in-store/api/v1/transactions?type=INCREMENT,CAPTURE").decode(t, 200, &l)
		if len(l.Transactions) != 2 {
			t.Errorf("listing of increments and captures: %d, want 2", len(l.Transactions))
		}
		s.get(t, "/in-store/api/v1/transactions?type=SALE").problem(t, 400, "validation")
		s.get(t, "/in-store/api/v1/transactions?authorizationState=CLOSED").problem(t, 400, "validation")

		kinds := 0
		for _, e := range s.timeline(t, ref) {
			if e.Kind == instore.EventAuthorization {
				kinds++
			}
		}
		if kinds != 2 {
			t.Errorf("the pre-auth's timeline has %d AUTHORIZATION entries, want 2", kinds)
		}
		s.waitEvents(t, "&types=transaction.authorization", func(evs []instore.EventWire) bool {
			n := 0
			for _, e := range evs {
				if e.Type == instore.EventTransactionAuthorization && strings.Contains(string(e.Data), `"onlineAPIRefId":"`+ref+`"`) {
					n++
				}
			}
			return n == 2
		})
	})
}

// TestPreAuthRaces: a capture, a void and an increment posted at once on
// one OPEN pre-auth: one capture or void at most starts, the others are
// refused (conflict, or WP09 while it runs); then refunds racing on the
// captured pre-auth never exceed its capturedAmount. Both backends.
func TestPreAuthRaces(t *testing.T) {
	sandboxes(t, func(t *testing.T, s *sandbox) {
		ref := s.approvedPreAuth(t, 30000).OnlineAPIRefID
		ops := []struct {
			path string
			body map[string]any
		}{{"capture", map[string]any{"amount": 30000}}, {"void", nil}, {"capture", map[string]any{"amount": 20000}}, {"void", nil}}
		var (
			mu      sync.Mutex
			wg      sync.WaitGroup
			created []txJSON
		)
		for _, op := range ops {
			wg.Go(func() {
				r := s.preAuthOp(t, op.path, ref, op.body)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case r.resp.StatusCode == 201:
					created = append(created, r.tx(t, 201))
				case r.resp.StatusCode != 409 || !strings.Contains(string(r.body), "conflict") && !strings.Contains(string(r.body), "WP09"):
					t.Errorf("%s = %d %s, want 201, or 409 conflict or WP09", op.path, r.resp.StatusCode, r.body)
				}
			})
		}
		wg.Wait()
		if len(created) != 1 {
			t.Fatalf("%d captures and voids started, want 1", len(created))
		}
		won := s.final(t, created[0].OnlineAPIRefID)
		a := s.authorization(t, ref)
		if won.Type == instore.TypeVoid {
			if a.State != instore.AuthVoided {
				t.Fatalf("after the void: %+v", a)
			}
			return
		}
		if a.State != instore.AuthCaptured || a.CapturedAmount != won.TotalAmount {
			t.Fatalf("after the capture of %d: %+v", won.TotalAmount, a)
		}
		var refs []string
		for i := range 3 {
			wg.Go(func() {
				r := s.post(t, "/in-store/api/v1/refund", map[string]any{"terminalId": s.terminals[i], "amount": 12000, "currency": "SEK",
					"originalOnlineAPIRefId": ref}, nil)
				mu.Lock()
				defer mu.Unlock()
				if r.resp.StatusCode == 201 {
					refs = append(refs, r.tx(t, 201).OnlineAPIRefID)
				}
			})
		}
		wg.Wait()
		if paid := s.paidBack(t, refs); paid > a.CapturedAmount {
			t.Errorf("refunds paid back %d of a capture of %d", paid, a.CapturedAmount)
		}
	})
}

// TestPreAuthExpiry: an OPEN pre-auth past its validity is voided on its
// terminal by the service (a VOID whose CREATED entry has actor TIMER),
// and ends EXPIRED, with its transaction.authorization event; the timer
// survives a restart (re-armed from the store). Both backends, a raw
// terminal and the fake clock.
func TestPreAuthExpiry(t *testing.T) {
	eachBackend(t, func(t *testing.T, store func(*server.Config)) {
		s, ck, _, d, cmd := expiringPreAuth(t, store, "RAW-PRE", nil)
		pre := s.transaction(t, cmd.Ref)

		s.restart(t, nil)
		d = s.redial(t, d)
		advance(t, ck, testValidity)
		void := d.expect(protocol.TypeVoid)
		d.send(protocol.TypeAck, "", "", void.Ref, nil)
		d.send(protocol.TypeResult, "", "", void.Ref, protocol.Result{StatusID: instore.StatusApproved})
		if v := s.final(t, void.Ref); v.Type != instore.TypeVoid || v.StatusID != instore.StatusApproved || v.PreAuthorization != pre.OnlineAPIRefID {
			t.Errorf("the expiry's void: %+v", v)
		}
		if a := s.authorization(t, pre.OnlineAPIRefID); a.State != instore.AuthExpired {
			t.Errorf("after the expiry: %+v, want EXPIRED", a)
		}
		tl := s.timeline(t, void.Ref)
		if len(tl) == 0 || tl[0].Kind != instore.EventCreated || tl[0].Actor != instore.ActorTimer {
			t.Errorf("the void's timeline: %+v, want CREATED by TIMER first", tl)
		}
		if !slices.ContainsFunc(s.timeline(t, pre.OnlineAPIRefID), func(e instore.TransactionEvent) bool {
			return e.Kind == instore.EventAuthorization && strings.Contains(e.Detail, "EXPIRED")
		}) {
			t.Errorf("the pre-auth's timeline lacks its expiry")
		}
	})
}
