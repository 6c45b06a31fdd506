package sqlstore

import (
	"context"
	"fmt"
	"time"

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

// DeviceSeen records a device's hello: its software version and time.
func (db *DB) DeviceSeen(ctx context.Context, serial, softwareVersion string, at time.Time, evs ...instore.OutboxEvent) error {
	return db.updateOutbox(ctx, evs, func(c conn) error {
		res, err := c.exec(ctx, `UPDATE devices SET software_version = ?, last_seen_at = ? WHERE serial_number = ?`,
			softwareVersion, micros(at), serial)
		if err != nil {
			return fmt.Errorf("device seen: %w", err)
		}
		return mustAffect(res, "device")
	})
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
