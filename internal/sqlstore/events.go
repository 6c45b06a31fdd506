package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/mutant"
)

// Events for integrators (instore.EventStore; migration 0011).

const outboxColumns = `merchant_id, type, terminal_id, created_at, data`

func outboxArgs(e *instore.OutboxEvent) []any {
	return []any{e.MerchantID, e.Type, e.TerminalID, micros(e.At), string(e.Data)}
}

// insertOutbox inserts events, unnumbered, in the database transaction of
// the write they describe.
func insertOutbox(ctx context.Context, c conn, evs []instore.OutboxEvent) error {
	for i := range evs {
		if _, err := c.exec(ctx, `INSERT INTO events (`+outboxColumns+`) VALUES (?, ?, ?, ?, ?)`, outboxArgs(&evs[i])...); err != nil {
			return fmt.Errorf("insert event: %w", err)
		}
	}
	return nil
}

// AppendEvents writes events of no stored change.
func (db *DB) AppendEvents(ctx context.Context, evs []instore.OutboxEvent) error {
	return db.update(ctx, func(c conn) error { return insertOutbox(ctx, c, evs) })
}

// sequenceLock is the advisory lock that makes one sequencer run at a time
// across the nodes on one PostgreSQL database.
const sequenceLock = 0x1a57_e7e7

// SequenceEvents numbers committed events in commit order. On SQLite the one writer commits in
// id order, so an event's number is its id; on PostgreSQL ids are taken at
// insert, before commit, so the sequencer (one at a time: an advisory
// lock held to its commit) numbers what committed, after the highest
// number so far, in id order.
func (db *DB) SequenceEvents(ctx context.Context, limit int) (int, error) {
	var n int64
	err := db.update(ctx, func(c conn) error {
		var top int64
		if c.d.name == "postgres" {
			if _, err := c.exec(ctx, `SELECT pg_advisory_xact_lock(?)`, int64(sequenceLock)); err != nil {
				return fmt.Errorf("sequence events: lock: %w", err)
			}
		}
		if err := c.queryRow(ctx, `SELECT COALESCE(MAX(seq), 0) FROM events`).Scan(&top); err != nil {
			return fmt.Errorf("sequence events: %w", err)
		}
		var res interface{ RowsAffected() (int64, error) }
		var err error
		if c.d.name == "postgres" {
			res, err = c.exec(ctx, `WITH n AS (SELECT id, row_number() OVER (ORDER BY id) AS r FROM events
					WHERE seq IS NULL ORDER BY id LIMIT ?)
				UPDATE events e SET seq = ? + n.r FROM n WHERE e.id = n.id`, limit, top)
		} else if mutant.On(mutant.EventsOutOfOrder) {
			var lo, hi sql.NullInt64
			if err := c.queryRow(ctx, `SELECT MIN(id), MAX(id) FROM (SELECT id FROM events WHERE seq IS NULL ORDER BY id LIMIT ?)`, limit).Scan(&lo, &hi); err != nil {
				return err
			}
			res, err = c.exec(ctx, `UPDATE events SET seq = ? - id WHERE seq IS NULL AND id BETWEEN ? AND ?`, lo.Int64+hi.Int64, lo.Int64, hi.Int64)
		} else {
			res, err = c.exec(ctx, `UPDATE events SET seq = id WHERE id IN
				(SELECT id FROM events WHERE seq IS NULL ORDER BY id LIMIT ?)`, limit)
		}
		if err != nil {
			return fmt.Errorf("sequence events: %w", err)
		}
		// The endpoints' deliveries are made as the dispatcher reaches the
		// events (FillDeliveries), not here.
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}

// ListEvents returns the numbered events of f, oldest first.
func (db *DB) ListEvents(ctx context.Context, f instore.EventFilter) ([]instore.StoredEvent, error) {
	var b strings.Builder
	var args []any
	if f.MerchantID != "" {
		b.WriteString(`SELECT seq, ` + outboxColumns + ` FROM events WHERE merchant_id = ? AND seq > ?`)
		args = append(args, f.MerchantID, f.After)
	} else {
		// Every merchant's (the node's event feed).
		b.WriteString(`SELECT seq, ` + outboxColumns + ` FROM events WHERE seq > ?`)
		args = append(args, f.After)
	}
	if f.TerminalID != "" {
		b.WriteString(` AND terminal_id = ?`)
		args = append(args, f.TerminalID)
	}
	if len(f.Types) > 0 {
		b.WriteString(` AND type IN (?` + strings.Repeat(`, ?`, len(f.Types)-1) + `)`)
		for _, t := range f.Types {
			args = append(args, t)
		}
	}
	b.WriteString(` ORDER BY seq LIMIT ?`)
	args = append(args, f.Limit)
	rows, err := db.read().query(ctx, b.String(), args...)
	if err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	return collect(rows, func(s scanner) (instore.StoredEvent, error) {
		var e instore.StoredEvent
		var at int64
		var data string
		err := s.Scan(&e.Seq, &e.MerchantID, &e.Type, &e.TerminalID, &at, &data)
		e.At, e.Data = fromMicros(at), []byte(data)
		return e, err
	}, "list events")
}

// LastEventSeq returns the number of a merchant's latest event.
func (db *DB) LastEventSeq(ctx context.Context, merchantID string) (int64, error) {
	var n int64
	var err error
	if merchantID == "" {
		err = db.read().queryRow(ctx, `SELECT COALESCE(MAX(seq), 0) FROM events`).Scan(&n)
	} else {
		err = db.read().queryRow(ctx, `SELECT COALESCE(MAX(seq), 0) FROM events WHERE merchant_id = ? AND seq IS NOT NULL`,
			merchantID).Scan(&n)
	}
	if err != nil {
		return 0, fmt.Errorf("last event: %w", err)
	}
	return n, nil
}

// ExpireEvents deletes the numbered events dated before before, with their
// deliveries that ended (a pending one keeps its event: it is still owed).
func (db *DB) ExpireEvents(ctx context.Context, before time.Time) (int, error) {
	var n int64
	err := db.update(ctx, func(c conn) error {
		if _, err := c.exec(ctx, `DELETE FROM webhook_deliveries WHERE status <> 'pending' AND event_seq IN
			(SELECT seq FROM events WHERE created_at < ? AND seq IS NOT NULL)`, micros(before)); err != nil {
			return fmt.Errorf("expire events: %w", err)
		}
		// The newest numbered event is kept whatever its age: the next
		// number is taken after it (SequenceEvents), and numbers must never
		// be used twice, or a reader resuming after an old id would skip
		// the new events that took it again.
		// An event an enabled endpoint has yet to be given a delivery for
		// is kept too (a disabled one holds nothing: enabled again, it
		// resumes with what is still kept).
		res, err := c.exec(ctx, `DELETE FROM events WHERE created_at < ? AND seq IS NOT NULL
			AND seq NOT IN (SELECT event_seq FROM webhook_deliveries)
			AND seq < (SELECT MAX(seq) FROM events)
			AND NOT EXISTS (SELECT 1 FROM webhooks w WHERE w.merchant_id = events.merchant_id
				AND w.status = 'enabled' AND w.deleted_at IS NULL AND w.fanned_seq < events.seq)`, micros(before))
		if err != nil {
			return fmt.Errorf("expire events: %w", err)
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}
