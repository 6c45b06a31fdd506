package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/mutant"
)

// isPending selects PENDING transactions. The status is written into the
// SQL, not bound, so that PostgreSQL can use the partial indexes on
// status_id = 14 with a generic plan.
var isPending = "status_id = " + strconv.Itoa(int(instore.StatusPending))

// CreateTransaction stores ch.T with Version 1 and ch's events, and ties
// ch.Idempotency. A second PENDING transaction on a terminal ID (the
// unique partial index transactions_one_active), a taken id or a missing
// reference is instore.ErrConflict.
func (db *DB) CreateTransaction(ctx context.Context, ch *instore.Change) error {
	// On PostgreSQL the tie, the insert and its event are one statement
	// (createTied).
	tied := ch.Idempotency != nil && len(ch.Events) == 1 && db.d.name == "postgres"
	write := db.single
	if !tied && (ch.Idempotency != nil || !oneStatement(ch)) {
		write = db.update // the insert and the record's tie: two statements
	}
	err := write(ctx, func(c conn) error {
		if tied {
			return createTied(ctx, c, ch)
		}
		if err := insertTransaction(ctx, c, ch); err != nil {
			return c.conflictErr("create transaction", err)
		}
		return tieIdempotency(ctx, c, ch)
	})
	if err != nil {
		return err
	}
	ch.T.Version = 1
	return nil
}

// tieIdempotency writes the new transaction's id into the idempotency
// record of the request creating it (ch.Idempotency), if that record is
// still the request's attempt's and has no transaction: in the creation's
// database transaction, so that the record names the transaction if and
// only if it exists. Otherwise instore.ErrIdempotencyLost, and the caller
// rolls the insert back.
func tieIdempotency(ctx context.Context, c conn, ch *instore.Change) error {
	return tieClaim(ctx, c, ch.Idempotency, ch.T.ID)
}

// tieClaim ties the idempotency record of claim k (nil: none) to id, what
// its request created: a transaction, or a close (batches; the column
// transaction_id holds either, told apart by the id's prefix).
func tieClaim(ctx context.Context, c conn, k *instore.IdempotencyClaim, id string) error {
	if k == nil || mutant.On(mutant.IdempotencyNotTied) {
		return nil
	}
	n, err := c.execAffected(ctx, `UPDATE idempotency_keys SET transaction_id = ?
		WHERE merchant_id = ? AND key = ? AND attempt = ? AND transaction_id IS NULL AND status_code IS NULL`,
		id, k.MerchantID, k.Key, k.Attempt)
	if err != nil {
		return fmt.Errorf("tie idempotency record: %w", err)
	}
	if n != 1 {
		return fmt.Errorf("tie idempotency record: %w", instore.ErrIdempotencyLost)
	}
	return nil
}

// Transaction returns the transaction with id.
func (db *DB) Transaction(ctx context.Context, id string) (*instore.Transaction, error) {
	return getOne(ctx, db.read(), scanTransaction, "transaction", `SELECT `+transactionColumns+` FROM transactions WHERE id = ?`, id)
}

// ActiveTransaction returns the PENDING transaction of a terminal ID.
func (db *DB) ActiveTransaction(ctx context.Context, terminalID string) (*instore.Transaction, error) {
	return getOne(ctx, db.read(), scanTransaction, "active transaction", `SELECT `+transactionColumns+` FROM transactions WHERE terminal_id = ? AND `+isPending, terminalID)
}

// Commit writes ch (instore.Change) in one database transaction: the
// compare-and-set update of ch.T (and of ch.Pair.T), the timeline entries
// with their events, the print job and the effects. A refused
// compare-and-set or insert rolls all of it back; on success the versions
// are set. A pair's rows are updated in id order, so two pairs updated at
// once in opposite orders queue on PostgreSQL's row locks instead of
// deadlocking. A change with one row and at most one event is one
// statement on PostgreSQL (single); a relaxed one does not wait for the
// disk (commitRelaxed).
func (db *DB) Commit(ctx context.Context, ch *instore.Change) error {
	if ch.Relaxed {
		return db.commitRelaxed(ctx, ch)
	}
	chs := []*instore.Change{ch}
	if ch.Pair != nil {
		chs = append(chs, ch.Pair)
		slices.SortStableFunc(chs, func(x, y *instore.Change) int { return strings.Compare(x.T.ID, y.T.ID) })
	}
	write := db.update
	if len(chs) == 1 && len(ch.Effects) == 0 && ch.Job == nil && oneStatement(ch) {
		write = db.single
	}
	err := write(ctx, func(c conn) error {
		for _, x := range chs {
			if err := updateTransaction(ctx, c, x); err != nil {
				return err
			}
		}
		for _, x := range chs {
			if x.Job != nil {
				if err := insertPrintJob(ctx, c, x.Job); err != nil {
					return err
				}
			}
			for _, e := range x.Effects {
				if err := insertEffect(ctx, c, e); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, x := range chs {
		x.T.Version = x.From + 1
	}
	return nil
}

// commitRelaxed is Commit of a change of the progress stage only, without
// waiting for the disk: on PostgreSQL the statement runs on the pool whose
// sessions have synchronous_commit off (the commit returns once the WAL is
// written, not flushed; the WAL writer flushes it within wal_writer_delay,
// and any later synchronous commit flushes it first); on SQLite it joins
// the group committer as a relaxed write (committed with synchronous
// NORMAL and flushed by the next FULL commit: groupCommitter).
func (db *DB) commitRelaxed(ctx context.Context, ch *instore.Change) error {
	if ch.Pair != nil || len(ch.Effects) > 0 || ch.Job != nil {
		return fmt.Errorf("update transaction: a relaxed change writes the progress stage only")
	}
	var err error
	switch {
	case db.group != nil:
		err = db.counted(true, db.group.doRelaxed(ctx, func(c conn) error { return updateProgress(ctx, c, ch) }))
	case oneStatement(ch):
		err = db.counted(true, updateProgress(ctx, conn{d: db.d, q: db.relaxedPipe.querier(db.relaxed)}, ch))
	default:
		err = db.update(ctx, func(c conn) error { return updateProgress(ctx, c, ch) })
	}
	if err != nil {
		return err
	}
	ch.T.Version = ch.From + 1
	return nil
}

// PendingTransactions lists every PENDING transaction, oldest first.
func (db *DB) PendingTransactions(ctx context.Context) ([]*instore.Transaction, error) {
	return getAll(ctx, db.read(), scanTransaction, "list pending transactions", `SELECT `+transactionColumns+` FROM transactions WHERE `+isPending+` ORDER BY created_at, id`)
}

// UnconfirmedTransactions lists the APPROVED sales awaiting confirmation
// whose deadline is at or before dueBy (zero: all), earliest first, by the
// partial index transactions_unconfirmed.
func (db *DB) UnconfirmedTransactions(ctx context.Context, dueBy time.Time) ([]*instore.Transaction, error) {
	due := int64(math.MaxInt64)
	if !dueBy.IsZero() {
		due = micros(dueBy)
	}
	return getAll(ctx, db.read(), scanTransaction, "list unconfirmed transactions", `SELECT `+transactionColumns+` FROM transactions
		WHERE confirm_state = 'PENDING' AND confirm_deadline <= ? AND status_id = ?
		ORDER BY confirm_deadline, id`, due, instore.StatusApproved)
}

// OpenPreAuths lists the approved pre-auths whose authorisation is OPEN
// and expires at or before dueBy (the zero time: all), earliest expiry
// first, by the partial index transactions_preauth_open.
func (db *DB) OpenPreAuths(ctx context.Context, dueBy time.Time) ([]*instore.Transaction, error) {
	due := int64(math.MaxInt64)
	if !dueBy.IsZero() {
		due = micros(dueBy)
	}
	return getAll(ctx, db.read(), scanTransaction, "list open pre-auths", `SELECT `+transactionColumns+` FROM transactions
		WHERE auth_state = 'OPEN' AND auth_expires_at <= ? ORDER BY auth_expires_at, id`, due)
}

// confirmWithin is the stored confirmation window of t in seconds (NULL:
// none asked).
func confirmWithin(t *instore.Transaction) sql.NullInt64 {
	if t.ConfirmWithin <= 0 {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: int64(t.ConfirmWithin / time.Second), Valid: true}
}

const transactionColumns = `id, merchant_id, terminal_id, device_serial, type,
	amount, cashback_amount, vat_amount, currency, payment_method_id, ecr_reference, print_receipt,
	status_id, error_id, progress, version, original_id, reverses, reversed_by, cancel_requested,
	result, result_message_id, created_at, acknowledged_at, deadline_at, completed_at,
	confirm_within, confirm_state, confirm_deadline, confirmed_at, tip, tip_amount,
	auth_state, authorized_amount, captured_amount, auth_expires_at, by_timer,
	forwarding_state, forwarded_at`

// transactionValues is the placeholder list of transactionColumns.
const transactionValues = `?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?`

// transactionArgs are the values of transactionColumns for a new t.
func transactionArgs(t *instore.Transaction) ([]any, error) {
	result, err := encodeResult(t.Result)
	if err != nil {
		return nil, err
	}
	tip, err := nullJSON(t.Tip, t.Tip == nil, "tip")
	if err != nil {
		return nil, err
	}
	args := append([]any{t.ID, t.MerchantID, t.TerminalID, nullString(t.SerialNumber), t.Type,
		t.Amount, t.CashbackAmount, nullInt64(t.VATAmount), t.Currency, nullInt(t.PaymentMethodID),
		nullString(t.ECRReference), t.PrintReceipt,
		t.StatusID, nullInt(t.ErrorID), t.Progress, 1, nullString(t.OriginalID), nullString(t.Reverses),
		nullString(t.ReversedBy), t.CancelRequested,
		result, nullString(t.ResultMessageID), micros(t.CreatedAt), nullMicros(t.AcknowledgedAt),
		nullMicros(t.DeadlineAt), nullMicros(t.CompletedAt),
		confirmWithin(t), nullString(t.ConfirmState), nullMicros(t.ConfirmDeadline), nullMicros(t.ConfirmedAt),
		tip, t.TipAmount}, authArgs(t)...)
	return append(append(args, t.ByTimer), forwardingArgs(t)...), nil
}

// authArgs are the values of the authorisation's columns (auth_state,
// authorized_amount, captured_amount, auth_expires_at) of t.
func authArgs(t *instore.Transaction) []any {
	a := t.Authorization
	if a == nil {
		return []any{sql.NullString{}, 0, 0, sql.NullInt64{}}
	}
	return []any{string(a.State), a.AuthorizedAmount, a.CapturedAmount, micros(a.ExpiresAt)}
}

// createTied is, on PostgreSQL, the creation of t with its one event and
// the tie of its Idempotency-Key record in one statement (atomic, needing
// no transaction of its own; the writer's pipeline may send it with other
// callers' statements, as one transaction): the record is tied first, and the transaction and
// its event are inserted for each record tied, so a record no longer the
// attempt's (or already tied) inserts nothing: instore.ErrIdempotencyLost,
// nothing written. A conflict of the insert fails the whole statement, tie
// included.
func createTied(ctx context.Context, c conn, ch *instore.Change) error {
	t := ch.T
	args, err := transactionArgs(t)
	if err != nil {
		return err
	}
	k := ch.Idempotency
	linked, linkedArgs := onDevice(c, ch)
	q := `WITH k AS (UPDATE idempotency_keys SET transaction_id = ?
			WHERE merchant_id = ? AND key = ? AND attempt = ? AND transaction_id IS NULL AND status_code IS NULL
			AND ` + linked + `
			RETURNING 1),
		w AS (INSERT INTO transactions (` + transactionColumns + `) SELECT ` + transactionValues + ` FROM k RETURNING id)`
	q += ` ` + insertEventFromW
	all := append(append([]any{t.ID, k.MerchantID, k.Key, k.Attempt}, linkedArgs...), args...)
	n, err := c.execAffected(ctx, q, append(all, eventArgs(&ch.Events[0])...)...)
	if err != nil {
		return c.conflictErr("create transaction", err)
	}
	if n == 1 {
		return nil
	}
	// Nothing was written: the record is another attempt's, or the
	// terminal ID's device changed. The record tells which: still this
	// attempt's and untied, it was the device (the terminal's row, read
	// now, may have been linked back since).
	if ch.OnDevice != "" {
		var own int
		if err := c.queryRow(ctx, `SELECT COUNT(*) FROM idempotency_keys
			WHERE merchant_id = ? AND key = ? AND attempt = ? AND transaction_id IS NULL AND status_code IS NULL`,
			k.MerchantID, k.Key, k.Attempt).Scan(&own); err != nil {
			return fmt.Errorf("create transaction: %w", err)
		}
		if own == 1 {
			return fmt.Errorf("create transaction: %w", instore.ErrRelinked)
		}
	}
	return fmt.Errorf("tie idempotency record: %w", instore.ErrIdempotencyLost)
}

// onDevice is the condition (SQL and its arguments) that ch.T's terminal
// ID is linked to ch.OnDevice (instore.Change), the device its command
// goes to, read with the terminal's row locked against a link or unlink
// until the creation commits (forKeyShare: a link that locked the row
// first is waited for, and the condition is checked on the row it
// wrote; a plan that reads through the serial number's index may refuse
// at once instead, which is as safe); always true when ch has no
// OnDevice. Whichever commits first, the link or the creation, the other
// sees it: the link refuses a terminal ID with a PENDING transaction
// (WP09), the creation a terminal ID linked elsewhere
// (instore.ErrRelinked).
func onDevice(c conn, ch *instore.Change) (string, []any) {
	if ch.OnDevice == "" {
		return "1 = 1", nil
	}
	return `EXISTS (SELECT 1 FROM terminals WHERE terminal_id = ? AND serial_number = ?` + c.d.forKeyShare + `)`,
		[]any{ch.T.TerminalID, ch.OnDevice}
}

func insertTransaction(ctx context.Context, c conn, ch *instore.Change) error {
	t := ch.T
	args, err := transactionArgs(t)
	if err != nil {
		return err
	}
	q := `INSERT INTO transactions (` + transactionColumns + `) VALUES (` + transactionValues + `)`
	if ch.OnDevice != "" {
		linked, linkedArgs := onDevice(c, ch)
		q = `INSERT INTO transactions (` + transactionColumns + `) SELECT ` + transactionValues + ` WHERE ` + linked
		args = append(args, linkedArgs...)
	}
	// One row written, or none when the terminal ID's device changed:
	// the statement's own count, or its event's (one per row).
	folded := false
	if len(ch.Events) == 1 {
		q, args, folded = c.withEvent(q, args, &ch.Events[0])
	}
	n, err := c.execAffected(ctx, q, args...)
	if err == nil && n == 1 && !folded {
		err = insertEvents(ctx, c, t.ID, ch.Events)
	}
	if err == nil && n != 1 {
		return fmt.Errorf("insert transaction: %w", instore.ErrRelinked)
	}
	return err
}

func updateTransaction(ctx context.Context, c conn, ch *instore.Change) error {
	t, fromVersion := ch.T, ch.From
	result, err := encodeResult(t.Result)
	if err != nil {
		return fmt.Errorf("update transaction: %w", err)
	}
	q := `UPDATE transactions SET
		device_serial = ?, status_id = ?, error_id = ?, progress = ?, version = ?,
		reverses = ?, reversed_by = ?, cancel_requested = ?, result = ?, result_message_id = ?,
		acknowledged_at = ?, deadline_at = ?, completed_at = ?, tip_amount = ?`
	args := []any{nullString(t.SerialNumber), t.StatusID, nullInt(t.ErrorID), t.Progress, fromVersion + 1,
		nullString(t.Reverses), nullString(t.ReversedBy), t.CancelRequested, result, nullString(t.ResultMessageID),
		nullMicros(t.AcknowledgedAt), nullMicros(t.DeadlineAt), nullMicros(t.CompletedAt), t.TipAmount}
	if t.ConfirmState != "" {
		// Only a sale that asked for confirmation sets these (SQLite
		// rewrites the entries of an index whose column SET names).
		q += `, confirm_state = ?, confirm_deadline = ?, confirmed_at = ?`
		args = append(args, t.ConfirmState, nullMicros(t.ConfirmDeadline), nullMicros(t.ConfirmedAt))
	}
	if t.Authorization != nil {
		// Only an approved pre-auth sets these.
		q += `, auth_state = ?, authorized_amount = ?, captured_amount = ?, auth_expires_at = ?`
		args = append(args, authArgs(t)...)
	}
	if t.Forwarding != nil {
		// Only an offline approval sets these (forwarding.go).
		q += `, forwarding_state = ?, forwarded_at = ?`
		args = append(args, forwardingArgs(t)...)
	}
	q += ` WHERE id = ? AND version = ?`
	return writeUpdate(ctx, c, ch, q, append(args, t.ID, fromVersion))
}

// updateProgress is updateTransaction for a change of the progress stage
// only (commitRelaxed): it sets no indexed column, so SQLite, which
// rewrites the entries of every index on a column its SET names, changed or
// not, leaves the transaction's five indexes alone.
func updateProgress(ctx context.Context, c conn, ch *instore.Change) error {
	return writeUpdate(ctx, c, ch, `UPDATE transactions SET progress = ?, version = ? WHERE id = ? AND version = ?`,
		[]any{ch.T.Progress, ch.From + 1, ch.T.ID, ch.From})
}

// writeUpdate runs the compare-and-set update q of ch.T (its last two
// arguments are the id and the version it expects) with ch's events.
func writeUpdate(ctx context.Context, c conn, ch *instore.Change, q string, args []any) error {
	t := ch.T
	// With one event on PostgreSQL, one statement writes both (its rows
	// affected are the update's); otherwise the events follow the update
	// in its database transaction.
	folded := false
	if len(ch.Events) == 1 {
		q, args, folded = c.withEvent(q, args, &ch.Events[0])
	}
	n, err := c.execAffected(ctx, q, args...)
	if err != nil {
		return c.conflictErr("update transaction", err)
	}
	if n > 0 {
		if folded {
			return nil
		}
		return insertEvents(ctx, c, t.ID, ch.Events)
	}
	return notUpdated(ctx, c, "transactions", "transaction", t.ID, "update transaction", "version moved on")
}

func scanTransaction(s scanner) (*instore.Transaction, error) {
	var (
		t                                        instore.Transaction
		serial, ecrReference, original, reverses sql.NullString
		reversedBy, result, resultMessageID      sql.NullString
		vat, paymentMethod, errorID              sql.NullInt64
		created                                  int64
		acknowledged, deadline, completed        sql.NullInt64
		within, confirmDeadline, confirmedAt     sql.NullInt64
		confirmState, tip, authState             sql.NullString
		authorized, captured                     int64
		authExpires                              sql.NullInt64
		fwdState                                 sql.NullString
		fwdAt                                    sql.NullInt64
	)
	if err := s.Scan(&t.ID, &t.MerchantID, &t.TerminalID, &serial, &t.Type,
		&t.Amount, &t.CashbackAmount, &vat, &t.Currency, &paymentMethod, &ecrReference, &t.PrintReceipt,
		&t.StatusID, &errorID, &t.Progress, &t.Version, &original, &reverses, &reversedBy, &t.CancelRequested,
		&result, &resultMessageID, &created, &acknowledged, &deadline, &completed,
		&within, &confirmState, &confirmDeadline, &confirmedAt, &tip, &t.TipAmount,
		&authState, &authorized, &captured, &authExpires, &t.ByTimer, &fwdState, &fwdAt); err != nil {
		return nil, err
	}
	t.SerialNumber = serial.String
	t.VATAmount = fromNullInt64(vat)
	t.PaymentMethodID = fromNullInt(paymentMethod)
	t.ECRReference = ecrReference.String
	t.ErrorID = fromNullInt(errorID)
	t.OriginalID = original.String
	t.Reverses = reverses.String
	t.ReversedBy = reversedBy.String
	if result.Valid {
		t.Result = new(instore.Result)
		if err := json.Unmarshal([]byte(result.String), t.Result); err != nil {
			return nil, fmt.Errorf("decode transaction result: %w", err)
		}
	}
	if tip.Valid {
		t.Tip = new(instore.Tip)
		if err := json.Unmarshal([]byte(tip.String), t.Tip); err != nil {
			return nil, fmt.Errorf("decode transaction tip: %w", err)
		}
	}
	t.ResultMessageID = resultMessageID.String
	t.CreatedAt = fromMicros(created)
	t.AcknowledgedAt = fromNullMicros(acknowledged)
	t.DeadlineAt = fromNullMicros(deadline)
	t.CompletedAt = fromNullMicros(completed)
	t.ConfirmWithin = time.Duration(within.Int64) * time.Second
	t.ConfirmState = instore.ConfirmState(confirmState.String)
	t.ConfirmDeadline = fromNullMicros(confirmDeadline)
	t.ConfirmedAt = fromNullMicros(confirmedAt)
	if authState.Valid {
		t.Authorization = &instore.Authorization{State: instore.AuthorizationState(authState.String),
			AuthorizedAmount: authorized, CapturedAmount: captured, ExpiresAt: fromMicros(authExpires.Int64)}
	}
	t.Forwarding = scanForwarding(fwdState, fwdAt)
	return &t, nil
}

// encodeResult is a result as stored: JSON text, NULL when nil.
func encodeResult(r *instore.Result) (sql.NullString, error) {
	return nullJSON(r, r == nil, "transaction result")
}

// nullJSON is v as stored: JSON text, NULL when absent; what names v in an
// error.
func nullJSON(v any, absent bool, what string) (sql.NullString, error) {
	if absent {
		return sql.NullString{}, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return sql.NullString{}, fmt.Errorf("encode %s: %w", what, err)
	}
	return sql.NullString{String: string(b), Valid: true}, nil
}

// nullInt stores a nil *int as NULL.
func nullInt[T ~int](p *T) sql.NullInt64 {
	if p == nil {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: int64(*p), Valid: true}
}

func fromNullInt(v sql.NullInt64) *int {
	if !v.Valid {
		return nil
	}
	i := int(v.Int64)
	return &i
}

// nullInt64 stores a nil *int64 as NULL.
func nullInt64(p *int64) sql.NullInt64 {
	if p == nil {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: *p, Valid: true}
}

func fromNullInt64(v sql.NullInt64) *int64 {
	if !v.Valid {
		return nil
	}
	i := v.Int64
	return &i
}
