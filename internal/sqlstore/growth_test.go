package sqlstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/pgtest"
	"github.com/instore-dev/instore/internal/sqlstore"
)

// The benchmarks' stores (seedBench and seedEvents) are kept between runs,
// one per size and schema: filling 10,000,000 transactions takes minutes,
// measuring a few seconds. SQLite's is a file in $TMPDIR/instore-bench,
// PostgreSQL's a schema bench_... of the test database; both are complete
// once the fixture is written beside them (a .json file, a table), and
// are made again when the schema (the newest migration) or benchSeedFormat
// changes. Delete them by hand to free the disk:
//
//	rm -r "${TMPDIR:-/tmp}/instore-bench"
//	psql "$INSTORE_TEST_DATABASE_URL" -c 'DROP SCHEMA bench_... CASCADE'
const benchSeedFormat = 2

// benchKey names a cached store of n transactions.
func benchKey(b testing.TB, n int) string {
	entries, err := os.ReadDir(filepath.Join("migrations", "sqlite"))
	if err != nil {
		b.Fatal(err)
	}
	return fmt.Sprintf("%d_m%d_f%d", n, len(entries), benchSeedFormat)
}

// cachedBench opens the store of be holding n transactions and their
// events, filled by seed when no earlier run kept one.
func cachedBench(b *testing.B, be backend, n int, seed func(db *sqlstore.DB, driver, dsn string) *benchFixture) (*sqlstore.DB, *benchFixture) {
	key := benchKey(b, n)
	var dsn, done string
	var fx benchFixture
	var found bool
	if be.driver == "pgx" {
		dsn, found = pgBenchSchema(b, "bench_"+key, &fx)
	} else {
		dir := filepath.Join(os.TempDir(), "instore-bench")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			b.Fatal(err)
		}
		dsn, done = filepath.Join(dir, "sqlite-"+key+".db"), filepath.Join(dir, "sqlite-"+key+".json")
		if j, err := os.ReadFile(done); err == nil && json.Unmarshal(j, &fx) == nil {
			found = true
		} else {
			for _, s := range []string{"", "-wal", "-shm"} {
				os.Remove(dsn + s)
			}
		}
	}
	db := mustOpen(b, dsn, sqlstore.Options{Synchronous: "NORMAL"})
	// A store tells the events committed below its horizon (horizon.go),
	// raised as the service does after its writes.
	tell := func() {
		if _, err := db.SequenceEvents(context.Background(), 1000); err != nil {
			b.Fatal(err)
		}
	}
	if found {
		b.Logf("%s: %d transactions kept by an earlier run", be.name, n)
		tell()
		return db, &fx
	}
	start := time.Now()
	fx = *seed(db, be.driver, dsn)
	b.Logf("%s: stored %d transactions and their events in %v", be.name, n, time.Since(start).Round(time.Millisecond))
	j, err := json.Marshal(fx)
	if err != nil {
		b.Fatal(err)
	}
	if be.driver == "pgx" {
		raw := rawOpen(b, "pgx", dsn)
		if _, err := raw.Exec(`CREATE TABLE bench_fixture (doc TEXT NOT NULL)`); err != nil {
			b.Fatal(err)
		}
		if _, err := raw.Exec(`INSERT INTO bench_fixture (doc) VALUES ($1)`, string(j)); err != nil {
			b.Fatal(err)
		}
	} else if err := os.WriteFile(done, j, 0o600); err != nil {
		b.Fatal(err)
	}
	tell()
	return db, &fx
}

// pgBenchSchema returns the URL of the test database with the schema
// named schema as its search_path, and whether an earlier run completed
// it (then fx is its fixture); an incomplete one is made afresh, empty.
func pgBenchSchema(b *testing.B, schema string, fx *benchFixture) (string, bool) {
	skipWithoutPostgres(b)
	base := os.Getenv(pgtest.Env)
	admin := rawOpen(b, "pgx", base)
	var doc string
	err := admin.QueryRow(`SELECT doc FROM ` + schema + `.bench_fixture`).Scan(&doc)
	u, perr := url.Parse(base)
	if perr != nil {
		b.Fatal(perr)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	if err == nil && json.Unmarshal([]byte(doc), fx) == nil {
		return u.String(), true
	}
	if _, err := admin.Exec(`DROP SCHEMA IF EXISTS ` + schema + ` CASCADE`); err != nil {
		b.Fatal(err)
	}
	if _, err := admin.Exec(`CREATE SCHEMA ` + schema); err != nil {
		b.Fatal(err)
	}
	return u.String(), false
}

// benchPendingDeliveries is how many deliveries of the benchmark's
// endpoint are still to be sent: those of the newest events.
const benchPendingDeliveries = 100

// seedEvents stores, in bulk SQL, an integrator event per transaction of
// the store seedBench filled (transaction.final, numbered in the
// transactions' order of creation, ~500 bytes of data), and one enabled
// webhook endpoint of mer_bench (through the store) with a delivery per
// event: all sent but those of the newest benchPendingDeliveries events,
// as an endpoint that keeps pace has them. It returns the newest event's
// number. The statements follow the events and webhook_deliveries tables:
// when those change, change them here (the benchmarks themselves go
// through instore.Store).
func seedEvents(b testing.TB, db *sqlstore.DB, driver, dsn string) (top int64, webhookID string) {
	b.Helper()
	ctx := context.Background()
	w := &instore.Webhook{ID: "whk_bench", MerchantID: "mer_bench", URL: "https://example.com/hook",
		Status: instore.WebhookEnabled, Secret: "whsec_bench", CreatedAt: benchEnd.Add(-benchDays * 24 * time.Hour)}
	if err := db.CreateWebhook(ctx, w, 10); err != nil {
		b.Fatal(err)
	}
	raw := rawOpen(b, driver, dsn)
	exec := func(q string, args ...any) int64 {
		b.Helper()
		if driver == "pgx" {
			q = sqlstore.RebindPostgres(q)
		}
		res, err := raw.ExecContext(ctx, q, args...)
		if err != nil {
			b.Fatalf("seed events: %v\n%s", err, q)
		}
		n, _ := res.RowsAffected()
		return n
	}
	// A day at a time (and a statement of its own each): one statement of
	// 10,000,000 rows would grow SQLite's WAL to the table's size.
	start := benchEnd.Add(-benchDays * 24 * time.Hour)
	for d := range benchDays + 1 {
		from, to := start.Add(time.Duration(d)*24*time.Hour), start.Add(time.Duration(d+1)*24*time.Hour)
		top += exec(`INSERT INTO events (seq, merchant_id, type, terminal_id, created_at, data)
			SELECT ? + ROW_NUMBER() OVER (ORDER BY created_at, id), merchant_id, 'transaction.final', terminal_id, completed_at,
				'{"onlineAPIRefId":"' || id || '","terminalId":"' || terminal_id || '","result":' || COALESCE(result, 'null') || '}'
			FROM transactions WHERE merchant_id = 'mer_bench' AND created_at >= ? AND created_at < ? ORDER BY created_at, id`,
			top, from.UnixMicro(), to.UnixMicro())
	}
	const batch = 1_000_000
	for lo := int64(0); lo < top; lo += batch {
		exec(`INSERT INTO webhook_deliveries (webhook_id, event_seq, status, attempts, next_at, lease_until, created_at, done_at)
			SELECT 'whk_bench', seq, CASE WHEN seq > ? THEN 'pending' ELSE 'succeeded' END, 1, created_at, 0, created_at,
				CASE WHEN seq > ? THEN NULL ELSE created_at END
			FROM events WHERE seq > ? AND seq <= ?`, top-benchPendingDeliveries, top-benchPendingDeliveries, lo, lo+batch)
	}
	exec(`UPDATE webhooks SET fanned_seq = ?`, top)
	if driver == "pgx" {
		for _, t := range []string{"events", "webhook_deliveries"} {
			if _, err := raw.ExecContext(ctx, "VACUUM ANALYZE "+t); err != nil {
				b.Fatal(err)
			}
		}
	}
	return top, w.ID
}

// benchEvents runs the event and webhook sub-benchmarks of
// BenchmarkListTransactions on db, which seedEvents filled: a stream's
// replay after a recent and after an old event (a page of 100; of one
// terminal ID too), the node's feed after its newest events, and a claim
// of the endpoint's next delivery.
func benchEvents(b *testing.B, db *sqlstore.DB, fx *benchFixture) {
	ctx := context.Background()
	for _, q := range []struct {
		name string
		f    instore.EventFilter
	}{
		{"events-replay-recent", instore.EventFilter{MerchantID: "mer_bench", After: fx.TopEvent - 1000}},
		{"events-replay-old", instore.EventFilter{MerchantID: "mer_bench", After: fx.TopEvent / 2}},
		{"events-replay-terminal", instore.EventFilter{MerchantID: "mer_bench", After: fx.TopEvent / 2, TerminalID: fx.Terminals[3]}},
		{"events-feed", instore.EventFilter{After: fx.TopEvent - 50}},
	} {
		q.f.Limit = 100
		b.Run(q.name, func(b *testing.B) {
			got, err := db.ListEvents(ctx, q.f)
			if err != nil || len(got) == 0 {
				b.Fatalf("ListEvents() = %d events, %v", len(got), err)
			}
			for b.Loop() {
				if _, err := db.ListEvents(ctx, q.f); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	// A lease that ends when it begins: the next claim takes the same
	// delivery again, as it would after its attempt failed; the store kept
	// for the next run is as it was.
	b.Run("claim-delivery", func(b *testing.B) {
		for b.Loop() {
			now := time.Now()
			got, err := db.ClaimDeliveries(ctx, now, now, instore.ClaimQuota{Limit: 10})
			if err != nil || len(got) != 1 {
				b.Fatalf("ClaimDeliveries() = %d deliveries, %v; want 1", len(got), err)
			}
		}
	})
}
