package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/client"
)

// exerciseBatches drives day closes through the SDK against the demo: a
// close ends the batch of what ran before; then a sale and a sale only the
// terminal knows (SandboxBatchExtra), the close with its one difference,
// a third close that matches, the listing (one batch a page, AllBatches)
// and Batch; an unknown batch is not-found.
func exerciseBatches(t *testing.T, e *itEnv) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, term := e.c, e.terms[0]

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
