package storetest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/instore-dev/instore"
)

// ptr returns a pointer to a copy of v.
func ptr[T any](v T) *T { return &v }

// seed creates customer cus_1 with merchant mer_1 and device SN-1 linked to
// a terminal ID of mer_1, and returns that terminal ID.
func seed(t *testing.T, s instore.Store) string {
	t.Helper()
	mustCreateCustomer(t, s, "cus_1", at(0))
	mustCreateMerchant(t, s, "mer_1", "cus_1", at(0))
	return seedTerminal(t, s, "SN-1")
}

// seedTerminal creates device serial and links it to a new terminal ID of
// cus_1 and mer_1 (see seed), and returns that terminal ID.
func seedTerminal(t *testing.T, s instore.Store, serial string) string {
	t.Helper()
	devices.mustCreate(t, s, newDevice(serial, "cus_1", at(0)))
	id := mustAllocateTerminal(t, s, "cus_1", "mer_1", at(0)).TerminalID
	mustLink(t, s, id, serial, at(0), "", "")
	return id
}

// newTransaction returns a purchase with the fields a new one has: no
// optional field set, no result.
func newTransaction(id, merchantID, terminalID, serial string, status instore.TransactionStatus, created time.Time) *instore.Transaction {
	progress := instore.ProgressSent
	if status != instore.StatusPending {
		progress = instore.ProgressFinal
	}
	return &instore.Transaction{
		ID: id, MerchantID: merchantID, TerminalID: terminalID, SerialNumber: serial,
		Type: instore.TypePurchase, Amount: 1250, Currency: "SEK",
		StatusID: status, Progress: progress, CreatedAt: created,
	}
}

func mustCreateTransaction(t *testing.T, s instore.Store, tx *instore.Transaction) *instore.Transaction {
	t.Helper()
	return mustCreate(t, s, &instore.Change{T: tx})
}

// mustCreate stores the creation ch and returns its transaction.
func mustCreate(t *testing.T, s instore.Store, ch *instore.Change) *instore.Transaction {
	t.Helper()
	if err := s.CreateTransaction(t.Context(), ch); err != nil {
		t.Fatalf("CreateTransaction(%q) = %v", ch.T.ID, err)
	}
	return ch.T
}

func mustUpdateTransaction(t *testing.T, s instore.Store, tx *instore.Transaction, fromVersion int64) {
	t.Helper()
	mustCommit(t, s, &instore.Change{T: tx, From: fromVersion})
}

// mustCommit stores the update ch, which must succeed.
func mustCommit(t *testing.T, s instore.Store, ch *instore.Change) {
	t.Helper()
	if err := s.Commit(t.Context(), ch); err != nil {
		t.Fatalf("Commit(%q, %d) = %v", ch.T.ID, ch.From, err)
	}
}

// mustTransaction reads a transaction that must exist.
func mustTransaction(t *testing.T, s instore.Store, id string) *instore.Transaction {
	t.Helper()
	return mustGet(t, "Transaction", s.Transaction, id)
}

// approvedResult is a result with every field set.
func approvedResult() *instore.Result {
	return &instore.Result{
		EntryMode: "CONTACTLESS", CardBrand: "VISA", MaskedPAN: "************4242",
		AuthorizationCode: "A1B2C3", PaymentMethodID: ptr(2),
		Receipt: instore.Receipt{
			Customer: []string{"ACME RETAIL", "Köp 12,50 SEK", "", "\"quoted\" \\ <tag> & 😀"},
			Merchant: []string{"ACME RETAIL", "MERCHANT COPY", "Auth A1B2C3"},
		},
	}
}

var transactionTests = []test{
	{"RoundTrip", func(t *testing.T, s instore.Store) {
		terminalID := seed(t, s)
		orig := mustCreateTransaction(t, s, newTransaction("txn_orig", "mer_1", terminalID, "SN-1", instore.StatusApproved, at(1)))
		rev := mustCreateTransaction(t, s, newTransaction("txn_rev", "mer_1", terminalID, "SN-1", instore.StatusApproved, at(2)))
		for _, tx := range []*instore.Transaction{
			{
				ID: "txn_full", MerchantID: "mer_1", TerminalID: terminalID, SerialNumber: "SN-1",
				Type: instore.TypeRefund, Amount: 125000, CashbackAmount: 2000, VATAmount: ptr(int64(25000)),
				Currency: "EUR", PaymentMethodID: ptr(1), ECRReference: "ECR-4711", PrintReceipt: true,
				StatusID: instore.StatusTechnicalError, ErrorID: ptr(36), Progress: instore.ProgressFinal,
				OriginalID: orig.ID, Reverses: orig.ID, ReversedBy: rev.ID, CancelRequested: true,
				Result: approvedResult(), ResultMessageID: "msg-9c1f",
				CreatedAt: at(3), AcknowledgedAt: ptr(at(4)), DeadlineAt: ptr(at(5)), CompletedAt: ptr(at(6)),
			},
			// Zero values: VAT 0 and payment method 0 are values, not absence.
			{
				ID: "txn_zero", MerchantID: "mer_1", TerminalID: terminalID, Type: instore.TypeReversal,
				VATAmount: ptr(int64(0)), PaymentMethodID: ptr(0), ErrorID: ptr(0), Currency: "SEK",
				StatusID: instore.StatusApproved, Progress: instore.ProgressFinal,
				Result: &instore.Result{}, CreatedAt: at(7),
			},
			// A new pending purchase: every optional field unset.
			newTransaction("txn_new", "mer_1", terminalID, "", instore.StatusPending, base),
		} {
			tx.Version = 42 // ignored: a new transaction has version 1
			if err := s.CreateTransaction(t.Context(), &instore.Change{T: tx}); err != nil {
				t.Fatalf("CreateTransaction(%q) = %v", tx.ID, err)
			}
			if tx.Version != 1 {
				t.Errorf("CreateTransaction(%q) set Version %d, want 1", tx.ID, tx.Version)
			}
			if d := diff(asStored(tx), mustTransaction(t, s, tx.ID)); d != "" {
				t.Errorf("Transaction(%q) mismatch (-want +got):\n%s", tx.ID, d)
			}
		}
		got := mustTransaction(t, s, "txn_new")
		if got.VATAmount != nil || got.PaymentMethodID != nil || got.ErrorID != nil || got.Result != nil ||
			got.AcknowledgedAt != nil || got.DeadlineAt != nil || got.CompletedAt != nil {
			t.Errorf("Transaction(txn_new) has optional fields set: %+v", got)
		}
	}},
	{"Confirmation", func(t *testing.T, s instore.Store) {
		// A purchase that asked for confirmation keeps its window, state
		// and times through creation and updates; UnconfirmedTransactions
		// and the listing's Unconfirmed filter find exactly the APPROVED
		// ones still awaiting it, earliest deadline first.
		terminalID := seed(t, s)
		other := seedTerminal(t, s, "SN-2")
		asked := func(id, terminal, serial string, created time.Time) *instore.Transaction {
			tx := newTransaction(id, "mer_1", terminal, serial, instore.StatusPending, created)
			tx.ConfirmWithin, tx.ConfirmState = 30*time.Second, instore.ConfirmPending
			return mustCreateTransaction(t, s, tx)
		}
		late := asked("txn_late", terminalID, "SN-1", at(1))
		if d := diff(asStored(late), mustTransaction(t, s, late.ID)); d != "" {
			t.Errorf("created (-want +got):\n%s", d)
		}
		approve := func(tx *instore.Transaction, deadline time.Time) {
			from := tx.Version
			tx.StatusID, tx.Progress, tx.CompletedAt, tx.ConfirmDeadline = instore.StatusApproved, instore.ProgressFinal, ptr(at(2)), ptr(deadline)
			mustUpdateTransaction(t, s, tx, from)
		}
		approve(late, at(20))
		early := asked("txn_early", other, "SN-2", at(3))
		approve(early, at(10))
		confirmed := asked("txn_confirmed", terminalID, "SN-1", at(4))
		approve(confirmed, at(11))
		confirmed.ConfirmState, confirmed.ConfirmedAt = instore.ConfirmConfirmed, ptr(at(5))
		mustUpdateTransaction(t, s, confirmed, confirmed.Version)
		if d := diff(asStored(confirmed), mustTransaction(t, s, confirmed.ID)); d != "" {
			t.Errorf("confirmed (-want +got):\n%s", d)
		}
		declined := asked("txn_declined", other, "SN-2", at(6))
		declined.StatusID, declined.Progress = instore.StatusTransactionDeclined, instore.ProgressFinal
		mustUpdateTransaction(t, s, declined, declined.Version)
		mustCreateTransaction(t, s, newTransaction("txn_plain", "mer_1", terminalID, "SN-1", instore.StatusApproved, at(7)))

		ids := func(ts []*instore.Transaction, err error) string {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, tx := range ts {
				out = append(out, tx.ID)
			}
			return strings.Join(out, ",")
		}
		if got := ids(s.UnconfirmedTransactions(t.Context(), time.Time{})); got != "txn_early,txn_late" {
			t.Errorf("UnconfirmedTransactions(all) = %s, want txn_early,txn_late", got)
		}
		if got := ids(s.UnconfirmedTransactions(t.Context(), at(15))); got != "txn_early" {
			t.Errorf("UnconfirmedTransactions(due by at(15)) = %s, want txn_early", got)
		}
		if got := ids(s.UnconfirmedTransactions(t.Context(), at(10))); got != "txn_early" {
			t.Errorf("UnconfirmedTransactions(due at its deadline) = %s, want txn_early", got)
		}
		list := func(f instore.TransactionFilter) string {
			f.MerchantID, f.From, f.To, f.Limit, f.Unconfirmed = "mer_1", at(0), at(30), 10, true
			return ids(s.ListTransactions(t.Context(), f))
		}
		if got := list(instore.TransactionFilter{}); got != "txn_early,txn_late" {
			t.Errorf("ListTransactions(unconfirmed) = %s, want newest first txn_early,txn_late", got)
		}
		if got := list(instore.TransactionFilter{TransactionSelection: instore.TransactionSelection{TerminalID: other}}); got != "txn_early" {
			t.Errorf("ListTransactions(unconfirmed, terminal) = %s, want txn_early", got)
		}
		// Reversed at its deadline: no longer awaiting confirmation.
		early.StatusID, early.ConfirmState = instore.StatusReversed, instore.ConfirmAutoReversed
		mustUpdateTransaction(t, s, early, early.Version)
		if got := ids(s.UnconfirmedTransactions(t.Context(), time.Time{})); got != "txn_late" {
			t.Errorf("UnconfirmedTransactions after the reversal = %s, want txn_late", got)
		}
	}},
	{"NotFound", func(t *testing.T, s instore.Store) {
		terminalID := seed(t, s)
		mustCreateTransaction(t, s, newTransaction("txn_1", "mer_1", terminalID, "SN-1", instore.StatusApproved, at(1)))
		checkMissing(t, "Transaction(missing)", s.Transaction, "txn_missing_5e1a", "txn_missing_5e1a")
		checkMissing(t, "ActiveTransaction(terminal ID with only a final transaction)", s.ActiveTransaction, terminalID, terminalID)
		checkMissing(t, "ActiveTransaction(missing terminal ID)", s.ActiveTransaction, "99999998", "99999998")
		tx := newTransaction("txn_missing_5e1a", "mer_1", terminalID, "SN-1", instore.StatusApproved, at(2))
		tx.Version = 1
		err := s.Commit(t.Context(), &instore.Change{T: tx, From: 1})
		checkNotFound(t, "Commit(missing)", err, "txn_missing_5e1a")
		if tx.Version != 1 {
			t.Errorf("Commit(missing) set Version %d, want it unchanged (1)", tx.Version)
		}
	}},
	{"CreateConflict", func(t *testing.T, s instore.Store) {
		a := seed(t, s)
		b := seedTerminal(t, s, "SN-2")
		first := mustCreateTransaction(t, s, newTransaction("txn_1", "mer_1", a, "SN-1", instore.StatusPending, at(1)))
		for _, tc := range []struct {
			name string
			tx   *instore.Transaction
		}{
			{"second PENDING on a terminal ID", newTransaction("txn_2", "mer_1", a, "SN-1", instore.StatusPending, at(2))},
			{"duplicate id", newTransaction("txn_1", "mer_1", b, "SN-2", instore.StatusApproved, at(2))},
			{"missing terminal ID", newTransaction("txn_3", "mer_1", "99999998", "", instore.StatusApproved, at(2))},
			{"missing merchant", newTransaction("txn_4", "mer_missing", b, "SN-2", instore.StatusApproved, at(2))},
			{"missing original", func() *instore.Transaction {
				tx := newTransaction("txn_5", "mer_1", b, "SN-2", instore.StatusApproved, at(2))
				tx.OriginalID = "txn_missing"
				return tx
			}()},
		} {
			tc.tx.Version = 7
			checkConflict(t, "CreateTransaction("+tc.name+")", s.CreateTransaction(t.Context(), &instore.Change{T: tc.tx}))
			if tc.tx.Version != 7 {
				t.Errorf("CreateTransaction(%s) refused but set Version %d", tc.name, tc.tx.Version)
			}
		}
		if d := diff(asStored(first), mustTransaction(t, s, "txn_1")); d != "" {
			t.Errorf("Transaction(txn_1) after refused creates mismatch (-want +got):\n%s", d)
		}
		for _, id := range []string{"txn_2", "txn_3", "txn_4", "txn_5"} {
			checkMissing(t, "Transaction(refused)", s.Transaction, id, "")
		}
		// A final transaction beside the PENDING one, and a PENDING one on
		// another terminal ID, are fine.
		mustCreateTransaction(t, s, newTransaction("txn_6", "mer_1", a, "SN-1", instore.StatusApproved, at(3)))
		mustCreateTransaction(t, s, newTransaction("txn_7", "mer_1", b, "SN-2", instore.StatusPending, at(3)))
	}},
	{"Update", func(t *testing.T, s instore.Store) {
		terminalID := seed(t, s)
		other := mustCreateTransaction(t, s, newTransaction("txn_other", "mer_1", terminalID, "SN-1", instore.StatusApproved, at(1)))
		tx := newTransaction("txn_1", "mer_1", terminalID, "SN-1", instore.StatusPending, at(2))
		tx.VATAmount, tx.PaymentMethodID, tx.ECRReference, tx.PrintReceipt = ptr(int64(250)), ptr(0), "ECR-1", true
		tx.OriginalID = other.ID
		mustCreateTransaction(t, s, tx)

		// Every mutable field changes, step by step.
		steps := []func(tx *instore.Transaction){
			func(tx *instore.Transaction) { // acknowledged, with a deadline
				tx.Progress = instore.ProgressAcknowledged
				tx.AcknowledgedAt, tx.DeadlineAt = ptr(at(4)), ptr(at(9))
			},
			func(tx *instore.Transaction) { // a cancel request, another device
				tx.Progress, tx.CancelRequested, tx.SerialNumber = instore.ProgressWaitingForPIN, true, "SN-OTHER"
			},
			func(tx *instore.Transaction) { // a final result
				tx.StatusID, tx.ErrorID, tx.Progress = instore.StatusTechnicalError, ptr(37), instore.ProgressFinal
				tx.Result, tx.ResultMessageID, tx.CompletedAt = approvedResult(), "msg-1", ptr(at(6))
				tx.Reverses, tx.ReversedBy = other.ID, other.ID
			},
			func(tx *instore.Transaction) { // and everything cleared again
				tx.SerialNumber, tx.ErrorID, tx.Reverses, tx.ReversedBy = "", nil, "", ""
				tx.CancelRequested, tx.Result, tx.ResultMessageID = false, nil, ""
				tx.AcknowledgedAt, tx.DeadlineAt, tx.CompletedAt = nil, nil, nil
				tx.StatusID, tx.Progress = instore.StatusReversed, instore.ProgressFinal
			},
		}
		for i, step := range steps {
			from := tx.Version
			step(tx)
			mustUpdateTransaction(t, s, tx, from)
			if tx.Version != from+1 {
				t.Errorf("step %d: Commit set Version %d, want %d", i, tx.Version, from+1)
			}
			if d := diff(asStored(tx), mustTransaction(t, s, tx.ID)); d != "" {
				t.Errorf("step %d: Transaction() after Commit mismatch (-want +got):\n%s", i, d)
			}
		}

		// Immutable fields are not written.
		want := asStored(tx)
		changed := *tx
		changed.MerchantID, changed.TerminalID, changed.Type = "mer_x", "99999998", instore.TypeRefund
		changed.Amount, changed.CashbackAmount, changed.VATAmount, changed.Currency = 1, 2, ptr(int64(3)), "NOK"
		changed.PaymentMethodID, changed.ECRReference, changed.PrintReceipt = ptr(2), "ECR-X", false
		changed.OriginalID, changed.CreatedAt = "", at(99)
		mustUpdateTransaction(t, s, &changed, tx.Version)
		want.Version = tx.Version + 1
		if d := diff(want, mustTransaction(t, s, tx.ID)); d != "" {
			t.Errorf("Commit wrote immutable fields (-want +got):\n%s", d)
		}
	}},
	{"CommitRelaxed", func(t *testing.T, s instore.Store) {
		// A progress stage written without waiting for the disk is the same
		// compare-and-set as Commit, seen at once by readers.
		terminalID := seed(t, s)
		tx := mustCreateTransaction(t, s, newTransaction("txn_1", "mer_1", terminalID, "SN-1", instore.StatusPending, at(1)))
		for i, stage := range []instore.Progress{instore.ProgressWaitingForCard, instore.ProgressWaitingForPIN, instore.ProgressAuthorizing} {
			from := tx.Version
			tx.Progress = stage
			if err := s.Commit(t.Context(), &instore.Change{T: tx, From: from, Relaxed: true}); err != nil {
				t.Fatalf("CommitRelaxed(%s) = %v", stage, err)
			}
			if tx.Version != from+1 {
				t.Errorf("stage %d: CommitRelaxed set Version %d, want %d", i, tx.Version, from+1)
			}
			if d := diff(asStored(tx), mustTransaction(t, s, tx.ID)); d != "" {
				t.Errorf("stage %d: Transaction() after CommitRelaxed mismatch (-want +got):\n%s", i, d)
			}
		}
		stale := *tx
		stale.Progress = instore.ProgressWaitingForCard
		checkConflict(t, "CommitRelaxed(stale version)", s.Commit(t.Context(), &instore.Change{T: &stale, From: tx.Version - 1, Relaxed: true}))
		if stale.Version != tx.Version {
			t.Errorf("CommitRelaxed(stale version) set Version %d, want it unchanged (%d)", stale.Version, tx.Version)
		}
		missing := *tx
		missing.ID = "txn_missing_5e1a"
		checkNotFound(t, "CommitRelaxed(missing)", s.Commit(t.Context(), &instore.Change{T: &missing, From: 1, Relaxed: true}), "txn_missing_5e1a")
		// A durable change after it keeps every stage.
		tx.StatusID, tx.Progress, tx.Result = instore.StatusApproved, instore.ProgressFinal, approvedResult()
		mustUpdateTransaction(t, s, tx, tx.Version)
		if d := diff(asStored(tx), mustTransaction(t, s, tx.ID)); d != "" {
			t.Errorf("Transaction() after the result mismatch (-want +got):\n%s", d)
		}
	}},
	{"UpdateConflict", func(t *testing.T, s instore.Store) {
		terminalID := seed(t, s)
		tx := mustCreateTransaction(t, s, newTransaction("txn_1", "mer_1", terminalID, "SN-1", instore.StatusPending, at(1)))
		tx.Progress = instore.ProgressAcknowledged
		mustUpdateTransaction(t, s, tx, 1)
		want := asStored(tx)

		// A change computed from the old version is refused.
		stale := *tx
		stale.Version, stale.StatusID, stale.Progress = 1, instore.StatusApproved, instore.ProgressFinal
		checkConflict(t, "Commit(stale version)", s.Commit(t.Context(), &instore.Change{T: &stale, From: 1}))
		if stale.Version != 1 {
			t.Errorf("Commit(stale version) set Version %d, want it unchanged (1)", stale.Version)
		}
		checkConflict(t, "Commit(future version)", s.Commit(t.Context(), &instore.Change{T: &stale, From: 3}))
		if d := diff(want, mustTransaction(t, s, tx.ID)); d != "" {
			t.Errorf("Transaction() after refused updates mismatch (-want +got):\n%s", d)
		}

		// A final transaction cannot become a second PENDING one.
		done := mustCreateTransaction(t, s, newTransaction("txn_2", "mer_1", terminalID, "SN-1", instore.StatusApproved, at(2)))
		back := *done
		back.StatusID, back.Progress = instore.StatusPending, instore.ProgressSent
		checkConflict(t, "Commit(second PENDING on a terminal ID)", s.Commit(t.Context(), &instore.Change{T: &back, From: 1}))
		if back.Version != 1 {
			t.Errorf("Commit(second PENDING) set Version %d, want it unchanged (1)", back.Version)
		}
		if d := diff(asStored(done), mustTransaction(t, s, done.ID)); d != "" {
			t.Errorf("Transaction(txn_2) after a refused update mismatch (-want +got):\n%s", d)
		}
		// A missing reference is refused too.
		bad := *done
		bad.ReversedBy = "txn_missing"
		checkConflict(t, "Commit(missing reversed_by)", s.Commit(t.Context(), &instore.Change{T: &bad, From: 1}))
	}},
	{"ConcurrentCreate", func(t *testing.T, s instore.Store) {
		terminalID := seed(t, s)
		const n = 16
		var txs [n]*instore.Transaction
		for i := range n {
			txs[i] = newTransaction("txn_"+string(rune('a'+i)), "mer_1", terminalID, "SN-1", instore.StatusPending, at(i))
		}
		errs := atOnce(n, func(i int) error {
			return s.CreateTransaction(t.Context(), &instore.Change{T: txs[i]})
		})
		winner := exactlyOne(t, "concurrent CreateTransaction(PENDING, same terminal ID)", errs)
		if winner < 0 {
			return
		}
		active, err := s.ActiveTransaction(t.Context(), terminalID)
		if err != nil {
			t.Fatalf("ActiveTransaction() = %v", err)
		}
		if d := diff(asStored(txs[winner]), active); d != "" {
			t.Errorf("ActiveTransaction() is not the winner (-want +got):\n%s", d)
		}
		for i, tx := range txs {
			if i == winner {
				continue
			}
			checkMissing(t, "Transaction(refused)", s.Transaction, tx.ID, "")
		}

		// Once the winner is final, the terminal ID takes a new one.
		w := txs[winner]
		w.StatusID, w.Progress, w.CompletedAt = instore.StatusAbortedByCardholder, instore.ProgressFinal, ptr(at(30))
		mustUpdateTransaction(t, s, w, w.Version)
		next := mustCreateTransaction(t, s, newTransaction("txn_next", "mer_1", terminalID, "SN-1", instore.StatusPending, at(31)))
		active, err = s.ActiveTransaction(t.Context(), terminalID)
		if err != nil {
			t.Fatalf("ActiveTransaction() after the first ended = %v", err)
		}
		if active.ID != next.ID {
			t.Errorf("ActiveTransaction() = %q, want %q", active.ID, next.ID)
		}
	}},
	{"ConcurrentUpdate", func(t *testing.T, s instore.Store) {
		terminalID := seed(t, s)
		tx := mustCreateTransaction(t, s, newTransaction("txn_1", "mer_1", terminalID, "SN-1", instore.StatusPending, at(1)))
		tx.Progress = instore.ProgressAcknowledged
		mustUpdateTransaction(t, s, tx, tx.Version)
		from := tx.Version
		const n = 16
		var txs [n]*instore.Transaction
		for i := range n {
			c := *tx
			// Each writer makes a different change, so the stored row tells
			// which one won.
			c.Progress = instore.TerminalStages[i%len(instore.TerminalStages)]
			c.DeadlineAt = ptr(at(100 + i))
			txs[i] = &c
		}
		errs := atOnce(n, func(i int) error {
			return s.Commit(t.Context(), &instore.Change{T: txs[i], From: from})
		})
		winner := exactlyOne(t, "concurrent Commit(same version)", errs)
		if winner < 0 {
			return
		}
		for i, c := range txs {
			want := from
			if i == winner {
				want = from + 1
			}
			if c.Version != want {
				t.Errorf("writer %d: Version = %d after Commit, want %d", i, c.Version, want)
			}
		}
		got := mustTransaction(t, s, tx.ID)
		if got.Version != from+1 {
			t.Errorf("stored Version = %d after concurrent updates, want %d", got.Version, from+1)
		}
		if d := diff(asStored(txs[winner]), got); d != "" {
			t.Errorf("stored transaction is not the winner's (-want +got):\n%s", d)
		}
	}},
	{"Pending", func(t *testing.T, s instore.Store) {
		checkAll(t, "PendingTransactions", s.PendingTransactions)
		a := seed(t, s)
		b := seedTerminal(t, s, "SN-2")
		c := seedTerminal(t, s, "SN-3")
		mustCreateTransaction(t, s, newTransaction("txn_a0", "mer_1", a, "SN-1", instore.StatusApproved, at(0)))
		pa := mustCreateTransaction(t, s, newTransaction("txn_a1", "mer_1", a, "SN-1", instore.StatusPending, at(5)))
		pb := mustCreateTransaction(t, s, newTransaction("txn_b1", "mer_1", b, "SN-2", instore.StatusPending, at(2)))
		pc := mustCreateTransaction(t, s, newTransaction("txn_c1", "mer_1", c, "SN-3", instore.StatusPending, at(2)))
		mustCreateTransaction(t, s, newTransaction("txn_c0", "mer_1", c, "SN-3", instore.StatusTerminalIsOffline, at(1)))
		checkAll(t, "PendingTransactions", s.PendingTransactions, pb, pc, pa)
		for _, p := range []*instore.Transaction{pa, pb, pc} {
			active, err := s.ActiveTransaction(t.Context(), p.TerminalID)
			if err != nil {
				t.Fatalf("ActiveTransaction(%q) = %v", p.TerminalID, err)
			}
			if d := diff(asStored(p), active); d != "" {
				t.Errorf("ActiveTransaction(%q) mismatch (-want +got):\n%s", p.TerminalID, d)
			}
		}

		// A transaction that ends leaves both lists.
		pb.StatusID, pb.Progress = instore.StatusTerminalIsOffline, instore.ProgressFinal
		mustUpdateTransaction(t, s, pb, pb.Version)
		checkMissing(t, "ActiveTransaction(after the transaction ended)", s.ActiveTransaction, b, b)
		checkAll(t, "PendingTransactions", s.PendingTransactions, pc, pa)
	}},
}

// exactlyOne checks that exactly one of errs is nil and every other one is
// instore.ErrConflict, and returns the index of the nil one (-1 if none).
func exactlyOne(t *testing.T, op string, errs []error) int {
	t.Helper()
	return exactlyOneOr(t, op, errs, instore.ErrConflict)
}

// exactlyOneOr is exactlyOne where the others are errors.Is lost.
func exactlyOneOr(t *testing.T, op string, errs []error, lost error) int {
	t.Helper()
	winner, wins := -1, 0
	for i, err := range errs {
		switch {
		case err == nil:
			winner, wins = i, wins+1
		case !errors.Is(err, lost):
			t.Errorf("%s #%d = %v, want nil or %q", op, i, err, lost)
		}
	}
	if wins != 1 {
		t.Errorf("%s: %d of %d succeeded, want exactly 1 (the others %q)", op, wins, len(errs), lost)
		return -1
	}
	return winner
}
