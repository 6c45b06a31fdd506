package instore_test

import (
	"testing"
	"time"

	"github.com/instore-dev/instore"
)

// TestCheckOnPreAuth runs the rule of what acts on a pre-auth, and of the
// refunds and reversals of one (CheckOnOriginal), over every case they
// decide, with no store: the pre-auth's own state, then the other
// transactions that name it.
func TestCheckOnPreAuth(t *testing.T) {
	expires := time.Date(2026, 3, 8, 12, 0, 0, 0, time.UTC)
	preAuth := func(status instore.TransactionStatus, state instore.AuthorizationState, captured int64) *instore.Transaction {
		p := &instore.Transaction{ID: "txn_p", Type: instore.TypePreAuth, StatusID: status, Amount: 10000}
		if state != "" {
			p.Authorization = &instore.Authorization{State: state, AuthorizedAmount: 10000, CapturedAmount: captured, ExpiresAt: expires}
		}
		return p
	}
	open, captured := preAuth(instore.StatusApproved, instore.AuthOpen, 0), preAuth(instore.StatusApproved, instore.AuthCaptured, 9000)
	purchase := &instore.Transaction{ID: "txn_p", Type: instore.TypePurchase, StatusID: instore.StatusApproved, Amount: 10000}
	other := func(id string, typ instore.TransactionType, status instore.TransactionStatus, amount int64) *instore.Transaction {
		return &instore.Transaction{ID: id, Type: typ, OriginalID: "txn_p", StatusID: status, Amount: amount}
	}
	on := func(typ instore.TransactionType, amount, tip int64) *instore.Transaction {
		return &instore.Transaction{Type: typ, Amount: amount, TipAmount: tip, OriginalID: "txn_p"}
	}
	at := func(t *instore.Transaction, created time.Time) *instore.Transaction { t.CreatedAt = created; return t }
	pending := func(typ instore.TransactionType) []*instore.Transaction {
		return []*instore.Transaction{other("txn_x", typ, instore.StatusPending, 100)}
	}
	refund := func(amount int64) *instore.Transaction {
		return &instore.Transaction{Type: instore.TypeRefund, Amount: amount}
	}
	// unknownVoid is a VOID the service ended TECHNICAL_ERROR (WP23,
	// WP25 or WP36 alike), with the terminal's late result (result) or
	// none ("").
	unknownVoid := func(result string) []*instore.Transaction {
		v := other("txn_v", instore.TypeVoid, instore.StatusTechnicalError, 10000)
		v.ResultMessageID = result
		return []*instore.Transaction{v}
	}
	largest := preAuth(instore.StatusApproved, instore.AuthOpen, 0)
	largest.Authorization.AuthorizedAmount = instore.MaxAuthorizedAmount
	refunded := []*instore.Transaction{other("txn_r", instore.TypeRefund, instore.StatusApproved, 5000), other("txn_c", instore.TypeCapture, instore.StatusApproved, 9000)}
	for _, tc := range []struct {
		name   string
		pre    *instore.Transaction
		others []*instore.Transaction
		t      *instore.Transaction
		code   string
		detail string
		ref    string
	}{
		{"increment of an open pre-auth", open, nil, on(instore.TypeIncrement, 500, 0), "", "", ""},
		{"void of an open pre-auth", open, nil, on(instore.TypeVoid, 10000, 0), "", "", ""},
		{"capture of all", open, nil, on(instore.TypeCapture, 10000, 0), "", "", ""},
		{"capture up to the tolerance, tip included", open, nil, on(instore.TypeCapture, 10000, 2000), "", "", ""},
		{"capture past the tolerance", open, nil, on(instore.TypeCapture, 10000, 2001), instore.EValidation, "may capture (12000", ""},
		{"capture of a captured pre-auth", captured, nil, on(instore.TypeCapture, 1, 0), instore.EConflict, "is CAPTURED", ""},
		{"increment of a captured pre-auth", captured, nil, on(instore.TypeIncrement, 1, 0), instore.EConflict, "is CAPTURED; only an OPEN one takes an INCREMENT.", ""},
		{"void of a voided pre-auth", preAuth(instore.StatusApproved, instore.AuthVoided, 0), nil, on(instore.TypeVoid, 1, 0), instore.EConflict, "is VOIDED; only an OPEN one takes a VOID.", ""},
		{"void of an expired pre-auth", preAuth(instore.StatusApproved, instore.AuthExpired, 0), nil, on(instore.TypeVoid, 1, 0), instore.EConflict, "is EXPIRED", ""},
		{"capture of a declined pre-auth", preAuth(instore.StatusTransactionDeclined, "", 0), nil, on(instore.TypeCapture, 1, 0), instore.EConflict, "Only an APPROVED", ""},
		{"capture of a purchase", purchase, nil, on(instore.TypeCapture, 1, 0), instore.EConflict, "takes a CAPTURE; the original is a PURCHASE", ""},
		{"capture while a capture is in flight", open, pending(instore.TypeCapture), on(instore.TypeCapture, 1, 0), instore.EConflict, "CAPTURE of the pre-authorisation is in flight", "txn_x"},
		{"increment while a void is in flight", open, pending(instore.TypeVoid), on(instore.TypeIncrement, 1, 0), instore.EConflict, "VOID of the pre-authorisation is in flight", "txn_x"},
		{"void while a capture is in flight", open, pending(instore.TypeCapture), on(instore.TypeVoid, 1, 0), instore.EConflict, "in flight", "txn_x"},
		{"capture while an increment is in flight", open, pending(instore.TypeIncrement), on(instore.TypeCapture, 1, 0), "", "", ""},
		{"capture at its expiry", open, nil, at(on(instore.TypeCapture, 1, 0), expires), instore.EConflict, "expired at 2026-03-08T12:00:00Z", ""},
		{"increment after its expiry", open, nil, at(on(instore.TypeIncrement, 1, 0), expires.Add(time.Hour)), instore.EConflict, "expired", ""},
		{"capture just before its expiry", open, nil, at(on(instore.TypeCapture, 1, 0), expires.Add(-time.Microsecond)), "", "", ""},
		{"the expiry's void", open, nil, at(on(instore.TypeVoid, 10000, 0), expires), "", "", ""},
		{"a void of an older authorized amount", open, nil, on(instore.TypeVoid, 9000, 0), instore.EConflict, "changed to 10000", ""},
		{"capture after a declined capture", open, []*instore.Transaction{other("txn_x", instore.TypeCapture, instore.StatusTransactionDeclined, 1)},
			on(instore.TypeCapture, 1, 0), "", "", ""},
		// A VOID whose outcome is unknown may still release the hold: no
		// increment or capture, another void; one the terminal answered
		// (its result kept) blocks nothing.
		{"capture after a void whose outcome is unknown", open, unknownVoid(""), on(instore.TypeCapture, 1, 0), instore.EConflict, "outcome unknown", "txn_v"},
		{"increment after a void whose outcome is unknown", open, unknownVoid(""), on(instore.TypeIncrement, 1, 0), instore.EConflict, "takes no INCREMENT", "txn_v"},
		{"void after a void whose outcome is unknown", open, unknownVoid(""), on(instore.TypeVoid, 10000, 0), "", "", ""},
		{"capture after an unknown void the terminal declined late", open, unknownVoid("m-late"), on(instore.TypeCapture, 1, 0), "", "", ""},
		{"capture after an unknown capture", open, []*instore.Transaction{other("txn_x", instore.TypeCapture, instore.StatusTechnicalError, 1)},
			on(instore.TypeCapture, 1, 0), "", "", ""},
		// The authorised amount stays within MaxAuthorizedAmount, so that its
		// VOID fits the protocol's frame.
		{"increment up to the largest authorized amount", open, nil, on(instore.TypeIncrement, instore.MaxAuthorizedAmount-10000, 0), "", "", ""},
		{"increment past the largest authorized amount", open, nil, on(instore.TypeIncrement, instore.MaxAuthorizedAmount-10000+1, 0), instore.EValidation, "increased by (199989998", ""},
		{"increment of a pre-auth at the largest authorized amount", largest, nil, on(instore.TypeIncrement, 1, 0), instore.EValidation, "increased by (0", ""},
		// Refunds and reversals of a pre-auth (CheckOnOriginal).
		{"refund of a captured pre-auth", captured, nil, refund(9000), "", "", ""},
		{"refund past the captured amount", captured, nil, refund(9001), instore.EValidation, "captured amount (9000)", ""},
		{"refund past what is left", captured, refunded, refund(4001), instore.EValidation, "captured amount (4000)", ""},
		{"refund of an open pre-auth", open, nil, refund(1), instore.EConflict, "Only a CAPTURED pre-authorisation", ""},
		{"reversal of an open pre-auth", open, nil, &instore.Transaction{Type: instore.TypeReversal}, instore.ENotReversible, "never reversed", ""},
		{"reversal of a captured pre-auth", captured, nil, &instore.Transaction{Type: instore.TypeReversal}, instore.ENotReversible, "never reversed", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := instore.CheckOnOriginal(tc.pre, tc.others, tc.t)
			if instore.OnPreAuth(tc.t.Type) {
				err = instore.CheckOnPreAuth(tc.pre, tc.others, tc.t, instore.DefaultCaptureTolerance)
			}
			wantProblem(t, err, tc.code, tc.detail, tc.ref)
		})
	}
	if err := instore.CheckOnPreAuth(open, nil, refund(1), 0.2); err == nil {
		t.Errorf("CheckOnPreAuth(a refund) = nil, want an error")
	}
	if got := instore.CaptureLimit(999, 0.2); got != 1198 {
		t.Errorf("CaptureLimit(999, 0.2) = %d, want 1198", got)
	}
}
