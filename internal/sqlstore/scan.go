package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// scanner is a *sql.Row or *sql.Rows.
type scanner interface {
	Scan(dest ...any) error
}

// collect scans every row with scan and closes rows. The result is never
// nil, so an empty list encodes as [] rather than null.
func collect[T any](rows *sql.Rows, scan func(scanner) (T, error), op string) ([]T, error) {
	defer rows.Close()
	list := []T{}
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		list = append(list, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return list, nil
}

// getOne scans the one row query returns; no row is instore.ErrNotFound
// naming what.
func getOne[T any](ctx context.Context, c conn, scan func(scanner) (T, error), what, query string, args ...any) (T, error) {
	v, err := scan(c.queryRow(ctx, query, args...))
	if err != nil {
		var zero T
		return zero, notFound(err, what)
	}
	return v, nil
}

// getAll scans every row query returns; op names the listing in errors.
func getAll[T any](ctx context.Context, c conn, scan func(scanner) (T, error), op, query string, args ...any) ([]T, error) {
	rows, err := c.query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return collect(rows, scan, op)
}

// ofCustomer narrows query to the rows of customerID, or keeps every row
// when customerID is empty, and orders them by order.
func ofCustomer(query, customerID, order string) (string, []any) {
	if customerID == "" {
		return query + ` ORDER BY ` + order, nil
	}
	return query + ` WHERE customer_id = ? ORDER BY ` + order, []any{customerID}
}

// The destinations below convert a column's value as it scans. Each is
// one pointer, so passing it to Scan as an interface allocates nothing;
// the drivers' usual values (nil, string, []byte, int64) are converted
// here, anything else through database/sql's own conversion.

// stringInto scans a nullable text column into *p, NULL as "" (the
// reverse of nullString).
type stringInto[S ~string] struct{ p *S }

func intoString[S ~string](p *S) stringInto[S] { return stringInto[S]{p} }

func (d stringInto[S]) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*d.p = ""
	case string:
		*d.p = S(v)
	case []byte:
		*d.p = S(v)
	default:
		var ns sql.NullString
		if err := ns.Scan(src); err != nil {
			return err
		}
		*d.p = S(ns.String)
	}
	return nil
}

// scannedMicros returns a scanned time's microseconds (false: NULL).
func scannedMicros(src any) (int64, bool, error) {
	switch v := src.(type) {
	case nil:
		return 0, false, nil
	case int64:
		return v, true, nil
	}
	var n sql.NullInt64
	err := n.Scan(src)
	return n.Int64, n.Valid, err
}

// timeInto scans a time stored as microseconds (micros) into *p; NULL is
// an error.
type timeInto struct{ p *time.Time }

func intoTime(p *time.Time) timeInto { return timeInto{p} }

func (d timeInto) Scan(src any) error {
	us, ok, err := scannedMicros(src)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("converting NULL to %T is unsupported", *d.p)
	}
	*d.p = fromMicros(us)
	return nil
}

// nullTimeInto scans a nullable time (nullMicros) into *p, NULL as nil.
type nullTimeInto struct{ p **time.Time }

func intoNullTime(p **time.Time) nullTimeInto { return nullTimeInto{p} }

func (d nullTimeInto) Scan(src any) error {
	us, ok, err := scannedMicros(src)
	if err != nil {
		return err
	}
	*d.p = fromNullMicros(sql.NullInt64{Int64: us, Valid: ok})
	return nil
}
