package service

import (
	"context"
	"time"

	"github.com/instore-dev/instore"
)

// listWindow is a page of a listing (GET /transactions, GET /batches)
// checked by openListing: its range, its limit, where its cursor left off.
type listWindow struct {
	from, to time.Time
	limit    int
	after    *instore.TransactionCursor // nil: the first page
	// scope binds the listing's cursors (the merchant, and the listing
	// when it is not the transactions one); key signs them, read once.
	scope string
	q     *instore.ListQuery
	key   []byte
}

// openListing applies the rules every listing shares, in the contract's
// order: the range's defaults (the last 24 hours; 24 hours before to;
// from to now), validation (from before to, limit 1-1000, terminalId;
// more checks by more, e.g. a filter of its own), the cursor (signed for
// scope and q, it brings back the first page's range), WP03, WP26 (a
// range over 30 days), WP27 (a start more than 90 days ago), WP16
// (terminalId).
func (s *Service) openListing(ctx context.Context, p *instore.Principal, scope string, q *instore.ListQuery, more func(*instore.FieldErrors)) (*listWindow, error) {
	var f instore.FieldErrors
	now := s.Now().UTC()
	w := &listWindow{limit: q.Limit, scope: scope, q: q}
	w.from, w.to = windowOf(now, q.From, q.To)
	if !w.from.Before(w.to) {
		f.Add("from", "must be before to")
	}
	if w.limit == 0 {
		w.limit = instore.DefaultListLimit
	} else if w.limit < 1 || w.limit > instore.MaxListLimit {
		f.Add("limit", "must be 1-%d", instore.MaxListLimit)
	}
	if q.TerminalID != "" && !instore.ValidTerminalID(q.TerminalID) {
		f.Add("terminalId", "must be 8 digits")
	}
	if more != nil {
		more(&f)
	}
	if err := f.Err(); err != nil {
		return nil, err
	}
	if q.Cursor != "" {
		var err error
		if w.key, err = s.cursorKey(ctx); err != nil {
			return nil, err
		}
		c, ok := openCursor(w.key, scope, q)
		if !ok {
			f.Add("cursor", "is not a cursor this service returned for this listing; pass the nextCursor of the previous page with the same parameters")
			return nil, f.Err()
		}
		w.from, w.to = time.UnixMicro(c.From).UTC(), time.UnixMicro(c.To).UTC()
		w.after = &instore.TransactionCursor{CreatedAt: time.UnixMicro(c.At).UTC(), ID: c.ID}
	}
	if _, err := s.merchant(ctx, p); err != nil {
		return nil, err
	}
	if err := checkWindow(now, w.from, w.to); err != nil {
		return nil, err
	}
	if q.TerminalID != "" {
		if _, err := s.ownTerminal(ctx, p, q.TerminalID); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// pageOf cuts rows, read with a limit of w.limit+1, to the page and
// returns the cursor of the next page (empty on the last): the position
// (at, id) of the page's last row, pos tells it.
func pageOf[T any](ctx context.Context, s *Service, w *listWindow, rows []T, pos func(T) (time.Time, string)) ([]T, string, error) {
	if len(rows) <= w.limit {
		return rows, "", nil
	}
	rows = rows[:w.limit]
	if w.key == nil {
		var err error
		if w.key, err = s.cursorKey(ctx); err != nil {
			return nil, "", err
		}
	}
	at, id := pos(rows[len(rows)-1])
	return rows, sealCursor(w.key, w.scope, w.q, listCursor{At: at.UnixMicro(), ID: id, From: w.from.UnixMicro(), To: w.to.UnixMicro()}), nil
}
