package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/instore-dev/instore"
)

// Terminal IDs are eight digits handed out in order from a counter row in
// settings, so an ID is never handed out twice, even after its terminal is
// gone (which MAX(terminal_id)+1 would not promise).
const (
	terminalIDCounter = "next_terminal_id"
	firstTerminalID   = 10000001
	lastTerminalID    = 99999999
)

// AllocateTerminalID assigns t.TerminalID the next terminal ID and stores t.
// The counter row is incremented and t inserted in one transaction: the
// UPDATE locks the row (PostgreSQL) or runs under the one write lock
// (SQLite), so concurrent allocations queue and never share an ID. t is
// unchanged unless it was stored.
func (db *DB) AllocateTerminalID(ctx context.Context, t *instore.Terminal) error {
	id, err := updateValue(ctx, db, nil, func(c conn) (string, error) {
		return allocateTerminalID(ctx, c, t, "allocate terminal id")
	})
	if err != nil {
		return err
	}
	t.TerminalID = id
	return nil
}

// allocateTerminalID inserts t under the next free terminal ID of the
// counter, within c's transaction, and returns the ID; t is unchanged. An
// ID taken outside the counter (an import) is skipped. op names the
// operation in a conflict's error.
func allocateTerminalID(ctx context.Context, c conn, t *instore.Terminal, op string) (string, error) {
	for {
		n, err := nextTerminalID(ctx, c)
		if err != nil {
			return "", err
		}
		cand := *t
		cand.TerminalID = strconv.FormatInt(n, 10)
		inserted, err := insertTerminalIfFree(ctx, c, &cand)
		if err != nil {
			return "", c.conflictErr(op, err)
		}
		if inserted {
			return cand.TerminalID, nil
		}
	}
}

// Terminal returns the terminal with a terminal ID.
func (db *DB) Terminal(ctx context.Context, terminalID string) (*instore.Terminal, error) {
	return findTerminal(ctx, db.read(), `terminal_id = ?`, terminalID)
}

// TerminalBySerial finds the terminal ID linked to a device.
func (db *DB) TerminalBySerial(ctx context.Context, serial string) (*instore.Terminal, error) {
	return findTerminal(ctx, db.read(), `serial_number = ?`, serial)
}

// Terminals lists a merchant's terminal IDs in order.
func (db *DB) Terminals(ctx context.Context, merchantID string) ([]*instore.Terminal, error) {
	return listTerminals(ctx, db.read(), merchantID)
}

// LinkTerminal binds terminalID to the device serial; see
// instore.TerminalStore. Linking a terminal ID to the device it is already
// bound to changes nothing and returns (serial, terminalID).
//
// Links racing on PostgreSQL have deadlocked although each locks its rows
// in terminal ID order (the store suite's LinkConcurrent, once in CI; the
// likely cycle: a link locks only the rows its snapshot shows bound, and
// its unique check of serial_number then waits for another link's
// uncommitted binding): untilNoDeadlock.
func (db *DB) LinkTerminal(ctx context.Context, terminalID, serial string, at time.Time, evs ...instore.OutboxEvent) (prevSerial, prevTerminalID string, err error) {
	err = db.untilNoDeadlock(func() error {
		return db.updateOutbox(ctx, evs, func(c conn) error {
			var err error
			prevSerial, prevTerminalID, err = linkTerminal(ctx, c, terminalID, serial, at)
			return err
		})
	})
	if err != nil {
		return "", "", err
	}
	return prevSerial, prevTerminalID, nil
}

// untilNoDeadlock runs write, a whole database transaction whose closure
// keeps nothing from one run to the next, again when PostgreSQL aborts it
// as a deadlock's victim (rolled back whole), at most deadlockAttempts
// times in all, as PostgreSQL's documentation advises: a write that can
// meet another in a cycle never answers a deadlock to its caller.
func (db *DB) untilNoDeadlock(write func() error) error {
	var err error
	for range deadlockAttempts {
		if err = write(); !db.d.deadlock(err) {
			break
		}
	}
	return err
}

// deadlockAttempts bounds untilNoDeadlock's tries.
const deadlockAttempts = 5

// UnlinkTerminal unbinds terminalID and returns the device it was bound to.
func (db *DB) UnlinkTerminal(ctx context.Context, terminalID string, evs ...instore.OutboxEvent) (serial string, err error) {
	return updateValue(ctx, db, evs, func(c conn) (string, error) { return unlinkTerminal(ctx, c, terminalID) })
}

// nextTerminalID takes the next value of the terminal ID counter, creating
// the counter on first use. Under PostgreSQL the UPDATE holds the counter
// row's lock until the transaction ends.
func nextTerminalID(ctx context.Context, c conn) (int64, error) {
	if err := insertSettingIfAbsent(ctx, c, terminalIDCounter, strconv.Itoa(firstTerminalID)); err != nil {
		return 0, err
	}
	var next string
	err := c.queryRow(ctx, `UPDATE settings SET value = CAST(CAST(value AS BIGINT) + 1 AS TEXT)
		WHERE name = ? RETURNING value`, terminalIDCounter).Scan(&next)
	if err != nil {
		return 0, fmt.Errorf("take terminal id: %w", err)
	}
	n, err := strconv.ParseInt(next, 10, 64)
	if err != nil || n-1 < firstTerminalID {
		return 0, errors.New("take terminal id: the counter in settings is not a terminal ID")
	}
	if n-1 > lastTerminalID {
		return 0, errors.New("take terminal id: every 8-digit terminal ID is taken")
	}
	return n - 1, nil
}

// insertTerminalIfFree stores t unless its terminal ID is taken, and says
// whether it did.
func insertTerminalIfFree(ctx context.Context, c conn, t *instore.Terminal) (bool, error) {
	n, err := c.execAffected(ctx, `INSERT INTO terminals
		(terminal_id, customer_id, merchant_id, serial_number, linked_at, created_at)
		VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (terminal_id) DO NOTHING`,
		t.TerminalID, t.CustomerID, nullString(t.MerchantID), nullString(t.SerialNumber),
		nullMicros(t.LinkedAt), micros(t.CreatedAt))
	return n > 0, err
}

const terminalColumns = `terminal_id, customer_id, merchant_id, serial_number, linked_at, created_at`

func scanTerminal(s scanner) (*instore.Terminal, error) {
	var t instore.Terminal
	if err := s.Scan(&t.TerminalID, &t.CustomerID, intoString(&t.MerchantID), intoString(&t.SerialNumber),
		intoNullTime(&t.LinkedAt), intoTime(&t.CreatedAt)); err != nil {
		return nil, err
	}
	return &t, nil
}

// findTerminal returns the terminal matching where, a condition on one
// unique column; where is one of the package's constants, never input.
func findTerminal(ctx context.Context, c conn, where string, arg any) (*instore.Terminal, error) {
	return getOne(ctx, c, scanTerminal, "terminal", `SELECT `+terminalColumns+` FROM terminals WHERE `+where, arg)
}

func listTerminals(ctx context.Context, c conn, merchantID string) ([]*instore.Terminal, error) {
	return getAll(ctx, c, scanTerminal, "list terminals", `SELECT `+terminalColumns+` FROM terminals WHERE merchant_id = ? ORDER BY terminal_id`, merchantID)
}

func linkTerminal(ctx context.Context, c conn, terminalID, serial string, at time.Time) (prevSerial, prevTerminalID string, err error) {
	// Lock the target and the terminal bound to the device, in terminal ID
	// order so that two links never wait for each other. Creating a
	// transaction on either waits for this lock (its foreign key check
	// shares the row), so the PENDING guard below cannot be overtaken.
	rows, err := c.query(ctx, `SELECT terminal_id, customer_id, serial_number FROM terminals
		WHERE terminal_id = ? OR serial_number = ? ORDER BY terminal_id`+c.d.forUpdate, terminalID, serial)
	if err != nil {
		return "", "", fmt.Errorf("link terminal: %w", err)
	}
	found, customerID := false, ""
	for rows.Next() {
		var (
			id, customer string
			bound        sql.NullString
		)
		if err := rows.Scan(&id, &customer, &bound); err != nil {
			rows.Close()
			return "", "", fmt.Errorf("link terminal: %w", err)
		}
		if id == terminalID {
			found, customerID, prevSerial = true, customer, bound.String
		}
		if bound.Valid && bound.String == serial {
			prevTerminalID = id
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return "", "", fmt.Errorf("link terminal: %w", err)
	}
	if !found {
		return "", "", fmt.Errorf("terminal %w", instore.ErrNotFound)
	}
	if _, err := findDevice(ctx, c, serial); err != nil {
		return "", "", err
	}
	if prevSerial == serial {
		return prevSerial, prevTerminalID, nil // already linked: nothing to do
	}
	if err := refusePending(ctx, c, terminalID, prevTerminalID); err != nil {
		return "", "", err
	}
	if prevTerminalID != "" {
		if _, err := c.exec(ctx, `UPDATE terminals SET serial_number = NULL, linked_at = NULL WHERE terminal_id = ?`,
			prevTerminalID); err != nil {
			return "", "", c.conflictErr("link terminal", err)
		}
	}
	if _, err := c.exec(ctx, `UPDATE terminals SET serial_number = ?, linked_at = ? WHERE terminal_id = ?`,
		serial, micros(at), terminalID); err != nil {
		return "", "", c.conflictErr("link terminal", err)
	}
	if _, err := c.exec(ctx, `UPDATE devices SET link_code = NULL, customer_id = ? WHERE serial_number = ?`,
		customerID, serial); err != nil {
		return "", "", c.conflictErr("link terminal", err)
	}
	return prevSerial, prevTerminalID, nil
}

func unlinkTerminal(ctx context.Context, c conn, terminalID string) (string, error) {
	var bound sql.NullString
	err := c.queryRow(ctx, `SELECT serial_number FROM terminals WHERE terminal_id = ?`+c.d.forUpdate, terminalID).Scan(&bound)
	if err != nil {
		return "", notFound(err, "terminal")
	}
	if !bound.Valid {
		return "", fmt.Errorf("terminal link %w", instore.ErrNotFound)
	}
	if err := refusePending(ctx, c, terminalID); err != nil {
		return "", err
	}
	if _, err := c.exec(ctx, `UPDATE terminals SET serial_number = NULL, linked_at = NULL WHERE terminal_id = ?`,
		terminalID); err != nil {
		return "", c.conflictErr("unlink terminal", err)
	}
	return bound.String, nil
}

// refusePending returns a wrapped instore.ErrConflict when one of the
// terminal IDs has a PENDING transaction. Empty IDs are ignored.
func refusePending(ctx context.Context, c conn, terminalIDs ...string) error {
	for _, id := range terminalIDs {
		if id == "" {
			continue
		}
		var n int
		if err := c.queryRow(ctx, `SELECT COUNT(*) FROM transactions WHERE terminal_id = ? AND `+isPending, id).Scan(&n); err != nil {
			return fmt.Errorf("check pending transaction: %w", err)
		}
		if n > 0 {
			return fmt.Errorf("terminal has a pending transaction: %w", instore.ErrConflict)
		}
	}
	return nil
}
