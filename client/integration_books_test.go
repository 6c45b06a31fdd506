package client_test

import (
	"context"
	"encoding/csv"
	"strings"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/client"
)

// exerciseBooks drives the end of a day against the demo: totals, a
// reconciliation of the ECR's books, and the listing as CSV, paged. Its
// window starts just before its sales, to the nanosecond.
func exerciseBooks(t *testing.T, e *itEnv) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, term := e.c, e.terms[0]
	from := time.Now()
	var sales []*client.Transaction
	for _, amount := range []int64{1250, 2000, 1011} { // …11: declined
		sales = append(sales, payFinal(t, c, client.PurchaseParams{TerminalID: term, Amount: amount, Currency: "SEK", ECRReference: "ORDER-" + string(rune('A'+len(sales)))}))
	}
	to := time.Now().Add(time.Minute)

	tot := mustOK[*client.Totals](t, "Totals")(c.Totals(ctx, client.TotalsParams{From: from, To: to, TerminalID: term}))
	var approved, declined client.Total
	for _, g := range tot.Totals {
		switch g.StatusID {
		case instore.StatusApproved:
			approved = g
		case instore.StatusTransactionDeclined:
			declined = g
		}
	}
	if approved.Count != 2 || approved.Amount != 3250 || declined.Count != 1 || declined.Amount != 1011 {
		t.Errorf("totals = %+v", tot.Totals)
	}

	amount := func(n int64) *int64 { return &n }
	books := []client.ReconcileLine{
		{OnlineAPIRefID: sales[0].OnlineAPIRefID, Type: instore.TypePurchase, Amount: amount(1250), Currency: "SEK", Status: "APPROVED"},
		{ECRReference: "ORDER-B", Type: instore.TypePurchase, Amount: amount(2500), Currency: "SEK", Status: "APPROVED"},
	}
	rec := mustOK[*client.Reconciliation](t, "Reconcile")(c.Reconcile(ctx, client.ReconcileParams{From: from, To: to, TerminalID: term, Transactions: books}))
	if rec.Matched || rec.Counts.Matched != 1 || len(rec.Mismatched) != 1 || rec.Mismatched[0].Field != "amount" ||
		rec.Mismatched[0].ECR != float64(2500) || rec.Mismatched[0].Service != float64(2000) || len(rec.MissingInECR) != 0 {
		t.Errorf("reconciliation = %+v", rec)
	}
	books[1].Amount = amount(2000)
	if rec = mustOK[*client.Reconciliation](t, "Reconcile")(c.Reconcile(ctx, client.ReconcileParams{From: from, To: to, TerminalID: term, Transactions: books})); !rec.Matched {
		t.Errorf("the books corrected: %+v", rec)
	}
	_, err := c.Reconcile(ctx, client.ReconcileParams{From: to, To: from, Transactions: books})
	if e, ok := err.(*client.Error); !ok || e.StatusCode != 400 {
		t.Errorf("from after to: %v", err)
	}

	var ids []string
	p := client.ListParams{From: from, To: to, TerminalID: term, Limit: 2}
	for pages := 0; ; pages++ {
		body, next, err := c.TransactionsCSV(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := csv.NewReader(strings.NewReader(string(body))).ReadAll()
		if err != nil || rows[0][0] != "onlineAPIRefId" {
			t.Fatalf("CSV page %d: %v %q", pages, err, body)
		}
		for _, r := range rows[1:] {
			ids = append(ids, r[0])
		}
		if next == "" {
			break
		}
		p.Cursor = next
	}
	// The listing's query has whole seconds: earlier sales of the same
	// second may come first; the three are the newest, newest first.
	if n := len(ids); n < 3 || ids[0] != sales[2].OnlineAPIRefID || ids[1] != sales[1].OnlineAPIRefID || ids[2] != sales[0].OnlineAPIRefID {
		t.Errorf("CSV pages hold %v, want the three sales first, newest first", ids)
	}
}
