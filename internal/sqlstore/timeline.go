package sqlstore

import (
	"context"
	"fmt"

	"github.com/instore-dev/instore"
)

// A transaction's timeline (instore.TransactionEvent) is written with the
// transaction: every write of a transaction inserts its instore.Change's
// Events in the database transaction of the write, each one row of events
// that is both the timeline entry and the event integrators are told of it
// (its Outbox; migration 0018). On PostgreSQL a write that is one statement
// (single, or a relaxed one: pipeline.go) stays one statement: the insert of its one entry joins it as
// a data-modifying WITH, atomic with it (withEvent).

// eventColumns are the columns of a timeline entry's row after
// transaction_id (the outbox columns are NULL or empty for an entry
// integrators are not told of).
const eventColumns = `version, created_at, kind, actor, status_before, status_after, detail, ` + toldColumns

// eventValues is the placeholder list of eventColumns.
const eventValues = `?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?`

func eventArgs(e *instore.TransactionEvent) []any {
	return append([]any{e.Version, micros(e.At), e.Kind, e.Actor, e.StatusBefore, e.StatusAfter, e.Detail}, toldArgs(e.Outbox)...)
}

// withEvent rewrites one INSERT or UPDATE of a transaction row (q, args) so
// that it also inserts the event e, when the dialect can do it in one
// statement (PostgreSQL): the event is inserted for each row written, so
// the statement's rows affected are the transaction's. ok is false on
// SQLite, whose writes run in a transaction anyway (insertEvents then).
func (c conn) withEvent(q string, args []any, e *instore.TransactionEvent) (string, []any, bool) {
	if c.d.name != "postgres" {
		return q, args, false
	}
	q = `WITH w AS (` + q + ` RETURNING id) ` + insertEventFromW
	return q, append(args, eventArgs(e)...), true
}

// insertEventFromW inserts, in a PostgreSQL statement whose WITH names w
// the rows written, a timeline entry (eventArgs) for each.
const insertEventFromW = `INSERT INTO events (transaction_id, ` + eventColumns + `) SELECT w.id, ` + eventValues + ` FROM w`

// insertEvents inserts the events of the transaction id; it must run in
// the database transaction of the write it records. An event already
// stored (the same key) is the same event: it is kept.
func insertEvents(ctx context.Context, c conn, id string, events []instore.TransactionEvent) error {
	for i := range events {
		e := &events[i]
		if _, err := c.exec(ctx, `INSERT INTO events (transaction_id, `+eventColumns+`) VALUES (?, `+eventValues+`)
			ON CONFLICT (transaction_id, version) DO NOTHING`, append([]any{id}, eventArgs(e)...)...); err != nil {
			return fmt.Errorf("insert transaction event: %w", err)
		}
	}
	return nil
}

// oneStatement reports whether a write of ch's row can be one statement:
// no event, or one that withEvent folds into it.
func oneStatement(ch *instore.Change) bool { return len(ch.Events) <= 1 }

// TransactionEvents returns the timeline of the transaction ref, oldest
// first.
func (db *DB) TransactionEvents(ctx context.Context, ref string) ([]instore.TransactionEvent, error) {
	rows, err := db.read().query(ctx, `SELECT version, created_at, kind, actor, status_before, status_after, detail
		FROM events WHERE transaction_id = ? ORDER BY version`, ref)
	if err != nil {
		return nil, fmt.Errorf("transaction events: %w", err)
	}
	defer rows.Close()
	out := []instore.TransactionEvent{}
	for rows.Next() {
		var e instore.TransactionEvent
		var at int64
		if err := rows.Scan(&e.Version, &at, &e.Kind, &e.Actor, &e.StatusBefore, &e.StatusAfter, &e.Detail); err != nil {
			return nil, fmt.Errorf("transaction events: %w", err)
		}
		e.At = fromMicros(at)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("transaction events: %w", err)
	}
	return out, nil
}
