package lifecycle_test

import (
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/lifecycle"
)

// TestNextTip: an approval of a purchase records the tip the card was
// charged (also late, then REVERSED); a tip the purchase did not allow
// (instore.CheckTipAmount) never loses the result: an approval is stored
// with the tip charged, ends REVERSED and owes the terminal a reversal;
// another outcome is stored without a tip.
func TestNextTip(t *testing.T) {
	pending := instore.Transaction{ID: "txn_1", Type: instore.TypePurchase, SerialNumber: "SN1", TerminalID: "10000001",
		Amount: 1000, Currency: "SEK", StatusID: instore.StatusPending, Progress: instore.ProgressAcknowledged,
		Version: 2, CreatedAt: t0, AcknowledgedAt: &t0, Tip: &instore.Tip{Mode: instore.TipEnterTotal}}
	lateOne := pending
	lateOne.StatusID, lateOne.Progress = instore.StatusTechnicalError, instore.ProgressFinal
	noTip := pending
	noTip.Tip = nil
	fixed := pending
	fixed.Tip = &instore.Tip{Mode: instore.TipFixed, Amount: new(int64(150))}
	refund := noTip
	refund.Type = instore.TypeRefund
	for _, tc := range []struct {
		name     string
		t        instore.Transaction
		status   instore.TransactionStatus
		tip      int64
		want     int64
		total    int64
		after    instore.TransactionStatus
		kind     instore.TimelineKind
		reversal bool
	}{
		{"approved", pending, instore.StatusApproved, 150, 150, 1150, instore.StatusApproved, instore.EventResult, false},
		{"declined, a stray tip dropped", pending, instore.StatusTransactionDeclined, 150, 0, 1000, instore.StatusTransactionDeclined, instore.EventResult, false},
		{"approved late, reversed", lateOne, instore.StatusApproved, 150, 150, 1150, instore.StatusReversed, instore.EventLateApproval, true},
		{"no tip asked: charged, reversed", noTip, instore.StatusApproved, 150, 150, 1150, instore.StatusReversed, instore.EventTipRefused, true},
		{"above the amount: charged, reversed", pending, instore.StatusApproved, 1001, 1001, 2001, instore.StatusReversed, instore.EventTipRefused, true},
		{"not the FIXED tip: charged, reversed", fixed, instore.StatusApproved, 149, 149, 1149, instore.StatusReversed, instore.EventTipRefused, true},
		{"the FIXED tip", fixed, instore.StatusApproved, 150, 150, 1150, instore.StatusApproved, instore.EventResult, false},
		{"a refund's stray tip dropped", refund, instore.StatusApproved, 150, 0, 1000, instore.StatusApproved, instore.EventResult, false},
	} {
		next, st := lifecycle.Next(tc.t, lifecycle.Event{Kind: instore.EventResult, At: t0.Add(time.Second),
			Result: &instore.TerminalResult{MessageID: "m-1", Ref: "txn_1", StatusID: tc.status, TipAmount: tc.tip}}, testRules())
		if next.TipAmount != tc.want || next.TotalAmount() != tc.total {
			t.Errorf("%s: tipAmount %d, totalAmount %d; want %d, %d", tc.name, next.TipAmount, next.TotalAmount(), tc.want, tc.total)
		}
		if !st.Changed || next.StatusID != tc.after || next.ResultMessageID != "m-1" || st.Event.Kind != tc.kind || (st.Reverse != "") != tc.reversal {
			t.Errorf("%s: changed %v, status %d, result %q, kind %s, reverse %q; want status %d, stored, %s, reversal %v",
				tc.name, st.Changed, next.StatusID, next.ResultMessageID, st.Event.Kind, st.Reverse, tc.after, tc.kind, tc.reversal)
		}
	}
}
