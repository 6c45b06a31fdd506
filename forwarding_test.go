package instore_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/instore-dev/instore"
)

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
