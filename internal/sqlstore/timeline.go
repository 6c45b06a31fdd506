package sqlstore

import (
	"context"
	"fmt"

	"github.com/instore-dev/instore"
)

// A transaction's timeline (instore.TransactionEvent) is written with the
// transaction: every write of a transaction inserts its instore.Change's
// Events in the database transaction of the write. On PostgreSQL a write that is one
// statement (autocommit) stays one statement: the insert of its one event
// joins it as a data-modifying WITH, atomic with it (withEvent).

const eventColumns = `transaction_id, version, at, kind, actor, status_before, status_after, detail`

func eventArgs(e *instore.TransactionEvent) []any {
	return []any{e.Version, micros(e.At), e.Kind, e.Actor, e.StatusBefore, e.StatusAfter, e.Detail}
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
	o, oargs := outboxCTE(e)
	q = `WITH w AS (` + q + ` RETURNING id)` + o + ` INSERT INTO transaction_events (` + eventColumns + `)
		SELECT w.id, ?, ?, ?, ?, ?, ?, ? FROM w`
	return q, append(append(args, oargs...), eventArgs(e)...), true
}

// outboxCTE is the part of a PostgreSQL statement that inserts e's
// integrator event for each row of w ("" when it has none).
func outboxCTE(e *instore.TransactionEvent) (string, []any) {
	if e.Outbox == nil {
		return "", nil
	}
	return `, o AS (INSERT INTO events (` + outboxColumns + `) SELECT ?, ?, ?, ?, ? FROM w)`, outboxArgs(e.Outbox)
}

// insertEvents inserts the events of the transaction id; it must run in
// the database transaction of the write it records. An event already
// stored (the same key) is the same event: it is kept.
func insertEvents(ctx context.Context, c conn, id string, events []instore.TransactionEvent) error {
	for i := range events {
		n, err := c.execAffected(ctx, `INSERT INTO transaction_events (`+eventColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (transaction_id, version) DO NOTHING`, append([]any{id}, eventArgs(&events[i])...)...)
		if err != nil {
			return fmt.Errorf("insert transaction event: %w", err)
		}
		if o := events[i].Outbox; o != nil && n > 0 { // an event kept already told integrators
			if err := insertOutbox(ctx, c, []instore.OutboxEvent{*o}); err != nil {
				return err
			}
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
	rows, err := db.read().query(ctx, `SELECT version, at, kind, actor, status_before, status_after, detail
		FROM transaction_events WHERE transaction_id = ? ORDER BY version`, ref)
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
