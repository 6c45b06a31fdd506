package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"
)

// migrationFS holds the schema of each dialect as numbered files,
// NNNN_name.sql, with the same numbers in both directories.
//
//go:embed migrations/sqlite/*.sql migrations/postgres/*.sql
var migrationFS embed.FS

// migration is one numbered schema change.
type migration struct {
	version int
	name    string
	sql     string
}

// loadMigrations reads the migrations in dir of fsys, in version order.
func loadMigrations(fsys fs.FS, dir string) ([]migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	var ms []migration
	seen := map[int]string{}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: name must be NNNN_name.sql", e.Name())
		}
		if other, dup := seen[v]; dup {
			return nil, fmt.Errorf("migrations %s and %s have the same number", other, e.Name())
		}
		seen[v] = e.Name()
		b, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: e.Name(), sql: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	return ms, nil
}

// migrate applies the pending migrations, each in its own transaction, on
// one connection of the writer that holds the dialect's migration lock.
func (db *DB) migrate(ctx context.Context) (err error) {
	ms, err := loadMigrations(migrationFS, db.d.dir)
	if err != nil {
		return err
	}
	sc, err := db.writer.Conn(ctx)
	if err != nil {
		return err
	}
	defer sc.Close()
	unlock, err := db.d.lockMigrations(ctx, sc)
	if err != nil {
		return err
	}
	defer func() {
		if uerr := unlock(); uerr != nil {
			// Never hand a connection that may still hold the lock back
			// to the pool.
			sc.Raw(func(any) error { return driver.ErrBadConn })
			if err == nil {
				err = fmt.Errorf("release migration lock: %w", uerr)
			}
		}
	}()

	c := conn{d: db.d, q: sc}
	if err := inTx(ctx, sc, db.d, func(c conn) error {
		_, err := c.exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    INTEGER PRIMARY KEY,
			applied_at BIGINT NOT NULL
		)`)
		return err
	}); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	var newest sql.NullInt64
	if err := c.queryRow(ctx, `SELECT MAX(version) FROM schema_migrations`).Scan(&newest); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	known := 0
	if len(ms) > 0 {
		known = ms[len(ms)-1].version
	}
	if newest.Valid && int(newest.Int64) > known {
		return fmt.Errorf("database schema version %d is newer than this binary knows (%d): run a newer instore", newest.Int64, known)
	}

	for _, m := range ms {
		if err := inTx(ctx, sc, db.d, func(c conn) error { return applyMigration(ctx, c, m) }); err != nil {
			return fmt.Errorf("%s: %w", m.name, err)
		}
	}
	return nil
}

// applyMigration runs m unless it is recorded as applied. The check is inside
// the transaction, so a SQLite process that waited for another one's BEGIN
// IMMEDIATE sees its work.
func applyMigration(ctx context.Context, c conn, m migration) error {
	var n int
	if err := c.queryRow(ctx, `SELECT COUNT(*) FROM schema_migrations WHERE version = ?`, m.version).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return nil
	}
	// Dialect-specific already: run as written, without rebinding.
	if _, err := c.q.ExecContext(ctx, m.sql); err != nil {
		return err
	}
	_, err := c.exec(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`,
		m.version, micros(time.Now()))
	return err
}

// inTx runs fn in a transaction on sc and commits it when fn returns nil.
func inTx(ctx context.Context, sc *sql.Conn, d *dialect, fn func(c conn) error) error {
	tx, err := sc.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(conn{d: d, q: tx}); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}
