package client_test

import (
	"testing"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/client"
)

// exercisePreAuth drives a hotel stay against the demo: a pre-authorisation,
// an increment, a capture with a tip, the listing of captured pre-auths and
// a refund of part of the capture; a void of another one.
func exercisePreAuth(t *testing.T, e *itEnv) {
	ctx, c, term := e.onFirstTerminal(t)
	// final follows the operation name started to its approval.
	final := func(name string) func(*client.Transaction, error) *client.Transaction {
		return func(tx *client.Transaction, err error) *client.Transaction {
			t.Helper()
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			f, err := c.WaitForFinal(ctx, tx.OnlineAPIRefID, nil)
			if err != nil || !f.Approved() {
				t.Fatalf("%s: %v %+v", name, err, f)
			}
			return f
		}
	}
	pre := final("Preauthorize")(c.Preauthorize(ctx, client.PreAuthParams{TerminalID: term, Amount: 40000, Currency: "SEK", ECRReference: "ROOM-12"}))
	if !pre.PreAuthOpen() {
		t.Fatalf("pre-auth: %+v", pre.Authorization)
	}
	final("Increment")(c.Increment(ctx, client.IncrementParams{OnlineAPIRefID: pre.OnlineAPIRefID, Amount: 10000}))
	capture := final("Capture")(c.Capture(ctx, client.CaptureParams{OnlineAPIRefID: pre.OnlineAPIRefID, Amount: 52000, TipAmount: 2000}))
	if capture.TotalAmount != 52000 || capture.TipAmount != 2000 {
		t.Errorf("capture: totalAmount %d, tipAmount %d", capture.TotalAmount, capture.TipAmount)
	}
	page, err := c.Transactions(ctx, client.ListParams{Types: []instore.TransactionType{instore.TypePreAuth}, AuthorizationState: instore.AuthCaptured})
	if err != nil || len(page.Transactions) == 0 || page.Transactions[0].OnlineAPIRefID != pre.OnlineAPIRefID ||
		page.Transactions[0].Authorization.CapturedAmount != 52000 {
		t.Errorf("Transactions(captured pre-auths): %v %+v", err, page)
	}
	final("Refund")(c.Refund(ctx, client.RefundParams{TerminalID: term, Amount: 12000, Currency: "SEK", OriginalOnlineAPIRefID: pre.OnlineAPIRefID}))

	other := final("Preauthorize")(c.Preauthorize(ctx, client.PreAuthParams{TerminalID: term, Amount: 20000, Currency: "SEK"}))
	final("Void")(c.Void(ctx, client.VoidParams{OnlineAPIRefID: other.OnlineAPIRefID}))
	if got, err := c.Transaction(ctx, other.OnlineAPIRefID, 0); err != nil || got.Authorization == nil || got.Authorization.State != instore.AuthVoided {
		t.Errorf("after the void: %v %+v", err, got)
	}
}
