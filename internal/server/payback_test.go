package server_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/server"
)

// sandboxes runs f on a sandbox on each backend (see backends).
func sandboxes(t *testing.T, f func(t *testing.T, s *sandbox)) {
	eachBackend(t, func(t *testing.T, mutate func(*server.Config)) { f(t, startSandbox(t, mutate)) })
}

// paidBack sums what the refunds and reversals of orig took back, once
// every one of them is final: APPROVED refunds, and the amount of an
// APPROVED reversal.
func (s *sandbox) paidBack(t *testing.T, refs []string) int64 {
	t.Helper()
	var sum int64
	for _, ref := range refs {
		if tx := s.final(t, ref); tx.StatusID == instore.StatusApproved {
			sum += tx.Amount
		}
	}
	return sum
}

// TestRefundThenReversal: a purchase refunded in full on another terminal
// ID can no longer be reversed (it paid 200 % back before).
func TestRefundThenReversal(t *testing.T) {
	sandboxes(t, func(t *testing.T, s *sandbox) {
		orig := s.approved(t, map[string]any{"terminalId": s.terminals[0], "amount": 10000, "currency": "SEK"})
		refund := s.post(t, "/in-store/api/v1/refund", map[string]any{"terminalId": s.terminals[1], "amount": 10000,
			"currency": "SEK", "originalOnlineAPIRefId": orig.OnlineAPIRefID}, nil).tx(t, 201)
		if got := s.final(t, refund.OnlineAPIRefID); got.StatusID != instore.StatusApproved {
			t.Fatalf("refund ended %d, want APPROVED", got.StatusID)
		}
		p := s.post(t, "/in-store/api/v1/reversal", map[string]any{"onlineAPIRefId": orig.OnlineAPIRefID}, nil).problem(t, 409, "not-reversible")
		if p.OnlineAPIRefID != refund.OnlineAPIRefID {
			t.Errorf("reversal problem names %q, want the refund %q", p.OnlineAPIRefID, refund.OnlineAPIRefID)
		}
		if got := s.final(t, orig.OnlineAPIRefID); got.StatusID != instore.StatusApproved {
			t.Errorf("purchase after the refused reversal = %d, want APPROVED", got.StatusID)
		}
		// A partial refund refuses it just the same.
		orig2 := s.approved(t, map[string]any{"terminalId": s.terminals[0], "amount": 10000, "currency": "SEK"})
		s.final(t, s.post(t, "/in-store/api/v1/refund", map[string]any{"terminalId": s.terminals[1], "amount": 500,
			"currency": "SEK", "originalOnlineAPIRefId": orig2.OnlineAPIRefID}, nil).tx(t, 201).OnlineAPIRefID)
		s.post(t, "/in-store/api/v1/reversal", map[string]any{"onlineAPIRefId": orig2.OnlineAPIRefID}, nil).problem(t, 409, "not-reversible")
	})
}

// TestReversalThenRefund: a reversed purchase takes no refund.
func TestReversalThenRefund(t *testing.T) {
	sandboxes(t, func(t *testing.T, s *sandbox) {
		orig := s.approved(t, map[string]any{"terminalId": s.terminals[0], "amount": 10000, "currency": "SEK"})
		rev := s.post(t, "/in-store/api/v1/reversal", map[string]any{"onlineAPIRefId": orig.OnlineAPIRefID}, nil).tx(t, 201)
		if got := s.final(t, rev.OnlineAPIRefID); got.StatusID != instore.StatusApproved {
			t.Fatalf("reversal ended %d, want APPROVED", got.StatusID)
		}
		s.post(t, "/in-store/api/v1/refund", map[string]any{"terminalId": s.terminals[1], "amount": 10000,
			"currency": "SEK", "originalOnlineAPIRefId": orig.OnlineAPIRefID}, nil).problem(t, 409, "conflict")
	})
}

// TestReversalAndRefundsRace: a reversal and full refunds of one sale sent
// at once pay back the sale once at most (40.00 of 20.00 before).
func TestReversalAndRefundsRace(t *testing.T) {
	sandboxes(t, func(t *testing.T, s *sandbox) {
		for round := range 3 {
			orig := s.approved(t, map[string]any{"terminalId": s.terminals[0], "amount": 2000, "currency": "SEK"})
			var (
				wg   sync.WaitGroup
				mu   sync.Mutex
				refs []string
			)
			send := func(path string, body map[string]any) {
				defer wg.Done()
				r := s.post(t, path, body, nil)
				switch r.resp.StatusCode {
				case 201:
					var tx txJSON
					must(t, json.Unmarshal(r.body, &tx))
					mu.Lock()
					refs = append(refs, tx.OnlineAPIRefID)
					mu.Unlock()
				case 409, 400:
					// refused by the rule, or WP09 on a busy terminal
				default:
					t.Errorf("round %d: %s = %d %s", round, path, r.resp.StatusCode, r.body)
				}
			}
			wg.Add(3)
			go send("/in-store/api/v1/reversal", map[string]any{"onlineAPIRefId": orig.OnlineAPIRefID})
			for _, term := range s.terminals[1:] {
				go send("/in-store/api/v1/refund", map[string]any{"terminalId": term, "amount": 2000,
					"currency": "SEK", "originalOnlineAPIRefId": orig.OnlineAPIRefID})
			}
			wg.Wait()
			if len(refs) != 1 {
				t.Errorf("round %d: %d of a reversal and two full refunds were created, want 1", round, len(refs))
			}
			if got := s.paidBack(t, refs); got > 2000 {
				t.Errorf("round %d: paid back %d of a sale of 2000", round, got)
			}
		}
	})
}

// TestIdempotentRetryAfterCrash: the state a crash leaves (an idempotency
// record tied to the transaction it created, its answer never stored) is
// answered about that transaction at any later time, never with a second
// purchase; a record that created nothing runs again.
func TestIdempotentRetryAfterCrash(t *testing.T) {
	sandboxes(t, func(t *testing.T, s *sandbox) {
		ctx := context.Background()
		st := s.srv.Store
		term, err := st.Terminal(ctx, s.terminals[0])
		must(t, err)
		now := time.Now().UTC().Truncate(time.Microsecond)
		// crashed leaves what a process killed at a chosen moment leaves:
		// the record of key (made long ago, by an attempt that is gone) and,
		// with tx, the transaction it created.
		crashed := func(key string, body map[string]any, tx *instore.Transaction) {
			t.Helper()
			b, _ := json.Marshal(body)
			sum := sha256.Sum256(append([]byte("POST /in-store/api/v1/purchase\n"), b...))
			rec := &instore.IdempotencyRecord{MerchantID: s.merchantRec.ID, Key: key, Method: "POST",
				Path: "/in-store/api/v1/purchase", RequestHash: sum[:], Attempt: "att_gone", CreatedAt: now.Add(-time.Hour)}
			if existing, err := st.BeginIdempotency(ctx, rec); err != nil || existing != nil {
				t.Fatalf("BeginIdempotency = %v, %v", existing, err)
			}
			if tx != nil {
				must(t, st.CreateTransaction(ctx, &instore.Change{T: tx,
					Idempotency: &instore.IdempotencyClaim{MerchantID: s.merchantRec.ID, Key: key, Attempt: "att_gone"}}))
			}
		}
		count := func() int {
			ts, err := st.ListTransactions(ctx, instore.TransactionFilter{MerchantID: s.merchantRec.ID,
				From: now.Add(-2 * time.Hour), To: now.Add(time.Hour), Limit: 1000})
			must(t, err)
			return len(ts)
		}
		tx := func(ref string, status instore.TransactionStatus, errorCode string, acked bool) *instore.Transaction {
			created := now.Add(-time.Hour)
			t := &instore.Transaction{ID: ref, MerchantID: s.merchantRec.ID, TerminalID: term.TerminalID, SerialNumber: term.SerialNumber,
				Type: instore.TypePurchase, Amount: 100, Currency: "SEK", StatusID: status, Progress: instore.ProgressFinal,
				CreatedAt: created, CompletedAt: &created, ResultMessageID: "m-" + ref}
			if acked {
				t.AcknowledgedAt = &created
			}
			if errorCode != "" {
				c, _ := s.srv.Metadata.ErrorCode(errorCode)
				t.ErrorID, t.ResultMessageID = &c.ID, ""
			}
			return t
		}
		body := func(amount int) map[string]any {
			return map[string]any{"terminalId": s.terminals[0], "amount": amount, "currency": "SEK"}
		}

		// Killed after the terminal acknowledged, before the 201 was stored;
		// the terminal's approval came in after the restart.
		crashed("after-ack", body(100), tx("txn_after_ack", instore.StatusApproved, "", true))
		// Killed before the ack; the ack time-out ended it (WP25).
		crashed("before-ack", body(101), tx("txn_before_ack", instore.StatusTechnicalError, instore.WP25, false))
		// Killed before anything was created.
		crashed("before-create", body(102), nil)
		before := count()

		key := func(k string) map[string]string { return map[string]string{"Idempotency-Key": k} }
		for range 2 { // the answer, then its replay
			r := s.post(t, "/in-store/api/v1/purchase", body(100), key("after-ack"))
			if got := r.tx(t, 201); got.OnlineAPIRefID != "txn_after_ack" || got.StatusID != instore.StatusApproved {
				t.Errorf("retry after a crash after the ack = %s %d, want txn_after_ack APPROVED", got.OnlineAPIRefID, got.StatusID)
			}
			if r.resp.Header.Get("Idempotent-Replayed") != "true" {
				t.Errorf("retry after a crash: Idempotent-Replayed = %q, want true", r.resp.Header.Get("Idempotent-Replayed"))
			}
			p := s.post(t, "/in-store/api/v1/purchase", body(101), key("before-ack")).problem(t, 504, "WP25")
			if p.OnlineAPIRefID != "txn_before_ack" {
				t.Errorf("retry after a crash before the ack names %q, want txn_before_ack", p.OnlineAPIRefID)
			}
		}
		if got := count(); got != before {
			t.Fatalf("retries of keys that created a transaction made %d transactions, want none", got-before)
		}
		// The key whose request created nothing runs again, once.
		first := s.post(t, "/in-store/api/v1/purchase", body(102), key("before-create")).tx(t, 201)
		s.final(t, first.OnlineAPIRefID)
		again := s.post(t, "/in-store/api/v1/purchase", body(102), key("before-create")).tx(t, 201)
		if again.OnlineAPIRefID != first.OnlineAPIRefID {
			t.Errorf("second retry of a key that created nothing = %s, want %s", again.OnlineAPIRefID, first.OnlineAPIRefID)
		}
		if got := count(); got != before+1 {
			t.Errorf("%d transactions made, want 1", got-before)
		}
		rec, err := st.IdempotencyRecord(ctx, s.merchantRec.ID, "before-create")
		must(t, err)
		if rec.TransactionID != first.OnlineAPIRefID {
			t.Errorf("record of the rerun names %q, want %q", rec.TransactionID, first.OnlineAPIRefID)
		}
	})
}
