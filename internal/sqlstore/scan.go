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

// scanInto is a destination of Scan that converts the column's value as it
// scans it.
type scanInto func(src any) error

func (f scanInto) Scan(src any) error { return f(src) }

// intoString scans a nullable text column into *p, NULL as "" (the
// reverse of nullString).
func intoString[S ~string](p *S) scanInto {
	return func(src any) error {
		var v sql.NullString
		err := v.Scan(src)
		*p = S(v.String)
		return err
	}
}

// intoTime scans a time stored as microseconds (micros) into *p; NULL is
// an error.
func intoTime(p *time.Time) scanInto {
	return func(src any) error {
		var v sql.NullInt64
		if err := v.Scan(src); err != nil {
			return err
		}
		if !v.Valid {
			return fmt.Errorf("converting NULL to %T is unsupported", *p)
		}
		*p = fromMicros(v.Int64)
		return nil
	}
}

// intoNullTime scans a nullable time (nullMicros) into *p, NULL as nil.
func intoNullTime(p **time.Time) scanInto {
	return func(src any) error {
		var v sql.NullInt64
		err := v.Scan(src)
		*p = fromNullMicros(v)
		return err
	}
}
