package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/pgtest"
	"github.com/instore-dev/instore/internal/testwait"
)

func TestRebind(t *testing.T) {
	pg, lite := newPostgres(), newSQLite()
	for _, tc := range []struct {
		in, want string
	}{
		{"SELECT 1", "SELECT 1"},
		{"SELECT a FROM t WHERE id = ?", "SELECT a FROM t WHERE id = $1"},
		{"INSERT INTO t (a, b, c) VALUES (?, ?, ?)", "INSERT INTO t (a, b, c) VALUES ($1, $2, $3)"},
		{"SELECT '?', \"?\" FROM t WHERE a = ?", "SELECT '?', \"?\" FROM t WHERE a = $1"},
		{"SELECT 'it''s ?' WHERE a = ?", "SELECT 'it''s ?' WHERE a = $1"},
		{"SELECT a -- why?\nFROM t WHERE a = ? -- and ?", "SELECT a -- why?\nFROM t WHERE a = $1 -- and ?"},
		{"SELECT a - ? FROM t", "SELECT a - $1 FROM t"},
		{"SELECT 'unterminated ?", "SELECT 'unterminated ?"},
	} {
		if got := pg.rebind(tc.in); got != tc.want {
			t.Errorf("postgres rebind(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if got := pg.rebind(tc.in); got != tc.want {
			t.Errorf("postgres rebind(%q) from the cache = %q, want %q", tc.in, got, tc.want)
		}
		if got := lite.rebind(tc.in); got != tc.in {
			t.Errorf("sqlite rebind(%q) = %q, want it unchanged", tc.in, got)
		}
	}
}

// TestSQLiteConnections checks the pragmas and the writer/reader split that
// the architecture depends on.
func TestSQLiteConnections(t *testing.T) {
	for _, tc := range []struct {
		opts        Options
		synchronous int // PRAGMA synchronous: 1 NORMAL, 2 FULL
	}{
		{Options{}, 2},
		{Options{Synchronous: "FULL"}, 2},
		{Options{Synchronous: "normal"}, 1},
	} {
		t.Run(tc.opts.Synchronous, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "instore.db")
			db, err := Open(t.Context(), path, tc.opts)
			if err != nil {
				t.Fatalf("Open() = %v", err)
			}
			defer db.Close()

			pragma := func(pool *sql.DB, name string) any {
				t.Helper()
				var v any
				if err := pool.QueryRowContext(t.Context(), "PRAGMA "+name).Scan(&v); err != nil {
					t.Fatalf("PRAGMA %s: %v", name, err)
				}
				return v
			}
			for _, p := range []struct {
				pool *sql.DB
				role string
				name string
				want any
			}{
				{db.writer, "writer", "journal_mode", "wal"},
				{db.writer, "writer", "foreign_keys", int64(1)},
				{db.writer, "writer", "busy_timeout", int64(sqliteBusyTimeout)},
				{db.writer, "writer", "synchronous", int64(tc.synchronous)},
				{db.writer, "writer", "query_only", int64(0)},
				{db.reader, "reader", "journal_mode", "wal"},
				{db.reader, "reader", "busy_timeout", int64(sqliteBusyTimeout)},
				{db.reader, "reader", "query_only", int64(1)},
			} {
				if got := pragma(p.pool, p.name); got != p.want {
					t.Errorf("%s PRAGMA %s = %v (%T), want %v (%T)", p.role, p.name, got, got, p.want, p.want)
				}
			}
			if got := db.writer.Stats().MaxOpenConnections; got != 1 {
				t.Errorf("writer MaxOpenConnections = %d, want 1", got)
			}
			if got := db.reader.Stats().MaxOpenConnections; got != sqliteReaders {
				t.Errorf("reader MaxOpenConnections = %d, want %d", got, sqliteReaders)
			}

			// A write transaction takes the write lock at BEGIN (IMMEDIATE),
			// before it writes anything.
			tx, err := db.writer.BeginTx(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			other, err := sql.Open("sqlite", path+"?_busy_timeout=0")
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			if _, err := other.ExecContext(t.Context(), "BEGIN IMMEDIATE"); err == nil {
				t.Errorf("BEGIN IMMEDIATE beside an open store transaction = nil error, want SQLITE_BUSY")
			}

			if _, err := db.reader.ExecContext(t.Context(), "INSERT INTO settings (name, value) VALUES ('a', 'b')"); err == nil {
				t.Errorf("INSERT on the reader pool = nil error, want a query_only refusal")
			}
		})
	}
}

// TestPostgresPoolBounded: the pool never opens more connections than
// postgresMaxConns, so a burst of requests queues in the pool instead of
// failing with "too many clients" at the server's max_connections.
// openPostgresTest opens the store on a fresh schema of
// INSTORE_TEST_DATABASE_URL, or skips: never on the database's own schema,
// which another branch's migrations may have moved on.
func openPostgresTest(t *testing.T) *DB {
	t.Helper()
	u := pgtest.Schema(t, "dialecttest")
	if u == "" {
		t.Skip("INSTORE_TEST_DATABASE_URL is not set; set it to a postgres:// URL to run the PostgreSQL tests")
	}
	db, err := Open(t.Context(), u, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestPostgresPoolBounded(t *testing.T) {
	db := openPostgresTest(t)
	var wg sync.WaitGroup
	errs := make(chan error, 120)
	for range 120 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := db.writer.ExecContext(t.Context(), "SELECT pg_sleep(0.2)"); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("a query of a burst of 120 failed: %v", err)
	}
	if got := db.writer.Stats().MaxOpenConnections; got != postgresMaxConns {
		t.Errorf("MaxOpenConnections = %d, want %d", got, postgresMaxConns)
	}
	if got := db.reader.Stats().MaxOpenConnections; got != postgresMaxConns || db.reader == db.writer {
		t.Errorf("reader pool: MaxOpenConnections = %d (want %d), the writer's own pool: %v", got, postgresMaxConns, db.reader == db.writer)
	}
}

// TestPostgresReadsDoNotWaitForWrites: with every connection of the write
// pool busy (here: waiting for an advisory lock the test holds), reads
// still get connections of their own and answer.
func TestPostgresReadsDoNotWaitForWrites(t *testing.T) {
	db := openPostgresTest(t)
	ctx := t.Context()
	lock, err := db.reader.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const key = 727274 // any advisory lock key no other test takes
	if _, err := lock.ExecContext(ctx, "SELECT pg_advisory_lock($1)", key); err != nil {
		t.Fatal(err)
	}
	var blocked sync.WaitGroup
	for range postgresMaxConns {
		blocked.Go(func() {
			db.writer.ExecContext(ctx, "SELECT pg_advisory_lock($1), pg_advisory_unlock($1)", key)
		})
	}
	testwait.ForNil(t, "the write pool to fill", func() error {
		if st := db.writer.Stats(); st.InUse < postgresMaxConns {
			return fmt.Errorf("%+v", st)
		}
		return nil
	})
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := db.Setting(rctx, "no-such-setting"); !errors.Is(err, instore.ErrNotFound) {
		t.Errorf("a read with the write pool full = %v, want an answer (not found)", err)
	}
	if _, err := lock.ExecContext(ctx, "SELECT pg_advisory_unlock($1)", key); err != nil {
		t.Fatal(err)
	}
	lock.Close()
	blocked.Wait()
}

func TestPoolSizes(t *testing.T) {
	for _, tc := range []struct{ max, w, r, x int }{
		{0, postgresMaxConns, postgresMaxConns, postgresRelaxedConns},
		{DefaultMaxConns, 16, 16, 8},
		{20, 8, 8, 4},
		{1, 2, 2, 1}, // raised to MinMaxConns
	} {
		w, r, x := poolSizes(tc.max)
		if w != tc.w || r != tc.r || x != tc.x || w+r+x > max(tc.max, MinMaxConns) && tc.max > 0 {
			t.Errorf("poolSizes(%d) = %d %d %d, want %d %d %d", tc.max, w, r, x, tc.w, tc.r, tc.x)
		}
	}
}

// TestDeadlockDetected: a real deadlock on PostgreSQL (two database
// transactions taking two advisory locks in opposite orders) is what
// dialect.deadlock recognises, wrapped as the store wraps errors; another
// error, and none, are not.
func TestDeadlockDetected(t *testing.T) {
	db := openPostgresTest(t)
	ctx := t.Context()
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range 2 {
		wg.Go(func() {
			errs[i] = db.writeTx(ctx, db.writer, func(c conn) error {
				if _, err := c.exec(ctx, `SELECT pg_advisory_xact_lock(?)`, 7700+i); err != nil {
					return err
				}
				<-start
				if _, err := c.exec(ctx, `SELECT pg_advisory_xact_lock(?)`, 7701-i); err != nil {
					return fmt.Errorf("second lock: %w", err)
				}
				return nil
			})
		})
	}
	held := testwait.Until(10*time.Second, func() bool {
		var n int
		err := db.reader.QueryRowContext(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND objid IN (7700, 7701)`).Scan(&n)
		return err == nil && n == 2
	})
	close(start)
	if !held {
		t.Fatal("the two transactions did not both take their first lock within 10 s")
	}
	wg.Wait()
	if db.d.deadlock(errs[0]) == db.d.deadlock(errs[1]) || errs[0] != nil && errs[1] != nil {
		t.Errorf("deadlock(%v), deadlock(%v): want exactly one victim, the other committed", errs[0], errs[1])
	}
	if db.d.deadlock(nil) || db.d.deadlock(fmt.Errorf("link: %w", instore.ErrConflict)) {
		t.Errorf("deadlock() of no error or a conflict = true")
	}
}

// TestUntilNoDeadlock: a write PostgreSQL aborts as a deadlock's victim is
// run again, at most deadlockAttempts times in all; any other outcome is
// answered at once.
func TestUntilNoDeadlock(t *testing.T) {
	db := &DB{d: newPostgres()}
	victim := fmt.Errorf("delete webhook: %w", &pgconn.PgError{Code: "40P01", Message: "deadlock detected"})
	for _, tc := range []struct {
		victimFor int // runs that are victims before one that ends
		last      error
		wantRuns  int
		wantErr   bool
	}{
		{0, nil, 1, false},
		{2, nil, 3, false},
		{0, instore.ErrConflict, 1, true},
		{2, instore.ErrConflict, 3, true},
		{deadlockAttempts + 3, nil, deadlockAttempts, true},
	} {
		runs := 0
		err := db.untilNoDeadlock(func() error {
			runs++
			if runs <= tc.victimFor {
				return victim
			}
			return tc.last
		})
		if runs != tc.wantRuns || (err != nil) != tc.wantErr {
			t.Errorf("%d victims then %v: %d runs, %v; want %d runs", tc.victimFor, tc.last, runs, err, tc.wantRuns)
		}
	}
}
