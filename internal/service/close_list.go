package service

import (
	"context"
	"fmt"
	"time"

	"github.com/instore-dev/instore"
)

// Batches lists the merchant's batches (closes), newest first by closedAt,
// a page at a time, as Transactions lists transactions: the same window
// rules (from/to, 30 days, 90 days back; WP26, WP27), limit, and a cursor
// bound to the merchant and the query. Errors, in order: validation,
// WP03, WP26, WP27, WP16 (terminalId).
func (s *Service) Batches(ctx context.Context, p *instore.Principal, q instore.BatchQuery) ([]*instore.Batch, string, error) {
	// The transactions listing's rules and cursor over a query of its
	// shape; the cursor is signed for "batches:" and the merchant, which
	// no transactions cursor is.
	lq := instore.ListQuery{From: q.From, To: q.To, TransactionSelection: instore.TransactionSelection{TerminalID: q.TerminalID}, Limit: q.Limit, Cursor: q.Cursor}
	w, err := s.openListing(ctx, p, "batches:"+p.MerchantID, &lq, nil)
	if err != nil {
		return nil, "", err
	}
	bs, err := s.Store.ListBatches(ctx, instore.BatchFilter{MerchantID: p.MerchantID, TerminalID: q.TerminalID, From: w.from, To: w.to, Limit: w.limit + 1, After: w.after})
	if err != nil {
		return nil, "", fmt.Errorf("list batches: %w", err)
	}
	return pageOf(ctx, s, w, bs, func(b *instore.Batch) (time.Time, string) { return b.ClosedAt, b.ID })
}

// Batch returns one of the merchant's batches (not-found otherwise).
func (s *Service) Batch(ctx context.Context, p *instore.Principal, id string) (*instore.Batch, error) {
	return merchantsByRef(ctx, s, p, id, s.Store.Batch, func(b *instore.Batch) string { return b.MerchantID },
		"No batch with this batchId.", "batch")
}
