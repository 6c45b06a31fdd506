package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/instore-dev/instore"
)

// newReversal returns a reversal of originalID with the fields a new one has.
func newReversal(id, terminalID, serial, originalID string, amount int64, status instore.TransactionStatus) *instore.Transaction {
	tx := newTransaction(id, "mer_1", terminalID, serial, status, at(3))
	tx.Type, tx.Amount, tx.OriginalID, tx.Reverses = instore.TypeReversal, amount, originalID, originalID
	return tx
}

// checkCode fails unless err is an *instore.Error with code.
func checkCode(t *testing.T, op string, err error, code string) {
	t.Helper()
	var e *instore.Error
	if !errors.As(err, &e) || e.Code != code {
		t.Errorf("%s error = %v, want an instore.Error %s", op, err, code)
	}
}

// paidBack is what the refunds and reversals of orig pay back, or may:
// APPROVED and PENDING refunds, and the amount of a reversal that is
// PENDING or APPROVED.
func paidBack(t *testing.T, s instore.Store, origID string) int64 {
	t.Helper()
	others, err := s.OnOriginal(t.Context(), origID)
	if err != nil {
		t.Fatalf("OnOriginal(%q) = %v", origID, err)
	}
	sum := instore.Refunded(others)
	for _, o := range others {
		if o.Type == instore.TypeReversal && (o.StatusID == instore.StatusPending || o.StatusID == instore.StatusApproved) {
			sum += o.Amount
		}
	}
	return sum
}

// paybackCase seeds case i of a table test on one store (cus_1 and mer_1
// exist): devices SN-Ai and SN-Bi linked to two terminal IDs, and an
// APPROVED purchase of 1000 on the first.
func paybackCase(t *testing.T, s instore.Store, i string) (a, b string, orig *instore.Transaction) {
	t.Helper()
	a = seedTerminal(t, s, "SN-A"+i)
	b = seedTerminal(t, s, "SN-B"+i)
	return a, b, purchase(t, s, "txn_orig"+i, a, "SN-A"+i, 1000, at(1))
}

// payback makes the refund or reversal of origID with status of case i of
// an afterPayback (paybackCase: terminal IDs a and b).
type payback func(i, a, b, origID string, status instore.TransactionStatus) *instore.Transaction

// refundOf is the payback of a refund of amount on b, created at created.
func refundOf(amount int64, created time.Time) payback {
	return func(i, a, b, origID string, status instore.TransactionStatus) *instore.Transaction {
		return newRefund("txn_refund"+i, b, "SN-B"+i, origID, amount, status, created)
	}
}

// reversal is the payback of a reversal of the whole original on a.
func reversal(i, a, b, origID string, status instore.TransactionStatus) *instore.Transaction {
	return newReversal("txn_rev"+i, a, "SN-A"+i, origID, 1000, status)
}

// priorPayback is a case of an afterPayback: the payback already on the
// original, and whether it refuses the next.
type priorPayback struct {
	name    string
	status  instore.TransactionStatus
	message string
	refused bool
}

// afterPayback is a table test of a payback created (next, a what) after
// another (prior) on the same original.
type afterPayback struct {
	what, code  string
	prior, next payback
	cases       []priorPayback
}

// test seeds cus_1 and mer_1 and runs each case on a fresh original
// (paybackCase i): it stores the prior payback with the case's status and
// result message, and then creates the next, PENDING, which must be
// refused with code and not stored, or be created, as the case says.
func (p afterPayback) test(t *testing.T, s instore.Store) {
	mustCreateCustomer(t, s, "cus_1", at(0))
	mustCreateMerchant(t, s, "mer_1", "cus_1", at(0))
	for n, tc := range p.cases {
		i := fmt.Sprint(n)
		t.Run(tc.name, func(t *testing.T) {
			a, b, orig := paybackCase(t, s, i)
			prior := p.prior(i, a, b, orig.ID, tc.status)
			next := p.next(i, a, b, orig.ID, instore.StatusPending)
			prior.ResultMessageID = tc.message
			mustCreateRefund(t, s, prior)
			err := s.CreateOnOriginal(t.Context(), &instore.Change{T: next})
			if !tc.refused {
				if err != nil {
					t.Fatalf("CreateOnOriginal(%s after a %s) = %v, want nil", p.what, tc.name, err)
				}
				return
			}
			checkCode(t, "CreateOnOriginal("+p.what+" after a "+tc.name+")", err, p.code)
			checkMissing(t, "Transaction(refused "+p.what+")", s.Transaction, next.ID, "")
		})
	}
}

var paybackTests = []test{
	// A refund approved or pending refuses a reversal; a failed one does
	// not.
	{"ReversalAfterRefund", afterPayback{"reversal", instore.ENotReversible, refundOf(1000, at(2)), reversal, []priorPayback{
		{"approved refund", instore.StatusApproved, "msg-1", true},
		{"pending refund", instore.StatusPending, "", true},
		{"declined refund", instore.StatusTransactionDeclined, "msg-1", false},
		{"refund ended without a result", instore.StatusTechnicalError, "", false},
	}}.test},
	// A reversal pending, approved, or ended without a result (the
	// terminal may still report it approved) refuses a refund; one that
	// failed with a result does not.
	{"RefundAfterReversal", afterPayback{"refund", instore.EConflict, reversal, refundOf(100, at(4)), []priorPayback{
		{"pending reversal", instore.StatusPending, "", true},
		{"approved reversal", instore.StatusApproved, "msg-1", true},
		{"reversal ended without a result", instore.StatusTechnicalError, "", true},
		{"reversal that failed", instore.StatusTechnicalError, "msg-1", false},
		{"declined reversal", instore.StatusTransactionDeclined, "msg-1", false},
	}}.test},
	{"Original", func(t *testing.T, s instore.Store) {
		// Only an APPROVED purchase takes a refund or a reversal; the
		// original's state is read in the creation's database transaction.
		a := seed(t, s)
		b := seedTerminal(t, s, "SN-2")
		orig := purchase(t, s, "txn_orig", a, "SN-1", 1000, at(1))
		orig.StatusID = instore.StatusReversed
		mustUpdateTransaction(t, s, orig, orig.Version)
		checkCode(t, "CreateOnOriginal(refund of a REVERSED purchase)",
			s.CreateOnOriginal(t.Context(), &instore.Change{T: newRefund("txn_r", b, "SN-2", orig.ID, 1, instore.StatusPending, at(2))}), instore.EConflict)
		checkCode(t, "CreateOnOriginal(reversal of a REVERSED purchase)",
			s.CreateOnOriginal(t.Context(), &instore.Change{T: newReversal("txn_v", b, "SN-2", orig.ID, 1000, instore.StatusPending)}), instore.ENotReversible)
		refund := newRefund("txn_refund", a, "SN-1", "", 100, instore.StatusApproved, at(2))
		refund.ID = "txn_refund"
		mustCreateTransaction(t, s, refund)
		checkCode(t, "CreateOnOriginal(refund of a refund)",
			s.CreateOnOriginal(t.Context(), &instore.Change{T: newRefund("txn_r", b, "SN-2", refund.ID, 1, instore.StatusPending, at(3))}), instore.EConflict)
		checkCode(t, "CreateOnOriginal(reversal of a refund)",
			s.CreateOnOriginal(t.Context(), &instore.Change{T: newReversal("txn_v", b, "SN-2", refund.ID, 100, instore.StatusPending)}), instore.ENotReversible)
	}},
	{"ReversalLatest", func(t *testing.T, s instore.Store) {
		// Only the latest transaction of a terminal can be reversed,
		// decided in the creation's database transaction: a failed
		// reversal of the purchase does not count as newer, a purchase on
		// another terminal does not either, a newer one on its terminal
		// refuses the reversal, which is not stored.
		a := seed(t, s)
		b := seedTerminal(t, s, "SN-2")
		orig := purchase(t, s, "txn_orig", a, "SN-1", 1000, at(1))
		failed := newReversal("txn_v1", a, "SN-1", orig.ID, 1000, instore.StatusTransactionDeclined)
		failed.CreatedAt, failed.ResultMessageID = at(2), "msg-1"
		if err := s.CreateOnOriginal(t.Context(), &instore.Change{T: failed}); err != nil {
			t.Fatalf("CreateOnOriginal(first reversal) = %v", err)
		}
		purchase(t, s, "txn_other_terminal", b, "SN-2", 500, at(3))
		rev := newReversal("txn_v2", a, "SN-1", orig.ID, 1000, instore.StatusPending)
		rev.CreatedAt = at(4)
		if err := s.CreateOnOriginal(t.Context(), &instore.Change{T: rev}); err != nil {
			t.Fatalf("CreateOnOriginal(reversal after a failed one and a purchase elsewhere) = %v, want nil", err)
		}
		rev.StatusID, rev.ResultMessageID = instore.StatusTransactionDeclined, "msg-2"
		mustUpdateTransaction(t, s, rev, rev.Version)
		purchase(t, s, "txn_newer", a, "SN-1", 300, at(5))
		late := newReversal("txn_v3", a, "SN-1", orig.ID, 1000, instore.StatusPending)
		late.CreatedAt = at(6)
		checkCode(t, "CreateOnOriginal(reversal of a purchase with a newer one on its terminal)",
			s.CreateOnOriginal(t.Context(), &instore.Change{T: late}), instore.ENotReversible)
		checkMissing(t, "Transaction(refused reversal)", s.Transaction, late.ID, "")
	}},
	{"Concurrent", func(t *testing.T, s instore.Store) {
		// A reversal and four full refunds of one purchase race, each on a
		// terminal ID of its own: exactly one of them wins, and never more
		// than the amount is paid back. Several rounds, so that each kind
		// gets to win.
		const refunds = 4
		mustCreateCustomer(t, s, "cus_1", at(0))
		mustCreateMerchant(t, s, "mer_1", "cus_1", at(0))
		for round := range 6 {
			t.Run(fmt.Sprint("round", round), func(t *testing.T) {
				sn := func(i int) string { return fmt.Sprintf("SN-C%d-%d", round, i) }
				var terminals []string
				for i := range refunds + 2 {
					terminals = append(terminals, seedTerminal(t, s, sn(i)))
				}
				orig := purchase(t, s, fmt.Sprintf("txn_orig%d", round), terminals[0], sn(0), 2000, at(1))
				txs := []*instore.Transaction{newReversal(fmt.Sprintf("txn_rev%d", round), terminals[1], sn(1), orig.ID, 2000, instore.StatusPending)}
				for i := range refunds {
					txs = append(txs, newRefund(fmt.Sprintf("txn_r%d_%d", round, i), terminals[i+2], sn(i+2), orig.ID, 2000, instore.StatusPending, at(2)))
				}
				// Alternate which one asks first.
				if round%2 == 1 {
					txs[0], txs[len(txs)-1] = txs[len(txs)-1], txs[0]
				}
				errs := atOnce(len(txs), func(i int) error {
					return s.CreateOnOriginal(t.Context(), &instore.Change{T: txs[i]})
				})
				wins := 0
				for i, err := range errs {
					var e *instore.Error
					switch {
					case err == nil:
						wins++
					case errors.As(err, &e):
					default:
						t.Errorf("concurrent CreateOnOriginal(%s) = %v, want nil or the rule's error", txs[i].ID, err)
					}
				}
				if wins != 1 {
					t.Errorf("a reversal and %d full refunds of one purchase: %d created, want 1 (%v)", refunds, wins, errs)
				}
				if got := paidBack(t, s, orig.ID); got > orig.Amount {
					t.Errorf("paid back %d of a purchase of %d", got, orig.Amount)
				}
			})
		}
	}},
}
