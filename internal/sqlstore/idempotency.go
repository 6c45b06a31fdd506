package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/instore-dev/instore"
)

// BeginIdempotency stores rec unless a record with its merchant and key
// exists, and then returns that record. The insert and the read are one
// transaction and the insert does nothing on a taken key, so of concurrent
// first requests exactly one stores its record and the others read it.
//
// On PostgreSQL the insert is one statement (no transaction of its own; the
// relaxed pipeline may send it with other callers' statements) and a taken
// key is read after it; a record deleted between
// the two (expired) is inserted again.
//
// The claim is a relaxed write (relaxedWrite: it does not wait for the
// disk). A crash of the database may lose it only with what committed
// after it that had not reached the disk either: the WAL is written and
// flushed in order, so the durable creation that ties the record to its
// transaction (CreateTransaction) brings the claim to the disk with it.
// A claim lost alone is a request that created nothing: its retry claims
// the key again and runs, as after a claim that was abandoned.
func (db *DB) BeginIdempotency(ctx context.Context, rec *instore.IdempotencyRecord) (*instore.IdempotencyRecord, error) {
	if db.group == nil {
		for range 3 {
			var inserted bool
			err := db.relaxedWrite(ctx, func(c conn) error {
				var err error
				inserted, err = insertIdempotencyIfAbsent(ctx, c, rec)
				return err
			})
			if err != nil {
				return nil, db.conflictErr("begin idempotency", err)
			}
			if inserted {
				return nil, nil
			}
			existing, err := findIdempotency(ctx, db.read(), rec.MerchantID, rec.Key)
			if !errors.Is(err, instore.ErrNotFound) {
				return existing, err
			}
		}
		return nil, fmt.Errorf("begin idempotency: %w (the key's record keeps disappearing)", instore.ErrConflict)
	}
	var existing *instore.IdempotencyRecord
	err := db.relaxedWrite(ctx, func(c conn) error {
		inserted, err := insertIdempotencyIfAbsent(ctx, c, rec)
		if err != nil {
			return c.conflictErr("begin idempotency", err)
		}
		if inserted {
			return nil
		}
		existing, err = findIdempotency(ctx, c, rec.MerchantID, rec.Key)
		return err
	})
	if err != nil {
		return nil, err
	}
	return existing, nil
}

// CompleteIdempotency stores the response of the running record of
// attempt. A missing record, or one of another attempt, is
// instore.ErrNotFound; a completed one is instore.ErrConflict (the first
// response is the one replayed).
//
// The response of a record tied to the transaction its request created is
// a relaxed write, one statement: lost in a crash of the database, the
// record is still tied and running, and a retry answers about that
// transaction (never a second one), as after a crash before the response
// was stored. Any other response waits for the disk: a retry of a request
// that did something else must not run it again.
func (db *DB) CompleteIdempotency(ctx context.Context, merchantID, key, attempt string, status int, header map[string]string, body []byte) error {
	if status <= 0 {
		// status_code NULL (StatusCode 0) means running.
		return fmt.Errorf("complete idempotency: status %d is not an HTTP status", status)
	}
	headers, err := encodeHeader(header)
	if err != nil {
		return err
	}
	const complete = `UPDATE idempotency_keys SET status_code = ?, response_headers = ?, response_body = ?
			WHERE merchant_id = ? AND key = ? AND attempt = ? AND status_code IS NULL`
	args := []any{status, headers, body, merchantID, key, attempt}
	var tied int64
	if err := db.relaxedWrite(ctx, func(c conn) error {
		tied, err = c.execAffected(ctx, complete+` AND transaction_id IS NOT NULL`, args...)
		return err
	}); err != nil {
		return fmt.Errorf("complete idempotency: %w", err)
	}
	if tied > 0 {
		return nil
	}
	return db.update(ctx, func(c conn) error {
		n, err := c.execAffected(ctx, complete, args...)
		if err != nil {
			return fmt.Errorf("complete idempotency: %w", err)
		}
		if n > 0 {
			return nil
		}
		rec, err := findIdempotency(ctx, c, merchantID, key)
		if err != nil {
			return err
		}
		if rec.Attempt != attempt {
			return fmt.Errorf("idempotency record of another attempt %w", instore.ErrNotFound)
		}
		return fmt.Errorf("complete idempotency: %w (already complete)", instore.ErrConflict)
	})
}

// IdempotencyRecord reads a record.
func (db *DB) IdempotencyRecord(ctx context.Context, merchantID, key string) (*instore.IdempotencyRecord, error) {
	return findIdempotency(ctx, db.read(), merchantID, key)
}

// DeleteIdempotency removes the record of attempt unless it names a
// transaction; when there is no such record it is instore.ErrNotFound.
func (db *DB) DeleteIdempotency(ctx context.Context, merchantID, key, attempt string) error {
	return db.update(ctx, func(c conn) error {
		res, err := c.exec(ctx, `DELETE FROM idempotency_keys
			WHERE merchant_id = ? AND key = ? AND attempt = ? AND transaction_id IS NULL`, merchantID, key, attempt)
		if err != nil {
			return fmt.Errorf("delete idempotency: %w", err)
		}
		return mustAffect(res, "idempotency record")
	})
}

// ExpireIdempotency deletes the records created before t and says how many.
func (db *DB) ExpireIdempotency(ctx context.Context, before time.Time) (int, error) {
	n, err := updateValue(ctx, db, nil, func(c conn) (int64, error) {
		n, err := c.execAffected(ctx, `DELETE FROM idempotency_keys WHERE created_at < ?`, micros(before))
		if err != nil {
			return 0, fmt.Errorf("expire idempotency: %w", err)
		}
		return n, nil
	})
	return int(n), err
}

// insertIdempotencyIfAbsent stores rec unless its merchant and key are
// taken, and says whether it did.
func insertIdempotencyIfAbsent(ctx context.Context, c conn, rec *instore.IdempotencyRecord) (bool, error) {
	headers, err := encodeHeader(rec.Header)
	if err != nil {
		return false, err
	}
	status := sql.NullInt64{Int64: int64(rec.StatusCode), Valid: rec.StatusCode != 0}
	n, err := c.execAffected(ctx, `INSERT INTO idempotency_keys
		(merchant_id, key, method, path, request_hash, status_code, response_body, response_headers, created_at,
		attempt, transaction_id)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (merchant_id, key) DO NOTHING`,
		rec.MerchantID, rec.Key, rec.Method, rec.Path, rec.RequestHash, status, rec.Body, headers,
		micros(rec.CreatedAt), rec.Attempt, nullString(rec.TransactionID))
	return n > 0, err
}

const idempotencyColumns = `merchant_id, key, method, path, request_hash, status_code, response_body, response_headers, created_at,
	attempt, transaction_id`

func scanIdempotency(s scanner) (*instore.IdempotencyRecord, error) {
	var (
		rec     instore.IdempotencyRecord
		status  sql.NullInt64
		headers sql.NullString
		created int64
		txID    sql.NullString
	)
	if err := s.Scan(&rec.MerchantID, &rec.Key, &rec.Method, &rec.Path, &rec.RequestHash, &status,
		&rec.Body, &headers, &created, &rec.Attempt, &txID); err != nil {
		return nil, err
	}
	rec.TransactionID = txID.String
	rec.StatusCode = int(status.Int64)
	if headers.Valid {
		if err := json.Unmarshal([]byte(headers.String), &rec.Header); err != nil {
			return nil, fmt.Errorf("decode idempotency response headers: %w", err)
		}
	}
	rec.CreatedAt = fromMicros(created)
	return &rec, nil
}

func findIdempotency(ctx context.Context, c conn, merchantID, key string) (*instore.IdempotencyRecord, error) {
	return getOne(ctx, c, scanIdempotency, "idempotency record", `SELECT `+idempotencyColumns+` FROM idempotency_keys WHERE merchant_id = ? AND key = ?`, merchantID, key)
}

// encodeHeader is a response header as stored: JSON text, NULL when nil.
func encodeHeader(h map[string]string) (sql.NullString, error) {
	return nullJSON(h, h == nil, "idempotency response headers")
}
