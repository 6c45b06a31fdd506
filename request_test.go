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
