package main

import (
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/pgtest"
)

// freshPostgres returns the URL of a new, empty schema in the database of
// INSTORE_TEST_DATABASE_URL (dropped at the end); it skips the test when
// the variable is unset.
func freshPostgres(t *testing.T) string {
	t.Helper()
	u := pgtest.Schema(t, "demo")
	if u == "" {
		t.Skip("INSTORE_TEST_DATABASE_URL is unset: no PostgreSQL to run the demo on")
	}
	return u
}

// TestDemoPostgresRestart runs the demo on a fresh PostgreSQL schema: it
// seeds it, answers with the credentials it printed, keeps nothing on
// disk, and started again on the same database prints the same
// credentials and still knows the purchase.
func TestDemoPostgresRestart(t *testing.T) {
	dbURL := freshPostgres(t)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	info, _, stop := runDemo(t, "--database-url", dbURL, "--sim-delay", "0")
	if got := getMetadata(t, info); got != 200 {
		t.Fatalf("metadata with the demo's credentials = %d, want 200", got)
	}
	if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
		t.Errorf("the demo on PostgreSQL made %v in TMPDIR, want nothing (a temporary SQLite?)", entries)
	}
	if len(info.Terminals) != 3 {
		t.Fatalf("terminals = %+v, want 3", info.Terminals)
	}
	ref := purchase(t, info, info.Terminals[0].TerminalID, 1250)
	if got := waitFinal(t, info, ref); got != instore.StatusApproved {
		t.Fatalf("demo purchase ended %d, want APPROVED", got)
	}
	stop()

	again, _, _ := runDemo(t, "--database-url", dbURL, "--sim-delay", "0")
	// Only the URLs change: the ports are new.
	want := info
	want.OnlineAPIBaseURL, want.AccessAPIBaseURL = again.OnlineAPIBaseURL, again.AccessAPIBaseURL
	want.TerminalGatewayURL, want.ConsoleURL = again.TerminalGatewayURL, again.ConsoleURL
	if diff := cmp.Diff(want, again); diff != "" {
		t.Errorf("restart on the same database printed other credentials (-first +then):\n%s", diff)
	}
	if got := getMetadata(t, again); got != 200 {
		t.Errorf("metadata after restart = %d, want 200", got)
	}
	if got := waitFinal(t, again, ref); got != instore.StatusApproved {
		t.Errorf("after restart the purchase is %d, want APPROVED", got)
	}
}
