package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/pgtest"
	"github.com/instore-dev/instore/internal/sqlstore"
	"github.com/instore-dev/instore/internal/testwait"
)

// TestUnavailableClassifies: the errors of a database with no primary are
// told from the others, wrapped as the store wraps them.
func TestUnavailableClassifies(t *testing.T) {
	pg := func(code string) error {
		return fmt.Errorf("commit: %w", &pgconn.PgError{Severity: "FATAL", Code: code})
	}
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"read-only transaction (a standby) 25006", pg("25006"), true},
		{"admin shutdown 57P01", pg("57P01"), true},
		{"crash shutdown 57P02", pg("57P02"), true},
		{"cannot connect now 57P03", pg("57P03"), true},
		{"connection failure 08006", pg("08006"), true},
		{"unique violation 23505", pg("23505"), false},
		{"bad password 28P01", pg("28P01"), false},
		{"serialization failure 40001", pg("40001"), false},
		{"connect error", fmt.Errorf("open: %w", &pgconn.ConnectError{}), true},
		{"connection refused", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, true},
		{"connection reset", fmt.Errorf("read: %w", syscall.ECONNRESET), true},
		{"closed in the middle of an answer", fmt.Errorf("failed to receive message: %w", io.ErrUnexpectedEOF), true},
		{"closed connection", fmt.Errorf("x: %w", pgconn.ErrConnClosed), true},
		{"the caller's deadline", fmt.Errorf("query: %w", context.DeadlineExceeded), false},
		{"the caller went away", context.Canceled, false},
		{"no rows", sql.ErrNoRows, false},
		{"not found", instore.ErrNotFound, false},
		{"anything else", errors.New("boom"), false},
	}
	for _, c := range cases {
		if got := sqlstore.Unavailable(c.err); got != c.want {
			t.Errorf("%s: Unavailable(%v) = %t, want %t", c.name, c.err, got, c.want)
		}
	}
}

// TestUnavailableWhenThePrimaryStops runs a private PostgreSQL, stops it
// under an open store and starts it again: while it is down every call's
// error is Unavailable and Primary says so; once it is back the same store
// works again without being opened again. A server made read-only (as a
// standby is) refuses writes with an error that is Unavailable too.
func TestUnavailableWhenThePrimaryStops(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a private PostgreSQL")
	}
	pg := pgtest.Private(t)
	db := mustOpen(t, pg.URL, sqlstore.Options{MaxConns: 5})
	ctx := t.Context()
	rec := func(key string) *instore.IdempotencyRecord {
		return &instore.IdempotencyRecord{MerchantID: "mer_x", Key: key, Method: "POST", Path: "/p", RequestHash: []byte{1},
			CreatedAt: time.Now().UTC().Truncate(time.Microsecond), Attempt: "att_" + key}
	}
	if err := db.Primary(ctx); err != nil {
		t.Fatalf("Primary() on a running server = %v", err)
	}
	if _, err := db.BeginIdempotency(ctx, rec("k1")); err != nil {
		t.Fatal(err)
	}

	pg.Stop(t) // fast: the sessions end with 57P01, then nothing listens
	for i := range 3 {
		_, err := db.BeginIdempotency(ctx, rec(fmt.Sprintf("down%d", i)))
		if err == nil || !sqlstore.Unavailable(err) {
			t.Errorf("write %d with the server stopped: %v, want an error that is Unavailable", i, err)
		}
		if _, err := db.Customer(ctx, "cus_none"); err == nil || !sqlstore.Unavailable(err) {
			t.Errorf("read %d with the server stopped: %v, want an error that is Unavailable", i, err)
		}
	}
	if err := db.Primary(ctx); err == nil || !sqlstore.Unavailable(err) {
		t.Errorf("Primary() with the server stopped = %v, want an error that is Unavailable", err)
	}

	pg.Start(t)
	if err := db.Primary(ctx); err != nil {
		t.Errorf("Primary() once the server is back = %v", err)
	}
	if _, err := db.BeginIdempotency(ctx, rec("k2")); err != nil {
		t.Errorf("write once the server is back: %v", err)
	}

	// Read-only, as a standby or a demoted primary is: 25006.
	admin, err := sql.Open("pgx", pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	for _, q := range []string{"ALTER SYSTEM SET default_transaction_read_only = on", "SELECT pg_reload_conf()"} {
		if _, err := admin.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	testwait.For(t, "the server read-only", func() bool {
		var ro string
		admin.QueryRowContext(ctx, "SHOW default_transaction_read_only").Scan(&ro)
		return ro == "on"
	})
	_, err = db.BeginIdempotency(ctx, rec("ro"))
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "25006" || !sqlstore.Unavailable(err) {
		t.Errorf("write on a read-only server: %v, want SQLSTATE 25006, Unavailable", err)
	}
	if err := db.Primary(ctx); err == nil || !sqlstore.Unavailable(err) {
		t.Errorf("Primary() on a read-only server = %v, want an error that is Unavailable", err)
	}
}
