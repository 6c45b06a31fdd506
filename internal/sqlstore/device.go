package sqlstore

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/instore-dev/instore"
)

// CreateDevice stores a new device; a taken serial number or link code, or
// a missing customer, is instore.ErrConflict.
func (db *DB) CreateDevice(ctx context.Context, d *instore.Device) error {
	return db.create(ctx, "create device", func(c conn) error {
		_, err := c.exec(ctx, `INSERT INTO devices (`+deviceColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			d.SerialNumber, d.Model, nullString(d.CustomerID), d.SecretHash, d.SoftwareVersion,
			nullString(d.LinkCode), nullMicros(d.LastSeenAt), micros(d.CreatedAt))
		return err
	})
}

// Device returns the device with a serial number.
func (db *DB) Device(ctx context.Context, serial string) (*instore.Device, error) {
	return findDevice(ctx, db.read(), serial)
}

// Devices lists the devices of a customer, or all when customerID is empty,
// ordered by serial number.
func (db *DB) Devices(ctx context.Context, customerID string) ([]*instore.Device, error) {
	query, args := ofCustomer(`SELECT `+deviceColumns+` FROM devices`, customerID, `serial_number`)
	return getAll(ctx, db.read(), scanDevice, "list devices", query, args...)
}

// DeviceByLinkCode finds the device showing code.
func (db *DB) DeviceByLinkCode(ctx context.Context, code string) (*instore.Device, error) {
	return getOne(ctx, db.read(), scanDevice, "device", `SELECT `+deviceColumns+` FROM devices WHERE link_code = ?`, code)
}

// DevicesSeen records the hellos of seen in one write transaction: each
// device's software version and time, then every record's events in
// order; see instore.DeviceStore. On PostgreSQL the devices' rows are
// locked first, in the order of their serial numbers, so that two nodes'
// batches take their common rows in the same order whatever plan the
// update gets, and waiting for a lock ends after seenLockTimeout (a row
// held by a stalled transaction elsewhere then fails the batch, whose
// hellos the caller writes one by one, instead of holding them all); then
// one statement writes them (one array per column), each device once with
// its last record. On SQLite one statement each, in the order given (its
// one writer takes no row locks; its group commit shares the
// transaction's cost already).
func (db *DB) DevicesSeen(ctx context.Context, seen []instore.DeviceSeen) error {
	if len(seen) == 0 {
		return nil
	}
	var evs []instore.OutboxEvent
	for _, r := range seen {
		evs = append(evs, r.Events...)
	}
	return db.updateOutbox(ctx, evs, func(c conn) error {
		if db.d.name == "postgres" {
			return devicesSeenAtOnce(ctx, c, seen)
		}
		for _, r := range seen {
			res, err := c.exec(ctx, `UPDATE devices SET software_version = ?, last_seen_at = ? WHERE serial_number = ?`,
				r.SoftwareVersion, micros(r.At), r.SerialNumber)
			if err != nil {
				return fmt.Errorf("devices seen: %w", err)
			}
			if err := mustAffect(res, "device"); err != nil {
				return err
			}
		}
		return nil
	})
}

// seenLockTimeout bounds how long a batch of hellos waits for a device's
// row that another transaction holds (PostgreSQL lock_timeout).
const seenLockTimeout = "2s"

// devicesSeenAtOnce updates the devices of seen in one PostgreSQL
// statement: the last record of each serial number wins, as if the
// records were written one after another.
func devicesSeenAtOnce(ctx context.Context, c conn, seen []instore.DeviceSeen) error {
	last := make(map[string]instore.DeviceSeen, len(seen))
	for _, r := range seen {
		last[r.SerialNumber] = r
	}
	serials := slices.Sorted(maps.Keys(last))
	versions := make([]string, len(serials))
	ats := make([]int64, len(serials))
	for i, serial := range serials {
		versions[i], ats[i] = last[serial].SoftwareVersion, micros(last[serial].At)
	}
	if _, err := c.exec(ctx, `SET LOCAL lock_timeout = '`+seenLockTimeout+`'`); err != nil {
		return fmt.Errorf("devices seen: %w", err)
	}
	if len(serials) > 1 { // one row has no order to keep
		if _, err := c.exec(ctx, `SELECT 1 FROM devices WHERE serial_number = ANY(?::text[])
			ORDER BY serial_number FOR NO KEY UPDATE`, serials); err != nil {
			return fmt.Errorf("devices seen: lock: %w", err)
		}
	}
	n, err := c.execAffected(ctx, `UPDATE devices SET software_version = v.version, last_seen_at = v.seen_at
		FROM unnest(?::text[], ?::text[], ?::bigint[]) AS v(serial, version, seen_at)
		WHERE devices.serial_number = v.serial`, serials, versions, ats)
	if err != nil {
		return fmt.Errorf("devices seen: %w", err)
	}
	if n != int64(len(serials)) {
		return fmt.Errorf("devices seen: device %w", instore.ErrNotFound)
	}
	return nil
}

// SetLinkCode sets (or with "" clears) the code a device shows; another
// device showing the same code is instore.ErrConflict.
func (db *DB) SetLinkCode(ctx context.Context, serial, code string) error {
	return db.update(ctx, func(c conn) error {
		res, err := c.exec(ctx, `UPDATE devices SET link_code = ? WHERE serial_number = ?`, nullString(code), serial)
		if err != nil {
			return db.conflictErr("set link code", err)
		}
		return mustAffect(res, "device")
	})
}

const deviceColumns = `serial_number, model, customer_id, secret_hash, software_version, link_code, last_seen_at, created_at`

func scanDevice(s scanner) (*instore.Device, error) {
	var d instore.Device
	if err := s.Scan(&d.SerialNumber, &d.Model, intoString(&d.CustomerID), &d.SecretHash, &d.SoftwareVersion,
		intoString(&d.LinkCode), intoNullTime(&d.LastSeenAt), intoTime(&d.CreatedAt)); err != nil {
		return nil, err
	}
	return &d, nil
}

func findDevice(ctx context.Context, c conn, serial string) (*instore.Device, error) {
	return getOne(ctx, c, scanDevice, "device", `SELECT `+deviceColumns+` FROM devices WHERE serial_number = ?`, serial)
}
