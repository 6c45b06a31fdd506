package client_test

// The exercises of TestIntegrationOnlineAPI on the end of a day: totals,
// reconciliation, the CSV listing and day closes.

import (
	"encoding/csv"
	"errors"
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
	ctx, c, term := e.onFirstTerminal(t)
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

// exerciseBatches drives day closes through the SDK against the demo: a
// close ends the batch of what ran before; then a sale and a sale only the
// terminal knows (SandboxBatchExtra), the close with its one difference,
// a third close that matches, the listing (one batch a page, AllBatches)
// and Batch; an unknown batch is not-found.
func exerciseBatches(t *testing.T, e *itEnv) {
	ctx, c, term := e.onFirstTerminal(t)

	earlier := mustOK[*client.Batch](t, "CloseBatch")(c.CloseBatch(ctx, term))
	sale := payFinal(t, c, client.PurchaseParams{TerminalID: term, Amount: 1250, Currency: "SEK"})
	extra := mustOK[*client.SandboxBatchExtra](t, "SandboxBatchExtra")(c.SandboxBatchExtra(ctx, term, client.SandboxBatchExtraParams{Amount: 900}))
	first := mustOK[*client.Batch](t, "CloseBatch")(c.CloseBatch(ctx, term))
	if first.State != instore.BatchClosed || first.Matched || len(first.Differences) != 1 || first.Number == nil || *first.Number != extra.BatchNumber {
		t.Fatalf("first close = %+v, want CLOSED with one difference, number %d", first.BatchWire, extra.BatchNumber)
	}
	if d := first.Differences[0]; d.Kind != instore.MissingInService || d.OnlineAPIRefID != extra.Reference || d.Terminal == nil || d.Terminal.Amount != 900 {
		t.Errorf("difference = %+v, want MISSING_IN_SERVICE %s of 900", d, extra.Reference)
	}
	want := []instore.BatchTotal{{Currency: "SEK", Type: instore.TypePurchase, Count: 1, Amount: sale.TotalAmount}}
	if len(first.ServiceTotals) != 1 || first.ServiceTotals[0] != want[0] {
		t.Errorf("service totals = %+v, want %+v", first.ServiceTotals, want)
	}

	second := mustOK[*client.Batch](t, "CloseBatch")(c.CloseBatch(ctx, term))
	if !second.Matched || !second.OpenedAt.Equal(first.ClosedAt) || len(second.TerminalTotals) != 0 {
		t.Errorf("second close = %+v, want an empty matched batch opened at %v", second.BatchWire, first.ClosedAt)
	}

	page := mustOK[*client.BatchPage](t, "Batches")(c.Batches(ctx, client.BatchListParams{TerminalID: term, Limit: 1}))
	if len(page.Batches) != 1 || page.Batches[0].BatchID != second.BatchID || page.NextCursor == "" {
		t.Fatalf("Batches page 1 = %+v", page)
	}
	var ids []string
	for b, err := range c.AllBatches(ctx, client.BatchListParams{TerminalID: term, Limit: 1}) {
		if err != nil {
			t.Fatalf("AllBatches: %v", err)
		}
		ids = append(ids, b.BatchID)
	}
	if len(ids) != 3 || ids[0] != second.BatchID || ids[1] != first.BatchID || ids[2] != earlier.BatchID {
		t.Errorf("AllBatches = %v, want [%s %s %s]", ids, second.BatchID, first.BatchID, earlier.BatchID)
	}
	got := mustOK[*client.Batch](t, "Batch")(c.Batch(ctx, first.BatchID))
	if got.BatchID != first.BatchID || len(got.Differences) != 1 {
		t.Errorf("Batch = %+v", got.BatchWire)
	}
	var ce *client.Error
	if _, err := c.Batch(ctx, "bat_unknown"); !errors.As(err, &ce) || ce.Code() != instore.ENotFound {
		t.Errorf("Batch(unknown) error = %v, want not-found", err)
	}
}
