// Package pgtest gives tests a fresh PostgreSQL schema in the database of
// INSTORE_TEST_DATABASE_URL, so that no test runs on the database's own
// schema or sees another test's tables.
package pgtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver
)

// Env names the variable with the test database's URL.
const Env = "INSTORE_TEST_DATABASE_URL"

// Schema creates an empty schema named prefix_<random hex>, dropped when tb
// ends, and returns a URL of the test database whose search_path is that
// schema; "" when Env is unset (the caller skips with its own message).
func Schema(tb testing.TB, prefix string) string {
	tb.Helper()
	base := os.Getenv(Env)
	if base == "" {
		return ""
	}
	u, err := url.Parse(base)
	if err != nil {
		tb.Fatalf("parse %s: %v", Env, err)
	}
	admin, err := sql.Open("pgx", base)
	if err != nil {
		tb.Fatalf("open %s: %v", Env, err)
	}
	b := make([]byte, 8)
	rand.Read(b)
	schema := prefix + "_" + hex.EncodeToString(b)
	if _, err := admin.Exec("CREATE SCHEMA " + schema); err != nil {
		admin.Close()
		tb.Fatalf("create schema: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// By now every process of the test has ended; a backend still on
		// the schema served one killed with SIGKILL in a transaction (it
		// learns of it only when it next talks to its client) and could
		// deadlock with the drop: end it first, and try a deadlocked drop
		// again.
		var err error
		for range 5 {
			admin.ExecContext(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
				WHERE application_name = $1 AND pid <> pg_backend_pid()`, schema)
			if _, err = admin.ExecContext(ctx, "DROP SCHEMA "+schema+" CASCADE"); err == nil || ctx.Err() != nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			tb.Errorf("drop schema %s: %v", schema, err)
		}
		admin.Close()
	})
	q := u.Query()
	q.Set("search_path", schema)
	// Names the test's connections, so that the clean-up can end those a
	// killed process left behind.
	q.Set("application_name", schema)
	u.RawQuery = q.Encode()
	return u.String()
}
