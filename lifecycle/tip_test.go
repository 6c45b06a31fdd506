package lifecycle_test

import (
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/lifecycle"
)

// TestNextTip: a result sets the tip the card was charged on a purchase
// that asked for one, when APPROVED (also late, then REVERSED); never on
// one that asked for none, nor with another status.
func TestNextTip(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	pending := instore.Transaction{ID: "txn_1", Type: instore.TypePurchase, SerialNumber: "SN1", TerminalID: "10000001",
		Amount: 1000, Currency: "SEK", StatusID: instore.StatusPending, Progress: instore.ProgressAcknowledged,
		Version: 2, CreatedAt: t0, AcknowledgedAt: &t0, Tip: &instore.Tip{Mode: instore.TipEnterTotal}}
	lateOne := pending
	lateOne.StatusID, lateOne.Progress = instore.StatusTechnicalError, instore.ProgressFinal
	noTip := pending
	noTip.Tip = nil
	for _, tc := range []struct {
		name   string
		t      instore.Transaction
		status instore.TransactionStatus
		want   int64
		total  int64
	}{
		{"approved", pending, instore.StatusApproved, 150, 1150},
		{"declined", pending, instore.StatusTransactionDeclined, 0, 1000},
		{"approved late, reversed", lateOne, instore.StatusApproved, 150, 1150},
		{"no tip asked", noTip, instore.StatusApproved, 0, 1000},
	} {
		next, _ := lifecycle.Next(tc.t, lifecycle.Event{Kind: instore.EventResult, At: t0.Add(time.Second),
			Result: &instore.TerminalResult{MessageID: "m-1", Ref: "txn_1", StatusID: tc.status, TipAmount: 150}}, testRules())
		if next.TipAmount != tc.want || next.TotalAmount() != tc.total {
			t.Errorf("%s: tipAmount %d, totalAmount %d; want %d, %d", tc.name, next.TipAmount, next.TotalAmount(), tc.want, tc.total)
		}
	}
}
