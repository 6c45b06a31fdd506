package storetest

import (
	"testing"

	"github.com/instore-dev/instore"
)

var tipTests = []test{
	{"RoundTrip", func(t *testing.T, s instore.Store) {
		// A purchase's tip (how it was asked) is kept from its creation;
		// the tip the terminal charged is written with its result, and a
		// listing shows both.
		a := seed(t, s)
		for i, tip := range []*instore.Tip{
			{Mode: instore.TipPrompt, Suggestions: []int{10, 15, 20}},
			{Mode: instore.TipEnterTotal},
			{Mode: instore.TipFixed, Amount: ptr(int64(150))},
		} {
			tx := newTransaction("txn_tip"+string(rune('a'+i)), "mer_1", a, "SN-1", instore.StatusPending, at(1+2*i))
			tx.Amount, tx.Tip = 1000, tip
			mustCreateTransaction(t, s, tx)
			if d := diff(asStored(tx), mustTransaction(t, s, tx.ID)); d != "" {
				t.Errorf("created with tip %s (-want +got):\n%s", tip.Mode, d)
			}
			tx.StatusID, tx.Progress, tx.CompletedAt, tx.TipAmount = instore.StatusApproved, instore.ProgressFinal, ptr(at(2+2*i)), 150
			tx.Result, tx.ResultMessageID = approvedResult(), "msg-"+tx.ID
			mustUpdateTransaction(t, s, tx, tx.Version)
			got := mustTransaction(t, s, tx.ID)
			if d := diff(asStored(tx), got); d != "" {
				t.Errorf("approved with tip %s (-want +got):\n%s", tip.Mode, d)
			}
			if got.TotalAmount() != 1150 {
				t.Errorf("TotalAmount() = %d, want 1150", got.TotalAmount())
			}
		}
		list := mustList(t, s, instore.TransactionFilter{MerchantID: "mer_1", From: at(0), To: at(10), Limit: 10})
		for _, tx := range list {
			if tx.Tip == nil || tx.TipAmount != 150 {
				t.Errorf("listed %s: tip %+v, tipAmount %d; want its tip and 150", tx.ID, tx.Tip, tx.TipAmount)
			}
		}
	}},
	{"Refund", func(t *testing.T, s instore.Store) {
		// Refunds take up to what the card was charged (the amount and the
		// tip) less the cashback: of 1000 with 300 cashback and a tip of
		// 150, 850.
		a := seed(t, s)
		tx := newTransaction("txn_tip", "mer_1", a, "SN-1", instore.StatusApproved, at(1))
		tx.Amount, tx.CashbackAmount, tx.Tip, tx.TipAmount = 1000, 300, &instore.Tip{Mode: instore.TipEnterTotal}, 150
		orig := mustCreateTransaction(t, s, tx)
		checkExceeded(t, "refund of the cashback too", s.CreateOnOriginal(t.Context(), &instore.Change{T: newRefund("txn_r1", a, "SN-1", orig.ID, 851, instore.StatusPending, at(2))}))
		mustCreateRefund(t, s, newRefund("txn_r2", a, "SN-1", orig.ID, 700, instore.StatusApproved, at(3)))
		mustCreateRefund(t, s, newRefund("txn_r3", a, "SN-1", orig.ID, 150, instore.StatusPending, at(4)))
		checkExceeded(t, "one more", s.CreateOnOriginal(t.Context(), &instore.Change{T: newRefund("txn_r4", a, "SN-1", orig.ID, 1, instore.StatusPending, at(5))}))
		checkRefunded(t, s, orig.ID, 850)
	}},
}
