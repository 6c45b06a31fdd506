package instore_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/instore-dev/instore"
)

// TestCheckOnOriginal runs the money rule over every case it decides, with
// no store: the original's own state, then the other refunds and
// reversals of it. want is the problem's code ("" allowed) and a part of
// its detail (or of the field's message for an amount over what is left).
func TestCheckOnOriginal(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	deadline := t0.Add(time.Minute)
	approved := &instore.Transaction{ID: "txn_o", Type: instore.TypePurchase, StatusID: instore.StatusApproved, Amount: 1000}
	withCashback := &instore.Transaction{ID: "txn_o", Type: instore.TypePurchase, StatusID: instore.StatusApproved, Amount: 1000, CashbackAmount: 300}
	promptTip := &instore.Tip{Mode: instore.TipPrompt, Suggestions: []int{10}}
	withTip := &instore.Transaction{ID: "txn_o", Type: instore.TypePurchase, StatusID: instore.StatusApproved, Amount: 1000, Tip: promptTip, TipAmount: 150}
	withTipAndCashback := &instore.Transaction{ID: "txn_o", Type: instore.TypePurchase, StatusID: instore.StatusApproved, Amount: 1000,
		CashbackAmount: 300, Tip: promptTip, TipAmount: 70}
	unconfirmed := &instore.Transaction{ID: "txn_o", Type: instore.TypePurchase, StatusID: instore.StatusApproved, Amount: 1000,
		ConfirmState: instore.ConfirmPending, ConfirmDeadline: &deadline}
	confirmed := &instore.Transaction{ID: "txn_o", Type: instore.TypePurchase, StatusID: instore.StatusApproved, Amount: 1000,
		ConfirmState: instore.ConfirmConfirmed, ConfirmDeadline: &deadline}
	declined := &instore.Transaction{ID: "txn_o", Type: instore.TypePurchase, StatusID: instore.StatusTransactionDeclined, Amount: 1000}
	reversed := &instore.Transaction{ID: "txn_o", Type: instore.TypePurchase, StatusID: instore.StatusReversed, Amount: 1000}
	aRefund := &instore.Transaction{ID: "txn_o", Type: instore.TypeRefund, StatusID: instore.StatusApproved, Amount: 1000}
	other := func(id string, typ instore.TransactionType, status instore.TransactionStatus, amount int64, message string) *instore.Transaction {
		return &instore.Transaction{ID: id, Type: typ, OriginalID: "txn_o", StatusID: status, Amount: amount, ResultMessageID: message}
	}
	// priorReversal and priorRefund are an earlier reversal (txn_v, of the
	// whole amount) or refund (txn_r, of 1) of the original, the only one.
	priorReversal := func(status instore.TransactionStatus, message string) []*instore.Transaction {
		return []*instore.Transaction{other("txn_v", instore.TypeReversal, status, 1000, message)}
	}
	priorRefund := func(status instore.TransactionStatus, message string) []*instore.Transaction {
		return []*instore.Transaction{other("txn_r", instore.TypeRefund, status, 1, message)}
	}
	refund := func(amount int64) *instore.Transaction {
		return &instore.Transaction{Type: instore.TypeRefund, Amount: amount}
	}
	reversal := &instore.Transaction{Type: instore.TypeReversal, Amount: 1000}
	for _, tc := range []struct {
		name   string
		orig   *instore.Transaction
		others []*instore.Transaction
		t      *instore.Transaction
		code   string
		detail string
		ref    string // the problem's onlineAPIRefId
	}{
		// Refunds.
		{"refund of an approved purchase", approved, nil, refund(1000), "", "", ""},
		{"refund of a declined purchase", declined, nil, refund(1), instore.EConflict, "Only an APPROVED purchase can be refunded", ""},
		{"refund of a reversed purchase", reversed, nil, refund(1), instore.EConflict, "Only an APPROVED purchase can be refunded", ""},
		{"refund of a refund", aRefund, nil, refund(1), instore.EConflict, "the original is a REFUND", ""},
		{"refund of an unconfirmed sale", unconfirmed, nil, refund(1), instore.EConflict, "awaits confirmation", ""},
		{"refund of a confirmed sale", confirmed, nil, refund(1000), "", "", ""},
		{"refund while a reversal is pending", approved, priorReversal(instore.StatusPending, ""), refund(1), instore.EConflict, "being reversed (reversal txn_v)", "txn_v"},
		{"refund after an approved reversal", approved, priorReversal(instore.StatusApproved, "m"), refund(1), instore.EConflict, "being reversed", "txn_v"},
		{"refund after a reversal ended without a result", approved, priorReversal(instore.StatusTechnicalError, ""), refund(1), instore.EConflict, "being reversed", "txn_v"},
		{"refund after a reversal that failed with a result", approved, priorReversal(instore.StatusTechnicalError, "m"), refund(1000), "", "", ""},
		{"refund after a declined reversal", approved, priorReversal(instore.StatusTransactionDeclined, "m"), refund(1000), "", "", ""},
		{"refund of what is left", approved, []*instore.Transaction{other("txn_r1", instore.TypeRefund, instore.StatusApproved, 600, "m"),
			other("txn_r2", instore.TypeRefund, instore.StatusPending, 300, "")}, refund(100), "", "", ""},
		{"refund past what is left", approved, []*instore.Transaction{other("txn_r1", instore.TypeRefund, instore.StatusApproved, 600, "m"),
			other("txn_r2", instore.TypeRefund, instore.StatusPending, 300, "")}, refund(101), instore.EValidation, "exceeds what is left to refund of the original (100)", ""},
		{"failed refunds do not count", approved, []*instore.Transaction{other("txn_r1", instore.TypeRefund, instore.StatusTransactionDeclined, 600, "m"),
			other("txn_r2", instore.TypeRefund, instore.StatusTechnicalError, 400, "")}, refund(1000), "", "", ""},
		{"refund of the cashback", withCashback, nil, refund(701), instore.EValidation, "(700; its cashback of 300 is not refundable)", ""},
		{"refund of the goods' part", withCashback, nil, refund(700), "", "", ""},
		{"refund of the amount and the tip", withTip, nil, refund(1150), "", "", ""},
		{"refund past the amount and the tip", withTip, nil, refund(1151), instore.EValidation, "exceeds what is left to refund of the original (1150)", ""},
		{"refund of the tip left", withTip, []*instore.Transaction{other("txn_r1", instore.TypeRefund, instore.StatusApproved, 1000, "m")},
			refund(150), "", "", ""},
		{"refund past the tip left", withTip, []*instore.Transaction{other("txn_r1", instore.TypeRefund, instore.StatusApproved, 1000, "m")},
			refund(151), instore.EValidation, "(150)", ""},
		{"refund of the total less the cashback", withTipAndCashback, nil, refund(770), "", "", ""},
		{"refund of the total with the cashback", withTipAndCashback, nil, refund(771), instore.EValidation, "(770; its cashback of 300 is not refundable)", ""},
		// Reversals.
		{"reversal of an approved purchase", approved, nil, reversal, "", "", ""},
		{"reversal of a refund", aRefund, nil, reversal, instore.ENotReversible, "Only a purchase can be reversed; this is a REFUND", ""},
		{"reversal of a reversed purchase", reversed, nil, reversal, instore.ENotReversible, "already reversed", ""},
		{"reversal of a declined purchase", declined, nil, reversal, instore.ENotReversible, "ended in status 11", ""},
		{"reversal of an unconfirmed sale", unconfirmed, nil, reversal, instore.ENotReversible, "awaits confirmation", ""},
		{"reversal of a confirmed sale", confirmed, nil, reversal, "", "", ""},
		{"reversal of a sale with cashback", withCashback, nil, reversal, "", "", ""},
		{"reversal of a sale with a tip", withTip, nil, reversal, "", "", ""},
		{"reversal after an approved refund", approved, priorRefund(instore.StatusApproved, "m"), reversal, instore.ENotReversible, "has a refund that is approved or pending (txn_r)", "txn_r"},
		{"reversal after a pending refund", approved, priorRefund(instore.StatusPending, ""), reversal, instore.ENotReversible, "has a refund", "txn_r"},
		{"reversal after a declined refund", approved, priorRefund(instore.StatusTransactionDeclined, "m"), reversal, "", "", ""},
		{"reversal after a refund ended without a result", approved, priorRefund(instore.StatusTechnicalError, ""), reversal, "", "", ""},
		{"reversal while another is pending", approved, priorReversal(instore.StatusPending, ""), reversal, instore.ENotReversible, "being reversed already (reversal txn_v)", "txn_v"},
		{"reversal after an approved one", approved, priorReversal(instore.StatusApproved, "m"), reversal, instore.ENotReversible, "being reversed already", "txn_v"},
		{"reversal after one ended without a result", approved, priorReversal(instore.StatusTechnicalError, ""), reversal, "", "", ""},
		{"reversal after a declined one", approved, priorReversal(instore.StatusTransactionDeclined, "m"), reversal, "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := instore.CheckOnOriginal(tc.orig, tc.others, tc.t)
			if e := wantProblem(t, err, tc.code, tc.detail, tc.ref); e != nil && len(e.Fields) > 0 && !errors.Is(err, instore.ErrRefundExceeded) {
				t.Errorf("%v, want ErrRefundExceeded", err)
			}
		})
	}
	if err := instore.CheckOnOriginal(approved, nil, &instore.Transaction{Type: instore.TypePurchase}); err == nil {
		t.Errorf("CheckOnOriginal(a purchase) = nil, want an error: a purchase has no original")
	}
}

// TestCheckReversalLatest: a purchase is reversible only while it is the
// latest transaction of its terminal; its own earlier reversals aside.
func TestCheckReversalLatest(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	orig := &instore.Transaction{ID: "txn_5", Type: instore.TypePurchase, StatusID: instore.StatusApproved, CreatedAt: t0}
	tx := func(id string, typ instore.TransactionType, original string, at time.Time) *instore.Transaction {
		return &instore.Transaction{ID: id, Type: typ, OriginalID: original, CreatedAt: at}
	}
	later, same := t0.Add(time.Millisecond), t0
	for _, tc := range []struct {
		name    string
		newer   []*instore.Transaction
		refused bool
	}{
		{"nothing newer", nil, false},
		{"the original alone", []*instore.Transaction{orig}, false},
		{"its failed reversal", []*instore.Transaction{tx("txn_6", instore.TypeReversal, "txn_5", later), orig}, false},
		{"a newer purchase", []*instore.Transaction{tx("txn_7", instore.TypePurchase, "", later), orig}, true},
		{"a newer refund of it", []*instore.Transaction{tx("txn_7", instore.TypeRefund, "txn_5", later)}, true},
		{"a newer reversal of another", []*instore.Transaction{tx("txn_7", instore.TypeReversal, "txn_1", later)}, true},
		{"a newer one after its reversal", []*instore.Transaction{tx("txn_8", instore.TypePurchase, "", later.Add(time.Second)),
			tx("txn_6", instore.TypeReversal, "txn_5", later), orig}, true},
		{"the same time, a greater id", []*instore.Transaction{tx("txn_6", instore.TypePurchase, "", same), orig}, true},
		{"the same time, a smaller id", []*instore.Transaction{orig, tx("txn_4", instore.TypePurchase, "", same)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := instore.CheckReversalLatest(orig, tc.newer)
			if !tc.refused {
				if err != nil {
					t.Fatalf("CheckReversalLatest = %v, want nil", err)
				}
				return
			}
			var e *instore.Error
			if !errors.As(err, &e) || e.Code != instore.ENotReversible ||
				e.Detail != "Only the latest transaction of a terminal can be reversed; a newer one exists on this terminal. Refund it instead." {
				t.Fatalf("CheckReversalLatest = %v, want not-reversible, only the latest", err)
			}
		})
	}
	f := instore.NewerOnTerminal(&instore.Transaction{MerchantID: "mer_1", TerminalID: "10000001", CreatedAt: t0}, t0.Add(time.Hour))
	if f.MerchantID != "mer_1" || f.TerminalID != "10000001" || !f.From.Equal(t0) || !f.To.Equal(t0.Add(time.Hour)) || f.Limit != instore.MaxNewerChecked {
		t.Errorf("NewerOnTerminal = %+v", f)
	}
}

// wantProblem checks that err is nil when code is "", and otherwise the
// problem code with detail in its detail (or, when it names a field, in
// the field's message, the field /amount) and ref as its onlineAPIRefId;
// it returns the problem.
func wantProblem(t *testing.T, err error, code, detail, ref string) *instore.Error {
	t.Helper()
	if code == "" {
		if err != nil {
			t.Fatalf("err = %v, want nil", err)
		}
		return nil
	}
	var e *instore.Error
	if !errors.As(err, &e) || e.Code != code {
		t.Fatalf("err = %v, want %s", err, code)
	}
	text := e.Detail
	if len(e.Fields) > 0 {
		text = e.Fields[0].Message
		if e.Fields[0].Field != "/amount" {
			t.Errorf("fields %+v, want /amount", e.Fields)
		}
	}
	if !strings.Contains(text, detail) || e.OnlineAPIRefID != ref {
		t.Errorf("problem %q ref %q, want %q ref %q", text, e.OnlineAPIRefID, detail, ref)
	}
	return e
}

// TestCheckOnOriginalForwarding runs the money rule of offline approvals
// over every forwarding state, for a refund and a reversal: only a sale
// forwarded and accepted by the issuer (or one that was never offline)
// may be paid back.
func TestCheckOnOriginalForwarding(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	sale := func(state instore.ForwardingState) *instore.Transaction {
		o := &instore.Transaction{ID: "txn_o", Type: instore.TypePurchase, StatusID: instore.StatusApproved, Amount: 1000,
			Result: &instore.Result{Offline: state != ""}}
		if state != "" {
			o.Forwarding = &instore.Forwarding{State: state}
			if state != instore.ForwardQueued {
				o.Forwarding.ForwardedAt = &at
			}
		}
		return o
	}
	refund := &instore.Transaction{Type: instore.TypeRefund, Amount: 400}
	reversal := &instore.Transaction{Type: instore.TypeReversal, Amount: 1000}
	for _, tc := range []struct {
		state  instore.ForwardingState
		t      *instore.Transaction
		code   string
		detail string
	}{
		{"", refund, "", ""},
		{"", reversal, "", ""},
		{instore.ForwardQueued, refund, instore.EConflict, "still queued on its terminal (forwarding QUEUED): the issuer may yet decline it, so it cannot be refunded"},
		{instore.ForwardQueued, reversal, instore.ENotReversible, "cannot be reversed until it is FORWARDED"},
		{instore.ForwardForwarded, refund, "", ""},
		{instore.ForwardForwarded, reversal, "", ""},
		{instore.ForwardDeclined, refund, instore.EConflict, "the issuer declined it when the terminal forwarded it: the merchant was not paid, so it cannot be refunded"},
		{instore.ForwardDeclined, reversal, instore.ENotReversible, "the merchant was not paid, so it cannot be reversed"},
	} {
		name := string(tc.state)
		if name == "" {
			name = "online"
		}
		t.Run(name+" "+string(tc.t.Type), func(t *testing.T) {
			err := instore.CheckOnOriginal(sale(tc.state), nil, tc.t)
			if tc.code == "" {
				if err != nil {
					t.Fatalf("CheckOnOriginal = %v, want allowed", err)
				}
				return
			}
			var e *instore.Error
			if !errors.As(err, &e) || e.Code != tc.code || !strings.Contains(e.Detail, tc.detail) {
				t.Fatalf("CheckOnOriginal = %v, want %s with %q", err, tc.code, tc.detail)
			}
			if instore.HTTPStatus(e.Code) != 409 {
				t.Errorf("status %d, want 409", instore.HTTPStatus(e.Code))
			}
		})
	}
}

// TestCheckHeldByDevice: a reversal, or an operation on a pre-auth, goes
// only to the device that made the original: its terminal ID linked to
// another device since is refused (not-reversible for a sale, conflict for
// a pre-auth); a transaction stored before devices were recorded (no
// serial) is taken.
func TestCheckHeldByDevice(t *testing.T) {
	sale := &instore.Transaction{ID: "txn_1", Type: instore.TypePurchase, SerialNumber: "SN-A"}
	pre := &instore.Transaction{ID: "txn_2", Type: instore.TypePreAuth, SerialNumber: "SN-A"}
	old := &instore.Transaction{ID: "txn_3", Type: instore.TypePurchase}
	for _, tc := range []struct {
		name   string
		orig   *instore.Transaction
		serial string
		code   string
	}{
		{"a sale on its device", sale, "SN-A", ""},
		{"a sale, the ID linked to another device", sale, "SN-B", instore.ENotReversible},
		{"a pre-auth on its device", pre, "SN-A", ""},
		{"a pre-auth, the ID linked to another device", pre, "SN-B", instore.EConflict},
		{"no device recorded", old, "SN-B", ""},
	} {
		err := instore.CheckHeldByDevice(tc.orig, tc.serial)
		var e *instore.Error
		switch {
		case tc.code == "" && err != nil:
			t.Errorf("%s: %v, want it taken", tc.name, err)
		case tc.code != "" && (!errors.As(err, &e) || e.Code != tc.code):
			t.Errorf("%s: %v, want %s", tc.name, err, tc.code)
		}
	}
}
