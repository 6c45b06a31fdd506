package protocol

import (
	"strings"
	"testing"
	"time"

	"github.com/instore-dev/instore"
)

// FuzzTextRule: the Online API accepts an ecrReference or a print line
// exactly when the protocol carries it to the terminal. A request the API
// accepted and the protocol then refused left a TECHNICAL_ERROR
// transaction behind.
func FuzzTextRule(f *testing.F) {
	for _, s := range []string{"", "order 4711", "Bord 7 – smörgås", "a\tb", "a\x00b", "a\nb", "\x7f", "\u0085", "\u2028",
		"\xff", "\xc0\x80", "\xed\xa0\x80", "\uFFFD", strings.Repeat("é", 64), strings.Repeat("é", 65), strings.Repeat("😀", 65)} {
		f.Add(s)
	}
	amount := int64(100)
	f.Fuzz(func(t *testing.T, s string) {
		purchase := &instore.PurchaseRequest{TerminalID: "10000001", Amount: &amount, Currency: "SEK", ECRReference: s}
		payment := &Payment{Amount: amount, Currency: "SEK", ECRReference: s, Deadline: time.Unix(0, 0)}
		if api, proto := purchase.Validate() == nil, payment.Validate() == nil; api != proto {
			t.Errorf("ecrReference %q: API accepts %v, protocol accepts %v", s, api, proto)
		}
		req := &instore.PrintRequest{TerminalID: "10000001", Lines: []string{s}}
		print := &Print{Lines: []string{s}}
		if api, proto := req.Validate() == nil, print.Validate() == nil; api != proto {
			t.Errorf("print line %q: API accepts %v, protocol accepts %v", s, api, proto)
		}
	})
}
