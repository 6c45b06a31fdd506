package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/client"
)

// A purchase from start to end: credentials from the environment, the
// purchase, and its final status by long-poll. The export lines that
// `instore demo --env` prints point the environment at the demo (the tests
// set the same variables in TestMain).
func Example() {
	ctx := context.Background()
	c, err := client.FromEnv()
	if err != nil {
		log.Fatal(err)
	}
	terminalID := os.Getenv("INSTORE_TERMINAL_ID")
	amount, err := client.ParseAmount("12.50", "SEK")
	if err != nil {
		log.Fatal(err)
	}
	tx, err := c.Purchase(ctx, client.PurchaseParams{TerminalID: terminalID, Amount: amount, Currency: "SEK"})
	if err != nil {
		log.Fatal(err)
	}
	final, err := c.WaitForFinal(ctx, tx.OnlineAPIRefID, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(final.Status, client.FormatAmount(final.Amount, final.Currency), final.Currency)
	// Output: APPROVED 12.50 SEK
}

// The service's errors carry their code: here WP16, a terminal ID that is
// not the merchant's.
func ExampleError() {
	c, err := client.FromEnv()
	if err != nil {
		log.Fatal(err)
	}
	_, err = c.Purchase(context.Background(), client.PurchaseParams{TerminalID: "99999999", Amount: 1250, Currency: "SEK"})
	var e *client.Error
	if errors.As(err, &e) {
		fmt.Println(e.StatusCode, e.ErrorCode, e.ErrorID, e.Title)
	}
	// Output: 403 WP16 16 Specified terminal does not belong to the merchant
}

// Following the terminal's progress, and cancelling: in the sandbox an
// amount ending in 92 is acknowledged and never answered, so only the
// cancel ends it.
func ExampleClient_Cancel() {
	ctx := context.Background()
	c, err := client.FromEnv()
	if err != nil {
		log.Fatal(err)
	}
	terminalID := os.Getenv("INSTORE_TERMINAL_ID")
	tx, err := c.Purchase(ctx, client.PurchaseParams{TerminalID: terminalID, Amount: 1092, Currency: "SEK"})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := c.Cancel(ctx, terminalID); err != nil {
		log.Fatal(err)
	}
	final, err := c.WaitForFinal(ctx, tx.OnlineAPIRefID, func(t *client.Transaction) {
		// Called with every version: show t.Progress to the cashier.
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(final.Status, final.ErrorCode)
	// Output: ABORTED_BY_CASHIER WP37
}

// An ECR that stores its own key before calling can repeat the call after
// a crash and gets the first answer back, never a second transaction;
// SaveResponse shows that the second answer is a replay, and the request
// id to quote.
func ExampleIdempotencyKey() {
	c, err := client.FromEnv()
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	key := client.IdempotencyKey("order-4711-payment-1")
	p := client.PurchaseParams{TerminalID: os.Getenv("INSTORE_TERMINAL_ID"), Amount: 4700, Currency: "SEK", ECRReference: "order-4711"}
	var r client.Response
	first, err := c.Purchase(ctx, p, key, client.SaveResponse(&r))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("first:", r.StatusCode, "replayed:", r.Replayed, "request id:", r.RequestID != "")
	again, err := c.Purchase(ctx, p, key, client.SaveResponse(&r))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("again:", r.StatusCode, "replayed:", r.Replayed, "same transaction:", first.OnlineAPIRefID == again.OnlineAPIRefID)
	c.WaitForFinal(ctx, first.OnlineAPIRefID, nil)
	// Output:
	// first: 201 replayed: false request id: true
	// again: 201 replayed: true same transaction: true
}

// Listing with a filter, page after page.
func ExampleClient_AllTransactions() {
	ctx := context.Background()
	c, err := client.FromEnv()
	if err != nil {
		log.Fatal(err)
	}
	n := 0
	for tx, err := range c.AllTransactions(ctx, client.ListParams{ECRReference: "order-4711"}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(tx.ECRReference, tx.Status)
		n++
	}
	fmt.Println(n, "transaction")
	// Output:
	// order-4711 APPROVED
	// 1 transaction
}

// The code lists are read at run time, never hard-coded.
func ExampleClient_Metadata() {
	c, err := client.FromEnv()
	if err != nil {
		log.Fatal(err)
	}
	m, err := c.Metadata(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	s, _ := m.TransactionStatus(instore.StatusPending)
	e, _ := m.ErrorCode(instore.WP09)
	fmt.Println(s.Code, "-", e.Description)
	// Output: PENDING - Terminal is busy processing previous transaction
}

// Amounts as a person types them, in the currency's minor units. A comma
// is a decimal separator too, except before exactly three digits, which
// may separate thousands: that is refused as ambiguous.
func ExampleParseAmount() {
	for _, in := range []struct{ amount, currency string }{{"12.50", "SEK"}, {"1200", "JPY"}, {"1.250", "KWD"}, {"12.505", "SEK"}, {"12,50", "SEK"}, {"1,250", "SEK"}} {
		minor, err := client.ParseAmount(in.amount, in.currency)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Println(minor, client.FormatAmount(minor, in.currency), in.currency)
	}
	// Output:
	// 1250 12.50 SEK
	// 1200 1200 JPY
	// 1250 1.250 KWD
	// SEK has 2 decimals, got "12.505"
	// 1250 12.50 SEK
	// "1,250" is ambiguous: a comma before three digits may separate thousands; write it without thousands separators and with a dot for decimals, e.g. 1250 or 12.50
}

// A webhook endpoint: registered with the URL of the program's receiver
// (see VerifyWebhook), its secret stored from the answer (the only time
// it is shown besides a rotation), and deleted when no longer wanted.
func ExampleClient_CreateWebhook() {
	ctx := context.Background()
	c, err := client.FromEnv()
	if err != nil {
		log.Fatal(err)
	}
	wh, err := c.CreateWebhook(ctx, client.WebhookParams{
		URL:        "https://ecr.example.com/instore/webhook",
		EventTypes: []instore.EventType{instore.EventTransactionFinal},
	})
	if err != nil {
		log.Fatal(err)
	}
	secret := wh.Secret // store it where the receiver reads it
	fmt.Println(wh.Status, wh.EventTypes, secret != "")
	if err := c.DeleteWebhook(ctx, wh.WebhookID); err != nil {
		log.Fatal(err)
	}
	// Output: enabled [transaction.final] true
}

// A webhook receiver: it reads the body whole, verifies it with the
// endpoint's secret and answers 2xx only then. Deliveries come at least
// once: deduplicate by the event's id.
func ExampleVerifyWebhook() {
	secret := os.Getenv("INSTORE_WEBHOOK_SECRET")
	http.HandleFunc("POST /instore/webhook", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "read", http.StatusBadRequest)
			return
		}
		ev, err := client.VerifyWebhook(secret, r.Header, body)
		if err != nil {
			http.Error(w, "bad signature", http.StatusBadRequest)
			return
		}
		if ev.Type == instore.EventTransactionFinal {
			tx, err := ev.Transaction()
			if err == nil {
				log.Printf("%s ended %s", tx.OnlineAPIRefID, tx.Status)
			}
		}
		w.WriteHeader(http.StatusNoContent)
	})
}
