package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/instore-dev/instore"
)

// newRefund returns a refund of originalID with the fields a new one has.
func newRefund(id, terminalID, serial, originalID string, amount int64, status instore.TransactionStatus, created time.Time) *instore.Transaction {
	tx := newTransaction(id, "mer_1", terminalID, serial, status, created)
	tx.Type, tx.Amount, tx.OriginalID = instore.TypeRefund, amount, originalID
	return tx
}

func mustCreateRefund(t *testing.T, s instore.Store, tx *instore.Transaction) *instore.Transaction {
	t.Helper()
	if err := s.CreateOnOriginal(t.Context(), &instore.Change{T: tx}); err != nil {
		t.Fatalf("CreateOnOriginal(%q, %d) = %v", tx.ID, tx.Amount, err)
	}
	return tx
}

// checkRefunded fails unless the refunds of originalID that count
// (instore.Refunded of OnOriginal) sum to want.
func checkRefunded(t *testing.T, s instore.Store, originalID string, want int64) {
	t.Helper()
	others, err := s.OnOriginal(t.Context(), originalID)
	if err != nil {
		t.Fatalf("OnOriginal(%q) = %v", originalID, err)
	}
	if got := instore.Refunded(others); got != want {
		t.Errorf("Refunded(OnOriginal(%q)) = %d, want %d", originalID, got, want)
	}
}

// checkExceeded fails unless err wraps instore.ErrRefundExceeded.
func checkExceeded(t *testing.T, op string, err error) {
	t.Helper()
	if !errors.Is(err, instore.ErrRefundExceeded) {
		t.Errorf("%s error = %v, want instore.ErrRefundExceeded", op, err)
	}
}

// purchase stores an APPROVED purchase of amount.
func purchase(t *testing.T, s instore.Store, id, terminalID, serial string, amount int64, created time.Time) *instore.Transaction {
	t.Helper()
	tx := newTransaction(id, "mer_1", terminalID, serial, instore.StatusApproved, created)
	tx.Amount = amount
	return mustCreateTransaction(t, s, tx)
}

var refundTests = []test{
	{"Cashback", func(t *testing.T, s instore.Store) {
		// The cashback of a purchase is not refundable: of 1000 with 300
		// cashback, 700 are; a reversal still takes the whole.
		a := seed(t, s)
		tx := newTransaction("txn_cb", "mer_1", a, "SN-1", instore.StatusApproved, at(1))
		tx.Amount, tx.CashbackAmount = 1000, 300
		orig := mustCreateTransaction(t, s, tx)
		checkExceeded(t, "refund of the cashback too", s.CreateOnOriginal(t.Context(), &instore.Change{T: newRefund("txn_r1", a, "SN-1", orig.ID, 701, instore.StatusPending, at(2))}))
		mustCreateRefund(t, s, newRefund("txn_r2", a, "SN-1", orig.ID, 700, instore.StatusApproved, at(3)))
		checkExceeded(t, "one more", s.CreateOnOriginal(t.Context(), &instore.Change{T: newRefund("txn_r3", a, "SN-1", orig.ID, 1, instore.StatusPending, at(4))}))
		checkRefunded(t, s, orig.ID, 700)
	}},
	{"RoundTrip", func(t *testing.T, s instore.Store) {
		a := seed(t, s)
		orig := purchase(t, s, "txn_orig", a, "SN-1", 1000, at(1))
		checkRefunded(t, s, orig.ID, 0)
		for _, tx := range []*instore.Transaction{
			newRefund("txn_r1", a, "SN-1", orig.ID, 400, instore.StatusPending, at(2)),
			func() *instore.Transaction { // every field set
				tx := newRefund("txn_r2", a, "SN-1", orig.ID, 250, instore.StatusApproved, at(3))
				tx.VATAmount, tx.PaymentMethodID, tx.ECRReference, tx.PrintReceipt = ptr(int64(50)), ptr(1), "ECR-R2", true
				tx.Result, tx.ResultMessageID, tx.CompletedAt = approvedResult(), "msg-r2", ptr(at(4))
				tx.Progress = instore.ProgressFinal
				return tx
			}(),
		} {
			tx.Version = 42 // ignored: a new transaction has version 1
			mustCreateRefund(t, s, tx)
			if tx.Version != 1 {
				t.Errorf("CreateOnOriginal(%q) set Version %d, want 1", tx.ID, tx.Version)
			}
			if d := diff(asStored(tx), mustTransaction(t, s, tx.ID)); d != "" {
				t.Errorf("Transaction(%q) after CreateRefund mismatch (-want +got):\n%s", tx.ID, d)
			}
		}
		checkRefunded(t, s, orig.ID, 650)
		checkRefunded(t, s, "txn_missing", 0)
	}},
	{"Amounts", func(t *testing.T, s instore.Store) {
		terminals := []string{seed(t, s)}
		for i := 2; i <= 6; i++ {
			terminals = append(terminals, seedTerminal(t, s, fmt.Sprintf("SN-%d", i)))
		}
		serial := func(i int) string { return fmt.Sprintf("SN-%d", i+1) }
		orig := purchase(t, s, "txn_orig", terminals[0], serial(0), 1000, at(1))
		other := purchase(t, s, "txn_other", terminals[0], serial(0), 5000, at(1))

		mustCreateRefund(t, s, newRefund("txn_r1", terminals[0], serial(0), orig.ID, 400, instore.StatusApproved, at(2)))
		pending := mustCreateRefund(t, s, newRefund("txn_r2", terminals[1], serial(1), orig.ID, 300, instore.StatusPending, at(3)))
		checkRefunded(t, s, orig.ID, 700)

		// Past the amount: refused, nothing stored, t unchanged.
		over := newRefund("txn_over", terminals[2], serial(2), orig.ID, 301, instore.StatusPending, at(4))
		over.Version = 7
		checkExceeded(t, "CreateOnOriginal(700 refunded + 301 of 1000)", s.CreateOnOriginal(t.Context(), &instore.Change{T: over}))
		if over.Version != 7 {
			t.Errorf("CreateOnOriginal(refused) set Version %d, want it unchanged (7)", over.Version)
		}
		checkMissing(t, "Transaction(refused refund)", s.Transaction, over.ID, "")

		// Refunds that failed, and transactions that refer to the original
		// but are not refunds, do not count.
		declined := newRefund("txn_declined", terminals[2], serial(2), orig.ID, 900, instore.StatusTransactionDeclined, at(4))
		mustCreateTransaction(t, s, declined)
		reversal := newTransaction("txn_reversal", "mer_1", terminals[3], serial(3), instore.StatusTransactionDeclined, at(4))
		reversal.Type, reversal.Amount, reversal.OriginalID, reversal.ResultMessageID = instore.TypeReversal, 1000, orig.ID, "msg-rev"
		mustCreateTransaction(t, s, reversal)
		mustCreateRefund(t, s, newRefund("txn_r_other", terminals[3], serial(3), other.ID, 4000, instore.StatusApproved, at(4)))
		checkRefunded(t, s, orig.ID, 700)
		checkRefunded(t, s, other.ID, 4000)

		// Up to the amount exactly is fine; one more is not.
		mustCreateRefund(t, s, newRefund("txn_r3", terminals[2], serial(2), orig.ID, 300, instore.StatusApproved, at(5)))
		checkRefunded(t, s, orig.ID, 1000)
		checkExceeded(t, "CreateOnOriginal(1 more than the amount)",
			s.CreateOnOriginal(t.Context(), &instore.Change{T: newRefund("txn_over2", terminals[4], serial(4), orig.ID, 1, instore.StatusPending, at(6))}))

		// A PENDING refund that fails frees its amount.
		pending.StatusID, pending.Progress = instore.StatusAbortedByCardholder, instore.ProgressFinal
		mustUpdateTransaction(t, s, pending, pending.Version)
		checkRefunded(t, s, orig.ID, 700)
		mustCreateRefund(t, s, newRefund("txn_r4", terminals[4], serial(4), orig.ID, 300, instore.StatusPending, at(7)))
		checkRefunded(t, s, orig.ID, 1000)
		// And one that is approved keeps counting.
		r4 := mustTransaction(t, s, "txn_r4")
		r4.StatusID, r4.Progress = instore.StatusApproved, instore.ProgressFinal
		mustUpdateTransaction(t, s, r4, r4.Version)
		checkRefunded(t, s, orig.ID, 1000)
	}},
	{"Errors", func(t *testing.T, s instore.Store) {
		a := seed(t, s)
		b := seedTerminal(t, s, "SN-2")
		orig := purchase(t, s, "txn_orig", a, "SN-1", 1000, at(1))
		mustCreateTransaction(t, s, newTransaction("txn_busy", "mer_1", b, "SN-2", instore.StatusPending, at(1)))

		for _, original := range []string{"txn_missing_7c2d", ""} {
			tx := newRefund("txn_r", a, "SN-1", original, 100, instore.StatusPending, at(2))
			tx.Version = 7
			checkNotFound(t, "CreateOnOriginal(missing original)", s.CreateOnOriginal(t.Context(), &instore.Change{T: tx}), original)
			if tx.Version != 7 {
				t.Errorf("CreateOnOriginal(missing original) set Version %d, want it unchanged (7)", tx.Version)
			}
		}
		for _, tc := range []struct {
			name string
			tx   *instore.Transaction
		}{
			{"second PENDING on a terminal ID", newRefund("txn_r", b, "SN-2", orig.ID, 100, instore.StatusPending, at(2))},
			{"duplicate id", newRefund(orig.ID, a, "SN-1", orig.ID, 100, instore.StatusPending, at(2))},
			{"missing terminal ID", newRefund("txn_r", "99999998", "", orig.ID, 100, instore.StatusPending, at(2))},
		} {
			tc.tx.Version = 7
			checkConflict(t, "CreateOnOriginal("+tc.name+")", s.CreateOnOriginal(t.Context(), &instore.Change{T: tc.tx}))
			if tc.tx.Version != 7 {
				t.Errorf("CreateOnOriginal(%s) refused but set Version %d", tc.name, tc.tx.Version)
			}
		}
		checkMissing(t, "Transaction(refused refund)", s.Transaction, "txn_r", "")
		checkRefunded(t, s, orig.ID, 0)
		mustCreateRefund(t, s, newRefund("txn_r", a, "SN-1", orig.ID, 1000, instore.StatusPending, at(3)))
		checkRefunded(t, s, orig.ID, 1000)
	}},
	{"Concurrent", func(t *testing.T, s instore.Store) {
		// Eight refunds of 30 race on an original of 100: three fit. Each
		// is on a terminal ID of its own, so that only the amount check
		// can refuse them.
		const n = 8
		terminals := []string{seed(t, s)}
		for i := range n {
			terminals = append(terminals, seedTerminal(t, s, fmt.Sprintf("SN-R%d", i)))
		}
		orig := purchase(t, s, "txn_orig", terminals[0], "SN-1", 100, at(1))
		var txs [n]*instore.Transaction
		for i := range n {
			txs[i] = newRefund(fmt.Sprintf("txn_r%d", i), terminals[i+1], fmt.Sprintf("SN-R%d", i), orig.ID, 30, instore.StatusPending, at(2))
		}
		errs := atOnce(n, func(i int) error {
			return s.CreateOnOriginal(t.Context(), &instore.Change{T: txs[i]})
		})
		wins := 0
		for i, err := range errs {
			switch {
			case err == nil:
				wins++
				if d := diff(asStored(txs[i]), mustTransaction(t, s, txs[i].ID)); d != "" {
					t.Errorf("refund %d stored mismatch (-want +got):\n%s", i, d)
				}
			case errors.Is(err, instore.ErrRefundExceeded):
				checkMissing(t, "Transaction(refused refund)", s.Transaction, txs[i].ID, "")
			default:
				t.Errorf("concurrent CreateOnOriginal #%d = %v, want nil or instore.ErrRefundExceeded", i, err)
			}
		}
		if wins != 3 {
			t.Errorf("concurrent CreateOnOriginal(30 of 100) x %d: %d succeeded, want 3", n, wins)
		}
		checkRefunded(t, s, orig.ID, 90)
	}},
}

// pairFixture stores two transactions whose ids sort as txn_a < txn_b:
// a PENDING purchase and an APPROVED one, on two terminal IDs, each updated
// once (Version 2).
func pairFixture(t *testing.T, s instore.Store) (a, b *instore.Transaction) {
	t.Helper()
	ta := seed(t, s)
	tb := seedTerminal(t, s, "SN-2")
	a = mustCreateTransaction(t, s, newTransaction("txn_a", "mer_1", ta, "SN-1", instore.StatusPending, at(1)))
	b = mustCreateTransaction(t, s, newTransaction("txn_b", "mer_1", tb, "SN-2", instore.StatusApproved, at(2)))
	a.Progress = instore.ProgressAcknowledged
	mustUpdateTransaction(t, s, a, a.Version)
	b.CompletedAt = ptr(at(3))
	mustUpdateTransaction(t, s, b, b.Version)
	return a, b
}

// reverse changes a and b as a reversal of b by a would.
func reverse(a, b *instore.Transaction) {
	a.StatusID, a.Progress, a.Reverses, a.CompletedAt = instore.StatusApproved, instore.ProgressFinal, b.ID, ptr(at(5))
	b.StatusID, b.ReversedBy = instore.StatusReversed, a.ID
}

var pairTests = []test{
	{"Update", func(t *testing.T, s instore.Store) {
		a, b := pairFixture(t, s)
		reverse(a, b)
		if err := s.Commit(t.Context(), &instore.Change{T: a, From: 2, Pair: &instore.Change{T: b, From: 2}}); err != nil {
			t.Fatalf("CommitPair() = %v", err)
		}
		for _, tx := range []*instore.Transaction{a, b} {
			if tx.Version != 3 {
				t.Errorf("CommitPair() set %s Version %d, want 3", tx.ID, tx.Version)
			}
			if d := diff(asStored(tx), mustTransaction(t, s, tx.ID)); d != "" {
				t.Errorf("Transaction(%q) after CommitPair mismatch (-want +got):\n%s", tx.ID, d)
			}
		}
		// In the other order too.
		b.CancelRequested, a.ResultMessageID = true, "msg-a"
		if err := s.Commit(t.Context(), &instore.Change{T: b, From: 3, Pair: &instore.Change{T: a, From: 3}}); err != nil {
			t.Fatalf("CommitPair(b, a) = %v", err)
		}
		for _, tx := range []*instore.Transaction{a, b} {
			if d := diff(asStored(tx), mustTransaction(t, s, tx.ID)); d != "" {
				t.Errorf("Transaction(%q) after CommitPair(b, a) mismatch (-want +got):\n%s", tx.ID, d)
			}
		}
	}},
	{"BothOrNeither", func(t *testing.T, s instore.Store) {
		a, b := pairFixture(t, s)
		wantA, wantB := asStored(a), asStored(b)
		// txn_c is final, on the terminal ID of the PENDING txn_a.
		busy := mustCreateTransaction(t, s, newTransaction("txn_c", "mer_1", a.TerminalID, "SN-1", instore.StatusApproved, at(4)))
		for _, tc := range []struct {
			name         string
			aFrom, bFrom int64
			change       func(a, b, c *instore.Transaction) (first, second *instore.Transaction)
			notFound     bool
		}{
			// Except in "first version moved on", the failing guard is the
			// one last in id order (txn_a < txn_b < txn_c), so the other
			// update has run when it fails.
			{name: "second version moved on", aFrom: 2, bFrom: 1},
			{name: "second version ahead", aFrom: 2, bFrom: 3},
			{name: "first version moved on", aFrom: 1, bFrom: 2},
			{name: "second missing", aFrom: 2, bFrom: 2, notFound: true,
				change: func(a, b, c *instore.Transaction) (*instore.Transaction, *instore.Transaction) {
					b.ID = "txn_b_missing"
					return a, b
				}},
			{name: "second becomes a second PENDING on its terminal ID", aFrom: 2, bFrom: 1,
				change: func(a, b, c *instore.Transaction) (*instore.Transaction, *instore.Transaction) {
					c.StatusID, c.Progress = instore.StatusPending, instore.ProgressSent
					return b, c
				}},
			{name: "first in the arguments, last in id order, moved on", aFrom: 1, bFrom: 2,
				change: func(a, b, c *instore.Transaction) (*instore.Transaction, *instore.Transaction) {
					return b, a
				}},
		} {
			ca, cb, cc := *a, *b, *busy
			reverse(&ca, &cb)
			first, second := &ca, &cb
			if tc.change != nil {
				first, second = tc.change(&ca, &cb, &cc)
			}
			fv, sv := first.Version, second.Version
			err := s.Commit(t.Context(), &instore.Change{T: first, From: tc.aFrom, Pair: &instore.Change{T: second, From: tc.bFrom}})
			op := "CommitPair(" + tc.name + ")"
			if tc.notFound {
				checkNotFound(t, op, err, second.ID)
			} else {
				checkConflict(t, op, err)
			}
			if first.Version != fv || second.Version != sv {
				t.Errorf("%s set versions %d and %d, want them unchanged (%d, %d)", op, first.Version, second.Version, fv, sv)
			}
			if d := diff(wantA, mustTransaction(t, s, a.ID)); d != "" {
				t.Errorf("%s changed %s (-want +got):\n%s", op, a.ID, d)
			}
			if d := diff(wantB, mustTransaction(t, s, b.ID)); d != "" {
				t.Errorf("%s changed %s (-want +got):\n%s", op, b.ID, d)
			}
			if d := diff(asStored(busy), mustTransaction(t, s, busy.ID)); d != "" {
				t.Errorf("%s changed %s (-want +got):\n%s", op, busy.ID, d)
			}
		}
	}},
	{"Concurrent", func(t *testing.T, s instore.Store) {
		// Eight writers apply a pair from the same versions, half of them
		// in the other order: exactly one pair is written, whole.
		a, b := pairFixture(t, s)
		const n = 8
		var as, bs [n]*instore.Transaction
		for i := range n {
			ca, cb := *a, *b
			reverse(&ca, &cb)
			ca.ResultMessageID, cb.CompletedAt = fmt.Sprintf("msg-%d", i), ptr(at(10+i))
			as[i], bs[i] = &ca, &cb
		}
		errs := atOnce(n, func(i int) error {
			if i%2 == 0 {
				return s.Commit(t.Context(), &instore.Change{T: as[i], From: 2, Pair: &instore.Change{T: bs[i], From: 2}})
			}
			return s.Commit(t.Context(), &instore.Change{T: bs[i], From: 2, Pair: &instore.Change{T: as[i], From: 2}})
		})
		w := exactlyOne(t, "concurrent CommitPair(same versions)", errs)
		if w < 0 {
			return
		}
		for _, tx := range []*instore.Transaction{as[w], bs[w]} {
			if d := diff(asStored(tx), mustTransaction(t, s, tx.ID)); d != "" {
				t.Errorf("stored %s is not the winner's (-want +got):\n%s", tx.ID, d)
			}
		}
	}},
}
