package sqlstore

import (
	"context"
	"strings"

	"github.com/instore-dev/instore"
)

// Totals sums a merchant's transactions by currency, type and status in
// the database (instore.BooksStore). The rows are read from
// transactions_merchant_totals (migration 0015), which holds every column
// the query reads: on SQLite a covering index, on PostgreSQL an index with
// the summed columns INCLUDEd, so the sum reads one range of the index
// and no table row (an index-only scan, as far as the visibility map
// allows). A terminal ID is a filter on the same range: a merchant's day
// is read whole either way.
func (db *DB) Totals(ctx context.Context, f instore.TotalsFilter) ([]instore.Total, error) {
	query, args := totalsQuery(db.d, f)
	return getAll(ctx, db.read(), func(s scanner) (instore.Total, error) {
		var t instore.Total
		err := s.Scan(&t.Currency, &t.Type, &t.StatusID, &t.Count, &t.Amount)
		return t, err
	}, "totals", query, args...)
}

// totalsQuery is the query of Totals.
func totalsQuery(d *dialect, f instore.TotalsFilter) (string, []any) {
	return booksQuery(d, f, `currency, type, status_id, COUNT(*), CAST(SUM(amount + tip_amount) AS BIGINT)`,
		"transactions_merchant_totals", ` GROUP BY currency, type, status_id ORDER BY currency, type, status_id`)
}

// BookEntries lists the rows a reconciliation compares, oldest first
// (instore.BooksStore), through the listing's index of the merchant (and
// terminal ID) by creation.
func (db *DB) BookEntries(ctx context.Context, f instore.TotalsFilter, limit int) ([]instore.BookEntry, error) {
	index := "transactions_merchant_created"
	if f.TerminalID != "" {
		index = "transactions_merchant_terminal_created"
	}
	query, args := booksQuery(db.d, f, `id, ecr_reference, terminal_id, type, amount + tip_amount, currency, status_id, created_at`,
		index, ` ORDER BY created_at, id LIMIT ?`)
	return getAll(ctx, db.read(), func(s scanner) (instore.BookEntry, error) {
		var e instore.BookEntry
		var ref *string
		var at int64
		err := s.Scan(&e.OnlineAPIRefID, &ref, &e.TerminalID, &e.Type, &e.Amount, &e.Currency, &e.StatusID, &at)
		if ref != nil {
			e.ECRReference = instore.NullString(*ref)
		}
		e.CreatedAt = fromMicros(at)
		return e, err
	}, "book entries", query, append(args, limit)...)
}

// booksQuery is the query of the transactions f selects: columns, read
// through index on SQLite (INDEXED BY, as listQuery), then tail.
func booksQuery(d *dialect, f instore.TotalsFilter, columns, index, tail string) (string, []any) {
	var b strings.Builder
	b.WriteString(`SELECT ` + columns + ` FROM transactions`)
	if d.indexedBy {
		b.WriteString(` INDEXED BY ` + index)
	}
	b.WriteString(` WHERE merchant_id = ?`)
	args := []any{f.MerchantID}
	if f.TerminalID != "" {
		b.WriteString(` AND terminal_id = ?`)
		args = append(args, f.TerminalID)
	}
	b.WriteString(` AND created_at >= ? AND created_at < ?` + tail)
	return b.String(), append(args, micros(f.From), micros(f.To))
}
