package service

import (
	"context"
	"errors"
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
	// The transactions listing's checks and cursor, over a query of its
	// shape; the cursor is signed for "batches:" and the merchant, which
	// no transactions cursor is.
	lq := instore.ListQuery{From: q.From, To: q.To, TerminalID: q.TerminalID, Limit: q.Limit, Cursor: q.Cursor}
	var f instore.FieldErrors
	now := s.Now().UTC()
	to, from := now, now.Add(-instore.DefaultListRange)
	switch {
	case q.From != nil && q.To != nil:
		from, to = *q.From, *q.To
	case q.From != nil:
		from = *q.From
	case q.To != nil:
		to, from = *q.To, q.To.Add(-instore.DefaultListRange)
	}
	if !from.Before(to) {
		f.Add("from", "must be before to")
	}
	limit := q.Limit
	if limit == 0 {
		limit = instore.DefaultListLimit
	} else if limit < 1 || limit > instore.MaxListLimit {
		f.Add("limit", "must be 1-%d", instore.MaxListLimit)
	}
	if q.TerminalID != "" && !instore.ValidTerminalID(q.TerminalID) {
		f.Add("terminalId", "must be 8 digits")
	}
	if err := f.Err(); err != nil {
		return nil, "", err
	}
	scope := "batches:" + p.MerchantID
	var after *instore.TransactionCursor
	var key []byte
	if q.Cursor != "" {
		var err error
		if key, err = s.cursorKey(ctx); err != nil {
			return nil, "", err
		}
		c, ok := openCursor(key, scope, &lq)
		if !ok {
			f.Add("cursor", "is not a cursor this service returned for this listing; pass the nextCursor of the previous page with the same parameters")
			return nil, "", f.Err()
		}
		from, to = time.UnixMicro(c.From).UTC(), time.UnixMicro(c.To).UTC()
		after = &instore.TransactionCursor{CreatedAt: time.UnixMicro(c.At).UTC(), ID: c.ID}
	}
	if _, err := s.merchant(ctx, p); err != nil {
		return nil, "", err
	}
	if to.Sub(from) > instore.MaxListRange {
		return nil, "", instore.Errorf(instore.WP26, "A listing may cover at most 30 days; narrow from and to.")
	}
	if from.Before(now.Add(-instore.MaxListAge)) {
		return nil, "", instore.Errorf(instore.WP27, "Only the past 90 days can be listed; move from forward.")
	}
	if q.TerminalID != "" {
		if _, err := s.ownTerminal(ctx, p, q.TerminalID); err != nil {
			return nil, "", err
		}
	}
	bs, err := s.Store.ListBatches(ctx, instore.BatchFilter{MerchantID: p.MerchantID, TerminalID: q.TerminalID, From: from, To: to, Limit: limit + 1, After: after})
	if err != nil {
		return nil, "", fmt.Errorf("list batches: %w", err)
	}
	next := ""
	if len(bs) > limit {
		bs = bs[:limit]
		if key == nil {
			if key, err = s.cursorKey(ctx); err != nil {
				return nil, "", err
			}
		}
		last := bs[len(bs)-1]
		next = sealCursor(key, scope, &lq, listCursor{At: last.ClosedAt.UnixMicro(), ID: last.ID, From: from.UnixMicro(), To: to.UnixMicro()})
	}
	return bs, next, nil
}

// Batch returns one of the merchant's batches (not-found otherwise).
func (s *Service) Batch(ctx context.Context, p *instore.Principal, id string) (*instore.Batch, error) {
	if _, err := s.merchant(ctx, p); err != nil {
		return nil, err
	}
	if !instore.ValidRef(id) {
		return nil, instore.Errorf(instore.ENotFound, "No batch with this batchId.")
	}
	b, err := s.Store.Batch(ctx, id)
	if errors.Is(err, instore.ErrNotFound) || err == nil && b.MerchantID != p.MerchantID {
		return nil, instore.Errorf(instore.ENotFound, "No batch with this batchId.")
	} else if err != nil {
		return nil, fmt.Errorf("batch: %w", err)
	}
	return b, nil
}
