package sqlstore

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/instore-dev/instore"
)

// countsAsRefunded selects the refunds that take from an original's amount:
// APPROVED and PENDING. Written into the SQL, like isPending.
var countsAsRefunded = "type = '" + instore.TypeRefund + "' AND status_id IN (" +
	strconv.Itoa(instore.StatusApproved) + ", " + strconv.Itoa(instore.StatusPending) + ")"

// ListTransactions lists a merchant's transactions created in [f.From, f.To),
// optionally of one terminal ID, status and ECR reference (exact), newest
// first (created_at, then id, both descending), after f.After when set, at
// most f.Limit (instore.DefaultListLimit when 0 or less).
//
// Every filter combination has an index that starts with the merchant and
// the filtered columns and ends with (created_at, id) (migration 0003), so
// the query reads one range of it backwards and stops after f.Limit rows:
// the cost is that of the page, not of the range. The cursor is a keyset
// position, so rows created while a client pages (newer ones) never shift
// the pages it has still to read.
func (db *DB) ListTransactions(ctx context.Context, f instore.TransactionFilter) ([]*instore.Transaction, error) {
	query, args := listQuery(db.d, f)
	rows, err := db.read().query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list transactions: %w", err)
	}
	return collect(rows, scanTransaction, "list transactions")
}

// listQuery builds the query of ListTransactions. The set of distinct query
// texts is small (one per filter combination, with or without a cursor),
// so the dialect's rebind cache and the driver's statement cache stay small.
func listQuery(d *dialect, f instore.TransactionFilter) (string, []any) {
	var b strings.Builder
	b.WriteString(`SELECT ` + transactionColumns + ` FROM transactions`)
	if d.indexedBy {
		b.WriteString(` INDEXED BY ` + listIndex(f))
	}
	b.WriteString(` WHERE merchant_id = ?`)
	args := []any{f.MerchantID}
	// The index's equality columns, in the order of its definition.
	if f.TerminalID != "" {
		b.WriteString(` AND terminal_id = ?`)
		args = append(args, f.TerminalID)
	}
	if f.StatusID != nil {
		b.WriteString(` AND status_id = ?`)
		args = append(args, *f.StatusID)
	}
	if f.ECRReference != "" {
		b.WriteString(` AND ecr_reference = ?`)
		args = append(args, f.ECRReference)
	}
	b.WriteString(` AND created_at >= ?`)
	args = append(args, micros(f.From))
	// One upper bound on created_at, the tighter of To and the cursor, so
	// both dialects start the backward scan there; rows at the cursor's
	// time are then cut by id.
	if c := f.After; c != nil && micros(c.CreatedAt) < micros(f.To) {
		at := micros(c.CreatedAt)
		b.WriteString(` AND created_at <= ? AND (created_at < ? OR (created_at = ? AND id < ?))`)
		args = append(args, at, at, at, c.ID)
	} else {
		b.WriteString(` AND created_at < ?`)
		args = append(args, micros(f.To))
	}
	limit := f.Limit
	if limit <= 0 {
		limit = instore.DefaultListLimit
	}
	b.WriteString(` ORDER BY created_at DESC, id DESC LIMIT ?`)
	args = append(args, limit)
	return b.String(), args
}

// listIndex names the index (migrations 0001 and 0003) whose one range, read
// backwards, holds the listing f asks for: the merchant, the filtered
// columns, then (created_at, id). An ECR reference is nearly unique, so its
// index serves every combination with it.
func listIndex(f instore.TransactionFilter) string {
	switch {
	case f.ECRReference != "":
		return "transactions_merchant_ecr_created"
	case f.TerminalID != "" && f.StatusID != nil:
		return "transactions_merchant_terminal_status_created"
	case f.TerminalID != "":
		return "transactions_merchant_terminal_created"
	case f.StatusID != nil:
		return "transactions_merchant_status_created"
	default:
		return "transactions_merchant_created"
	}
}

// LatestTransaction returns the newest transaction of a terminal ID
// (created_at, then id), read from transactions_terminal_created.
func (db *DB) LatestTransaction(ctx context.Context, terminalID string) (*instore.Transaction, error) {
	t, err := scanTransaction(db.read().queryRow(ctx, `SELECT `+transactionColumns+` FROM transactions
		WHERE terminal_id = ? ORDER BY created_at DESC, id DESC LIMIT 1`, terminalID))
	if err != nil {
		return nil, notFound(err, "latest transaction")
	}
	return t, nil
}

// RefundedAmount sums the APPROVED and PENDING refunds of an original; 0
// when it has none (or does not exist).
func (db *DB) RefundedAmount(ctx context.Context, originalID string) (int64, error) {
	return refundedAmount(ctx, db.read(), originalID)
}

func refundedAmount(ctx context.Context, c conn, originalID string) (int64, error) {
	var sum int64
	// The CAST keeps the type BIGINT: PostgreSQL sums BIGINT as NUMERIC.
	if err := c.queryRow(ctx, `SELECT CAST(COALESCE(SUM(amount), 0) AS BIGINT) FROM transactions
		WHERE original_id = ? AND `+countsAsRefunded, originalID).Scan(&sum); err != nil {
		return 0, fmt.Errorf("sum refunds: %w", err)
	}
	return sum, nil
}

// CreateRefund stores the REFUND t like CreateTransaction (Version 1, the
// same ErrConflict rules) if the APPROVED and PENDING refunds of its
// original plus t.Amount stay within the original's amount, and returns a
// wrapped instore.ErrRefundExceeded otherwise; instore.ErrNotFound when the
// original does not exist. The check and the insert are one database
// transaction that first locks the original's row (SELECT ... FOR UPDATE on
// PostgreSQL; SQLite's BEGIN IMMEDIATE holds the one write lock already),
// so refunds of one original are checked one after the other and racing
// ones cannot both pass. t is unchanged on error.
func (db *DB) CreateRefund(ctx context.Context, t *instore.Transaction) error {
	if t.Type != instore.TypeRefund {
		return fmt.Errorf("create refund: type is %q, want %s", t.Type, instore.TypeRefund)
	}
	err := db.update(ctx, func(c conn) error {
		var amount int64
		if err := c.queryRow(ctx, `SELECT amount FROM transactions WHERE id = ?`+c.d.forUpdate, t.OriginalID).Scan(&amount); err != nil {
			return notFound(err, "original transaction")
		}
		refunded, err := refundedAmount(ctx, c, t.OriginalID)
		if err != nil {
			return fmt.Errorf("create refund: %w", err)
		}
		if refunded+t.Amount > amount {
			return fmt.Errorf("create refund: %w", instore.ErrRefundExceeded)
		}
		if err := insertTransaction(ctx, c, t); err != nil {
			return c.conflictErr("create refund", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	t.Version = 1
	return nil
}

// UpdateTransactionPair applies UpdateTransaction to a (from aFrom) and b
// (from bFrom) in one database transaction: both are written, or, when
// either compare-and-set fails, neither (ErrConflict, or ErrNotFound for a
// missing transaction) and a and b are unchanged. On success both versions
// are set. The rows are updated in id order, so two pairs updated at once
// in opposite orders queue on PostgreSQL's row locks instead of
// deadlocking.
func (db *DB) UpdateTransactionPair(ctx context.Context, a *instore.Transaction, aFrom int64, b *instore.Transaction, bFrom int64) error {
	type change struct {
		t    *instore.Transaction
		from int64
	}
	changes := []change{{a, aFrom}, {b, bFrom}}
	slices.SortStableFunc(changes, func(x, y change) int { return strings.Compare(x.t.ID, y.t.ID) })
	err := db.update(ctx, func(c conn) error {
		for _, ch := range changes {
			if err := updateTransaction(ctx, c, ch.t, ch.from); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	a.Version = aFrom + 1
	b.Version = bFrom + 1
	return nil
}
