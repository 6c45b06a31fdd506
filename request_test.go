package instore_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/apitest"
)

// TestRequestText: every free-text field of a request refuses what the
// terminal protocol cannot carry (instore.ValidText), so that a request is
// refused before anything is stored instead of ending TECHNICAL_ERROR when
// the command cannot be sent.
func TestRequestText(t *testing.T) {
	amount := int64(100)
	texts := []struct {
		name string
		text string
		ok   bool
	}{
		{"plain", "order 4711", true},
		{"letters", "Bord 7 – smörgås", true},
		{"64 characters", strings.Repeat("é", 64), true},
		{"65 characters", strings.Repeat("a", 65), false},
		{"tab", "order\t4711", false},
		{"NUL", "order\x004711", false},
		{"newline", "order\n", false},
		{"DEL", "order\x7f", false},
		{"C1", "order\u009b", false},
		{"invalid UTF-8", "order\xff", false},
	}
	for _, tt := range texts {
		t.Run(tt.name, func(t *testing.T) {
			reqs := []struct {
				name  string
				req   interface{ Validate() error }
				field string
			}{
				{"purchase", &instore.PurchaseRequest{TerminalID: "10000001", Amount: &amount, Currency: "SEK", ECRReference: tt.text}, "/ecrReference"},
				{"refund", &instore.RefundRequest{TerminalID: "10000001", Amount: &amount, Currency: "SEK", ECRReference: tt.text}, "/ecrReference"},
				{"reversal", &instore.ReversalRequest{OnlineAPIRefID: "txn_1", ECRReference: tt.text}, "/ecrReference"},
				{"print", &instore.PrintRequest{TerminalID: "10000001", Lines: []string{"ok", tt.text}}, "/lines/1"},
			}
			for _, r := range reqs {
				var want []string
				if !tt.ok {
					want = []string{r.field}
				}
				if diff := cmp.Diff(want, apitest.FieldsOf(t, r.req.Validate())); diff != "" {
					t.Errorf("%s with %q: Validate fields (-want +got):\n%s", r.name, tt.text, diff)
				}
			}
		})
	}
}

// TestPreAuthOpValidate: the shapes and ranges of an INCREMENT, CAPTURE
// and VOID request, each refused on its field. A capture whose whole
// total is tip is refused: its own amount (the total less the tip) would
// be 0, below every transaction's minimum.
func TestPreAuthOpValidate(t *testing.T) {
	n := func(v int64) *int64 { return &v }
	rows := []struct {
		name   string
		req    instore.PreAuthOpRequest
		fields []string
	}{
		{"increment", instore.PreAuthOpRequest{OnlineAPIRefID: "txn_1", Amount: n(500), Op: instore.TypeIncrement}, nil},
		{"increment without amount", instore.PreAuthOpRequest{OnlineAPIRefID: "txn_1", Op: instore.TypeIncrement}, []string{"/amount"}},
		{"increment of 0", instore.PreAuthOpRequest{OnlineAPIRefID: "txn_1", Amount: n(0), Op: instore.TypeIncrement}, []string{"/amount"}},
		{"increment with a tip", instore.PreAuthOpRequest{OnlineAPIRefID: "txn_1", Amount: n(500), TipAmount: n(1), Op: instore.TypeIncrement}, []string{"/tipAmount"}},
		{"capture", instore.PreAuthOpRequest{OnlineAPIRefID: "txn_1", Amount: n(66000), Op: instore.TypeCapture}, nil},
		{"capture with a tip", instore.PreAuthOpRequest{OnlineAPIRefID: "txn_1", Amount: n(66000), TipAmount: n(1000), Op: instore.TypeCapture}, nil},
		{"capture with a tip of 0", instore.PreAuthOpRequest{OnlineAPIRefID: "txn_1", Amount: n(66000), TipAmount: n(0), Op: instore.TypeCapture}, nil},
		{"capture all but 1 tip", instore.PreAuthOpRequest{OnlineAPIRefID: "txn_1", Amount: n(66000), TipAmount: n(65999), Op: instore.TypeCapture}, nil},
		{"capture all tip", instore.PreAuthOpRequest{OnlineAPIRefID: "txn_1", Amount: n(66000), TipAmount: n(66000), Op: instore.TypeCapture}, []string{"/tipAmount"}},
		{"capture tip above the total", instore.PreAuthOpRequest{OnlineAPIRefID: "txn_1", Amount: n(66000), TipAmount: n(66001), Op: instore.TypeCapture}, []string{"/tipAmount"}},
		{"capture negative tip", instore.PreAuthOpRequest{OnlineAPIRefID: "txn_1", Amount: n(66000), TipAmount: n(-1), Op: instore.TypeCapture}, []string{"/tipAmount"}},
		{"capture above the largest amount", instore.PreAuthOpRequest{OnlineAPIRefID: "txn_1", Amount: n(instore.MaxAmount + 1), Op: instore.TypeCapture}, []string{"/amount"}},
		{"void", instore.PreAuthOpRequest{OnlineAPIRefID: "txn_1", Op: instore.TypeVoid}, nil},
		{"void with an amount", instore.PreAuthOpRequest{OnlineAPIRefID: "txn_1", Amount: n(1), Op: instore.TypeVoid}, []string{"/amount"}},
		{"void without a ref", instore.PreAuthOpRequest{Op: instore.TypeVoid}, []string{"/onlineAPIRefId"}},
	}
	for _, tt := range rows {
		if diff := cmp.Diff(tt.fields, apitest.FieldsOf(t, tt.req.Validate())); diff != "" {
			t.Errorf("%s: Validate fields (-want +got):\n%s", tt.name, diff)
		}
	}
}
