package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/stdlib"
)

// beginWriter begins a write transaction of the store on PostgreSQL and,
// in the same round trip (one simple-protocol message), marks it as one
// that may write events: a ROW EXCLUSIVE lock on events (a fast-path
// relation lock, held to the transaction's end), taken before any
// statement gives the transaction an id. The told horizon counts only the
// transactions holding that mark (horizon.go): a long write transaction
// of another application in the same database does not hold the event
// stream back.
const beginWriter = `BEGIN; LOCK TABLE events IN ROW EXCLUSIVE MODE`

// errRolledBack is a COMMIT that the server answered with ROLLBACK (the
// transaction had failed).
var errRolledBack = errors.New("commit: the transaction was rolled back")

// writeTx runs fn in one write transaction of pool on PostgreSQL, begun
// with beginWriter, and commits it when fn returns nil. A single statement
// run on its own (single, relaxedWrite) needs no mark: a statement that
// inserts into events locks it when it is planned, before it runs and
// takes an id.
func (db *DB) writeTx(ctx context.Context, pool *sql.DB, fn func(c conn) error) error {
	sc, err := pool.Conn(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	// A connection given back inside a transaction (a failed ROLLBACK) is
	// closed by the driver before it is used again (stdlib's ResetSession).
	defer sc.Close()
	if _, err := sc.ExecContext(ctx, beginWriter); err != nil {
		rollback(sc)
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(conn{d: db.d, q: sc}); err != nil {
		rollback(sc)
		return err
	}
	err = sc.Raw(func(dc any) error {
		tag, err := dc.(*stdlib.Conn).Conn().Exec(ctx, "COMMIT")
		if err == nil && tag.String() != "COMMIT" {
			err = errRolledBack
		}
		return err
	})
	if err != nil {
		rollback(sc)
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// rollback ends a failed transaction of sc, even if its caller's context
// ended.
func rollback(sc *sql.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	sc.ExecContext(ctx, "ROLLBACK")
}
