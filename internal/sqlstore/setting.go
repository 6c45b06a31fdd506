package sqlstore

import (
	"context"
	"fmt"
)

// Setting returns a named service setting (instore.ErrNotFound when unset).
func (db *DB) Setting(ctx context.Context, name string) (string, error) {
	return findSetting(ctx, db.read(), name)
}

// InitSetting stores value under name unless a value is already there, and
// returns the value that is stored. The insert and the read are one
// transaction, so the first writer wins, also across nodes.
func (db *DB) InitSetting(ctx context.Context, name, value string) (string, error) {
	return updateValue(ctx, db, nil, func(c conn) (string, error) {
		if err := insertSettingIfAbsent(ctx, c, name, value); err != nil {
			return "", err
		}
		return findSetting(ctx, c, name)
	})
}

// PutSetting stores value under name, replacing any value there.
func (db *DB) PutSetting(ctx context.Context, name, value string) error {
	return db.update(ctx, func(c conn) error {
		_, err := c.exec(ctx, `INSERT INTO settings (name, value) VALUES (?, ?)
			ON CONFLICT (name) DO UPDATE SET value = excluded.value`, name, value)
		if err != nil {
			return fmt.Errorf("put setting: %w", err)
		}
		return nil
	})
}

func findSetting(ctx context.Context, c conn, name string) (string, error) {
	var value string
	if err := c.queryRow(ctx, `SELECT value FROM settings WHERE name = ?`, name).Scan(&value); err != nil {
		return "", notFound(err, "setting")
	}
	return value, nil
}

func insertSettingIfAbsent(ctx context.Context, c conn, name, value string) error {
	_, err := c.exec(ctx, `INSERT INTO settings (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING`, name, value)
	if err != nil {
		return fmt.Errorf("init setting: %w", err)
	}
	return nil
}
