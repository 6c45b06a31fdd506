package sqlstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/mutant"
)

// Events for integrators (instore.EventStore; migrations 0011 and 0018).
// An event is a row of events: the timeline entry of a transaction's change
// that integrators are told of (timeline.go), or an event of no transaction
// (a terminal's session, a print job, ...: insertOutbox). Its number, seq,
// is taken at insert (PostgreSQL: from the inserting transaction's id;
// SQLite: the row id, in commit order), and readers show only the events up
// to the store's told horizon (horizon.go): nothing numbers them afterwards.

// toldColumns are the columns that tell integrators of a row (NULL
// merchant_id: an entry they are not told of).
const toldColumns = `merchant_id, type, terminal_id, data`

// toldArgs are the values of toldColumns for o (nil: not told).
func toldArgs(o *instore.OutboxEvent) []any {
	if o == nil {
		return []any{nil, "", "", nil}
	}
	return []any{o.MerchantID, o.Type, o.TerminalID, string(o.Data)}
}

// insertOutbox inserts events of no transaction in the database
// transaction of the write they describe, in the order of evs: a
// statement of several rows (their numbers are taken row after row:
// migration 0021 on PostgreSQL, the row id on SQLite), so that a batch of many (a storm's hellos or session
// ends) is a few statements, not one each. The statements have the row
// counts of outboxRows, so that few shapes are prepared.
func insertOutbox(ctx context.Context, c conn, evs []instore.OutboxEvent) error {
	for len(evs) > 0 {
		n := outboxRows[len(outboxRows)-1]
		for _, size := range outboxRows {
			if size <= len(evs) {
				n = size
				break
			}
		}
		args := make([]any, 0, n*5)
		for i := range evs[:n] {
			args = append(append(args, micros(evs[i].At)), toldArgs(&evs[i])...)
		}
		if _, err := c.exec(ctx, `INSERT INTO events (created_at, `+toldColumns+`) VALUES (?, ?, ?, ?, ?)`+
			strings.Repeat(", (?, ?, ?, ?, ?)", n-1), args...); err != nil {
			return fmt.Errorf("insert event: %w", err)
		}
		evs = evs[n:]
	}
	return nil
}

// outboxRows are the row counts of insertOutbox's statements, largest
// first (5 values a row: 1,280 at the most, within both dialects' bounds).
var outboxRows = []int{256, 64, 16, 4, 1}

// AppendEvents writes events of no stored change.
func (db *DB) AppendEvents(ctx context.Context, evs []instore.OutboxEvent) error {
	return db.update(ctx, func(c conn) error { return insertOutbox(ctx, c, evs) })
}

// SequenceEvents moves the store's told horizon (horizon.go) up to what has
// committed and is on disk, and returns how many events were told since
// its last call (limit is not needed: nothing is numbered). When events
// committed above the horizon, it tries again until they are told.
func (db *DB) SequenceEvents(ctx context.Context, limit int) (int, error) {
	if err := db.advanceTold(ctx); err != nil {
		return 0, fmt.Errorf("sequence events: %w", err)
	}
	to := db.told.Load()
	from := db.reported.Swap(to)
	if to <= from {
		db.reported.CompareAndSwap(to, from) // never lower it
		return 0, nil
	}
	var n int
	if err := db.read().queryRow(ctx, `SELECT COUNT(*) FROM events WHERE seq > ? AND seq <= ? AND merchant_id IS NOT NULL`,
		from, to).Scan(&n); err != nil {
		return 0, fmt.Errorf("sequence events: %w", err)
	}
	return n, nil
}

// listColumns are what ListEvents reads of an event.
const listColumns = `merchant_id, type, terminal_id, created_at, data`

// ListEvents returns the told events of f, oldest first.
func (db *DB) ListEvents(ctx context.Context, f instore.EventFilter) ([]instore.StoredEvent, error) {
	var b strings.Builder
	var args []any
	if f.MerchantID != "" {
		b.WriteString(`SELECT seq, ` + listColumns + ` FROM events WHERE merchant_id = ? AND seq > ? AND seq <= ?`)
		args = append(args, f.MerchantID, f.After, db.told.Load())
	} else {
		// Every merchant's (the node's event feed).
		b.WriteString(`SELECT seq, ` + listColumns + ` FROM events WHERE seq > ? AND seq <= ? AND merchant_id IS NOT NULL`)
		args = append(args, f.After, db.told.Load())
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
	if mutant.On(mutant.EventsOutOfOrder) {
		b.WriteString(` ORDER BY seq DESC LIMIT ?`)
	} else {
		b.WriteString(` ORDER BY seq LIMIT ?`)
	}
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
		err = db.read().queryRow(ctx, `SELECT COALESCE(MAX(seq), 0) FROM events WHERE seq <= ? AND merchant_id IS NOT NULL`,
			db.told.Load()).Scan(&n)
	} else {
		err = db.read().queryRow(ctx, `SELECT COALESCE(MAX(seq), 0) FROM events WHERE merchant_id = ? AND seq <= ?`,
			merchantID, db.told.Load()).Scan(&n)
	}
	if err != nil {
		return 0, fmt.Errorf("last event: %w", err)
	}
	return n, nil
}

// ExpireEvents ends the told events dated before before, with their
// deliveries that ended (a pending one keeps its event: it is still owed).
// An event of no transaction is deleted; a transaction's stays as its
// timeline entry, no longer told (merchant_id and data NULL).
func (db *DB) ExpireEvents(ctx context.Context, before time.Time) (int, error) {
	var n int64
	err := db.update(ctx, func(c conn) error {
		told := db.told.Load()
		if _, err := c.exec(ctx, `DELETE FROM webhook_deliveries WHERE status <> 'pending' AND event_seq IN
			(SELECT seq FROM events WHERE created_at < ? AND merchant_id IS NOT NULL AND seq <= ?)`, micros(before), told); err != nil {
			return fmt.Errorf("expire events: %w", err)
		}
		// The newest told event is kept whatever its age (a reader's cursor
		// beyond it would be refused as unknown).
		// An event an enabled endpoint has yet to be given a delivery for
		// is kept too (a disabled one holds nothing: enabled again, it
		// resumes with what is still kept).
		expired := `created_at < ? AND merchant_id IS NOT NULL AND seq <= ?
			AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_seq = events.seq)
			AND seq < (SELECT MAX(seq) FROM events WHERE merchant_id IS NOT NULL AND seq <= ?)
			AND NOT EXISTS (SELECT 1 FROM webhooks w WHERE w.merchant_id = events.merchant_id
				AND w.status = 'enabled' AND w.deleted_at IS NULL AND w.fanned_seq < events.seq)`
		args := []any{micros(before), told, told}
		for _, q := range []string{`DELETE FROM events WHERE transaction_id IS NULL AND ` + expired,
			`UPDATE events SET merchant_id = NULL, data = NULL WHERE transaction_id IS NOT NULL AND ` + expired} {
			k, err := c.execAffected(ctx, q, args...)
			if err != nil {
				return fmt.Errorf("expire events: %w", err)
			}
			n += k
		}
		return nil
	})
	return int(n), err
}
