package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// This file holds every difference between SQLite and PostgreSQL: how a
// database is opened, placeholders, row locks, how constraint violations are
// reported, where the migrations live and how concurrent migrators are kept
// apart.
// The rest of the package writes portable SQL with ? placeholders.

// postgresMaxConns bounds each of the two PostgreSQL pools of one node: one
// for write transactions, one for reads, so that reads (a status, a
// listing) never wait for a connection behind writes waiting for their
// commits to be flushed, and writes keep as many commits in flight as the
// database can flush together.
const postgresMaxConns = 16

// postgresRelaxedConns bounds the third pool, for the progress stages that
// need not wait for the disk (Commit of a relaxed change).
const postgresRelaxedConns = 8

// sqliteReaders is the size of the SQLite reader pool.
const sqliteReaders = 4

// sqliteBusyTimeout is how long (ms) a SQLite connection waits for a lock.
const sqliteBusyTimeout = 5000

// migrationLockKey is the PostgreSQL advisory lock held while migrating, so
// that two nodes starting together do not both migrate.
const migrationLockKey int64 = 0x696e73746f7265 // "instore"

// dialect is one SQL backend.
type dialect struct {
	name string
	// dir is the directory of the dialect's migrations in migrationFS.
	dir string
	// numbered rewrites ? placeholders to $1..$n.
	numbered bool
	// advisoryLock takes a session-level lock around migrations.
	advisoryLock bool
	// forUpdate ends a SELECT that locks the rows it reads until the
	// transaction ends. SQLite needs none: its write transactions start
	// with BEGIN IMMEDIATE and so hold the database's one write lock.
	forUpdate string
	// forNoKeyUpdate is forUpdate for a row other tables reference by
	// foreign key (a merchant): it serialises the transactions that take
	// it without blocking inserts that reference the row (their key share
	// lock does not conflict with it).
	forNoKeyUpdate string
	// forKeyShare is forUpdate for a row read as a condition of an insert
	// that references it (a terminal ID, for a creation's device): the
	// lock the insert's foreign key check takes anyway, which a link's
	// FOR UPDATE excludes. In READ COMMITTED, a statement that waited for
	// such a lock checks its condition again on the row version the other
	// transaction committed.
	forKeyShare string
	// indexedBy names, in the query, the index a listing must read
	// (INDEXED BY). SQLite plans without statistics (the store never runs
	// ANALYZE), and its planner (3.54) prefers transactions_merchant_created
	// to the index that also holds a filtered column, which turns a
	// listing of a rare status into a walk over the whole range; with the
	// name it reads the right one, and a missing index is an error rather
	// than a slow plan. PostgreSQL plans with the statistics autovacuum
	// keeps, and has no such clause.
	indexedBy bool
	// rebound caches rewritten queries (numbered dialects only).
	rebound sync.Map
}

func newSQLite() *dialect { return &dialect{name: "sqlite", dir: "migrations/sqlite", indexedBy: true} }
func newPostgres() *dialect {
	return &dialect{name: "postgres", dir: "migrations/postgres", numbered: true, advisoryLock: true, forUpdate: " FOR UPDATE",
		forNoKeyUpdate: " FOR NO KEY UPDATE", forKeyShare: " FOR KEY SHARE"}
}

// isPostgres reports whether dsn names a PostgreSQL database.
func isPostgres(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// openSQLite opens the writer (one connection, BEGIN IMMEDIATE) and the
// reader pool (query_only) on the SQLite file at path.
func openSQLite(ctx context.Context, path, synchronous string) (writer, reader *sql.DB, err error) {
	switch {
	case path == "":
		return nil, nil, errors.New("sqlstore: empty database path")
	case path == ":memory:" || strings.HasPrefix(path, "file:"):
		return nil, nil, errors.New("sqlstore: sqlite wants a file path, not :memory: or a file: URI")
	case strings.Contains(path, "://"):
		return nil, nil, errors.New("sqlstore: unsupported database URL scheme (want postgres:// or a SQLite file path)")
	case strings.Contains(path, "?"):
		// The driver reads everything after '?' as its parameters.
		return nil, nil, errors.New("sqlstore: sqlite file path must not contain '?'")
	}
	dir := filepath.Dir(path)
	if fi, err := os.Stat(dir); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil, fmt.Errorf("sqlstore: directory %s of the sqlite file does not exist", dir)
		}
		return nil, nil, fmt.Errorf("sqlstore: %w", err)
	} else if !fi.IsDir() {
		return nil, nil, fmt.Errorf("sqlstore: %s is not a directory", dir)
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return nil, nil, fmt.Errorf("sqlstore: %s is a directory, want a sqlite file", path)
	}

	dsn := func(extra ...string) string {
		// Temporary files in memory: above all the statement journal of
		// the group committer's savepoints (a write per page a job
		// changes, to a temporary file otherwise: pwrite calls that were
		// a sixth of the server's CPU under purchase load with webhooks).
		return sqliteDSN(path, append([]string{"_foreign_keys", "on", "_synchronous", synchronous,
			"_pragma", "temp_store(memory)"}, extra...)...)
	}
	writer, err = sql.Open("sqlite", dsn("_txlock", "immediate"))
	if err != nil {
		return nil, nil, fmt.Errorf("sqlstore: open sqlite: %w", err)
	}
	writer.SetMaxOpenConns(1)
	writer.SetMaxIdleConns(1)
	writer.SetConnMaxLifetime(0)
	writer.SetConnMaxIdleTime(0)
	// The writer connects first: it creates the file and switches it to WAL
	// before any reader looks at it.
	if err := setWAL(ctx, writer); err != nil {
		writer.Close()
		return nil, nil, fmt.Errorf("sqlstore: open sqlite %s: %w", path, err)
	}

	reader, err = sql.Open("sqlite", dsn("_query_only", "on"))
	if err != nil {
		writer.Close()
		return nil, nil, fmt.Errorf("sqlstore: open sqlite: %w", err)
	}
	reader.SetMaxOpenConns(sqliteReaders)
	reader.SetMaxIdleConns(sqliteReaders)
	if err := reader.PingContext(ctx); err != nil {
		writer.Close()
		reader.Close()
		return nil, nil, fmt.Errorf("sqlstore: open sqlite %s: %w", path, err)
	}
	return writer, reader, nil
}

// setWAL switches the database to write-ahead logging. The mode is kept in
// the file, so this runs once per Open. Changing the journal mode can fail
// with SQLITE_BUSY at once, without waiting out busy_timeout (seen when
// several stores open one new file together, TestConcurrentOpen), so it is
// retried here for as long.
func setWAL(ctx context.Context, db *sql.DB) error {
	deadline := time.Now().Add(sqliteBusyTimeout * time.Millisecond)
	for {
		var mode string
		err := db.QueryRowContext(ctx, "PRAGMA journal_mode = WAL").Scan(&mode)
		if err == nil {
			if !strings.EqualFold(mode, "wal") {
				return fmt.Errorf("journal_mode is %s, want wal", mode)
			}
			return nil
		}
		var se *sqlite.Error
		if !errors.As(err, &se) || se.Code()&0xff != sqlite3.SQLITE_BUSY || time.Now().After(deadline) {
			return fmt.Errorf("set journal_mode: %w", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// openPostgres opens a pgx pool of conns connections, whose sessions get
// the run-time parameters params (name, value, ...). Errors never repeat the
// DSN: it may hold a password.
func openPostgres(ctx context.Context, dsn string, conns int, params ...string) (*sql.DB, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		// The parse error quotes the URL, with the password redacted only
		// on a best-effort basis.
		return nil, errors.New("sqlstore: invalid postgres URL (not repeated here: it may hold a password)")
	}
	for i := 0; i+1 < len(params); i += 2 {
		cfg.RuntimeParams[params[i]] = params[i+1]
	}
	db := stdlib.OpenDB(*cfg)
	// Bounded: PostgreSQL refuses connections past max_connections (100 by
	// default), and past a few per core more connections only queue inside
	// the server. Callers wait for a free connection instead.
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlstore: connect to postgres: %w", err)
	}
	return db, nil
}

// rebind rewrites the ? placeholders of query for the dialect. Question
// marks inside quoted strings, quoted identifiers and comments are kept.
func (d *dialect) rebind(query string) string {
	if !d.numbered {
		return query
	}
	if q, ok := d.rebound.Load(query); ok {
		return q.(string)
	}
	var b strings.Builder
	b.Grow(len(query) + 8)
	n := 0
	for i := 0; i < len(query); i++ {
		c := query[i]
		switch c {
		case '\'', '"':
			j := strings.IndexByte(query[i+1:], c)
			if j < 0 {
				b.WriteString(query[i:])
				i = len(query)
				continue
			}
			b.WriteString(query[i : i+j+2])
			i += j + 1
		case '-':
			if i+1 < len(query) && query[i+1] == '-' {
				j := strings.IndexByte(query[i:], '\n')
				if j < 0 {
					j = len(query) - i - 1
				}
				b.WriteString(query[i : i+j+1])
				i += j
				continue
			}
			b.WriteByte(c)
		case '?':
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
		default:
			b.WriteByte(c)
		}
	}
	q := b.String()
	d.rebound.Store(query, q)
	return q
}

// conflict reports whether err is a unique or foreign-key violation, and
// which one, in words safe for a log (no values).
func (d *dialect) conflict(err error) (string, bool) {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "23505":
			return "duplicate", true
		case "23503":
			return "missing reference", true
		}
		return "", false
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() {
		case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
			return "duplicate", true
		case sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
			return "missing reference", true
		case sqlite3.SQLITE_CONSTRAINT_TRIGGER:
			// A trigger's RAISE(ABORT): transactions_not_closing (0017).
			return "refused by a trigger", true
		}
	}
	return "", false
}

// deadlock reports whether err is PostgreSQL's deadlock_detected: the
// database transaction was rolled back whole, and may be run again.
// SQLite's one writer never deadlocks.
func (d *dialect) deadlock(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "40P01"
}

// lockMigrations keeps other nodes from migrating until unlock is called.
// SQLite needs no lock: its migrations run in BEGIN IMMEDIATE transactions
// that re-check what is applied.
func (d *dialect) lockMigrations(ctx context.Context, conn *sql.Conn) (unlock func() error, err error) {
	if !d.advisoryLock {
		return func() error { return nil }, nil
	}
	if _, err := conn.ExecContext(ctx, d.rebind("SELECT pg_advisory_lock(?)"), migrationLockKey); err != nil {
		return nil, fmt.Errorf("take migration lock: %w", err)
	}
	return func() error {
		// A fresh context: the unlock must run even when ctx is done.
		_, err := conn.ExecContext(context.Background(), d.rebind("SELECT pg_advisory_unlock(?)"), migrationLockKey)
		return err
	}, nil
}
