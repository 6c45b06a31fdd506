package instore_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/apitest"
)

func ptr[T any](v T) *T { return &v }

// TestCheckTip: a purchase's tip, each mode and every way to get it wrong,
// answered with the field that is wrong; a refund takes none.
func TestCheckTip(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tip    *instore.Tip
		fields []string
	}{
		{"none", nil, nil},
		{"prompt", &instore.Tip{Mode: instore.TipPrompt, Suggestions: []int{10, 15, 20}}, nil},
		{"prompt of one", &instore.Tip{Mode: instore.TipPrompt, Suggestions: []int{100}}, nil},
		{"prompt of none", &instore.Tip{Mode: instore.TipPrompt}, []string{"/tip/suggestions"}},
		{"prompt of four", &instore.Tip{Mode: instore.TipPrompt, Suggestions: []int{5, 10, 15, 20}}, []string{"/tip/suggestions"}},
		{"prompt of 0 and 101", &instore.Tip{Mode: instore.TipPrompt, Suggestions: []int{0, 10, 101}}, []string{"/tip/suggestions/0", "/tip/suggestions/2"}},
		{"prompt repeated", &instore.Tip{Mode: instore.TipPrompt, Suggestions: []int{10, 10}}, []string{"/tip/suggestions/1"}},
		{"prompt with an amount", &instore.Tip{Mode: instore.TipPrompt, Suggestions: []int{10}, Amount: ptr(int64(1))}, []string{"/tip/amount"}},
		{"enter total", &instore.Tip{Mode: instore.TipEnterTotal}, nil},
		{"enter total with suggestions", &instore.Tip{Mode: instore.TipEnterTotal, Suggestions: []int{10}}, []string{"/tip/suggestions"}},
		{"fixed", &instore.Tip{Mode: instore.TipFixed, Amount: ptr(int64(150))}, nil},
		{"fixed 0", &instore.Tip{Mode: instore.TipFixed, Amount: ptr(int64(0))}, nil},
		{"fixed equal to the amount", &instore.Tip{Mode: instore.TipFixed, Amount: ptr(int64(1000))}, nil},
		{"fixed above the amount", &instore.Tip{Mode: instore.TipFixed, Amount: ptr(int64(1001))}, []string{"/tip/amount"}},
		{"fixed negative", &instore.Tip{Mode: instore.TipFixed, Amount: ptr(int64(-1))}, []string{"/tip/amount"}},
		{"fixed above the limit", &instore.Tip{Mode: instore.TipFixed, Amount: ptr(int64(instore.MaxAmount + 1))}, []string{"/tip/amount"}},
		{"fixed without an amount", &instore.Tip{Mode: instore.TipFixed}, []string{"/tip/amount"}},
		{"no mode", &instore.Tip{}, []string{"/tip/mode"}},
		{"unknown mode", &instore.Tip{Mode: "ASK"}, []string{"/tip/mode"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := &instore.PurchaseRequest{TerminalID: "10000001", Amount: ptr(int64(1000)), Currency: "SEK", Tip: tc.tip}
			if diff := cmp.Diff(tc.fields, apitest.FieldsOf(t, req.Validate())); diff != "" {
				t.Errorf("fields (-want +got):\n%s", diff)
			}
		})
	}
	refund := &instore.RefundRequest{TerminalID: "10000001", Amount: ptr(int64(1000)), Currency: "SEK",
		Tip: &instore.Tip{Mode: instore.TipEnterTotal}}
	if diff := cmp.Diff([]string{"/tip"}, apitest.FieldsOf(t, refund.Validate())); diff != "" {
		t.Errorf("a refund's tip: fields (-want +got):\n%s", diff)
	}
}

// TestCheckTipAmount: the tip a terminal reports charged, against what the
// transaction asked for.
func TestCheckTipAmount(t *testing.T) {
	purchase := func(tip *instore.Tip) *instore.Transaction {
		return &instore.Transaction{Type: instore.TypePurchase, Amount: 1000, Tip: tip}
	}
	prompt := purchase(&instore.Tip{Mode: instore.TipPrompt, Suggestions: []int{10}})
	fixed := purchase(&instore.Tip{Mode: instore.TipFixed, Amount: ptr(int64(150))})
	fixed0 := purchase(&instore.Tip{Mode: instore.TipFixed, Amount: ptr(int64(0))})
	for _, tc := range []struct {
		name   string
		t      *instore.Transaction
		status instore.TransactionStatus
		tip    int64
		ok     bool
	}{
		{"no tip asked, none charged", purchase(nil), instore.StatusApproved, 0, true},
		{"no tip asked, one charged", purchase(nil), instore.StatusApproved, 1, false},
		{"prompt, a tip", prompt, instore.StatusApproved, 100, true},
		{"prompt, no tip", prompt, instore.StatusApproved, 0, true},
		{"prompt, the amount", prompt, instore.StatusApproved, 1000, true},
		{"prompt, above the amount", prompt, instore.StatusApproved, 1001, false},
		{"prompt, negative", prompt, instore.StatusApproved, -1, false},
		{"prompt, declined with a tip", prompt, instore.StatusTransactionDeclined, 100, false},
		{"prompt, declined without", prompt, instore.StatusTransactionDeclined, 0, true},
		{"fixed, the tip", fixed, instore.StatusApproved, 150, true},
		{"fixed, another tip", fixed, instore.StatusApproved, 149, false},
		{"fixed, no tip", fixed, instore.StatusApproved, 0, false},
		{"fixed, declined", fixed, instore.StatusTransactionDeclined, 0, true},
		{"fixed 0", fixed0, instore.StatusApproved, 0, true},
	} {
		err := instore.CheckTipAmount(tc.t, tc.status, tc.tip)
		if (err == nil) != tc.ok || err != nil && !errors.Is(err, instore.ErrTipRefused) {
			t.Errorf("%s: CheckTipAmount = %v, want ok %v", tc.name, err, tc.ok)
		}
	}
	if got := instore.TipOfPercent(1250, 0, 15); got != 188 { // 187.5 rounds up
		t.Errorf("15%% of 1250 = %d, want 188", got)
	}
	if got := instore.TipOfPercent(1300, 300, 10); got != 100 { // of the amount less the cashback
		t.Errorf("10%% of 1300 less 300 = %d, want 100", got)
	}
}
