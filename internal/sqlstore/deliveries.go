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

// The deliveries of webhooks (instore.WebhookStore): made as the
// dispatcher reaches an endpoint's events (fillDeliveries), claimed in
// runs behind each endpoint's head (ClaimDeliveries) and recorded a run at
// a time (RecordAttempts).

// ClaimDeliveries leases the due heads of the endpoints' queues, each with
// up to q.Run-1 consecutive due deliveries behind it (a run): a
// compare-and-set on the head's lease, so that of nodes claiming at once
// exactly one gets each head; the deliveries behind a head are leased by
// the node that holds it (a claim takes heads only, so no other node
// takes them: while the run is sent, its first unsent delivery is the
// endpoint's head, leased). The heads are taken in turns over the
// merchants (each merchant's earliest due head, then each one's second,
// ...), at most q.PerMerchant of a merchant less those it has in flight
// (q.Busy).
func (db *DB) ClaimDeliveries(ctx context.Context, now, leaseUntil time.Time, q instore.ClaimQuota) ([]*instore.DueDelivery, error) {
	// An endpoint whose fill failed is left out of this round, never the
	// others: its error is returned beside what was claimed.
	fillErr := db.fillDeliveries(ctx)
	if q.Limit <= 0 {
		return nil, fillErr
	}
	heads, err := db.dueHeads(ctx, now, q)
	if err != nil {
		return nil, err
	}
	// The leases of every run in one write (one wait for the group
	// committer on SQLite, not one per endpoint).
	var won []head
	err = db.relaxedWrite(ctx, func(c conn) error {
		won = won[:0]
		taken := map[string]int{}
		for _, h := range heads {
			if len(won) == q.Limit {
				break
			}
			if q.Room(h.merchant, taken[h.merchant]) <= 0 {
				continue
			}
			ok, err := leaseRun(ctx, c, h, now, leaseUntil, q.RunOf(h.inFlight))
			if err != nil {
				return err
			}
			if ok {
				won = append(won, h)
				taken[h.merchant]++
			}
		}
		return nil
	})
	if err != nil {
		// What was leased (PostgreSQL: each statement commits alone) is
		// sent when its lease ends.
		return nil, fmt.Errorf("claim deliveries: %w", err)
	}
	var out []*instore.DueDelivery
	for _, h := range won {
		r, err := db.readRun(ctx, h, now, leaseUntil, q.RunOf(h.inFlight))
		if err != nil {
			return out, err
		}
		out = append(out, r...)
	}
	return out, fillErr
}

// head is the first pending delivery of an endpoint's queue.
type head struct {
	id, seq           int64
	webhook, merchant string
	inFlight          int // the endpoint's concurrency
}

// dueHeads returns the due, unleased heads of the enabled endpoints' queues
// in the order of the merchants' turns, within q.
func (db *DB) dueHeads(ctx context.Context, now time.Time, q instore.ClaimQuota) ([]head, error) {
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
	rs, err := db.read().query(ctx, `SELECT id, event_seq, webhook_id, merchant_id, concurrency FROM (
		SELECT d.id, d.event_seq, d.webhook_id, w.merchant_id, w.concurrency, d.next_at,
			ROW_NUMBER() OVER (PARTITION BY w.merchant_id ORDER BY d.next_at, d.id) AS turn
		FROM webhooks w
		JOIN webhook_deliveries d ON d.id = (SELECT d2.id FROM webhook_deliveries d2
			WHERE d2.webhook_id = w.id AND d2.status = 'pending' ORDER BY d2.event_seq LIMIT 1)
		WHERE w.status = 'enabled' AND w.deleted_at IS NULL AND d.next_at <= ? AND d.lease_until < ?`+notFull+`
		) h WHERE turn <= ? ORDER BY turn, next_at, id LIMIT ?`, args...)
	if err != nil {
		return nil, fmt.Errorf("due deliveries: %w", err)
	}
	return collect(rs, func(s scanner) (head, error) {
		var h head
		return h, s.Scan(&h.id, &h.seq, &h.webhook, &h.merchant, &h.inFlight)
	}, "due deliveries")
}

// leaseRun leases the head h, if no other node took it first, and up to
// run-1 due deliveries behind it; it tells whether h was leased.
func leaseRun(ctx context.Context, c conn, h head, now, leaseUntil time.Time, run int) (bool, error) {
	lease := micros(leaseUntil)
	res, err := c.exec(ctx, `UPDATE webhook_deliveries SET lease_until = ?
		WHERE id = ? AND status = 'pending' AND lease_until < ? AND next_at <= ?`, lease, h.id, micros(now), micros(now))
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	if err != nil || n != 1 || run == 1 {
		return n == 1, err
	}
	// The head is this node's: those behind it too.
	_, err = c.exec(ctx, `UPDATE webhook_deliveries SET lease_until = ?
		WHERE id IN (SELECT id FROM webhook_deliveries WHERE webhook_id = ? AND status = 'pending' AND event_seq > ?
			ORDER BY event_seq LIMIT ?)
		AND lease_until < ? AND next_at <= ?`, lease, h.webhook, h.seq, run-1, micros(now), micros(now))
	return true, err
}

// readRun returns the run leased with h (leaseRun), in order, with its
// endpoint and events. A delivery whose event is gone (expired while it
// waited) is given up on the way; the run ends at the first delivery it
// did not lease (not due: an older delivery retried by the merchant),
// whose followers' leases are given back.
func (db *DB) readRun(ctx context.Context, h head, now, leaseUntil time.Time, run int) ([]*instore.DueDelivery, error) {
	lease := micros(leaseUntil)
	w, err := scanWebhook(db.read().queryRow(ctx, `SELECT `+webhookColumns+` FROM webhooks WHERE id = ?`, h.webhook))
	if err != nil {
		return nil, fmt.Errorf("claimed deliveries' endpoint: %w", err)
	}
	type row struct {
		d     instore.DueDelivery
		lease int64
		gone  bool
	}
	rs, err := db.read().query(ctx, `SELECT d.id, d.attempts, d.event_seq, d.lease_until, e.seq IS NULL,
			COALESCE(e.merchant_id, ''), COALESCE(e.type, ''), COALESCE(e.terminal_id, ''), COALESCE(e.created_at, 0), COALESCE(e.data, '')
		FROM webhook_deliveries d LEFT JOIN events e ON e.seq = d.event_seq
		WHERE d.webhook_id = ? AND d.status = 'pending' AND d.event_seq >= ? ORDER BY d.event_seq LIMIT ?`, h.webhook, h.seq, run)
	if err != nil {
		return nil, fmt.Errorf("claimed deliveries: %w", err)
	}
	got, err := collect(rs, func(s scanner) (row, error) {
		var r row
		var at int64
		var data string
		err := s.Scan(&r.d.ID, &r.d.Attempts, &r.d.Event.Seq, &r.lease, &r.gone,
			&r.d.Event.MerchantID, &r.d.Event.Type, &r.d.Event.TerminalID, &at, &data)
		r.d.Event.At, r.d.Event.Data, r.d.Webhook = fromMicros(at), []byte(data), *w
		return r, err
	}, "claimed deliveries")
	if err != nil {
		return nil, err
	}
	var out []*instore.DueDelivery
	var gone, release []any
	for i, r := range got {
		switch {
		case r.lease != lease:
			// Not this node's: the run ends before it.
			for _, r := range got[i:] {
				if r.lease == lease {
					release = append(release, r.d.ID)
				}
			}
		case r.gone:
			gone = append(gone, r.d.ID)
			continue
		default:
			out = append(out, &r.d)
			continue
		}
		break
	}
	if len(gone) > 0 {
		// Their events are gone (expired while the deliveries were made):
		// they cannot be sent; given up, so that they no longer head the
		// endpoint's queue.
		st := lifecycle.NextDelivery(lifecycle.DeliveryPending, lifecycle.DeliveryEvent{Kind: lifecycle.DeliveryEventGone, At: now})
		err := db.update(ctx, func(c conn) error {
			_, err := c.exec(ctx, `UPDATE webhook_deliveries SET status = ?, done_at = ?, lease_until = 0
				WHERE status = 'pending' AND id IN `+placeholders(len(gone)), append([]any{string(st.State), micros(now)}, gone...)...)
			return err
		})
		if err != nil {
			return out, fmt.Errorf("give up deliveries without their events: %w", err)
		}
	}
	if len(release) > 0 {
		err := db.relaxedWrite(ctx, func(c conn) error {
			_, err := c.exec(ctx, `UPDATE webhook_deliveries SET lease_until = 0
				WHERE lease_until = ? AND id IN `+placeholders(len(release)), append([]any{lease}, release...)...)
			return err
		})
		if err != nil {
			return out, fmt.Errorf("give back deliveries' leases: %w", err)
		}
	}
	return out, nil
}

// placeholders is "(?, ?, ...)" for n values.
func placeholders(n int) string {
	return "(?" + strings.Repeat(", ?", n-1) + ")"
}

// relaxedWrite runs the write fn without waiting for the disk, as a
// relaxed Commit does (PostgreSQL: the pool with synchronous_commit off,
// each statement of fn committed before the next runs, through the relaxed
// pipeline, which may send it with other callers' statements; SQLite: a relaxed write of the
// group committer). Each statement is atomic and isolated like any write,
// and visible to every node once it returns; a crash of the database may
// lose it. A delivery's lease is such a write: a lost lease lets another
// node send the delivery again, which at least once allows (the receiver
// deduplicates on webhook-id), and the claim no longer waits for a flush
// of its own.
func (db *DB) relaxedWrite(ctx context.Context, fn func(c conn) error) error {
	switch {
	case db.group != nil:
		return db.counted(true, db.group.doRelaxed(ctx, fn))
	case db.relaxed != nil:
		return db.counted(true, fn(conn{d: db.d, q: db.relaxedPipe.querier(db.relaxed)}))
	}
	return db.update(ctx, fn)
}

// relaxedUpdate runs the transaction fn without waiting for the disk
// (relaxedWrite, for several statements that must be atomic: on
// PostgreSQL a transaction of the pool with synchronous_commit off).
func (db *DB) relaxedUpdate(ctx context.Context, fn func(c conn) error) error {
	if db.group != nil || db.relaxed == nil {
		return db.relaxedWrite(ctx, fn)
	}
	tx, err := db.relaxed.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(conn{d: db.d, q: tx}); err != nil {
		tx.Rollback()
		return err
	}
	return db.counted(true, tx.Commit())
}

// recordChunk bounds the rows of one statement of RecordAttempts.
const recordChunk = 200

// RecordAttempts records attempts and what follows from them, and gives
// back the leases of the deliveries not attempted, in one transaction
// (one commit for a run of deliveries): the attempts in one statement
// per recordChunk, the deliveries that succeeded in one, the others one
// by one; each endpoint's failing time and disabling as if recorded one
// after the other. The transaction does not wait for the disk (as the
// lease): a crash of the database that loses it leaves the deliveries
// pending, and they are sent again (at least once), their lost attempts
// unrecorded.
func (db *DB) RecordAttempts(ctx context.Context, rs []instore.AttemptRecord) error {
	if len(rs) == 0 {
		return nil
	}
	return db.relaxedUpdate(ctx, func(c conn) error {
		var attempts, succeeded [][]any
		var release []any
		healths := map[string][]*instore.AttemptOutcome{}
		var order []string
		var failed []*instore.AttemptRecord
		for i, r := range rs {
			d, o := r.Delivery, r.Outcome
			if o == nil {
				release = append(release, d.ID)
				continue
			}
			a := o.Attempt
			attempts = append(attempts, []any{d.ID, a.N, micros(a.At), a.StatusCode, a.DurationMS, a.Response, a.Error})
			if _, seen := healths[d.Webhook.ID]; !seen {
				order = append(order, d.Webhook.ID)
			}
			healths[d.Webhook.ID] = append(healths[d.Webhook.ID], o)
			if o.Succeeded {
				succeeded = append(succeeded, []any{d.ID, a.N, micros(a.At)})
				continue
			}
			failed = append(failed, &rs[i])
		}
		// The endpoints' rows first, then the deliveries', as DeleteWebhook
		// and the fill take them (no deadlock on PostgreSQL).
		for _, id := range order {
			if err := recordHealth(ctx, c, id, healths[id]); err != nil {
				return err
			}
		}
		for _, r := range failed {
			d, o := r.Delivery, r.Outcome
			a := o.Attempt
			var err error
			if o.GiveUp {
				_, err = c.exec(ctx, `UPDATE webhook_deliveries SET status = 'failed', attempts = ?, done_at = ?, lease_until = 0
					WHERE id = ?`, a.N, micros(a.At), d.ID)
			} else {
				_, err = c.exec(ctx, `UPDATE webhook_deliveries SET attempts = ?, next_at = ?, lease_until = 0
					WHERE id = ?`, a.N, micros(o.NextAt), d.ID)
			}
			if err != nil {
				return fmt.Errorf("record attempt: %w", err)
			}
		}
		for rows := range chunks(attempts) {
			if _, err := c.exec(ctx, `INSERT INTO webhook_attempts (delivery_id, n, at, status_code, duration_ms, response, error)
				VALUES `+valueRows(len(rows), "?, ?, ?, ?, ?, ?, ?")+` ON CONFLICT (delivery_id, n) DO NOTHING`, flat(rows)...); err != nil {
				return fmt.Errorf("record attempts: %w", err)
			}
		}
		for rows := range chunks(succeeded) {
			if _, err := c.exec(ctx, `WITH v (id, n, at) AS (VALUES `+
				valueRows(len(rows), "CAST(? AS BIGINT), CAST(? AS INTEGER), CAST(? AS BIGINT)")+`)
				UPDATE webhook_deliveries SET status = 'succeeded', attempts = v.n, done_at = v.at, lease_until = 0
				FROM v WHERE webhook_deliveries.id = v.id`, flat(rows)...); err != nil {
				return fmt.Errorf("record attempts: %w", err)
			}
		}
		if len(release) > 0 {
			if _, err := c.exec(ctx, `UPDATE webhook_deliveries SET lease_until = 0
				WHERE status = 'pending' AND id IN `+placeholders(len(release)), release...); err != nil {
				return fmt.Errorf("give back deliveries' leases: %w", err)
			}
		}
		return nil
	})
}

// recordHealth moves an endpoint's health (its failing time, and its
// status when failing too long) by its attempts' outcomes of this round,
// in order (lifecycle.NextHealth), on its row as last committed. The
// common round (every attempt succeeded, the endpoint not failing)
// changes nothing and only reads the row; one that changes it reads it
// again locked (FOR NO KEY UPDATE on PostgreSQL, as ChangeWebhook takes
// it) and decides again on it, so that a PATCH meanwhile is neither
// written over nor lost.
func recordHealth(ctx context.Context, c conn, webhookID string, outcomes []*instore.AttemptOutcome) error {
	for i, lock := range []string{"", c.d.forNoKeyUpdate} {
		var h lifecycle.Health
		var failing sql.NullInt64
		err := c.queryRow(ctx, `SELECT status, disabled_reason, failing_since FROM webhooks WHERE id = ?`+lock,
			webhookID).Scan(&h.Status, &h.DisabledReason, &failing)
		if errors.Is(err, sql.ErrNoRows) {
			return nil // deleted since the claim: nothing to keep
		} else if err != nil {
			return fmt.Errorf("record attempt: %w", err)
		}
		if failing.Valid {
			at := fromMicros(failing.Int64)
			h.FailingSince = &at
		}
		before := h
		for _, o := range outcomes {
			h = lifecycle.NextHealth(h, *o)
		}
		if h.Status == before.Status && h.DisabledReason == before.DisabledReason &&
			nullMicros(h.FailingSince) == nullMicros(before.FailingSince) {
			return nil
		}
		if i == 0 {
			continue // a change: decided again on the locked row
		}
		if _, err := c.exec(ctx, `UPDATE webhooks SET status = ?, disabled_reason = ?, failing_since = ? WHERE id = ?`,
			h.Status, h.DisabledReason, nullMicros(h.FailingSince), webhookID); err != nil {
			return fmt.Errorf("record attempt: %w", err)
		}
	}
	return nil
}

// chunks yields rows recordChunk at a time.
func chunks(rows [][]any) func(yield func([][]any) bool) {
	return func(yield func([][]any) bool) {
		for len(rows) > 0 {
			n := min(len(rows), recordChunk)
			if !yield(rows[:n]) {
				return
			}
			rows = rows[n:]
		}
	}
}

// valueRows is n rows "(row), (row), ..." of a VALUES list.
func valueRows(n int, row string) string {
	return strings.TrimSuffix(strings.Repeat("("+row+"), ", n), ", ")
}

// flat is rows' values one after the other.
func flat(rows [][]any) []any {
	var out []any
	for _, r := range rows {
		out = append(out, r...)
	}
	return out
}

// deliveriesAhead is how many deliveries an endpoint is given ahead of
// the one it is sent (what GET /webhooks/{id}/deliveries shows pending):
// a few of the dispatcher's runs (webhook.Run).
const deliveriesAhead = 512

// refillAt is how few pending deliveries an endpoint has when it is given
// more: refilled in batches, not a write per delivery sent.
const refillAt = deliveriesAhead / 2

// fillSkip is how far an endpoint's merchant's events may run past its
// fanned_seq, none of them wanted, before fanned_seq is moved past them.
const fillSkip = 1024

// fillDeliveries gives each enabled endpoint that has refillAt pending
// deliveries or fewer the deliveries of its next wanted events after
// fanned_seq, in number order, up to deliveriesAhead pending, and moves
// fanned_seq past them; an endpoint that wants none of the events after it
// moves it to the highest number. So deliveries are made at the pace they
// are sent, not one per event and endpoint at numbering. One writer per
// endpoint at a time: the move of fanned_seq is a compare-and-set in the
// transaction that inserts the deliveries (a racing node's inserts
// nothing).
func (db *DB) fillDeliveries(ctx context.Context) error {
	top := db.told.Load() // the events told (horizon.go)
	type endpoint struct {
		id, merchantID, types string
		fanned                int64
	}
	// Only endpoints whose merchant has events after their fanned_seq.
	rows, err := db.read().query(ctx, `SELECT w.id, w.merchant_id, w.event_types, w.fanned_seq FROM webhooks w
		WHERE w.status = 'enabled' AND w.deleted_at IS NULL AND w.fanned_seq < ?
			AND EXISTS (SELECT 1 FROM events e WHERE e.merchant_id = w.merchant_id AND e.seq > w.fanned_seq)
		ORDER BY w.id`, top) // one order of the rows a fill locks, on every node
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
	type due struct {
		ep      endpoint
		pending int
	}
	var fills []due
	for _, ep := range eps {
		var pending int
		if err := db.read().queryRow(ctx, `SELECT COUNT(*) FROM (SELECT 1 FROM webhook_deliveries
			WHERE webhook_id = ? AND status = 'pending' LIMIT ?) p`, ep.id, refillAt+1).Scan(&pending); err != nil {
			errs = append(errs, fmt.Errorf("fill deliveries: %w", err))
			continue
		}
		if pending <= refillAt {
			fills = append(fills, due{ep, pending})
		}
	}
	wanted := `merchant_id = ? AND seq > ? AND seq <= ? AND (? = '' OR ? LIKE '%,' || type || ',%')`
	fill := func(c conn, ep endpoint, pending int) error {
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
		case len(got) == 0:
			// None wanted yet: fanned_seq moves in steps of fillSkip
			// events, not one write per round. Events are counted, not
			// numbers: numbers have gaps (horizon.go).
			var n int
			if err := c.queryRow(ctx, `SELECT COUNT(*) FROM (SELECT 1 FROM events
				WHERE merchant_id = ? AND seq > ? AND seq <= ? LIMIT ?) e`, ep.merchantID, ep.fanned, top, fillSkip).Scan(&n); err != nil {
				return err
			}
			if n < fillSkip {
				return nil
			}
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
	}
	// Not waiting for the disk: the deliveries are made from the events,
	// and a crash that loses them loses the move of fanned_seq with them
	// (one transaction): they are made again. Every endpoint's fill in
	// one transaction (one wait for SQLite's group committer); if it
	// fails, each endpoint's in its own, so that one endpoint's failure
	// leaves the others filled.
	if len(fills) == 0 {
		return errors.Join(errs...)
	}
	err = db.relaxedUpdate(ctx, func(c conn) error {
		for _, f := range fills {
			if err := fill(c, f.ep, f.pending); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		fills = nil
	}
	for _, f := range fills {
		if err := db.relaxedUpdate(ctx, func(c conn) error { return fill(c, f.ep, f.pending) }); err != nil {
			errs = append(errs, fmt.Errorf("fill deliveries of endpoint %s: %w", f.ep.id, err))
		}
	}
	return errors.Join(errs...)
}
