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
		if _, err := admin.ExecContext(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			tb.Errorf("drop schema %s: %v", schema, err)
		}
		admin.Close()
	})
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}
