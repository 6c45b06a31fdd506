package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/instore-dev/instore"
)

func newIdempotency(merchantID, key string, created time.Time) *instore.IdempotencyRecord {
	return &instore.IdempotencyRecord{
		MerchantID: merchantID, Key: key, Method: "POST", Path: "/in-store/api/v1/transactions/purchase",
		RequestHash: hash("request " + key), CreatedAt: created, Attempt: "att-" + key,
	}
}

func mustBeginIdempotency(t *testing.T, s instore.Store, rec *instore.IdempotencyRecord) {
	t.Helper()
	existing, err := s.BeginIdempotency(t.Context(), rec)
	if err != nil || existing != nil {
		t.Fatalf("BeginIdempotency(%q) = (%v, %v), want (nil, nil)", rec.Key, existing, err)
	}
}

// mustIdempotency reads a record that must exist.
func mustIdempotency(t *testing.T, s instore.Store, merchantID, key string) *instore.IdempotencyRecord {
	t.Helper()
	rec, err := s.IdempotencyRecord(t.Context(), merchantID, key)
	if err != nil {
		t.Fatalf("IdempotencyRecord(%q, %q) = %v", merchantID, key, err)
	}
	return rec
}

// claim is the idempotency claim of the record newIdempotency makes.
func claim(key string) *instore.IdempotencyClaim {
	return &instore.IdempotencyClaim{MerchantID: "mer_1", Key: key, Attempt: "att-" + key}
}

var idempotencyTests = []test{
	{"Tie", func(t *testing.T, s instore.Store) {
		// A creation ties the record of its request to the transaction in
		// the same database transaction; a record tied is never deleted as
		// abandoned.
		a := seed(t, s)
		mustBeginIdempotency(t, s, newIdempotency("mer_1", "key-1", at(0)))
		tx := newTransaction("txn_1", "mer_1", a, "SN-1", instore.StatusPending, at(1))
		mustCreate(t, s, &instore.Change{T: tx, Idempotency: claim("key-1")})
		if got := mustIdempotency(t, s, "mer_1", "key-1"); got.TransactionID != "txn_1" || got.StatusCode != 0 {
			t.Errorf("IdempotencyRecord() after the creation = transaction %q, status %d; want txn_1, running", got.TransactionID, got.StatusCode)
		}
		err := s.DeleteIdempotency(t.Context(), "mer_1", "key-1", "att-key-1")
		checkNotFound(t, "DeleteIdempotency(tied)", err, "")
		mustIdempotency(t, s, "mer_1", "key-1")

		// A refund or reversal is tied the same way.
		tx.StatusID, tx.Progress = instore.StatusApproved, instore.ProgressFinal
		mustUpdateTransaction(t, s, tx, tx.Version)
		mustBeginIdempotency(t, s, newIdempotency("mer_1", "key-2", at(2)))
		r := newRefund("txn_r", a, "SN-1", tx.ID, 100, instore.StatusPending, at(3))
		if err := s.CreateOnOriginal(t.Context(), &instore.Change{T: r, Idempotency: claim("key-2")}); err != nil {
			t.Fatalf("CreateOnOriginal(%q) = %v", r.ID, err)
		}
		if got := mustIdempotency(t, s, "mer_1", "key-2"); got.TransactionID != "txn_r" {
			t.Errorf("IdempotencyRecord() after CreateOnOriginal = transaction %q, want txn_r", got.TransactionID)
		}

		// And a close (POST /terminal/{terminalId}/close), by its batchId.
		mustBeginIdempotency(t, s, newIdempotency("mer_1", "key-3", at(4)))
		if err := s.CreateBatch(t.Context(), newBatch("bat_k", seedTerminal(t, s, "SN-3"), at(0), at(4)), claim("key-3")); err != nil {
			t.Fatalf("CreateBatch(with a claim) = %v", err)
		}
		if got := mustIdempotency(t, s, "mer_1", "key-3"); got.TransactionID != "bat_k" {
			t.Errorf("IdempotencyRecord() after CreateBatch = tied to %q, want bat_k", got.TransactionID)
		}
	}},
	{"TieLost", func(t *testing.T, s instore.Store) {
		// A creation whose record is another attempt's, tied already,
		// completed or gone stores nothing.
		a := seed(t, s)
		b := seedTerminal(t, s, "SN-2")
		orig := purchase(t, s, "txn_orig", b, "SN-2", 1000, at(0))
		mustBeginIdempotency(t, s, newIdempotency("mer_1", "key-other", at(0)))
		mustBeginIdempotency(t, s, newIdempotency("mer_1", "key-done", at(0)))
		if err := s.CompleteIdempotency(t.Context(), "mer_1", "key-done", "att-key-done", 201, nil, nil); err != nil {
			t.Fatalf("CompleteIdempotency() = %v", err)
		}
		mustBeginIdempotency(t, s, newIdempotency("mer_1", "key-tied", at(0)))
		tied := newTransaction("txn_tied", "mer_1", b, "SN-2", instore.StatusApproved, at(0))
		mustCreate(t, s, &instore.Change{T: tied, Idempotency: claim("key-tied")})
		for _, tc := range []struct {
			name string
			c    *instore.IdempotencyClaim
		}{
			{"another attempt", &instore.IdempotencyClaim{MerchantID: "mer_1", Key: "key-other", Attempt: "att-old"}},
			{"completed", claim("key-done")},
			{"tied already", claim("key-tied")},
			{"missing", claim("key-missing")},
		} {
			for _, create := range []struct {
				name string
				tx   *instore.Transaction
				f    func(*instore.Change) error
			}{
				{"CreateTransaction", newTransaction("txn_lost", "mer_1", a, "SN-1", instore.StatusPending, at(1)),
					func(ch *instore.Change) error { return s.CreateTransaction(t.Context(), ch) }},
				{"CreateOnOriginal", newRefund("txn_lost", a, "SN-1", orig.ID, 100, instore.StatusPending, at(1)),
					func(ch *instore.Change) error { return s.CreateOnOriginal(t.Context(), ch) }},
			} {
				if err := create.f(&instore.Change{T: create.tx, Idempotency: tc.c}); !errors.Is(err, instore.ErrIdempotencyLost) {
					t.Errorf("%s(record %s) = %v, want instore.ErrIdempotencyLost", create.name, tc.name, err)
				}
				checkMissing(t, "Transaction("+create.name+" with record "+tc.name+")", s.Transaction, "txn_lost", "")
			}
			if err := s.CreateBatch(t.Context(), newBatch("bat_lost", a, at(0), at(1)), tc.c); !errors.Is(err, instore.ErrIdempotencyLost) {
				t.Errorf("CreateBatch(record %s) = %v, want instore.ErrIdempotencyLost", tc.name, err)
			}
			checkMissing(t, "Batch(with record "+tc.name+")", s.Batch, "bat_lost", "")
		}
		if got := mustIdempotency(t, s, "mer_1", "key-other"); got.TransactionID != "" {
			t.Errorf("IdempotencyRecord(another attempt's) tied to %q, want untied", got.TransactionID)
		}
	}},
	{"RoundTrip", func(t *testing.T, s instore.Store) {
		rec := newIdempotency("mer_1", "key-1", base)
		mustBeginIdempotency(t, s, rec)
		if d := diff(asStored(rec), mustIdempotency(t, s, "mer_1", "key-1")); d != "" {
			t.Errorf("IdempotencyRecord() of a running record mismatch (-want +got):\n%s", d)
		}

		header := map[string]string{"Content-Type": "application/json", "Location": "/in-store/api/v1/transactions/txn_1"}
		body := []byte("{\"onlineAPIRefId\":\"txn_1\"}\n\x00\xff")
		if err := s.CompleteIdempotency(t.Context(), "mer_1", "key-1", "att-key-1", 201, header, body); err != nil {
			t.Fatalf("CompleteIdempotency() = %v", err)
		}
		want := asStored(rec)
		want.StatusCode, want.Header, want.Body = 201, header, body
		if d := diff(want, mustIdempotency(t, s, "mer_1", "key-1")); d != "" {
			t.Errorf("IdempotencyRecord() of a completed record mismatch (-want +got):\n%s", d)
		}

		// A response without header and body.
		mustBeginIdempotency(t, s, newIdempotency("mer_1", "key-2", at(1)))
		if err := s.CompleteIdempotency(t.Context(), "mer_1", "key-2", "att-key-2", 204, nil, nil); err != nil {
			t.Fatalf("CompleteIdempotency(no header, no body) = %v", err)
		}
		got := mustIdempotency(t, s, "mer_1", "key-2")
		if got.StatusCode != 204 || len(got.Header) != 0 || len(got.Body) != 0 {
			t.Errorf("IdempotencyRecord() = status %d, header %v, body %q; want 204 and nothing else", got.StatusCode, got.Header, got.Body)
		}
	}},
	{"Existing", func(t *testing.T, s instore.Store) {
		first := newIdempotency("mer_1", "key-1", at(0))
		mustBeginIdempotency(t, s, first)
		second := &instore.IdempotencyRecord{MerchantID: "mer_1", Key: "key-1", Method: "POST",
			Path: "/other", RequestHash: hash("other request"), CreatedAt: at(1)}
		existing, err := s.BeginIdempotency(t.Context(), second)
		if err != nil {
			t.Fatalf("BeginIdempotency(taken key) = %v", err)
		}
		if d := diff(asStored(first), existing); d != "" {
			t.Errorf("BeginIdempotency(taken key) mismatch, want the first record (-want +got):\n%s", d)
		}
		if d := diff(asStored(first), mustIdempotency(t, s, "mer_1", "key-1")); d != "" {
			t.Errorf("BeginIdempotency(taken key) changed the record (-want +got):\n%s", d)
		}

		// Completed, it is returned with its response.
		if err := s.CompleteIdempotency(t.Context(), "mer_1", "key-1", "att-key-1", 202, map[string]string{"A": "b"}, []byte("x")); err != nil {
			t.Fatalf("CompleteIdempotency() = %v", err)
		}
		existing, err = s.BeginIdempotency(t.Context(), second)
		if err != nil {
			t.Fatalf("BeginIdempotency(completed key) = %v", err)
		}
		want := asStored(first)
		want.StatusCode, want.Header, want.Body = 202, map[string]string{"A": "b"}, []byte("x")
		if d := diff(want, existing); d != "" {
			t.Errorf("BeginIdempotency(completed key) mismatch (-want +got):\n%s", d)
		}

		// The scope is the merchant.
		mustBeginIdempotency(t, s, newIdempotency("mer_2", "key-1", at(2)))
		if got := mustIdempotency(t, s, "mer_2", "key-1"); got.StatusCode != 0 {
			t.Errorf("IdempotencyRecord(other merchant).StatusCode = %d, want 0 (running)", got.StatusCode)
		}
	}},
	{"Complete", func(t *testing.T, s instore.Store) {
		err := s.CompleteIdempotency(t.Context(), "mer_1", "key-missing-6b0e", "att-key-missing-6b0e", 201, nil, []byte("x"))
		checkNotFound(t, "CompleteIdempotency(missing)", err, "key-missing-6b0e")
		_, err = s.IdempotencyRecord(t.Context(), "mer_1", "key-missing-6b0e")
		checkNotFound(t, "IdempotencyRecord(missing)", err, "key-missing-6b0e")

		// Only a running record takes a response: the first one stays.
		mustBeginIdempotency(t, s, newIdempotency("mer_1", "key-1", at(0)))
		if err := s.CompleteIdempotency(t.Context(), "mer_1", "key-1", "att-key-1", 201, nil, []byte("first")); err != nil {
			t.Fatalf("CompleteIdempotency() = %v", err)
		}
		err = s.CompleteIdempotency(t.Context(), "mer_1", "key-1", "att-key-1", 500, nil, []byte("second"))
		checkConflict(t, "CompleteIdempotency(completed)", err)
		if got := mustIdempotency(t, s, "mer_1", "key-1"); got.StatusCode != 201 || string(got.Body) != "first" {
			t.Errorf("IdempotencyRecord() = %d %q after a second completion, want 201 \"first\"", got.StatusCode, got.Body)
		}
	}},
	{"Delete", func(t *testing.T, s instore.Store) {
		mustBeginIdempotency(t, s, newIdempotency("mer_1", "key-1", at(0)))
		mustBeginIdempotency(t, s, newIdempotency("mer_2", "key-1", at(0)))
		if err := s.DeleteIdempotency(t.Context(), "mer_1", "key-1", "att-key-1"); err != nil {
			t.Fatalf("DeleteIdempotency() = %v", err)
		}
		_, err := s.IdempotencyRecord(t.Context(), "mer_1", "key-1")
		checkNotFound(t, "IdempotencyRecord(deleted)", err, "")
		mustIdempotency(t, s, "mer_2", "key-1")
		err = s.DeleteIdempotency(t.Context(), "mer_1", "key-1", "att-key-1")
		checkNotFound(t, "DeleteIdempotency(missing)", err, "key-1")
		// The key is free again.
		mustBeginIdempotency(t, s, newIdempotency("mer_1", "key-1", at(1)))
	}},
	{"Expire", func(t *testing.T, s instore.Store) {
		for i, key := range []string{"key-0", "key-1", "key-2", "key-3"} {
			mustBeginIdempotency(t, s, newIdempotency("mer_1", key, at(i)))
		}
		for _, tc := range []struct {
			before time.Time
			want   int
			left   []string
		}{
			{at(0), 0, []string{"key-0", "key-1", "key-2", "key-3"}}, // created_at == before stays
			{at(2), 2, []string{"key-2", "key-3"}},
			{at(2), 0, []string{"key-2", "key-3"}},
			{at(10), 2, nil},
		} {
			n, err := s.ExpireIdempotency(t.Context(), tc.before)
			if err != nil {
				t.Fatalf("ExpireIdempotency(%v) = %v", tc.before, err)
			}
			if n != tc.want {
				t.Errorf("ExpireIdempotency(%v) = %d, want %d", tc.before, n, tc.want)
			}
			for i := range 4 {
				key := fmt.Sprintf("key-%d", i)
				_, err := s.IdempotencyRecord(t.Context(), "mer_1", key)
				kept := false
				for _, k := range tc.left {
					kept = kept || k == key
				}
				if kept && err != nil {
					t.Errorf("IdempotencyRecord(%q) after ExpireIdempotency(%v) = %v, want it kept", key, tc.before, err)
				}
				if !kept && !errors.Is(err, instore.ErrNotFound) {
					t.Errorf("IdempotencyRecord(%q) after ExpireIdempotency(%v) = %v, want instore.ErrNotFound", key, tc.before, err)
				}
			}
		}
	}},
	{"ConcurrentBegin", func(t *testing.T, s instore.Store) {
		const n = 16
		var recs, existing [n]*instore.IdempotencyRecord
		for i := range n {
			recs[i] = newIdempotency("mer_1", "key-1", at(i))
			recs[i].RequestHash = hash(fmt.Sprintf("request %d", i))
		}
		errs := atOnce(n, func(i int) (err error) {
			existing[i], err = s.BeginIdempotency(t.Context(), recs[i])
			return err
		})
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("concurrent BeginIdempotency: %v", err)
		}
		winner := -1
		for i, e := range existing {
			if e == nil {
				if winner >= 0 {
					t.Errorf("BeginIdempotency #%d and #%d both stored their record", winner, i)
				}
				winner = i
			}
		}
		if winner < 0 {
			t.Fatal("no concurrent BeginIdempotency stored its record")
		}
		want := asStored(recs[winner])
		for i, e := range existing {
			if i == winner {
				continue
			}
			if d := diff(want, e); d != "" {
				t.Errorf("BeginIdempotency #%d returned another record than the winner's (-want +got):\n%s", i, d)
			}
		}

		header := map[string]string{"Content-Type": "application/json"}
		if err := s.CompleteIdempotency(t.Context(), "mer_1", "key-1", "att-key-1", 201, header, []byte(`{"ok":true}`)); err != nil {
			t.Fatalf("CompleteIdempotency() = %v", err)
		}
		want.StatusCode, want.Header, want.Body = 201, header, []byte(`{"ok":true}`)
		if d := diff(want, mustIdempotency(t, s, "mer_1", "key-1")); d != "" {
			t.Errorf("IdempotencyRecord() after completion mismatch (-want +got):\n%s", d)
		}
	}},
}
