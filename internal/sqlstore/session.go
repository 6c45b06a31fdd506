package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"github.com/instore-dev/instore"
)

// maxSessionRead bounds the serial numbers of one DeviceSessions (or
// DevicesBySerial) statement; more are read in several.
const maxSessionRead = 512

// sessionReadSizes are the lengths the IN list of a DeviceSessions
// statement is padded to (with its last serial number again), so that
// the prepared statements are a handful, not one per length.
var sessionReadSizes = []int{1, 16, 128, maxSessionRead}

// deviceSessionsQuery is a statement of DeviceSessions for n serial
// numbers: the terminal ID and device rows joined with the terminal's
// PENDING transaction, unfinished update and PENDING close (at most one of
// each: transactions_one_active, updates_one_open, batches_pending), and
// whether an open effect waits for the device (effects_open_device).
func deviceSessionsQuery(n int) string {
	return `SELECT ` + qualified("t", terminalColumns) + `, ` + qualified("d", deviceColumns) + `, a.id, ` +
		qualified("u", updateColumns) + `, b.id, b.device_serial,
		CASE WHEN EXISTS (SELECT 1 FROM effects e WHERE e.device_serial = t.serial_number AND e.done_at IS NULL) THEN 1 ELSE 0 END
	FROM terminals t JOIN devices d ON d.serial_number = t.serial_number
	LEFT JOIN transactions a ON a.terminal_id = t.terminal_id AND a.` + isPending + `
	LEFT JOIN updates u ON u.terminal_id = t.terminal_id AND u.` + isOpenUpdate + `
	LEFT JOIN batches b ON b.terminal_id = t.terminal_id AND b.state = 'PENDING'
	WHERE t.serial_number IN (?` + strings.Repeat(", ?", n-1) + `)`
}

// qualified prefixes each of the comma-separated columns with table.
func qualified(table, columns string) string {
	return table + "." + strings.ReplaceAll(columns, ", ", ", "+table+".")
}

// DeviceSessions returns what a hello and the end of a session read of
// each linked device of serials, one statement per 512; see
// instore.TerminalStore.
func (db *DB) DeviceSessions(ctx context.Context, serials []string) ([]*instore.DeviceSession, error) {
	return readIn(ctx, db, serials, deviceSessionsQuery, scanDeviceSession, "device sessions")
}

// DevicesBySerial returns the devices of serials (those that exist, in no
// order), one statement per 512; see instore.DeviceStore.
func (db *DB) DevicesBySerial(ctx context.Context, serials []string) ([]*instore.Device, error) {
	return readIn(ctx, db, serials, func(n int) string {
		return `SELECT ` + deviceColumns + ` FROM devices WHERE serial_number IN (?` + strings.Repeat(", ?", n-1) + `)`
	}, scanDevice, "devices")
}

// readIn reads the rows of keys (each key once) with query(n), a
// statement of an IN list of n keys, one statement per maxSessionRead
// keys; the list is padded to the next of sessionReadSizes with its last
// key again.
func readIn[T any](ctx context.Context, db *DB, keys []string, query func(n int) string, scan func(scanner) (T, error), op string) ([]T, error) {
	// Each key once: a row is read once whatever its key's repeats.
	seen := make(map[string]bool, len(keys))
	keys = slices.DeleteFunc(slices.Clone(keys), func(k string) bool {
		dup := seen[k]
		seen[k] = true
		return dup
	})
	out := make([]T, 0, len(keys))
	for len(keys) > 0 {
		chunk := keys[:min(len(keys), maxSessionRead)]
		keys = keys[len(chunk):]
		n := sessionReadSizes[len(sessionReadSizes)-1]
		for _, size := range sessionReadSizes {
			if size >= len(chunk) {
				n = size
				break
			}
		}
		args := make([]any, n)
		for i := range args {
			args[i] = chunk[min(i, len(chunk)-1)]
		}
		rows, err := db.read().query(ctx, query(n), args...)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		got, err := collect(rows, scan, op)
		if err != nil {
			return nil, err
		}
		out = append(out, got...)
	}
	return out, nil
}

// scanDeviceSession scans a row of deviceSessionsQuery: the terminal's
// columns, the device's, then the rest, in one Scan (scanTerminal's
// inside calls scanDevice's, which makes it).
func scanDeviceSession(s scanner) (*instore.DeviceSession, error) {
	var (
		activeID, batchID, batchDev sql.NullString
		u                           nullUpdate
		owed                        int64
		d                           *instore.Device
	)
	rest := append([]any{&activeID}, u.dest()...)
	rest = append(rest, &batchID, &batchDev, &owed)
	t, err := scanTerminal(scanFunc(func(tdest ...any) error {
		var err error
		d, err = scanDevice(scanFunc(func(ddest ...any) error {
			return s.Scan(append(append(append([]any{}, tdest...), ddest...), rest...)...)
		}))
		return err
	}))
	if err != nil {
		return nil, err
	}
	return &instore.DeviceSession{Terminal: t, Device: d, ActiveID: activeID.String, Update: u.update(),
		BatchID: batchID.String, BatchSerial: batchDev.String, Owed: owed != 0}, nil
}

// scanFunc is a scanner made of a function.
type scanFunc func(dest ...any) error

func (f scanFunc) Scan(dest ...any) error { return f(dest...) }
