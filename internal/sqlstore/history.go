package sqlstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/mutant"
	"github.com/instore-dev/instore/lifecycle"
)

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
	return getAll(ctx, db.read(), scanTransaction, "list transactions", query, args...)
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
	if f.Unconfirmed {
		b.WriteString(` AND confirm_state = 'PENDING' AND confirm_deadline IS NOT NULL AND status_id = ?`)
		args = append(args, instore.StatusApproved)
	}
	if len(f.Types) > 0 {
		b.WriteString(` AND type IN (?` + strings.Repeat(`, ?`, len(f.Types)-1) + `)`)
		for _, typ := range f.Types {
			args = append(args, string(typ))
		}
	}
	if f.AuthorizationState != "" {
		b.WriteString(` AND auth_state = ?`)
		args = append(args, string(f.AuthorizationState))
	}
	if f.Forwarding != "" {
		b.WriteString(` AND forwarding_state = ?`)
		args = append(args, string(f.Forwarding))
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
	case f.Unconfirmed:
		// The few sales awaiting confirmation (a partial index).
		return "transactions_unconfirmed"
	case f.Forwarding != "" && f.ECRReference == "":
		// The few offline approvals (a partial index, migration 0016).
		return "transactions_merchant_forwarding_created"
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

// OnOriginal lists the refunds and reversals of an original, oldest first
// (transactions_original).
func (db *DB) OnOriginal(ctx context.Context, originalID string) ([]*instore.Transaction, error) {
	return onOriginal(ctx, db.read(), originalID)
}

func onOriginal(ctx context.Context, c conn, originalID string) ([]*instore.Transaction, error) {
	return getAll(ctx, c, scanTransaction, "list on original", `SELECT `+transactionColumns+` FROM transactions
		WHERE original_id = ? ORDER BY created_at, id`, originalID)
}

// farFuture bounds the transactions CreateOnOriginal reads after an
// original: none is created later.
var farFuture = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// CreateOnOriginal stores the REFUND or REVERSAL ch.T like CreateTransaction
// (Version 1, the same ErrConflict rules, the idempotency record tied) if
// instore.CheckOnOriginal allows it (and, for a REVERSAL,
// instore.CheckReversalLatest: the original is the latest transaction of
// its terminal), or the INCREMENT, CAPTURE or VOID ch.T if
// instore.CheckOnPreAuth allows it, and returns the rule's error
// otherwise; instore.ErrNotFound when the original does not exist. The
// rule and the insert are one database transaction that first locks the
// original's row (SELECT ... FOR UPDATE on PostgreSQL; SQLite's one writer
// holds the write lock already), so the refunds and reversals of one
// original are decided one after the other and racing ones cannot both
// pass. ch is unchanged on error.
func (db *DB) CreateOnOriginal(ctx context.Context, ch *instore.Change) error {
	t := ch.T
	if t.OriginalID == "" {
		return fmt.Errorf("create on original: original transaction %w", instore.ErrNotFound)
	}
	err := db.update(ctx, func(c conn) error {
		orig, err := scanTransaction(c.queryRow(ctx, `SELECT `+transactionColumns+` FROM transactions WHERE id = ?`+c.d.forUpdate, t.OriginalID))
		if err != nil {
			return notFound(err, "original transaction")
		}
		others, err := onOriginal(ctx, c, t.OriginalID)
		if err != nil {
			return err
		}
		if instore.OnPreAuth(t.Type) {
			mutatePreAuth(orig, t)
			if err := instore.CheckOnPreAuth(orig, others, t, ch.CaptureTolerance); err != nil {
				return err
			}
			if err := lifecycle.CheckExpiryVoid(*orig, others, t, lifecycle.Rules{PreAuthValidity: ch.PreAuthValidity}); err != nil {
				return err
			}

			if err := insertTransaction(ctx, c, ch); err != nil {
				return c.conflictErr("create on pre-auth", err)
			}
			return tieIdempotency(ctx, c, ch)
		}
		if mutant.On(mutant.CashbackRefundable) {
			orig.CashbackAmount = 0
		}
		if mutant.On(mutant.QueuedRefundable) && t.Type == instore.TypeRefund && orig.Queued() {
			orig.Forwarding = nil
		}
		if mutant.On(mutant.PreAuthRefundsAboveCaptured) && orig.Authorization != nil {
			orig.Authorization.CapturedAmount = orig.Authorization.AuthorizedAmount
		}
		if err := instore.CheckOnOriginal(orig, mutated(others, t), t); err != nil {
			return err
		}
		if t.Type == instore.TypeReversal {
			q, args := listQuery(c.d, instore.NewerOnTerminal(orig, farFuture))
			rows, err := c.query(ctx, q, args...)
			if err != nil {
				return fmt.Errorf("newer on terminal: %w", err)
			}
			newer, err := collect(rows, scanTransaction, "newer on terminal")
			if err != nil {
				return err
			}
			if err := instore.CheckReversalLatest(orig, newer); err != nil {
				return err
			}
		}
		if err := insertTransaction(ctx, c, ch); err != nil {
			return c.conflictErr("create on original", err)
		}
		return tieIdempotency(ctx, c, ch)
	})
	if err != nil {
		return err
	}
	t.Version = 1
	return nil
}

// mutated is what the money rule is given as the other refunds and
// reversals of an original when a mutant of it is switched on (the
// deterministic simulation's TestMutants; internal/mutant); others
// otherwise.
func mutated(others []*instore.Transaction, t *instore.Transaction) []*instore.Transaction {
	switch {
	case mutant.On(mutant.RefundLimitOutsideLock), mutant.On(mutant.RefundAboveAmount) && t.Type == instore.TypeRefund:
		return nil
	case mutant.On(mutant.PendingRefundsNotCounted) && t.Type == instore.TypeRefund:
		return slices.DeleteFunc(slices.Clone(others), func(o *instore.Transaction) bool { return o.StatusID == instore.StatusPending })
	case mutant.On(mutant.ReversalBesideRefund) && t.Type == instore.TypeReversal:
		return slices.DeleteFunc(slices.Clone(others), func(o *instore.Transaction) bool { return o.Type == instore.TypeRefund })
	}
	return others
}

// mutatePreAuth switches on, for t acting on the pre-auth pre, the mutant
// of the deterministic simulation's TestMutants that concerns it
// (internal/mutant): a void of an authorisation that ended is let through
// (pre seen OPEN). With none on, it changes nothing.
func mutatePreAuth(pre, t *instore.Transaction) {
	if mutant.On(mutant.VoidAfterCapture) && t.Type == instore.TypeVoid && pre.Authorization != nil {
		pre.Authorization.State = instore.AuthOpen
	}
}
