package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/client"
	"github.com/instore-dev/instore/internal/testwait"
)

// onFirstTerminal is the start of an exercise on the demo's first
// terminal: a context of a minute (cancelled when t ends), the client and
// the terminal.
func (e *itEnv) onFirstTerminal(t *testing.T) (context.Context, *client.Client, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx, e.c, e.terms[0]
}

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
	for tx, err := range c.AllTransactions(context.Background(), client.ListParams{Unconfirmed: true}) {
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
		page := mustOK[*client.EventPage](t, "Events")(c.Events(context.Background(), client.EventQuery{After: cursor, Limit: 500}))
		if len(page.Events) == 0 {
			return out
		}
		out = append(out, page.Events...)
		cursor = page.NextCursor
	}
}
