package sqlstore

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
)

// NoPrimary is the reason a node gives (readiness, the 503's detail) while
// Unavailable errors say that PostgreSQL has no primary it can write to.
const NoPrimary = "database: no primary reachable"

// Unavailable reports whether err says that the database cannot take a
// write for now, not that the request or the service is wrong: no server
// answers (connection refused or reset, a connect that timed out, a
// multi-host URL with target_session_attrs=read-write that found no
// primary), the server shuts down or crashed (SQLSTATE 57P01, 57P02), is
// starting or recovering (57P03), lost the connection (class 08), or is a
// standby, a primary being demoted or not yet promoted (25006,
// read_only_sql_transaction). That is the state of a PostgreSQL failover
// (docs/operations.md, "High availability"): the request may be sent again
// once a primary is back, so it answers 503 with Retry-After, never 500.
//
// A server's other refusals (a bad password, a missing database, a
// constraint) are not: they are answered as they are. SQLite's errors
// never are.
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, driver.ErrBadConn) || errors.Is(err, errGroupTimeout) {
		// A connection lost (with the server's last error, a FATAL, say,
		// joined to it: pipeline.go), or a group of writes unanswered.
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "25006", // read_only_sql_transaction
			"57P01", // admin_shutdown
			"57P02", // crash_shutdown
			"57P03": // cannot_connect_now
			return true
		}
		return strings.HasPrefix(pe.Code, "08") // connection_exception
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	switch {
	case errors.As(err, &ce):
		return true
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		// The caller's own end (a deadline is a net.Error too), not the
		// database's.
		return false
	case errors.As(err, &ne):
		return true
	case errors.Is(err, pgconn.ErrConnClosed),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return true
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		// The server closed the connection in the middle of an answer: a
		// backend whose postmaster died exits without a message.
		return true
	}
	return pgconn.SafeToRetry(err)
}

// Primary is Ping that, on PostgreSQL, also asks whether the server takes
// writes, as target_session_attrs=read-write does: nil, or an error for
// which Unavailable holds when it does not (it answers, but is a standby
// or read-only). It runs on the read pool, as Ping does, so that a
// readiness check never waits behind the writes; every pool connects to
// the same URL.
func (db *DB) Primary(ctx context.Context) error {
	if db.relaxed == nil {
		return db.Ping(ctx)
	}
	var readOnly string
	if err := db.reader.QueryRowContext(ctx, "SHOW transaction_read_only").Scan(&readOnly); err != nil {
		return fmt.Errorf("%s: %w", NoPrimary, err)
	}
	if readOnly != "off" {
		return fmt.Errorf("%s: %w", NoPrimary, &pgconn.PgError{Severity: "ERROR", Code: "25006",
			Message: "the server takes no writes (a standby, or read-only)"})
	}
	return nil
}
