package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/pgtest"
	"github.com/instore-dev/instore/internal/sqlstore"
	"github.com/instore-dev/instore/internal/storetest"
	"github.com/instore-dev/instore/internal/testwait"
)

func TestSQLite(t *testing.T) {
	storetest.Run(t, func(t *testing.T) instore.Store {
		return mustOpen(t, sqlitePath(t), sqlstore.Options{})
	})
}

func TestSQLiteSynchronousNormal(t *testing.T) {
	storetest.Run(t, func(t *testing.T) instore.Store {
		return mustOpen(t, sqlitePath(t), sqlstore.Options{Synchronous: "NORMAL"})
	})
}

func TestPostgres(t *testing.T) {
	skipWithoutPostgres(t)
	storetest.Run(t, func(t *testing.T) instore.Store {
		return mustOpen(t, freshPostgres(t), sqlstore.Options{})
	})
}

func TestMigrationNumbers(t *testing.T) {
	numbers := func(dir string) []int {
		t.Helper()
		entries, err := os.ReadDir(filepath.Join("migrations", dir))
		if err != nil {
			t.Fatal(err)
		}
		var ns []int
		for _, e := range entries {
			num, _, _ := strings.Cut(e.Name(), "_")
			n, err := strconv.Atoi(num)
			if err != nil || !strings.HasSuffix(e.Name(), ".sql") {
				t.Errorf("migrations/%s/%s: want NNNN_name.sql", dir, e.Name())
				continue
			}
			ns = append(ns, n)
		}
		slices.Sort(ns)
		return ns
	}
	sqlite, postgres := numbers("sqlite"), numbers("postgres")
	if len(sqlite) == 0 {
		t.Fatal("no sqlite migrations")
	}
	if d := cmp.Diff(sqlite, postgres); d != "" {
		t.Errorf("migration numbers differ (-sqlite +postgres):\n%s", d)
	}
}

func TestSQLiteReopen(t *testing.T) {
	path := sqlitePath(t)
	db := mustOpen(t, path, sqlstore.Options{})
	c := &instore.Customer{ID: "cus_1", Name: "Acme", CreatedAt: time.UnixMicro(1_700_000_000_123_456).UTC()}
	if err := db.CreateCustomer(t.Context(), c); err != nil {
		t.Fatalf("CreateCustomer() = %v", err)
	}
	before := appliedMigrations(t, "sqlite", path)
	if err := db.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}

	db = mustOpen(t, path, sqlstore.Options{})
	got, err := db.Customer(t.Context(), c.ID)
	if err != nil {
		t.Fatalf("Customer() after reopening = %v", err)
	}
	if d := cmp.Diff(c, got); d != "" {
		t.Errorf("Customer() after reopening mismatch (-want +got):\n%s", d)
	}
	if d := cmp.Diff(before, appliedMigrations(t, "sqlite", path)); d != "" {
		t.Errorf("schema_migrations changed by reopening (-before +after):\n%s", d)
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		dsn, raw := b.migrated(t)
		if _, err := raw.Exec(`INSERT INTO schema_migrations (version, applied_at) VALUES (9999, 0)`); err != nil {
			t.Fatal(err)
		}
		db, err := sqlstore.Open(t.Context(), dsn, sqlstore.Options{})
		if err == nil {
			db.Close()
			t.Fatal("Open() of a database migrated by a newer binary = nil error, want an error")
		}
		if !strings.Contains(err.Error(), "newer") {
			t.Errorf("Open() = %q, want an error that says the schema is newer", err)
		}
	})
}

func TestConcurrentOpen(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		dsn := b.dsn(t)
		const n = 4
		var (
			wg   sync.WaitGroup
			errs [n]error
		)
		for i := range n {
			wg.Go(func() {
				db, err := sqlstore.Open(t.Context(), dsn, sqlstore.Options{})
				if err == nil {
					err = db.Close()
				}
				errs[i] = err
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("Open() #%d = %v", i, err)
			}
		}
		applied := appliedMigrations(t, b.driver, dsn)
		files, err := filepath.Glob(filepath.Join("migrations", b.name, "*.sql"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no migrations in migrations/%s: %v", b.name, err)
		}
		if len(applied) != len(files) {
			t.Errorf("schema_migrations = %v, want each of the %d migrations applied once", applied, len(files))
		}
	})
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, dsn string
		opts      sqlstore.Options
		want      string
	}{
		{"unknown synchronous", filepath.Join(dir, "a.db"), sqlstore.Options{Synchronous: "OFF"}, "synchronous"},
		{"missing directory", filepath.Join(dir, "missing", "a.db"), sqlstore.Options{}, "does not exist"},
		{"directory as file", dir, sqlstore.Options{}, "directory"},
		{"empty dsn", "", sqlstore.Options{}, "empty"},
		{"memory", ":memory:", sqlstore.Options{}, ":memory:"},
		{"unknown scheme", "mysql://localhost/instore", sqlstore.Options{}, "scheme"},
		{"query in path", filepath.Join(dir, "a.db?mode=ro"), sqlstore.Options{}, "?"},
		{"bad postgres url", "postgres://localhost:notaport/x", sqlstore.Options{}, "postgres"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, err := sqlstore.Open(t.Context(), tc.dsn, tc.opts)
			if err == nil {
				db.Close()
				t.Fatalf("Open(%q, %+v) = nil error, want an error", tc.dsn, tc.opts)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Open(%q, %+v) = %q, want an error mentioning %q", tc.dsn, tc.opts, err, tc.want)
			}
		})
	}
}

// backend is a dialect the tests can open a fresh database of.
type backend struct {
	name, driver string
	dsn          func(t testing.TB) string
}

// migrated returns a fresh database the store has migrated, and a
// connection to it that bypasses the store.
func (b backend) migrated(t testing.TB) (dsn string, raw *sql.DB) {
	t.Helper()
	dsn = b.dsn(t)
	mustOpen(t, dsn, sqlstore.Options{}).Close()
	return dsn, rawOpen(t, b.driver, dsn)
}

// backends returns SQLite, and PostgreSQL when its URL is set.
func backends(t testing.TB) []backend {
	bs := []backend{{name: "sqlite", driver: "sqlite", dsn: sqlitePath}}
	if os.Getenv(pgtest.Env) != "" {
		bs = append(bs, backend{name: "postgres", driver: "pgx", dsn: freshPostgres})
	}
	return bs
}

// forEachBackend runs test as a subtest on each of backends.
func forEachBackend(t *testing.T, test func(t *testing.T, be backend)) {
	for _, be := range backends(t) {
		t.Run(be.name, func(t *testing.T) { test(t, be) })
	}
}

func sqlitePath(t testing.TB) string {
	return filepath.Join(t.TempDir(), "instore.db")
}

func mustOpen(t testing.TB, dsn string, opts sqlstore.Options) *sqlstore.DB {
	t.Helper()
	db, err := sqlstore.Open(t.Context(), dsn, opts)
	if err != nil {
		t.Fatalf("Open() = %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// rawOpen opens dsn with database/sql alone, to look behind the store.
func rawOpen(t testing.TB, driver, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// appliedMigrations returns the rows of schema_migrations, "version@applied_at".
func appliedMigrations(t *testing.T, driver, dsn string) []string {
	t.Helper()
	rows, err := rawOpen(t, driver, dsn).Query(`SELECT version, applied_at FROM schema_migrations ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var applied []string
	for rows.Next() {
		var version, at int64
		if err := rows.Scan(&version, &at); err != nil {
			t.Fatal(err)
		}
		applied = append(applied, strconv.FormatInt(version, 10)+"@"+strconv.FormatInt(at, 10))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return applied
}

// skipWithoutPostgres skips t unless the PostgreSQL test database is set.
func skipWithoutPostgres(t testing.TB) {
	t.Helper()
	if os.Getenv(pgtest.Env) == "" {
		t.Skip(pgtest.Env + " is not set; set it to a postgres:// URL to run the PostgreSQL tests")
	}
}

// freshPostgres returns the URL of an empty schema of the test database,
// dropped when t ends (pgtest.Schema), or skips t.
func freshPostgres(t testing.TB) string {
	t.Helper()
	skipWithoutPostgres(t)
	return pgtest.Schema(t, "storetest")
}

// eventsOnPostgres is a store on a fresh PostgreSQL schema and a plain
// connection to that schema, to look at the events' rows (the test is
// skipped without PostgreSQL).
func eventsOnPostgres(t *testing.T) (*sqlstore.DB, *sql.DB) {
	skipWithoutPostgres(t)
	dsn := freshPostgres(t)
	return mustOpen(t, dsn, sqlstore.Options{}), rawOpen(t, "pgx", dsn)
}

// TestHellosWaitBoundedForALockedDevice: on PostgreSQL a batch of hellos
// whose device row another transaction holds (a node stalled in its own
// write) fails after the batch's lock wait, not when the caller gives up,
// so that the service writes the batch's other hellos one by one; the
// batch writes nothing, and the others alone go through.
func TestHellosWaitBoundedForALockedDevice(t *testing.T) {
	ctx := t.Context()
	db, raw := eventsOnPostgres(t)
	for _, serial := range []string{"SN-held", "SN-free"} {
		if err := db.CreateDevice(ctx, &instore.Device{SerialNumber: serial, Model: instore.ModelCountertop, SecretHash: []byte("x"),
			CreatedAt: time.Unix(1_800_000_000, 0).UTC()}); err != nil {
			t.Fatal(err)
		}
	}
	held, err := raw.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Rollback()
	if _, err := held.ExecContext(ctx, `SELECT 1 FROM devices WHERE serial_number = 'SN-held' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	seen := func(serial string) instore.DeviceSeen {
		return instore.DeviceSeen{SerialNumber: serial, SoftwareVersion: "9.9.9", At: time.Unix(1_800_000_100, 0).UTC()}
	}
	// Far longer than the lock wait: only the lock wait ends this call.
	waitCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	err = db.DevicesSeen(waitCtx, []instore.DeviceSeen{seen("SN-free"), seen("SN-held")})
	if err == nil || waitCtx.Err() != nil || !strings.Contains(err.Error(), "lock") {
		t.Fatalf("DevicesSeen with a held row = %v (caller's context: %v), want the lock wait's error", err, waitCtx.Err())
	}
	if d, err := db.Device(ctx, "SN-free"); err != nil || d.SoftwareVersion == "9.9.9" {
		t.Fatalf("the failed batch wrote SN-free: %+v, %v", d, err)
	}
	if err := db.DevicesSeen(ctx, []instore.DeviceSeen{seen("SN-free")}); err != nil {
		t.Fatalf("SN-free alone: %v", err)
	}
}

// TestCreationWaitsForARacingLink: on PostgreSQL a link (or unlink)
// that locked the terminal ID's row before a creation for its old device
// reached the database makes the creation wait, and once the link
// commits, refuse (instore.ErrRelinked), keyed or not, with nothing
// stored: under READ COMMITTED a plain read of the terminal, taken before
// the wait, would still see the old device, and the command would go to
// a device no longer linked to the terminal ID while the link answered
// 200 (found by the black-box review). The link's side is the database's
// own order: it locks the row FOR UPDATE as LinkTerminal does.
func TestCreationWaitsForARacingLink(t *testing.T) {
	ctx := t.Context()
	db, raw := eventsOnPostgres(t)
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	term := seedLinked(t, db, at, "S-OLD", "S-NEW")
	for i, keyed := range []bool{false, true} {
		t.Run(fmt.Sprintf("keyed=%v", keyed), func(t *testing.T) {
			_, _, err := db.LinkTerminal(ctx, term.TerminalID, "S-OLD", at)
			mustT(t, err)
			tx := &instore.Transaction{ID: fmt.Sprintf("txn_race%d", i), MerchantID: "mer_1", TerminalID: term.TerminalID,
				SerialNumber: "S-OLD", Type: instore.TypePurchase, Amount: 100, Currency: "SEK",
				StatusID: instore.StatusPending, Progress: instore.ProgressSent, CreatedAt: at}
			ch := &instore.Change{T: tx, OnDevice: "S-OLD",
				Events: []instore.TransactionEvent{{Version: 1, Kind: instore.EventCreated, At: at, Actor: instore.ActorECR, StatusAfter: "PENDING"}}}
			if keyed {
				key := fmt.Sprintf("key-%d", i)
				_, err := db.BeginIdempotency(ctx, &instore.IdempotencyRecord{MerchantID: "mer_1", Key: key, Attempt: "att",
					Method: "POST", Path: "/in-store/api/v1/purchase", RequestHash: []byte("0123456789abcdef0123456789abcdef"), CreatedAt: at})
				mustT(t, err)
				ch.Idempotency = &instore.IdempotencyClaim{MerchantID: "mer_1", Key: key, Attempt: "att"}
			}
			link, err := raw.BeginTx(ctx, nil)
			mustT(t, err)
			defer link.Rollback()
			_, err = link.ExecContext(ctx, `SELECT 1 FROM terminals WHERE terminal_id = $1 FOR UPDATE`, term.TerminalID)
			mustT(t, err)
			_, err = link.ExecContext(ctx, `UPDATE terminals SET serial_number = 'S-NEW' WHERE terminal_id = $1`, term.TerminalID)
			mustT(t, err)
			created := make(chan error, 1)
			go func() { created <- db.CreateTransaction(context.WithoutCancel(ctx), ch) }()
			testwait.ForNil(t, "the creation to wait for the link's lock", func() error {
				var n int
				if err := raw.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity
					WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%INSERT INTO transactions%'`).Scan(&n); err != nil {
					return err
				}
				if n == 0 {
					return errors.New("the creation does not wait for a lock yet")
				}
				return nil
			})
			mustT(t, link.Commit())
			if err := <-created; !errors.Is(err, instore.ErrRelinked) {
				t.Fatalf("CreateTransaction for the old device after the link = %v, want instore.ErrRelinked", err)
			}
			if _, err := db.Transaction(ctx, tx.ID); !errors.Is(err, instore.ErrNotFound) {
				t.Errorf("the refused creation stored its transaction: %v", err)
			}
			if keyed {
				rec, err := db.IdempotencyRecord(ctx, "mer_1", ch.Idempotency.Key)
				mustT(t, err)
				if rec.TransactionID != "" {
					t.Errorf("the refused creation tied the record to %q", rec.TransactionID)
				}
			}
		})
	}
}

func mustT(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
