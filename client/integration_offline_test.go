package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/client"
)

// exerciseOffline drives store and forward against the demo: the card
// network down, a sale approved offline and listed QUEUED, one above the
// floor limit TERMINAL_IS_OFFLINE, its refund refused while QUEUED; the
// next forward declined and the network back: DECLINED, and its refund
// refused.
func exerciseOffline(t *testing.T, e *itEnv) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, term := e.c, e.terms[0]
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
