package sqlstore

import (
	"database/sql"
	"fmt"
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
