package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/mutant"
)

const batchColumns = `id, merchant_id, terminal_id, device_serial, state, number, opened_at, closed_at,
	error_id, message_id, reported_at, report`

// batchReport is a batch's report column: the terminal's list and the
// comparison, with names of their own so that a Go rename never changes
// what is stored.
type batchReport struct {
	Items          []batchItem       `json:"items"`
	TerminalTotals []batchTotal      `json:"terminalTotals"`
	ServiceTotals  []batchTotal      `json:"serviceTotals"`
	Matched        bool              `json:"matched"`
	Differences    []batchDifference `json:"differences"`
}

type batchItem struct {
	Ref      string `json:"ref"`
	Type     string `json:"type"`
	StatusID int    `json:"statusId"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
	Offline  bool   `json:"offline,omitempty"`
}

type batchTotal struct {
	Currency string `json:"currency"`
	Type     string `json:"type"`
	Count    int    `json:"count"`
	Amount   int64  `json:"amount"`
}

type batchDifference struct {
	Kind     string     `json:"kind"`
	Ref      string     `json:"ref"`
	Terminal *batchItem `json:"terminal,omitempty"`
	Service  *batchItem `json:"service,omitempty"`
}

func toBatchItem(it *instore.BatchItem) *batchItem {
	if it == nil {
		return nil
	}
	return &batchItem{Ref: it.Ref, Type: string(it.Type), StatusID: int(it.StatusID), Amount: it.Amount, Currency: it.Currency, Offline: it.Offline}
}

func fromBatchItem(it *batchItem) *instore.BatchItem {
	if it == nil {
		return nil
	}
	return &instore.BatchItem{Ref: it.Ref, Type: instore.TransactionType(it.Type), StatusID: instore.TransactionStatus(it.StatusID),
		Amount: it.Amount, Currency: it.Currency, Offline: it.Offline}
}

func encodeBatchReport(b *instore.Batch) (string, error) {
	r := batchReport{Items: []batchItem{}, TerminalTotals: []batchTotal{}, ServiceTotals: []batchTotal{}, Matched: b.Matched, Differences: []batchDifference{}}
	for i := range b.TerminalItems {
		r.Items = append(r.Items, *toBatchItem(&b.TerminalItems[i]))
	}
	for _, t := range b.TerminalTotals {
		r.TerminalTotals = append(r.TerminalTotals, batchTotal{Currency: t.Currency, Type: string(t.Type), Count: t.Count, Amount: t.Amount})
	}
	for _, t := range b.ServiceTotals {
		r.ServiceTotals = append(r.ServiceTotals, batchTotal{Currency: t.Currency, Type: string(t.Type), Count: t.Count, Amount: t.Amount})
	}
	for _, d := range b.Differences {
		r.Differences = append(r.Differences, batchDifference{Kind: string(d.Kind), Ref: d.Ref, Terminal: toBatchItem(d.Terminal), Service: toBatchItem(d.Service)})
	}
	out, err := json.Marshal(r)
	return string(out), err
}

func decodeBatchReport(s string, b *instore.Batch) error {
	var r batchReport
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		return fmt.Errorf("decode batch report: %w", err)
	}
	totals := func(ts []batchTotal) []instore.BatchTotal {
		out := make([]instore.BatchTotal, len(ts))
		for i, t := range ts {
			out[i] = instore.BatchTotal{Currency: t.Currency, Type: instore.TransactionType(t.Type), Count: t.Count, Amount: t.Amount}
		}
		return out
	}
	b.TerminalItems = make([]instore.BatchItem, len(r.Items))
	for i := range r.Items {
		b.TerminalItems[i] = *fromBatchItem(&r.Items[i])
	}
	b.TerminalTotals, b.ServiceTotals, b.Matched = totals(r.TerminalTotals), totals(r.ServiceTotals), r.Matched
	b.Differences = make([]instore.BatchDifference, len(r.Differences))
	for i, d := range r.Differences {
		b.Differences[i] = instore.BatchDifference{Kind: instore.DifferenceKind(d.Kind), Ref: d.Ref, Terminal: fromBatchItem(d.Terminal), Service: fromBatchItem(d.Service)}
	}
	return nil
}

// CreateBatch stores the PENDING close b unless its terminal ID has a
// PENDING transaction (checked in the same database transaction) or a
// PENDING close (the unique index batches_pending): instore.ErrConflict.
// A transaction created meanwhile is refused by the trigger
// transactions_not_closing (0017); on PostgreSQL both first take the
// terminal ID's lock, so that neither misses the other.
func (db *DB) CreateBatch(ctx context.Context, b *instore.Batch, claim *instore.IdempotencyClaim) error {
	report, err := encodeBatchReport(b)
	if err != nil {
		return fmt.Errorf("create batch: %w", err)
	}
	return db.update(ctx, func(c conn) error {
		if db.d.name == "postgres" {
			if _, err := c.exec(ctx, `SELECT pg_advisory_xact_lock(1651078243, hashtext(?))`, b.TerminalID); err != nil {
				return fmt.Errorf("create batch: lock: %w", err)
			}
		}
		var running int
		if err := c.queryRow(ctx, `SELECT COUNT(*) FROM transactions WHERE terminal_id = ? AND status_id = ?`,
			b.TerminalID, instore.StatusPending).Scan(&running); err != nil {
			return fmt.Errorf("create batch: %w", err)
		}
		if running > 0 && !mutant.On(mutant.CloseBesideTransaction) {
			return fmt.Errorf("create batch: %w (a transaction is running)", instore.ErrConflict)
		}
		_, err := c.exec(ctx, `INSERT INTO batches (`+batchColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			b.ID, b.MerchantID, b.TerminalID, b.SerialNumber, string(b.State), b.Number, micros(b.OpenedAt), micros(b.ClosedAt),
			nullInt(b.ErrorID), b.MessageID, nullMicros(b.ReportedAt), report)
		if err != nil {
			return c.conflictErr("create batch", err)
		}
		return tieClaim(ctx, c, claim, b.ID)
	})
}

// Batch returns the batch with id.
func (db *DB) Batch(ctx context.Context, id string) (*instore.Batch, error) {
	return getOne(ctx, db.read(), scanBatch, "batch", `SELECT `+batchColumns+` FROM batches WHERE id = ?`, id)
}

// PendingBatch returns the PENDING close of a terminal ID.
func (db *DB) PendingBatch(ctx context.Context, terminalID string) (*instore.Batch, error) {
	return getOne(ctx, db.read(), scanBatch, "batch", `SELECT `+batchColumns+` FROM batches
		WHERE terminal_id = ? AND state = 'PENDING'`, terminalID)
}

// LastClosedBatch returns the terminal ID's CLOSED batch with the latest
// closed_at.
func (db *DB) LastClosedBatch(ctx context.Context, terminalID string) (*instore.Batch, error) {
	return getOne(ctx, db.read(), scanBatch, "batch", `SELECT `+batchColumns+` FROM batches
		WHERE terminal_id = ? AND state = 'CLOSED' ORDER BY closed_at DESC, id DESC LIMIT 1`, terminalID)
}

// PendingBatches lists every PENDING close, oldest first.
func (db *DB) PendingBatches(ctx context.Context) ([]*instore.Batch, error) {
	return getAll(ctx, db.read(), scanBatch, "list pending batches", `SELECT `+batchColumns+` FROM batches
		WHERE state = 'PENDING' ORDER BY closed_at, id`)
}

// UpdateBatch writes b's outcome if its stored state is still from.
func (db *DB) UpdateBatch(ctx context.Context, b *instore.Batch, from instore.BatchState, evs ...instore.OutboxEvent) error {
	report, err := encodeBatchReport(b)
	if err != nil {
		return fmt.Errorf("update batch: %w", err)
	}
	return db.updateOutbox(ctx, evs, func(c conn) error {
		n, err := c.execAffected(ctx, `UPDATE batches SET state = ?, number = ?, error_id = ?, message_id = ?, reported_at = ?, report = ?
			WHERE id = ? AND state = ?`, string(b.State), b.Number, nullInt(b.ErrorID), b.MessageID, nullMicros(b.ReportedAt), report, b.ID, string(from))
		if err != nil {
			return fmt.Errorf("update batch: %w", err)
		}
		if n > 0 {
			return nil
		}
		return notUpdated(ctx, c, "batches", "batch", b.ID, "update batch", "state moved on")
	})
}

// ListBatches lists a merchant's batches closed in [From, To), newest
// first, after f.After.
func (db *DB) ListBatches(ctx context.Context, f instore.BatchFilter) ([]*instore.Batch, error) {
	var b strings.Builder
	b.WriteString(`SELECT ` + batchColumns + ` FROM batches WHERE merchant_id = ?`)
	args := []any{f.MerchantID}
	if f.TerminalID != "" {
		b.WriteString(` AND terminal_id = ?`)
		args = append(args, f.TerminalID)
	}
	b.WriteString(` AND closed_at >= ? AND closed_at < ?`)
	args = append(args, micros(f.From), micros(f.To))
	if f.After != nil {
		at := micros(f.After.CreatedAt)
		b.WriteString(` AND (closed_at < ? OR closed_at = ? AND id < ?)`)
		args = append(args, at, at, f.After.ID)
	}
	b.WriteString(` ORDER BY closed_at DESC, id DESC LIMIT ?`)
	args = append(args, f.Limit)
	return getAll(ctx, db.read(), scanBatch, "list batches", b.String(), args...)
}

// TerminalTransactions lists the final transactions of a terminal ID
// completed in (from, to] and created within instore.BatchLookback before
// from (the index of the merchant's transactions by terminal ID,
// transactions_merchant_terminal_created, bounds the read: the terminal
// ID's merchant is read with it), oldest first.
func (db *DB) TerminalTransactions(ctx context.Context, terminalID string, from, to time.Time) ([]*instore.Transaction, error) {
	q, args := terminalTransactionsQuery(terminalID, from, to)
	return getAll(ctx, db.read(), scanTransaction, "list terminal transactions", q, args...)
}

// terminalTransactionsQuery is the query of TerminalTransactions.
func terminalTransactionsQuery(terminalID string, from, to time.Time) (string, []any) {
	return `SELECT ` + transactionColumns + ` FROM transactions
		WHERE merchant_id = (SELECT merchant_id FROM terminals WHERE terminal_id = ?) AND terminal_id = ?
		AND created_at > ? AND created_at <= ? AND status_id <> ? AND completed_at > ? AND completed_at <= ?
		ORDER BY completed_at, id`,
		[]any{terminalID, terminalID, micros(from.Add(-instore.BatchLookback)), micros(to), instore.StatusPending, micros(from), micros(to)}
}

func scanBatch(s scanner) (*instore.Batch, error) {
	var (
		b                   instore.Batch
		state, report       string
		opened, closed      int64
		errorID, reportedAt sql.NullInt64
	)
	err := s.Scan(&b.ID, &b.MerchantID, &b.TerminalID, &b.SerialNumber, &state, &b.Number, &opened, &closed,
		&errorID, &b.MessageID, &reportedAt, &report)
	if err != nil {
		return nil, err
	}
	b.State, b.OpenedAt, b.ClosedAt = instore.BatchState(state), fromMicros(opened), fromMicros(closed)
	b.ErrorID, b.ReportedAt = fromNullInt(errorID), fromNullMicros(reportedAt)
	if err := decodeBatchReport(report, &b); err != nil {
		return nil, err
	}
	return &b, nil
}
