package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/instore-dev/instore"
)

func newBatch(id, terminalID string, opened, closed time.Time) *instore.Batch {
	return &instore.Batch{ID: id, MerchantID: "mer_1", TerminalID: terminalID, SerialNumber: "SN-1", State: instore.BatchPending,
		OpenedAt: opened, ClosedAt: closed}
}

func mustCreateBatch(t *testing.T, s instore.Store, b *instore.Batch) *instore.Batch {
	t.Helper()
	return mustCreateWith(t, "CreateBatch", func(ctx context.Context, b *instore.Batch) error { return s.CreateBatch(ctx, b, nil) }, b, b.ID)
}

// closedBatch is b CLOSED with a report that has every part set.
func closedBatch(b *instore.Batch, reported time.Time) *instore.Batch {
	c := *b
	sale := instore.BatchItem{Ref: "txn_1", Type: instore.TypePurchase, StatusID: instore.StatusApproved, Amount: 1250, Currency: "SEK"}
	own := instore.BatchItem{Ref: "T-0001", Type: instore.TypePurchase, StatusID: instore.StatusApproved, Amount: 1000, Currency: "SEK", Offline: true}
	cmpd := instore.CompareBatch([]instore.BatchItem{sale, own}, []instore.BatchItem{sale})
	c.State, c.Number, c.MessageID, c.ReportedAt = instore.BatchClosed, 42, "msg-42", &reported
	c.TerminalItems = []instore.BatchItem{sale, own}
	c.TerminalTotals, c.ServiceTotals, c.Matched, c.Differences = cmpd.TerminalTotals, cmpd.ServiceTotals, cmpd.Matched, cmpd.Differences
	return &c
}

var batchTests = []test{
	{"RoundTrip", func(t *testing.T, s instore.Store) {
		terminalID := seed(t, s)
		b := mustCreateBatch(t, s, newBatch("bat_1", terminalID, at(0), at(10)))
		if d := diff(asStored(b), mustGet(t, "Batch", s.Batch, "bat_1")); d != "" {
			t.Errorf("Batch(bat_1) mismatch (-want +got):\n%s", d)
		}
		if d := diff(asStored(b), mustGet(t, "PendingBatch", s.PendingBatch, terminalID)); d != "" {
			t.Errorf("PendingBatch mismatch (-want +got):\n%s", d)
		}
		closed := closedBatch(b, at(11))
		ev := instore.OutboxEvent{MerchantID: "mer_1", TerminalID: terminalID, Type: instore.EventBatchClosed, At: at(11), Data: []byte(`{"batchId":"bat_1"}`)}
		if err := s.UpdateBatch(t.Context(), closed, instore.BatchPending, ev); err != nil {
			t.Fatalf("UpdateBatch = %v", err)
		}
		got := mustGet(t, "Batch", s.Batch, "bat_1")
		want := asStored(closed)
		want.ReportedAt = storedPtr(closed.ReportedAt)
		if d := diff(want, got); d != "" {
			t.Errorf("Batch(bat_1) after UpdateBatch mismatch (-want +got):\n%s", d)
		}
		checkMissing(t, "PendingBatch(after the close)", s.PendingBatch, terminalID, terminalID)
		if d := diff(want, mustGet(t, "LastClosedBatch", s.LastClosedBatch, terminalID)); d != "" {
			t.Errorf("LastClosedBatch mismatch (-want +got):\n%s", d)
		}
		// The second write from PENDING is refused: the first answer stands.
		again := *closed
		again.Number = 43
		checkConflict(t, "UpdateBatch(from PENDING again)", s.UpdateBatch(t.Context(), &again, instore.BatchPending))
		if got := mustGet(t, "Batch", s.Batch, "bat_1"); got.Number != 42 {
			t.Errorf("Batch number after a refused update = %d, want 42", got.Number)
		}
		err := s.UpdateBatch(t.Context(), newBatch("bat_missing", terminalID, at(0), at(1)), instore.BatchPending)
		checkNotFound(t, "UpdateBatch(missing)", err, "bat_missing")
		checkMissing(t, "Batch(missing)", s.Batch, "bat_missing", "bat_missing")
		checkMissing(t, "LastClosedBatch(none)", s.LastClosedBatch, "99999998", "99999998")
	}},
	{"FailedThenLate", func(t *testing.T, s instore.Store) {
		terminalID := seed(t, s)
		b := mustCreateBatch(t, s, newBatch("bat_1", terminalID, at(0), at(10)))
		failed := *b
		failed.State, failed.ErrorID = instore.BatchFailed, ptr(25)
		if err := s.UpdateBatch(t.Context(), &failed, instore.BatchPending); err != nil {
			t.Fatalf("UpdateBatch(FAILED) = %v", err)
		}
		if got := mustGet(t, "Batch", s.Batch, "bat_1"); got.State != instore.BatchFailed || got.ErrorID == nil || *got.ErrorID != 25 {
			t.Errorf("Batch after FAILED = %s %v", got.State, got.ErrorID)
		}
		if ps, err := s.PendingBatches(t.Context()); err != nil || len(ps) != 0 {
			t.Errorf("PendingBatches = %d, %v; want none", len(ps), err)
		}
		late := closedBatch(&failed, at(12))
		if err := s.UpdateBatch(t.Context(), late, instore.BatchFailed); err != nil {
			t.Fatalf("UpdateBatch(late answer) = %v", err)
		}
		if got := mustGet(t, "Batch", s.Batch, "bat_1"); got.State != instore.BatchClosed || got.ErrorID == nil || got.Number != 42 {
			t.Errorf("Batch after the late answer = %s, error %v, number %d", got.State, got.ErrorID, got.Number)
		}
	}},
	{"Busy", func(t *testing.T, s instore.Store) {
		terminalID := seed(t, s)
		mustCreateBatch(t, s, newBatch("bat_1", terminalID, at(0), at(10)))
		// One PENDING close per terminal ID.
		checkConflict(t, "CreateBatch(second PENDING)", s.CreateBatch(t.Context(), newBatch("bat_2", terminalID, at(0), at(11)), nil))
		if ps, err := s.PendingBatches(t.Context()); err != nil || len(ps) != 1 || ps[0].ID != "bat_1" {
			t.Errorf("PendingBatches = %v, %v; want bat_1", ps, err)
		}
		// Not while a transaction runs on the terminal ID.
		other := seedTerminal(t, s, "SN-2")
		mustCreateTransaction(t, s, newTransaction("txn_1", "mer_1", other, "SN-2", instore.StatusPending, at(1)))
		checkConflict(t, "CreateBatch(transaction running)", s.CreateBatch(t.Context(), newBatch("bat_3", other, at(0), at(2)), nil))
		checkConflict(t, "CreateBatch(missing terminal ID)", s.CreateBatch(t.Context(), newBatch("bat_4", "99999998", at(0), at(2)), nil))
		checkMissing(t, "Batch(refused)", s.Batch, "bat_3", "bat_3")
		// A terminal ID closing its batch takes no PENDING transaction
		// (with an event or without), as if one ran; a final one (an
		// offline approval) is no command and is taken; once the close
		// ended, a PENDING one is taken again.
		ev := instore.TransactionEvent{Version: 1, Kind: instore.EventCreated, At: at(12), Actor: instore.ActorECR, StatusAfter: "PENDING"}
		checkConflict(t, "CreateTransaction(closing)", s.CreateTransaction(t.Context(), &instore.Change{T: newTransaction("txn_2", "mer_1", terminalID, "SN-1", instore.StatusPending, at(12))}))
		checkConflict(t, "CreateTransaction(closing, with its event)", s.CreateTransaction(t.Context(),
			&instore.Change{T: newTransaction("txn_3", "mer_1", terminalID, "SN-1", instore.StatusPending, at(12)), Events: []instore.TransactionEvent{ev}}))
		mustCreateTransaction(t, s, newTransaction("txn_4", "mer_1", terminalID, "SN-1", instore.StatusApproved, at(12)))
		b := mustGet(t, "Batch", s.Batch, "bat_1")
		if err := s.UpdateBatch(t.Context(), closedBatch(b, at(13)), instore.BatchPending); err != nil {
			t.Fatalf("UpdateBatch = %v", err)
		}
		mustCreateTransaction(t, s, newTransaction("txn_5", "mer_1", terminalID, "SN-1", instore.StatusPending, at(14)))
	}},
	{"BusyRace", func(t *testing.T, s instore.Store) {
		// A PENDING transaction and a close of one terminal ID created at
		// once (two nodes): never both, whoever comes first.
		seed(t, s)
		for i := range 12 {
			serial := fmt.Sprintf("SN-RACE-%d", i)
			terminalID := seedTerminal(t, s, serial)
			errs := atOnce(2, func(j int) error {
				if j == 0 {
					return s.CreateTransaction(t.Context(), &instore.Change{T: newTransaction(fmt.Sprintf("txn_race_%d", i), "mer_1", terminalID, serial, instore.StatusPending, at(1))})
				}
				return s.CreateBatch(t.Context(), newBatch(fmt.Sprintf("bat_race_%d", i), terminalID, at(0), at(1)), nil)
			})
			if errs[0] == nil && errs[1] == nil {
				t.Fatalf("round %d: a PENDING transaction and a close were both created", i)
			}
			for _, err := range errs {
				if err != nil && !errors.Is(err, instore.ErrConflict) {
					t.Fatalf("round %d: %v, want nil or instore.ErrConflict", i, err)
				}
			}
		}
	}},
	{"List", func(t *testing.T, s instore.Store) {
		terminalID := seed(t, s)
		other := seedTerminal(t, s, "SN-2")
		var all []*instore.Batch
		for i, term := range []string{terminalID, other, terminalID, other, terminalID} {
			b := newBatch("bat_"+string(rune('a'+i)), term, at(i), at(i+1))
			b.State = instore.BatchClosed
			all = append(all, mustCreateBatch(t, s, b))
		}
		ids := func(bs []*instore.Batch) (out []string) {
			for _, b := range bs {
				out = append(out, b.ID)
			}
			return out
		}
		for _, tc := range []struct {
			name string
			f    instore.BatchFilter
			want []string
		}{
			{"all", instore.BatchFilter{MerchantID: "mer_1", From: at(0), To: at(100), Limit: 10}, []string{"bat_e", "bat_d", "bat_c", "bat_b", "bat_a"}},
			{"one terminal", instore.BatchFilter{MerchantID: "mer_1", TerminalID: other, From: at(0), To: at(100), Limit: 10}, []string{"bat_d", "bat_b"}},
			{"range [from, to)", instore.BatchFilter{MerchantID: "mer_1", From: at(2), To: at(4), Limit: 10}, []string{"bat_c", "bat_b"}},
			{"limit", instore.BatchFilter{MerchantID: "mer_1", From: at(0), To: at(100), Limit: 2}, []string{"bat_e", "bat_d"}},
			{"after", instore.BatchFilter{MerchantID: "mer_1", From: at(0), To: at(100), Limit: 2,
				After: &instore.TransactionCursor{CreatedAt: all[3].ClosedAt, ID: "bat_d"}}, []string{"bat_c", "bat_b"}},
			{"other merchant", instore.BatchFilter{MerchantID: "mer_2", From: at(0), To: at(100), Limit: 10}, nil},
		} {
			got, err := s.ListBatches(t.Context(), tc.f)
			if err != nil {
				t.Fatalf("ListBatches(%s) = %v", tc.name, err)
			}
			if d := diff(tc.want, ids(got)); d != "" {
				t.Errorf("ListBatches(%s) (-want +got):\n%s", tc.name, d)
			}
		}
		if got := mustGet(t, "LastClosedBatch", s.LastClosedBatch, terminalID); got.ID != "bat_e" {
			t.Errorf("LastClosedBatch = %s, want bat_e", got.ID)
		}
	}},
	{"TerminalTransactions", func(t *testing.T, s instore.Store) {
		terminalID := seed(t, s)
		other := seedTerminal(t, s, "SN-2")
		mk := func(id, term string, status instore.TransactionStatus, created, completed int) {
			tx := newTransaction(id, "mer_1", term, "SN-1", instore.StatusPending, at(created))
			mustCreateTransaction(t, s, tx)
			if status == instore.StatusPending {
				return
			}
			tx.StatusID, tx.Progress, tx.CompletedAt = status, instore.ProgressFinal, ptr(at(completed))
			mustUpdateTransaction(t, s, tx, tx.Version)
		}
		mk("txn_before", terminalID, instore.StatusApproved, 1, 2)   // completed at the window's start: out
		mk("txn_in", terminalID, instore.StatusApproved, 3, 4)       // in
		mk("txn_declined", terminalID, instore.StatusWrongPIN, 5, 6) // in
		mk("txn_end", terminalID, instore.StatusApproved, 7, 10)     // at the window's end: in
		mk("txn_other", other, instore.StatusApproved, 3, 4)         // another terminal ID: out
		mk("txn_after", terminalID, instore.StatusApproved, 11, 12)  // out
		mk("txn_pending", terminalID, instore.StatusPending, 13, 0)  // out
		got, err := s.TerminalTransactions(t.Context(), terminalID, at(2), at(10))
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, tx := range got {
			ids = append(ids, tx.ID)
		}
		if d := diff([]string{"txn_in", "txn_declined", "txn_end"}, ids); d != "" {
			t.Errorf("TerminalTransactions (-want +got):\n%s", d)
		}
	}},
}
