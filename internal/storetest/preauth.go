package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/lifecycle"
)

// preAuth stores an APPROVED PRE_AUTH of amount whose authorisation is
// in state.
func preAuth(t *testing.T, s instore.Store, id, terminalID, serial string, amount int64, state instore.AuthorizationState, captured int64) *instore.Transaction {
	t.Helper()
	tx := newTransaction(id, "mer_1", terminalID, serial, instore.StatusApproved, at(1))
	tx.Type, tx.Amount = instore.TypePreAuth, amount
	tx.Authorization = &instore.Authorization{State: state, AuthorizedAmount: amount, CapturedAmount: captured, ExpiresAt: stored(at(60))}
	return mustCreateTransaction(t, s, tx)
}

// onPreAuth returns a new PENDING INCREMENT, CAPTURE or VOID of preID.
func onPreAuth(id string, typ instore.TransactionType, terminalID, serial, preID string, amount int64) *instore.Transaction {
	tx := newTransaction(id, "mer_1", terminalID, serial, instore.StatusPending, at(2))
	tx.Type, tx.Amount, tx.OriginalID = typ, amount, preID
	return tx
}

// createOnPreAuth creates tx with the default capture tolerance.
func createOnPreAuth(t *testing.T, s instore.Store, tx *instore.Transaction) error {
	return s.CreateOnOriginal(t.Context(), &instore.Change{T: tx, CaptureTolerance: instore.DefaultCaptureTolerance})
}

// terminals seeds n more devices and terminal IDs (SN-p0...) and returns
// the terminal IDs.
func terminals(t *testing.T, s instore.Store, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = seedTerminal(t, s, fmt.Sprintf("SN-p%d", i))
	}
	return ids
}

// race creates create(i) for i in [0, n) at once (CreateOnOriginal, the
// default capture tolerance) and returns the transactions created; every
// refused one's error must pass refused.
func race(t *testing.T, s instore.Store, n int, create func(i int) *instore.Transaction, refused func(error) bool) (created []*instore.Transaction) {
	t.Helper()
	txs := make([]*instore.Transaction, n)
	for i := range n {
		txs[i] = create(i)
	}
	for i, err := range atOnce(n, func(i int) error { return createOnPreAuth(t, s, txs[i]) }) {
		switch tx := txs[i]; {
		case err == nil:
			created = append(created, tx)
		case !refused(err):
			t.Errorf("CreateOnOriginal(%s %s) = %v", tx.Type, tx.ID, err)
		}
	}
	return created
}

// raceOnPreAuth seeds twelve terminal IDs and a pre-auth of amount on the
// first, its authorisation in state with captured, and races the creation
// of create(i, ...) on each terminal ID (race); it returns the pre-auth and
// the transactions created.
func raceOnPreAuth(t *testing.T, s instore.Store, amount int64, state instore.AuthorizationState, captured int64,
	create func(i int, terminalID, serial, preID string) *instore.Transaction, refused func(error) bool) (*instore.Transaction, []*instore.Transaction) {
	t.Helper()
	seed(t, s)
	const n = 12
	ts := terminals(t, s, n)
	pre := preAuth(t, s, "txn_pre", ts[0], "SN-p0", amount, state, captured)
	return pre, race(t, s, n, func(i int) *instore.Transaction { return create(i, ts[i], fmt.Sprintf("SN-p%d", i), pre.ID) }, refused)
}

// isProblem is a refused of race: err is an *instore.Error of code.
func isProblem(code string) func(error) bool {
	return func(err error) bool {
		var e *instore.Error
		return errors.As(err, &e) && e.Code == code
	}
}

var preAuthTests = []test{
	{"RoundTrip", func(t *testing.T, s instore.Store) {
		// A pre-auth's authorisation is kept, listed by state and type,
		// and the OPEN ones by their expiry; an approved CAPTURE commits
		// with its pre-auth CAPTURED (Change.Pair).
		a := seed(t, s)
		pre := preAuth(t, s, "txn_pre", a, "SN-1", 10000, instore.AuthOpen, 0)
		if d := diff(asStored(pre), mustTransaction(t, s, pre.ID)); d != "" {
			t.Errorf("pre-auth (-want +got):\n%s", d)
		}
		purchase(t, s, "txn_sale", a, "SN-1", 500, at(1))
		for _, f := range []instore.TransactionFilter{
			{TransactionSelection: instore.TransactionSelection{Types: []instore.TransactionType{instore.TypePreAuth}}},
			{TransactionSelection: instore.TransactionSelection{Types: []instore.TransactionType{instore.TypePreAuth, instore.TypeCapture}}},
			{TransactionSelection: instore.TransactionSelection{AuthorizationState: instore.AuthOpen}},
		} {
			f.MerchantID, f.From, f.To = "mer_1", at(0), at(10)
			if got := mustList(t, s, f); len(got) != 1 || got[0].ID != pre.ID {
				t.Errorf("ListTransactions(types %v, state %q) = %d transactions, want the pre-auth", f.Types, f.AuthorizationState, len(got))
			}
		}
		for _, tc := range []struct {
			name string
			due  time.Time
			want int
		}{{"not due", at(59), 0}, {"due", at(60), 1}, {"all", time.Time{}, 1}} {
			if open, err := s.OpenPreAuths(t.Context(), tc.due); err != nil || len(open) != tc.want {
				t.Errorf("OpenPreAuths(%s) = %d, %v; want %d", tc.name, len(open), err, tc.want)
			}
		}
		capture := onPreAuth("txn_cap", instore.TypeCapture, a, "SN-1", pre.ID, 9000)
		capture.TipAmount = 1500
		if err := createOnPreAuth(t, s, capture); err != nil {
			t.Fatalf("CreateOnOriginal(capture) = %v", err)
		}
		capture.StatusID, capture.Progress, capture.CompletedAt = instore.StatusApproved, instore.ProgressFinal, ptr(at(3))
		pre.Authorization = &instore.Authorization{State: instore.AuthCaptured, AuthorizedAmount: 10000, CapturedAmount: 10500, ExpiresAt: stored(at(60))}
		if err := s.Commit(t.Context(), &instore.Change{T: capture, From: 1, Pair: &instore.Change{T: pre, From: pre.Version}}); err != nil {
			t.Fatalf("Commit(capture, pre-auth) = %v", err)
		}
		for _, tx := range []*instore.Transaction{capture, pre} {
			if d := diff(asStored(tx), mustTransaction(t, s, tx.ID)); d != "" {
				t.Errorf("%s after the capture (-want +got):\n%s", tx.ID, d)
			}
		}
		if open, err := s.OpenPreAuths(t.Context(), at(100)); err != nil || len(open) != 0 {
			t.Errorf("OpenPreAuths after the capture = %d, %v; want none", len(open), err)
		}
	}},
	{"Rules", func(t *testing.T, s instore.Store) {
		// The rule is decided in the creation's database transaction: a
		// PENDING capture refuses a void, an increment and a capture; a
		// capture past the tolerance is refused; nothing refused is stored.
		a := seed(t, s)
		ts := terminals(t, s, 4)
		pre := preAuth(t, s, "txn_pre", a, "SN-1", 10000, instore.AuthOpen, 0)
		over := onPreAuth("txn_over", instore.TypeCapture, ts[0], "SN-p0", pre.ID, 12001)
		checkCode(t, "capture past the tolerance", createOnPreAuth(t, s, over), instore.EValidation)
		if err := createOnPreAuth(t, s, onPreAuth("txn_cap", instore.TypeCapture, ts[0], "SN-p0", pre.ID, 12000)); err != nil {
			t.Fatalf("CreateOnOriginal(capture of 12000) = %v", err)
		}
		for i, typ := range []instore.TransactionType{instore.TypeVoid, instore.TypeIncrement, instore.TypeCapture} {
			tx := onPreAuth(fmt.Sprintf("txn_x%d", i), typ, ts[i+1], fmt.Sprintf("SN-p%d", i+1), pre.ID, 100)
			checkCode(t, string(typ)+" while a capture is in flight", createOnPreAuth(t, s, tx), instore.EConflict)
			checkMissing(t, "Transaction(refused "+string(typ)+")", s.Transaction, tx.ID, "")
		}
		checkMissing(t, "Transaction(refused capture)", s.Transaction, over.ID, "")
		checkCode(t, "reversal of a pre-auth", s.CreateOnOriginal(t.Context(), &instore.Change{T: newReversal("txn_rev", ts[3], "SN-p3", pre.ID, 10000, instore.StatusPending)}),
			instore.ENotReversible)
	}},
	{"ExpiryVoidRetry", func(t *testing.T, s instore.Store) {
		// The retry of an expiry VOID is decided in the creation's
		// database transaction: after a VOID of the timer ended declined,
		// another one created before its time (a decision taken on a read
		// from before that VOID ended) is refused, with the time it is due
		// (lifecycle.ExpiryNotDue), and nothing is stored; at its time it
		// is created. The ECR's own VOID is not held back.
		a := seed(t, s)
		ts := terminals(t, s, 3)
		pre := preAuth(t, s, "txn_pre", a, "SN-1", 10000, instore.AuthOpen, 0)
		void := func(id, terminalID, serial string, byTimer bool, created int) *instore.Transaction {
			v := onPreAuth(id, instore.TypeVoid, terminalID, serial, pre.ID, 10000)
			v.ByTimer, v.CreatedAt = byTimer, at(created)
			return v
		}
		create := func(tx *instore.Transaction) error {
			return s.CreateOnOriginal(t.Context(), &instore.Change{T: tx, CaptureTolerance: instore.DefaultCaptureTolerance,
				PreAuthValidity: 24 * time.Hour})
		}
		// createDeclined creates the VOID tx, which must be allowed, and
		// ends it declined a minute after it was created.
		createDeclined := func(tx *instore.Transaction) {
			t.Helper()
			if err := create(tx); err != nil {
				t.Fatalf("CreateOnOriginal(void %s, by the timer %v) = %v", tx.ID, tx.ByTimer, err)
			}
			tx.StatusID, tx.Progress, tx.CompletedAt = instore.StatusTransactionDeclined, instore.ProgressFinal, ptr(tx.CreatedAt.Add(time.Minute))
			if err := s.Commit(t.Context(), &instore.Change{T: tx, From: 1}); err != nil {
				t.Fatalf("Commit(declined void %s) = %v", tx.ID, err)
			}
		}
		createDeclined(void("txn_v1", a, "SN-1", true, 60)) // the expiry's, ended at 61
		early := void("txn_v2", ts[0], "SN-p0", true, 61)
		var notDue *lifecycle.ExpiryNotDue
		if err := create(early); !errors.As(err, &notDue) || !notDue.At.Equal(stored(at(62))) {
			t.Errorf("CreateOnOriginal(expiry void at once after a declined one) = %v, want not due before %s", err, at(62))
		}
		checkMissing(t, "Transaction(early expiry void)", s.Transaction, early.ID, "")
		createDeclined(void("txn_v3", ts[1], "SN-p1", false, 61)) // the ECR's, ended at 62: not the timer's
		if err := create(void("txn_v4", ts[2], "SN-p2", true, 62)); err != nil {
			t.Errorf("CreateOnOriginal(expiry void at its time) = %v", err)
		}
	}},
	{"RaceCaptureVoidIncrement", func(t *testing.T, s instore.Store) {
		// Captures, voids and increments racing on one OPEN pre-auth: one
		// capture or void at most is created; the others are refused
		// (conflict), whatever the order.
		types := []instore.TransactionType{instore.TypeCapture, instore.TypeVoid, instore.TypeIncrement}
		_, created := raceOnPreAuth(t, s, 10000, instore.AuthOpen, 0, func(i int, terminalID, serial, preID string) *instore.Transaction {
			return onPreAuth(fmt.Sprintf("txn_%02d", i), types[i%3], terminalID, serial, preID, 1000)
		}, isProblem(instore.EConflict))
		final := 0
		for _, tx := range created {
			if tx.Type != instore.TypeIncrement {
				final++
			}
		}
		if final != 1 {
			t.Errorf("%d captures and voids created, want exactly 1", final)
		}
	}},
	{"RaceRefunds", func(t *testing.T, s instore.Store) {
		// Refunds racing on a captured pre-auth never exceed its captured
		// amount (of 900, nine refunds of 100 out of twelve).
		pre, created := raceOnPreAuth(t, s, 1000, instore.AuthCaptured, 900, func(i int, terminalID, serial, preID string) *instore.Transaction {
			return newRefund(fmt.Sprintf("txn_r%02d", i), terminalID, serial, preID, 100, instore.StatusPending, at(2))
		}, func(err error) bool { return errors.Is(err, instore.ErrRefundExceeded) })
		if len(created) != 9 {
			t.Errorf("%d refunds created, want 9", len(created))
		}
		checkRefunded(t, s, pre.ID, 900)
	}},
}
