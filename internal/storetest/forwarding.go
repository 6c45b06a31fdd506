package storetest

import (
	"testing"

	"github.com/instore-dev/instore"
)

// offlineSale stores an APPROVED purchase approved offline, its
// forwarding QUEUED.
func offlineSale(t *testing.T, s instore.Store, id, terminalID, serial string, amount int64, created int) *instore.Transaction {
	t.Helper()
	tx := newTransaction(id, "mer_1", terminalID, serial, instore.StatusApproved, at(created))
	tx.Amount, tx.Result = amount, &instore.Result{Offline: true, Receipt: instore.Receipt{Customer: []string{}, Merchant: []string{}}}
	tx.Forwarding = &instore.Forwarding{State: instore.ForwardQueued}
	return mustCreateTransaction(t, s, tx)
}

// forward commits the forwarding of tx in state.
func forward(t *testing.T, s instore.Store, tx *instore.Transaction, state instore.ForwardingState) {
	t.Helper()
	tx.Forwarding = &instore.Forwarding{State: state, ForwardedAt: new(stored(at(30)))}
	if err := s.Commit(t.Context(), &instore.Change{T: tx, From: tx.Version}); err != nil {
		t.Fatalf("Commit(forwarding %s) = %v", state, err)
	}
}

var forwardingTests = []test{
	{"RoundTrip", func(t *testing.T, s instore.Store) {
		// An offline approval's forwarding is kept, moves by Commit, and
		// the listing's forwarding filter selects by it.
		a := seed(t, s)
		q1 := offlineSale(t, s, "txn_q1", a, "SN-1", 500, 1)
		q2 := offlineSale(t, s, "txn_q2", a, "SN-1", 600, 2)
		online := purchase(t, s, "txn_on", a, "SN-1", 700, at(3))
		for _, tx := range []*instore.Transaction{q1, q2, online} {
			if d := diff(asStored(tx), mustTransaction(t, s, tx.ID)); d != "" {
				t.Errorf("%s (-want +got):\n%s", tx.ID, d)
			}
		}
		forward(t, s, q1, instore.ForwardDeclined)
		if got := mustTransaction(t, s, q1.ID); got.Forwarding == nil || got.Forwarding.State != instore.ForwardDeclined ||
			got.Forwarding.ForwardedAt == nil || !got.Forwarding.ForwardedAt.Equal(stored(at(30))) || !got.Result.Offline {
			t.Errorf("after the forwarding: %+v, result %+v", got.Forwarding, got.Result)
		}
		for _, tc := range []struct {
			state instore.ForwardingState
			want  []string
		}{{instore.ForwardQueued, []string{"txn_q2"}}, {instore.ForwardDeclined, []string{"txn_q1"}}, {instore.ForwardForwarded, nil}} {
			got := mustList(t, s, instore.TransactionFilter{MerchantID: "mer_1", From: at(0), To: at(10), TransactionSelection: instore.TransactionSelection{Forwarding: tc.state}})
			var ids []string
			for _, tx := range got {
				ids = append(ids, tx.ID)
			}
			if d := diff(tc.want, ids); d != "" {
				t.Errorf("ListTransactions(forwarding %s) (-want +got):\n%s", tc.state, d)
			}
		}
		got := mustList(t, s, instore.TransactionFilter{MerchantID: "mer_1", From: at(0), To: at(10), TransactionSelection: instore.TransactionSelection{TerminalID: a, Forwarding: instore.ForwardQueued}})
		if len(got) != 1 || got[0].ID != q2.ID {
			t.Errorf("ListTransactions(terminal, QUEUED) = %d transactions, want txn_q2", len(got))
		}
	}},
	{"Payback", func(t *testing.T, s instore.Store) {
		// The money rule decided in the creation's database transaction:
		// no refund or reversal of a sale QUEUED or DECLINED; a FORWARDED
		// one is refunded like any other.
		seed(t, s)
		ts := terminals(t, s, 3)
		queued := offlineSale(t, s, "txn_q", ts[0], "SN-p0", 1000, 1)
		declined := offlineSale(t, s, "txn_d", ts[1], "SN-p1", 1000, 1)
		forward(t, s, declined, instore.ForwardDeclined)
		accepted := offlineSale(t, s, "txn_f", ts[2], "SN-p2", 1000, 1)
		forward(t, s, accepted, instore.ForwardForwarded)
		for i, orig := range []*instore.Transaction{queued, declined} {
			refund := newRefund("txn_r"+orig.ID, ts[i], "", orig.ID, 100, instore.StatusPending, at(2))
			checkCode(t, "refund of "+orig.ID, s.CreateOnOriginal(t.Context(), &instore.Change{T: refund}), instore.EConflict)
			rev := newReversal("txn_v"+orig.ID, ts[i], "", orig.ID, 1000, instore.StatusPending)
			checkCode(t, "reversal of "+orig.ID, s.CreateOnOriginal(t.Context(), &instore.Change{T: rev}), instore.ENotReversible)
		}
		if err := s.CreateOnOriginal(t.Context(), &instore.Change{T: newRefund("txn_rf", ts[2], "", accepted.ID, 1000, instore.StatusPending, at(2))}); err != nil {
			t.Errorf("refund of a FORWARDED sale = %v", err)
		}
	}},
}
