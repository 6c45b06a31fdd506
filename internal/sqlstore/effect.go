package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/instore-dev/instore"
)

// Effects (migration 0008): the messages the service owes terminal
// devices. Open ones (done_at NULL) are few, and every query that reads
// them goes through a partial index of the open rows only.

const effectColumns = `id, kind, device_serial, ref, reason, created_at, done_at, outcome`

// CreatePrintJobEffect stores p and e in one database transaction.
func (db *DB) CreatePrintJobEffect(ctx context.Context, p *instore.PrintJob, e *instore.Effect) error {
	return db.update(ctx, func(c conn) error {
		if err := insertPrintJob(ctx, c, p); err != nil {
			return err
		}
		return insertEffect(ctx, c, e)
	})
}

func insertEffect(ctx context.Context, c conn, e *instore.Effect) error {
	_, err := c.exec(ctx, `INSERT INTO effects (`+effectColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		e.ID, e.Kind, e.SerialNumber, e.Ref, e.Reason, micros(e.CreatedAt), nullMicros(e.DoneAt), nullString(e.Outcome))
	if err != nil {
		return c.conflictErr("create effect", err)
	}
	return nil
}

// Effect returns the effect with id.
func (db *DB) Effect(ctx context.Context, id string) (*instore.Effect, error) {
	return getOne(ctx, db.read(), scanEffect, "effect", `SELECT `+effectColumns+` FROM effects WHERE id = ?`, id)
}

// OpenEffects lists the open effects of a device, oldest first.
func (db *DB) OpenEffects(ctx context.Context, serial string) ([]*instore.Effect, error) {
	return getFew(ctx, db.read(), scanEffect, "list open effects", `SELECT `+effectColumns+` FROM effects
		WHERE device_serial = ? AND done_at IS NULL ORDER BY created_at, id`, serial)
}

// OwedDevices returns the devices owed an open effect, with the creation
// time of the newest (the partial index of open effects serves it).
func (db *DB) OwedDevices(ctx context.Context) (map[string]time.Time, error) {
	rows, err := db.read().query(ctx, `SELECT device_serial, MAX(created_at) FROM effects WHERE done_at IS NULL GROUP BY device_serial`)
	if err != nil {
		return nil, fmt.Errorf("owed devices: %w", err)
	}
	defer rows.Close()
	out := map[string]time.Time{}
	for rows.Next() {
		var s string
		var at int64
		if err := rows.Scan(&s, &at); err != nil {
			return nil, fmt.Errorf("owed devices: %w", err)
		}
		out[s] = fromMicros(at)
	}
	return out, rows.Err()
}

// EndEffect marks one open effect of a device done.
func (db *DB) EndEffect(ctx context.Context, id, serial string, outcome instore.EffectOutcome, at time.Time) error {
	return db.single(ctx, func(c conn) error {
		res, err := c.exec(ctx, `UPDATE effects SET done_at = ?, outcome = ?
			WHERE id = ? AND device_serial = ? AND done_at IS NULL`, micros(at), outcome, id, serial)
		if err != nil {
			return fmt.Errorf("end effect: %w", err)
		}
		return mustAffect(res, "open effect")
	})
}

// EndEffectsOf marks the open effects of kind for ref done.
func (db *DB) EndEffectsOf(ctx context.Context, ref string, kind instore.EffectKind, outcome instore.EffectOutcome, at time.Time) (int, error) {
	var n int64
	err := db.single(ctx, func(c conn) error {
		var err error
		n, err = endEffectsOf(ctx, c, ref, kind, outcome, at)
		return err
	})
	return int(n), err
}

func endEffectsOf(ctx context.Context, c conn, ref string, kind instore.EffectKind, outcome instore.EffectOutcome, at time.Time) (int64, error) {
	n, err := c.execAffected(ctx, `UPDATE effects SET done_at = ?, outcome = ?
		WHERE ref = ? AND kind = ? AND done_at IS NULL`, micros(at), outcome, ref, kind)
	if err != nil {
		return 0, fmt.Errorf("end effects: %w", err)
	}
	return n, nil
}

// ExpireEffects marks the open effects created before `before` done.
func (db *DB) ExpireEffects(ctx context.Context, before, at time.Time) ([]*instore.Effect, error) {
	var list []*instore.Effect
	err := db.single(ctx, func(c conn) error {
		rows, err := c.query(ctx, `UPDATE effects SET done_at = ?, outcome = ?
			WHERE done_at IS NULL AND created_at < ? AND kind <> ? RETURNING `+effectColumns,
			micros(at), instore.EffectExpired, micros(before), instore.EffectReversal)
		if err != nil {
			return fmt.Errorf("expire effects: %w", err)
		}
		list, err = collect(rows, scanEffect, "expire effects")
		return err
	})
	if err != nil {
		return nil, err
	}
	// RETURNING gives no order: oldest first, as the other lists.
	slices.SortFunc(list, func(a, b *instore.Effect) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return list, nil
}

func scanEffect(s scanner) (*instore.Effect, error) {
	var (
		e       instore.Effect
		created int64
		done    sql.NullInt64
		outcome sql.NullString
	)
	if err := s.Scan(&e.ID, &e.Kind, &e.SerialNumber, &e.Ref, &e.Reason, &created, &done, &outcome); err != nil {
		return nil, err
	}
	e.CreatedAt = fromMicros(created)
	e.DoneAt = fromNullMicros(done)
	e.Outcome = instore.EffectOutcome(outcome.String)
	return &e, nil
}
