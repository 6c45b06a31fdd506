package sandbox_test

import (
	"strings"
	"testing"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/testwait"
)

// TestConsoleOutcomeDecidesItsTransactionOnly: an outcome click that
// names the transaction the screen showed waiting (deciding) decides that
// one; a second click, or one after it ended, is refused (409) and never
// becomes the next sale's outcome. Without a name a click still sets the
// next outcome when nothing waits.
func TestConsoleOutcomeDecidesItsTransactionOnly(t *testing.T) {
	a, info, ch, counter := startWatched(t)
	sale := func() string {
		ref := purchaseOf(t, info, map[string]any{"terminalId": counter.TerminalID, "amount": 2000, "currency": "SEK"})
		next(t, ch, "device", func(s string) bool { return strings.Contains(s, `"deciding":"`+ref+`"`) })
		return ref
	}
	click := func(action, ref string) int {
		code, _ := consoleAction(t, info, counter.SerialNumber, action+"?onlineAPIRefId="+ref)
		return code
	}
	statusOf := func(ref string) instore.TransactionStatus {
		var tx instore.TransactionWire
		testwait.For(t, ref+" to end", func() bool {
			a.do("GET", "/in-store/api/v1/transaction/"+ref, nil, 200, &tx)
			return tx.StatusID != instore.StatusPending
		})
		return tx.StatusID
	}
	first := sale()
	if code := click("decline", "txn_nope"); code != 409 {
		t.Errorf("a click naming another transaction = %d, want 409", code)
	}
	if code := click("decline", first); code != 200 {
		t.Fatalf("decline = %d", code)
	}
	if code := click("approve", first); code != 409 {
		t.Errorf("a second click = %d, want 409", code)
	}
	if st := statusOf(first); st != instore.StatusTransactionDeclined {
		t.Fatalf("%s ended %d, want DECLINED", first, st)
	}
	if code := click("approve", first); code != 409 {
		t.Errorf("a click after the sale ended = %d, want 409", code)
	}
	// Nothing was kept for the next sale: it waits for a person again.
	second := sale()
	if code := click("wrong-pin", second); code != 200 {
		t.Fatalf("wrong-pin = %d", code)
	}
	if st := statusOf(second); st != instore.StatusWrongPIN {
		t.Errorf("the next sale ended %d, want WRONG_PIN (a refused click kept for it?)", st)
	}
}
