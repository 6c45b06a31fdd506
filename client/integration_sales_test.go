package client_test

// The exercises of TestIntegrationOnlineAPI on how a sale goes: ECR
// confirmation, tips, pre-authorisation and offline approvals.

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/client"
	"github.com/instore-dev/instore/internal/testwait"
)

// exerciseConfirm drives ECR confirmation against the demo: a sale that
// asked for it waits APPROVED and unconfirmed (listed by
// ListParams.Unconfirmed) until Confirm; confirming again answers the
// same; a sale that cannot be confirmed is a typed not-confirmable error.
func exerciseConfirm(t *testing.T, e *itEnv) {
	ctx, c, term := e.onFirstTerminal(t)

	// Where the events are now.
	var cursor string
	for {
		page := mustOK[*client.EventPage](t, "Events")(c.Events(ctx, client.EventQuery{After: cursor, Limit: 500}))
		if len(page.Events) == 0 {
			break
		}
		cursor = page.NextCursor
	}

	if _, err := c.Purchase(ctx, client.PurchaseParams{TerminalID: term, Amount: 100, Currency: "SEK", ConfirmWithinSeconds: 5}); !client.IsCode(err, instore.EValidation) {
		t.Errorf("Purchase with ConfirmWithinSeconds 5 = %v, want validation", err)
	}
	sale := payFinal(t, c, client.PurchaseParams{TerminalID: term, Amount: 4200, Currency: "SEK", ConfirmWithinSeconds: 600})
	if cf := sale.Confirmation; !sale.AwaitsConfirmation() || cf.WithinSeconds != 600 || cf.Deadline == nil || cf.ConfirmedAt != nil {
		t.Fatalf("a sale asking for confirmation ended %s with confirmation %+v, want APPROVED and PENDING with a deadline", sale.Status, cf)
	}
	if !unconfirmed(t, c, sale.OnlineAPIRefID) {
		t.Errorf("Transactions(Unconfirmed) does not list the unconfirmed sale %s", sale.OnlineAPIRefID)
	}
	// A sale that did not ask for confirmation is never listed as one.
	plain := payFinal(t, c, client.PurchaseParams{TerminalID: term, Amount: 4300, Currency: "SEK"})
	if plain.Confirmation != nil || plain.AwaitsConfirmation() {
		t.Errorf("a sale without ConfirmWithinSeconds has confirmation %+v", plain.Confirmation)
	}
	if unconfirmed(t, c, plain.OnlineAPIRefID) {
		t.Errorf("Transactions(Unconfirmed) lists %s, which asked for no confirmation", plain.OnlineAPIRefID)
	}

	var r client.Response
	got := mustOK[*client.Transaction](t, "Confirm")(c.Confirm(ctx, sale.OnlineAPIRefID, client.SaveResponse(&r)))
	if cf := got.Confirmation; !got.Approved() || got.AwaitsConfirmation() || cf == nil || cf.State != instore.ConfirmConfirmed || cf.ConfirmedAt == nil || r.StatusCode != http.StatusOK {
		t.Fatalf("Confirm = %s, confirmation %+v, status %d; want APPROVED and CONFIRMED", got.Status, cf, r.StatusCode)
	}
	again := mustOK[*client.Transaction](t, "Confirm again")(c.Confirm(ctx, sale.OnlineAPIRefID))
	if again.Version != got.Version || again.Confirmation == nil || again.Confirmation.State != instore.ConfirmConfirmed ||
		!again.Confirmation.ConfirmedAt.Equal(*got.Confirmation.ConfirmedAt) {
		t.Errorf("Confirm again = version %d %+v, want the same answer as the first (version %d %+v)", again.Version, again.Confirmation, got.Version, got.Confirmation)
	}
	if unconfirmed(t, c, sale.OnlineAPIRefID) {
		t.Errorf("Transactions(Unconfirmed) still lists the confirmed sale")
	}

	// Not confirmable: no confirmation asked; a declined sale. The error
	// is typed.
	declined := payFinal(t, c, client.PurchaseParams{TerminalID: term, Amount: 1011, Currency: "SEK", ConfirmWithinSeconds: 60})
	for _, ref := range []string{plain.OnlineAPIRefID, declined.OnlineAPIRefID} {
		_, err := c.Confirm(ctx, ref)
		var ce *client.Error
		if !errors.As(err, &ce) || ce.StatusCode != http.StatusConflict || ce.Code() != instore.ENotConfirmable || ce.Detail == "" ||
			!client.IsCode(err, instore.ENotConfirmable) {
			t.Errorf("Confirm(%s) = %v, want a 409 not-confirmable *client.Error with a detail", ref, err)
		}
	}
	if _, err := c.Confirm(ctx, "txn_unknown"); !client.IsCode(err, instore.WP04) {
		t.Errorf("Confirm(unknown) = %v, want WP04", err)
	}

	// The confirmation is an event (numbered just after its commit).
	testwait.ForNil(t, "transaction.confirmed last among the events of the confirmed sale", func() error {
		var types []instore.EventType
		for _, ev := range eventsAfter(t, c, cursor) {
			if tx, err := ev.Transaction(); err == nil && tx.OnlineAPIRefID == sale.OnlineAPIRefID {
				types = append(types, ev.Type)
			}
		}
		if n := len(types); n == 0 || types[n-1] != instore.EventTransactionConfirmed {
			return fmt.Errorf("events %v", types)
		}
		return nil
	})
}

// unconfirmed reports whether the unconfirmed listing holds ref.
func unconfirmed(t *testing.T, c *client.Client, ref string) bool {
	t.Helper()
	found := false
	for tx, err := range c.AllTransactions(t.Context(), client.ListParams{Unconfirmed: true}) {
		if err != nil {
			t.Fatalf("AllTransactions(Unconfirmed): %v", err)
		}
		if !tx.AwaitsConfirmation() {
			t.Errorf("Transactions(Unconfirmed) lists %s: %s, confirmation %+v", tx.OnlineAPIRefID, tx.Status, tx.Confirmation)
		}
		found = found || tx.OnlineAPIRefID == ref
	}
	return found
}

// eventsAfter returns every event after cursor.
func eventsAfter(t *testing.T, c *client.Client, cursor string) []client.Event {
	t.Helper()
	var out []client.Event
	for {
		page := mustOK[*client.EventPage](t, "Events")(c.Events(t.Context(), client.EventQuery{After: cursor, Limit: 500}))
		if len(page.Events) == 0 {
			return out
		}
		out = append(out, page.Events...)
		cursor = page.NextCursor
	}
}

// exerciseTips drives tips against the demo: each way to ask, the sandbox's
// next tip, and a refund of the whole total.
func exerciseTips(t *testing.T, e *itEnv) {
	ctx, c, term := e.onFirstTerminal(t)
	for _, tc := range []struct {
		name string
		next int64 // SandboxNextTip first, unless negative
		tip  *client.Tip
		want int64
	}{
		{"prompt", -1, client.TipPrompt(10, 15, 20), 100},
		{"enter total", 250, client.TipEnterTotal(), 250},
		{"fixed", -1, client.TipFixed(150), 150},
	} {
		if tc.next >= 0 {
			mustOK[*client.SandboxDevice](t, "SandboxNextTip")(c.SandboxNextTip(ctx, term, tc.next))
		}
		sale := payFinal(t, c, client.PurchaseParams{TerminalID: term, Amount: 1000, Currency: "SEK", Tip: tc.tip})
		if !sale.Approved() || sale.TipAmount != tc.want || sale.TotalAmount != 1000+tc.want || sale.Tip == nil || sale.Tip.Mode != tc.tip.Mode {
			t.Errorf("%s: status %d, tip %+v, tipAmount %d, totalAmount %d; want APPROVED with %d", tc.name, sale.StatusID, sale.Tip, sale.TipAmount, sale.TotalAmount, tc.want)
			continue
		}
		refund := mustOK[*client.Transaction](t, "Refund")(c.Refund(ctx, client.RefundParams{TerminalID: term, Amount: sale.TotalAmount,
			Currency: "SEK", OriginalOnlineAPIRefID: sale.OnlineAPIRefID}))
		if final, err := c.WaitForFinal(ctx, refund.OnlineAPIRefID, nil); err != nil || !final.Approved() {
			t.Errorf("%s: refund of the total: %v %+v", tc.name, err, final)
		}
	}
}

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

// exerciseOffline drives store and forward against the demo: the card
// network down, a sale approved offline and listed QUEUED, one above the
// floor limit TERMINAL_IS_OFFLINE, its refund refused while QUEUED; the
// next forward declined and the network back: DECLINED, and its refund
// refused.
func exerciseOffline(t *testing.T, e *itEnv) {
	ctx, c, term := e.onFirstTerminal(t)
	dev := mustOK[*client.SandboxDevice](t, "SandboxCardNetwork down")(c.SandboxCardNetwork(ctx, term,
		client.CardNetworkParams{FloorLimit: 5000, QueueSize: 3}))
	if dev.CardNetwork.Online || dev.CardNetwork.FloorLimit != 5000 || dev.CardNetwork.QueueSize != 3 {
		t.Fatalf("card network: %+v", dev.CardNetwork)
	}
	sale := payFinal(t, c, client.PurchaseParams{TerminalID: term, Amount: 2000, Currency: "SEK"})
	if !sale.Approved() || !sale.Queued() || sale.Result == nil || !sale.Result.Offline {
		t.Fatalf("a sale below the floor limit: status %d forwarding %+v", sale.StatusID, sale.Forwarding)
	}
	if above := payFinal(t, c, client.PurchaseParams{TerminalID: term, Amount: 9000, Currency: "SEK"}); above.StatusID != instore.StatusTerminalIsOffline {
		t.Errorf("a sale above the floor limit: status %d, want 9", above.StatusID)
	}
	page := mustOK[*client.TransactionPage](t, "Transactions QUEUED")(c.Transactions(ctx, client.ListParams{Forwarding: client.ForwardQueued}))
	if len(page.Transactions) != 1 || page.Transactions[0].OnlineAPIRefID != sale.OnlineAPIRefID {
		t.Errorf("listing QUEUED: %d transactions", len(page.Transactions))
	}
	refund := client.RefundParams{TerminalID: term, Amount: 100, Currency: "SEK", OriginalOnlineAPIRefID: sale.OnlineAPIRefID}
	if _, err := c.Refund(ctx, refund); !client.IsCode(err, instore.EConflict) {
		t.Errorf("refund of a queued sale = %v, want 409 conflict", err)
	}
	mustOK[*client.SandboxDevice](t, "SandboxNextForward")(c.SandboxNextForward(ctx, term, true))
	mustOK[*client.SandboxDevice](t, "SandboxCardNetwork up")(c.SandboxCardNetwork(ctx, term, client.CardNetworkParams{Online: true}))
	got := sale
	for {
		// The long poll: the next version of the transaction.
		got = mustOK[*client.Transaction](t, "TransactionAfter")(c.TransactionAfter(ctx, sale.OnlineAPIRefID, got.Version, 30*time.Second))
		if !got.Queued() {
			if !got.ForwardDeclined() || got.Forwarding.ForwardedAt == nil || !got.Approved() {
				t.Errorf("after forwarding: status %d forwarding %+v, want APPROVED, DECLINED", got.StatusID, got.Forwarding)
			}
			break
		}
	}
	if _, err := c.Refund(ctx, refund); !client.IsCode(err, instore.EConflict) {
		t.Errorf("refund of a declined sale = %v, want 409 conflict", err)
	}
}
