package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/instore-dev/instore"
)

// Webhook endpoints and their deliveries (instore.WebhookStore; migration
// 0011).

const webhookColumns = `id, merchant_id, url, event_types, description, status, disabled_reason,
	secret, previous_secret, previous_until, failing_since, created_at, concurrency`

// typesColumn is how event types are stored: ",a,b," (so that a LIKE finds
// one), "" for all.
func typesColumn(ts []instore.EventType) string {
	if len(ts) == 0 {
		return ""
	}
	var b strings.Builder
	for _, t := range ts {
		b.WriteString("," + string(t))
	}
	return b.String() + ","
}

func scanWebhook(s scanner) (*instore.Webhook, error) {
	var w instore.Webhook
	var types string
	var prevUntil, failing sql.NullInt64
	var created int64
	if err := s.Scan(&w.ID, &w.MerchantID, &w.URL, &types, &w.Description, &w.Status, &w.DisabledReason,
		&w.Secret, &w.PreviousSecret, &prevUntil, &failing, &created, &w.Concurrency); err != nil {
		return nil, err
	}
	if t := strings.Trim(types, ","); t != "" {
		for _, s := range strings.Split(t, ",") {
			w.EventTypes = append(w.EventTypes, instore.EventType(s))
		}
	}
	if prevUntil.Valid {
		at := fromMicros(prevUntil.Int64)
		w.PreviousUntil = &at
	}
	if failing.Valid {
		at := fromMicros(failing.Int64)
		w.FailingSince = &at
	}
	w.CreatedAt = fromMicros(created)
	return &w, nil
}

// CreateWebhook stores w unless its merchant has max endpoints already
// (instore.ErrConflict). The count and the insert are one transaction that
// first locks the merchant's row (SELECT ... FOR NO KEY UPDATE on PostgreSQL,
// which leaves the merchant's purchases, whose rows reference it, unblocked;
// SQLite's one writer holds the write lock already), so the creations of
// one merchant are decided one after the other and racing ones cannot pass
// the limit together (instore.ErrNotFound: no such merchant).
func (db *DB) CreateWebhook(ctx context.Context, w *instore.Webhook, max int) error {
	return db.update(ctx, func(c conn) error {
		var merchant string
		if err := c.queryRow(ctx, `SELECT id FROM merchants WHERE id = ?`+c.d.forNoKeyUpdate, w.MerchantID).Scan(&merchant); err != nil {
			return notFound(err, "merchant")
		}
		var n int
		if err := c.queryRow(ctx, `SELECT COUNT(*) FROM webhooks WHERE merchant_id = ? AND deleted_at IS NULL`,
			w.MerchantID).Scan(&n); err != nil {
			return fmt.Errorf("create webhook: %w", err)
		}
		if n >= max {
			return fmt.Errorf("create webhook: %w (%d endpoints)", instore.ErrConflict, n)
		}
		// A new endpoint gets the events told from now on (horizon.go).
		_, err := c.exec(ctx, `INSERT INTO webhooks (`+webhookColumns+`, fanned_seq)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			w.ID, w.MerchantID, w.URL, typesColumn(w.EventTypes), w.Description, w.Status, w.DisabledReason,
			w.Secret, w.PreviousSecret, nullMicros(w.PreviousUntil), nullMicros(w.FailingSince), micros(w.CreatedAt),
			w.InFlight(), db.told.Load())
		if err != nil {
			return c.conflictErr("create webhook", err)
		}
		return nil
	})
}

// Webhook returns a merchant's endpoint.
func (db *DB) Webhook(ctx context.Context, merchantID, id string) (*instore.Webhook, error) {
	w, err := scanWebhook(db.read().queryRow(ctx, `SELECT `+webhookColumns+` FROM webhooks
		WHERE merchant_id = ? AND id = ? AND deleted_at IS NULL`, merchantID, id))
	if err != nil {
		return nil, notFound(err, "webhook")
	}
	return w, nil
}

// Webhooks lists a merchant's endpoints, oldest first.
func (db *DB) Webhooks(ctx context.Context, merchantID string) ([]*instore.Webhook, error) {
	rows, err := db.read().query(ctx, `SELECT `+webhookColumns+` FROM webhooks
		WHERE merchant_id = ? AND deleted_at IS NULL ORDER BY created_at, id`, merchantID)
	if err != nil {
		return nil, fmt.Errorf("webhooks: %w", err)
	}
	return collect(rows, scanWebhook, "webhooks")
}

// ChangeWebhook changes a merchant's endpoint by change, decided on the
// endpoint as last committed: the read, change and the write are one
// transaction that first locks the endpoint's row (SELECT ... FOR NO KEY
// UPDATE on PostgreSQL, which leaves the inserts of its deliveries, whose
// rows reference it, unblocked; SQLite's one writer holds the write lock
// already). The changes of one endpoint (PATCHes, rotations, and the
// dispatcher's failing time and disabling in RecordAttempts, whose UPDATEs
// wait for that lock and then see the row written) are so made one after
// the other, and none writes back a value another changed meanwhile. It
// returns the endpoint as stored.
func (db *DB) ChangeWebhook(ctx context.Context, merchantID, id string, change func(*instore.Webhook) error) (*instore.Webhook, error) {
	return updateValue(ctx, db, nil, func(c conn) (*instore.Webhook, error) {
		w, err := scanWebhook(c.queryRow(ctx, `SELECT `+webhookColumns+` FROM webhooks
			WHERE merchant_id = ? AND id = ? AND deleted_at IS NULL`+c.d.forNoKeyUpdate, merchantID, id))
		if err != nil {
			return nil, notFound(err, "webhook")
		}
		if err := change(w); err != nil {
			return nil, err
		}
		w, err = scanWebhook(c.queryRow(ctx, `UPDATE webhooks SET url = ?, event_types = ?, description = ?, status = ?,
			disabled_reason = ?, secret = ?, previous_secret = ?, previous_until = ?, failing_since = ?, concurrency = ?
			WHERE id = ? RETURNING `+webhookColumns,
			w.URL, typesColumn(w.EventTypes), w.Description, w.Status, w.DisabledReason, w.Secret, w.PreviousSecret,
			nullMicros(w.PreviousUntil), nullMicros(w.FailingSince), w.InFlight(), id))
		if err != nil {
			return nil, fmt.Errorf("change webhook: %w", err)
		}
		return w, nil
	})
}

// DeleteWebhook marks an endpoint deleted and ends its pending deliveries.
//
// Its update of the pending deliveries can meet a lease of the same rows
// (a single statement, locking them in its own order) in a deadlock on
// PostgreSQL (seen under `instore loadtest purchase --webhooks`: the
// deletion answered 500): it is run again (untilNoDeadlock).
func (db *DB) DeleteWebhook(ctx context.Context, merchantID, id string, at time.Time) error {
	return db.untilNoDeadlock(func() error { return db.deleteWebhook(ctx, merchantID, id, at) })
}

func (db *DB) deleteWebhook(ctx context.Context, merchantID, id string, at time.Time) error {
	return db.update(ctx, func(c conn) error {
		res, err := c.exec(ctx, `UPDATE webhooks SET deleted_at = ?, status = 'disabled', secret = '', previous_secret = ''
			WHERE id = ? AND merchant_id = ? AND deleted_at IS NULL`, micros(at), id, merchantID)
		if err != nil {
			return fmt.Errorf("delete webhook: %w", err)
		}
		if err := mustAffect(res, "webhook"); err != nil {
			return err
		}
		_, err = c.exec(ctx, `UPDATE webhook_deliveries SET status = 'failed', done_at = ?
			WHERE webhook_id = ? AND status = 'pending'`, micros(at), id)
		return err
	})
}

const deliveryColumns = `d.id, d.webhook_id, d.event_seq, COALESCE(e.type, ''), d.status, d.next_at, d.created_at, d.done_at`

func scanDelivery(s scanner) (*instore.WebhookDelivery, error) {
	var d instore.WebhookDelivery
	var next, created int64
	var done sql.NullInt64
	if err := s.Scan(&d.ID, &d.WebhookID, &d.EventSeq, &d.EventType, &d.Status, &next, &created, &done); err != nil {
		return nil, err
	}
	d.NextAt, d.CreatedAt = fromMicros(next), fromMicros(created)
	if done.Valid {
		at := fromMicros(done.Int64)
		d.DoneAt = &at
	}
	return &d, nil
}

// attempts fills the attempts of ds.
func (db *DB) attempts(ctx context.Context, ds []*instore.WebhookDelivery) error {
	for _, d := range ds {
		rows, err := db.read().query(ctx, `SELECT n, at, status_code, duration_ms, response, error
			FROM webhook_attempts WHERE delivery_id = ? ORDER BY n`, d.ID)
		if err != nil {
			return fmt.Errorf("delivery attempts: %w", err)
		}
		as, err := collect(rows, func(s scanner) (instore.WebhookAttempt, error) {
			var a instore.WebhookAttempt
			var at int64
			err := s.Scan(&a.N, &at, &a.StatusCode, &a.DurationMS, &a.Response, &a.Error)
			a.At = fromMicros(at)
			return a, err
		}, "delivery attempts")
		if err != nil {
			return err
		}
		d.Attempts = as
	}
	return nil
}

// WebhookDeliveries lists an endpoint's deliveries, newest first.
func (db *DB) WebhookDeliveries(ctx context.Context, webhookID string, before int64, limit int) ([]*instore.WebhookDelivery, error) {
	if before <= 0 {
		before = 1<<63 - 1
	}
	rows, err := db.read().query(ctx, `SELECT `+deliveryColumns+` FROM webhook_deliveries d
		LEFT JOIN events e ON e.seq = d.event_seq
		WHERE d.webhook_id = ? AND d.id < ? ORDER BY d.id DESC LIMIT ?`, webhookID, before, limit)
	if err != nil {
		return nil, fmt.Errorf("webhook deliveries: %w", err)
	}
	ds, err := collect(rows, scanDelivery, "webhook deliveries")
	if err != nil {
		return nil, err
	}
	return ds, db.attempts(ctx, ds)
}

// WebhookDelivery returns one delivery of an endpoint.
func (db *DB) WebhookDelivery(ctx context.Context, webhookID string, id int64) (*instore.WebhookDelivery, error) {
	d, err := scanDelivery(db.read().queryRow(ctx, `SELECT `+deliveryColumns+` FROM webhook_deliveries d
		LEFT JOIN events e ON e.seq = d.event_seq WHERE d.webhook_id = ? AND d.id = ?`, webhookID, id))
	if err != nil {
		return nil, notFound(err, "delivery")
	}
	return d, db.attempts(ctx, []*instore.WebhookDelivery{d})
}

// RetryDelivery makes a delivery pending and due at.
func (db *DB) RetryDelivery(ctx context.Context, webhookID string, id int64, at time.Time) error {
	return db.update(ctx, func(c conn) error {
		res, err := c.exec(ctx, `UPDATE webhook_deliveries SET status = 'pending', next_at = ?, done_at = NULL
			WHERE webhook_id = ? AND id = ?`, micros(at), webhookID, id)
		if err != nil {
			return fmt.Errorf("retry delivery: %w", err)
		}
		return mustAffect(res, "delivery")
	})
}
