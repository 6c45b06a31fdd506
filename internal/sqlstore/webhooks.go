package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/lifecycle"
)

// Webhook endpoints and their deliveries (instore.WebhookStore; migration
// 0011).

const webhookColumns = `id, merchant_id, url, event_types, description, status, disabled_reason,
	secret, previous_secret, previous_until, failing_since, created_at`

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
		&w.Secret, &w.PreviousSecret, &prevUntil, &failing, &created); err != nil {
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
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			w.ID, w.MerchantID, w.URL, typesColumn(w.EventTypes), w.Description, w.Status, w.DisabledReason,
			w.Secret, w.PreviousSecret, nullMicros(w.PreviousUntil), nullMicros(w.FailingSince), micros(w.CreatedAt),
			db.told.Load())
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

// UpdateWebhook writes w's mutable fields.
func (db *DB) UpdateWebhook(ctx context.Context, w *instore.Webhook) error {
	return db.update(ctx, func(c conn) error {
		res, err := c.exec(ctx, `UPDATE webhooks SET url = ?, event_types = ?, description = ?, status = ?,
			disabled_reason = ?, secret = ?, previous_secret = ?, previous_until = ?, failing_since = ?
			WHERE id = ? AND merchant_id = ? AND deleted_at IS NULL`,
			w.URL, typesColumn(w.EventTypes), w.Description, w.Status, w.DisabledReason, w.Secret, w.PreviousSecret,
			nullMicros(w.PreviousUntil), nullMicros(w.FailingSince), w.ID, w.MerchantID)
		if err != nil {
			return fmt.Errorf("update webhook: %w", err)
		}
		return mustAffect(res, "webhook")
	})
}

// DeleteWebhook marks an endpoint deleted and ends its pending deliveries.
func (db *DB) DeleteWebhook(ctx context.Context, merchantID, id string, at time.Time) error {
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

// ClaimDeliveries leases the due heads of the endpoints' queues: a
// compare-and-set on the lease, so that of nodes claiming at once exactly
// one gets each. The heads are taken in turns over the merchants (each
// merchant's earliest due head, then each one's second, ...), at most
// q.PerMerchant of a merchant less those it has in flight (q.Busy).
func (db *DB) ClaimDeliveries(ctx context.Context, now, leaseUntil time.Time, q instore.ClaimQuota) ([]*instore.DueDelivery, error) {
	// An endpoint whose fill failed is left out of this round, never the
	// others: its error is returned beside what was claimed.
	fillErr := db.fillDeliveries(ctx)
	if q.Limit <= 0 {
		return nil, fillErr
	}
	turns, rows := q.Limit, q.Limit
	var full []any // merchants without room: left out
	if q.PerMerchant > 0 {
		turns = q.PerMerchant
		for m, n := range q.Busy {
			if n >= q.PerMerchant {
				full = append(full, m)
			} else {
				rows += n // rows of a busy merchant it has no room for
			}
		}
	}
	notFull := ""
	if len(full) > 0 {
		notFull = ` AND w.merchant_id NOT IN (?` + strings.Repeat(`, ?`, len(full)-1) + `)`
	}
	// The head of each enabled endpoint's queue, one index seek per
	// endpoint (webhook_deliveries_pending), then those due and not
	// leased: the work is the number of endpoints, not of the deliveries
	// waiting behind their heads (a backlog of thousands).
	args := append(append([]any{micros(now), micros(now)}, full...), turns, rows)
	rs, err := db.read().query(ctx, `SELECT id, merchant_id FROM (
		SELECT d.id, w.merchant_id, d.next_at,
			ROW_NUMBER() OVER (PARTITION BY w.merchant_id ORDER BY d.next_at, d.id) AS turn
		FROM webhooks w
		JOIN webhook_deliveries d ON d.id = (SELECT d2.id FROM webhook_deliveries d2
			WHERE d2.webhook_id = w.id AND d2.status = 'pending' ORDER BY d2.event_seq LIMIT 1)
		WHERE w.status = 'enabled' AND w.deleted_at IS NULL AND d.next_at <= ? AND d.lease_until < ?`+notFull+`
		) h WHERE turn <= ? ORDER BY turn, next_at, id LIMIT ?`, args...)
	if err != nil {
		return nil, fmt.Errorf("due deliveries: %w", err)
	}
	type head struct {
		id       int64
		merchant string
	}
	heads, err := collect(rs, func(s scanner) (head, error) {
		var h head
		return h, s.Scan(&h.id, &h.merchant)
	}, "due deliveries")
	if err != nil {
		return nil, err
	}
	taken := map[string]int{}
	var out []*instore.DueDelivery
	for _, h := range heads {
		if len(out) == q.Limit {
			break
		}
		if q.Room(h.merchant, taken[h.merchant]) <= 0 {
			continue
		}
		id := h.id
		var claimed bool
		err := db.relaxedWrite(ctx, func(c conn) error {
			res, err := c.exec(ctx, `UPDATE webhook_deliveries SET lease_until = ?
				WHERE id = ? AND status = 'pending' AND lease_until < ?`, micros(leaseUntil), id, micros(now))
			if err != nil {
				return err
			}
			n, err := res.RowsAffected()
			claimed = n == 1
			return err
		})
		if err != nil {
			return out, fmt.Errorf("claim delivery: %w", err)
		}
		if !claimed {
			continue
		}
		// The claimed delivery with its endpoint and its event, in one read.
		d := instore.DueDelivery{ID: id}
		var at int64
		var data string
		w, err := scanWebhook(prefixScanner{db.read().queryRow(ctx, `SELECT d.attempts, d.event_seq,
			e.merchant_id, e.type, e.terminal_id, e.created_at, e.data, `+prefixed("w.", webhookColumns)+`
			FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id JOIN events e ON e.seq = d.event_seq
			WHERE d.id = ?`, id), []any{&d.Attempts, &d.Event.Seq,
			&d.Event.MerchantID, &d.Event.Type, &d.Event.TerminalID, &at, &data}})
		if errors.Is(err, sql.ErrNoRows) {
			// Its event is gone (expired while the delivery was made): it
			// cannot be sent; given up, so that it no longer heads its
			// endpoint's queue.
			err := db.update(ctx, func(c conn) error {
				st := lifecycle.NextDelivery(lifecycle.DeliveryPending, lifecycle.DeliveryEvent{Kind: lifecycle.DeliveryEventGone, At: now})
				_, err := c.exec(ctx, `UPDATE webhook_deliveries SET status = ?, done_at = ?
					WHERE id = ? AND status = 'pending'`, string(st.State), micros(now), id)
				return err
			})
			if err != nil {
				return out, fmt.Errorf("give up a delivery without its event: %w", err)
			}
			continue
		}
		if err != nil {
			return out, fmt.Errorf("claimed delivery: %w", err)
		}
		d.Event.At, d.Event.Data, d.Webhook = fromMicros(at), []byte(data), *w
		out = append(out, &d)
		taken[h.merchant]++
	}
	return out, fillErr
}

// deliveriesAhead is how many deliveries an endpoint is given ahead of
// the one it is sent (what GET /webhooks/{id}/deliveries shows pending).
const deliveriesAhead = 32

// fillSkip is how far an endpoint's merchant's events may run past its
// fanned_seq, none of them wanted, before fanned_seq is moved past them.
const fillSkip = 1024

// fillDeliveries gives each enabled endpoint that has a quarter of
// deliveriesAhead pending deliveries or fewer the deliveries of its next
// wanted events after fanned_seq, in number order, up to deliveriesAhead
// pending, and moves fanned_seq past them; an endpoint that wants none of
// the events after it moves it to the highest number. So deliveries are made at the pace they are sent,
// not one per event and endpoint at numbering. One writer per endpoint at
// a time: the move of fanned_seq is a compare-and-set in the transaction
// that inserts the deliveries (a racing node's inserts nothing).
func (db *DB) fillDeliveries(ctx context.Context) error {
	top := db.told.Load() // the events told (horizon.go)
	type endpoint struct {
		id, merchantID, types string
		fanned                int64
	}
	// Only endpoints whose merchant has events after their fanned_seq.
	rows, err := db.read().query(ctx, `SELECT w.id, w.merchant_id, w.event_types, w.fanned_seq FROM webhooks w
		WHERE w.status = 'enabled' AND w.deleted_at IS NULL AND w.fanned_seq < ?
			AND EXISTS (SELECT 1 FROM events e WHERE e.merchant_id = w.merchant_id AND e.seq > w.fanned_seq)`, top)
	if err != nil {
		return fmt.Errorf("fill deliveries: %w", err)
	}
	eps, err := collect(rows, func(s scanner) (endpoint, error) {
		var e endpoint
		return e, s.Scan(&e.id, &e.merchantID, &e.types, &e.fanned)
	}, "fill deliveries")
	if err != nil {
		return err
	}
	var errs []error
	for _, ep := range eps {
		var pending int
		if err := db.read().queryRow(ctx, `SELECT COUNT(*) FROM (SELECT 1 FROM webhook_deliveries
			WHERE webhook_id = ? AND status = 'pending' LIMIT ?) p`, ep.id, deliveriesAhead).Scan(&pending); err != nil {
			errs = append(errs, fmt.Errorf("fill deliveries: %w", err))
			continue
		}
		if pending > deliveriesAhead/4 {
			continue // refilled in batches, not a write per delivery sent
		}
		wanted := `merchant_id = ? AND seq > ? AND seq <= ? AND (? = '' OR ? LIKE '%,' || type || ',%')`
		err := db.update(ctx, func(c conn) error {
			seqs, err := c.query(ctx, `SELECT seq FROM events WHERE `+wanted+` ORDER BY seq LIMIT ?`,
				ep.merchantID, ep.fanned, top, ep.types, ep.types, deliveriesAhead-pending)
			if err != nil {
				return err
			}
			got, err := collect(seqs, func(s scanner) (int64, error) {
				var n int64
				return n, s.Scan(&n)
			}, "fill deliveries")
			if err != nil {
				return err
			}
			upTo := top
			switch {
			case len(got) == deliveriesAhead-pending:
				upTo = got[len(got)-1]
			case len(got) == 0 && top-ep.fanned < fillSkip:
				// None wanted yet: fanned_seq moves in steps of fillSkip
				// events, not one write per round.
				return nil
			}
			res, err := c.exec(ctx, `UPDATE webhooks SET fanned_seq = ?
				WHERE id = ? AND fanned_seq = ? AND status = 'enabled' AND deleted_at IS NULL`,
				upTo, ep.id, ep.fanned)
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil || n == 0 {
				return err // another node moved it (or the endpoint changed): nothing to do
			}
			if len(got) == 0 {
				return nil
			}
			// A delivery made already (by a node of the release before,
			// which made them when events were numbered) is kept as it is.
			_, err = c.exec(ctx, `INSERT INTO webhook_deliveries (webhook_id, event_seq, status, attempts, next_at, created_at)
				SELECT ?, seq, 'pending', 0, created_at, created_at FROM events WHERE `+wanted+`
				ON CONFLICT (webhook_id, event_seq) DO NOTHING`,
				ep.id, ep.merchantID, ep.fanned, upTo, ep.types, ep.types)
			return err
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("fill deliveries of endpoint %s: %w", ep.id, err))
		}
	}
	return errors.Join(errs...)
}

// prefixScanner scans its columns into pre, then the rest into what Scan is
// given: a row of several tables read by one table's scan function.
type prefixScanner struct {
	s   scanner
	pre []any
}

func (p prefixScanner) Scan(dest ...any) error {
	return p.s.Scan(append(p.pre[:len(p.pre):len(p.pre)], dest...)...)
}

// prefixed qualifies each column of the list cols with prefix ("w.").
func prefixed(prefix, cols string) string {
	parts := strings.Split(cols, ",")
	for i, c := range parts {
		parts[i] = prefix + strings.TrimSpace(c)
	}
	return strings.Join(parts, ", ")
}

// relaxedWrite runs the one-statement write fn without waiting for the
// disk, as a relaxed Commit does (PostgreSQL: the pool with synchronous_commit
// off; SQLite: a relaxed write of the group committer). It is atomic and
// isolated like any write, and visible to every node once it returns; a
// crash of the database may lose it. A delivery's lease is such a write: a
// lost lease lets another node send the delivery again, which at least
// once allows (the receiver deduplicates on webhook-id), and the claim no
// longer waits for a flush of its own.
func (db *DB) relaxedWrite(ctx context.Context, fn func(c conn) error) error {
	switch {
	case db.group != nil:
		return db.group.doRelaxed(ctx, fn)
	case db.relaxed != nil:
		return fn(conn{d: db.d, q: db.relaxed})
	}
	return db.update(ctx, fn)
}

// RecordAttempt records an attempt and what follows from it.
func (db *DB) RecordAttempt(ctx context.Context, d *instore.DueDelivery, o instore.AttemptOutcome) error {
	a := o.Attempt
	return db.update(ctx, func(c conn) error {
		if _, err := c.exec(ctx, `INSERT INTO webhook_attempts (delivery_id, n, at, status_code, duration_ms, response, error)
			VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (delivery_id, n) DO NOTHING`,
			d.ID, a.N, micros(a.At), a.StatusCode, a.DurationMS, a.Response, a.Error); err != nil {
			return fmt.Errorf("record attempt: %w", err)
		}
		switch {
		case o.Succeeded:
			if _, err := c.exec(ctx, `UPDATE webhook_deliveries SET status = 'succeeded', attempts = ?, done_at = ?, lease_until = 0
				WHERE id = ?`, a.N, micros(a.At), d.ID); err != nil {
				return fmt.Errorf("record attempt: %w", err)
			}
			_, err := c.exec(ctx, `UPDATE webhooks SET failing_since = NULL WHERE id = ?`, d.Webhook.ID)
			return err
		case o.GiveUp:
			if _, err := c.exec(ctx, `UPDATE webhook_deliveries SET status = 'failed', attempts = ?, done_at = ?, lease_until = 0
				WHERE id = ?`, a.N, micros(a.At), d.ID); err != nil {
				return fmt.Errorf("record attempt: %w", err)
			}
		default:
			if _, err := c.exec(ctx, `UPDATE webhook_deliveries SET attempts = ?, next_at = ?, lease_until = 0
				WHERE id = ?`, a.N, micros(o.NextAt), d.ID); err != nil {
				return fmt.Errorf("record attempt: %w", err)
			}
		}
		if _, err := c.exec(ctx, `UPDATE webhooks SET failing_since = ? WHERE id = ? AND failing_since IS NULL`,
			micros(a.At), d.Webhook.ID); err != nil {
			return fmt.Errorf("record attempt: %w", err)
		}
		_, err := c.exec(ctx, `UPDATE webhooks SET status = 'disabled', disabled_reason = ?
			WHERE id = ? AND status = 'enabled' AND failing_since < ?`, o.DisableReason, d.Webhook.ID, micros(o.DisableBefore))
		return err
	})
}
