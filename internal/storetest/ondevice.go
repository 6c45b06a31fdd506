package storetest

import (
	"errors"
	"testing"

	"github.com/instore-dev/instore"
)

// onDeviceTests: a creation with OnDevice is written only while its
// terminal ID is linked to that device; otherwise it stores nothing (no
// row, no timeline entry, the idempotency record untied) and answers
// instore.ErrRelinked. With and without a record, with its first timeline
// entry (the shapes each backend writes in one statement), by
// CreateTransaction and CreateOnOriginal.
var onDeviceTests = []test{
	{"Relinked", func(t *testing.T, s instore.Store) {
		a := seed(t, s) // linked to SN-1
		b := seedTerminal(t, s, "SN-2")
		orig := purchase(t, s, "txn_orig", a, "SN-1", 1000, at(0))
		// a's device is replaced: SN-2 (unlinking b) now holds a.
		mustLink(t, s, a, "SN-2", at(1), "SN-1", b)
		n := 0
		for _, keyed := range []bool{false, true} {
			for _, create := range []struct {
				name string
				tx   func(id, serial string) *instore.Transaction
				f    func(*instore.Change) error
			}{
				{"CreateTransaction", func(id, serial string) *instore.Transaction {
					return newTransaction(id, "mer_1", a, serial, instore.StatusPending, at(2))
				}, func(ch *instore.Change) error { return s.CreateTransaction(t.Context(), ch) }},
				{"CreateOnOriginal", func(id, serial string) *instore.Transaction {
					return newRefund(id, a, serial, orig.ID, 100, instore.StatusPending, at(2))
				}, func(ch *instore.Change) error { return s.CreateOnOriginal(t.Context(), ch) }},
			} {
				n++
				key := "key-" + string(rune('a'+n))
				change := func(tx *instore.Transaction) *instore.Change {
					ch := &instore.Change{T: tx, OnDevice: tx.SerialNumber,
						Events: []instore.TransactionEvent{{Version: 1, Kind: instore.EventCreated, At: at(2), Actor: instore.ActorECR, StatusAfter: "PENDING"}}}
					if keyed {
						ch.Idempotency = claim(key)
					}
					return ch
				}
				if keyed {
					mustBeginIdempotency(t, s, newIdempotency("mer_1", key, at(2)))
				}
				stale := create.tx("txn_stale", "SN-1")
				if err := create.f(change(stale)); !errors.Is(err, instore.ErrRelinked) {
					t.Fatalf("%s(keyed %v) for the device a was linked to before = %v, want instore.ErrRelinked", create.name, keyed, err)
				}
				checkMissing(t, "Transaction("+create.name+" on the old device)", s.Transaction, "txn_stale", "")
				if evs := mustEvents(t, s, "txn_stale"); len(evs) > 0 {
					t.Errorf("%s on the old device wrote its timeline: %+v", create.name, evs)
				}
				if keyed {
					if got := mustIdempotency(t, s, "mer_1", key); got.TransactionID != "" {
						t.Errorf("%s on the old device tied the record to %q", create.name, got.TransactionID)
					}
				}
				// The same request on the device linked now is written (and
				// tied), then ended so that the next may run.
				tx := create.tx("txn_"+key, "SN-2")
				if err := create.f(change(tx)); err != nil {
					t.Fatalf("%s(keyed %v) on the device linked now = %v", create.name, keyed, err)
				}
				if keyed {
					if got := mustIdempotency(t, s, "mer_1", key); got.TransactionID != tx.ID {
						t.Errorf("%s tied the record to %q, want %q", create.name, got.TransactionID, tx.ID)
					}
				}
				tx.StatusID, tx.Progress = instore.StatusTransactionDeclined, instore.ProgressFinal
				mustUpdateTransaction(t, s, tx, tx.Version)
			}
		}
		// An unlinked terminal ID holds no device.
		if _, err := s.UnlinkTerminal(t.Context(), a); err != nil {
			t.Fatal(err)
		}
		tx := newTransaction("txn_unlinked", "mer_1", a, "SN-2", instore.StatusPending, at(3))
		if err := s.CreateTransaction(t.Context(), &instore.Change{T: tx, OnDevice: "SN-2"}); !errors.Is(err, instore.ErrRelinked) {
			t.Errorf("CreateTransaction on an unlinked terminal ID = %v, want instore.ErrRelinked", err)
		}
	}},
}
