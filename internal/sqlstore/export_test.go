package sqlstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/instore-dev/instore"
)

// ExplainListTransactions returns the plan the database chooses for
// ListTransactions(f), one line per step: EXPLAIN QUERY PLAN on SQLite,
// followed by a line "opcodes: ..." with the steps of the bytecode that
// show how the index is walked (SeekLE/SeekLT then Prev: backwards; a
// Sorter or OpenEphemeral: a sort); EXPLAIN on PostgreSQL.
func (db *DB) ExplainListTransactions(ctx context.Context, f instore.TransactionFilter) ([]string, error) {
	query, args := listQuery(db.d, f)
	return db.explain(ctx, query, args)
}

// ExplainTotals is ExplainListTransactions for Totals(f).
func (db *DB) ExplainTotals(ctx context.Context, f instore.TotalsFilter) ([]string, error) {
	query, args := totalsQuery(db.d, f)
	return db.explain(ctx, query, args)
}

// ExplainTerminalTransactions is ExplainListTransactions for
// TerminalTransactions.
func (db *DB) ExplainTerminalTransactions(ctx context.Context, terminalID string, from, to time.Time) ([]string, error) {
	query, args := terminalTransactionsQuery(terminalID, from, to)
	return db.explain(ctx, query, args)
}

// explain is the plan of query, as ExplainListTransactions shows it.
func (db *DB) explain(ctx context.Context, query string, args []any) ([]string, error) {
	c := db.read()
	if db.d.name != "sqlite" {
		rows, err := c.query(ctx, "EXPLAIN "+query, args...)
		if err != nil {
			return nil, err
		}
		return collect(rows, func(s scanner) (string, error) {
			var line string
			err := s.Scan(&line)
			return line, err
		}, "explain")
	}
	rows, err := c.query(ctx, "EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		return nil, err
	}
	plan, err := collect(rows, func(s scanner) (string, error) {
		var id, parent, notUsed int
		var detail string
		err := s.Scan(&id, &parent, &notUsed, &detail)
		return detail, err
	}, "explain query plan")
	if err != nil {
		return nil, err
	}
	rows, err = c.query(ctx, "EXPLAIN "+query, args...)
	if err != nil {
		return nil, err
	}
	ops, err := collect(rows, func(s scanner) (string, error) {
		var addr, p1, p2, p3 int
		var opcode, p4, p5, comment any
		err := s.Scan(&addr, &opcode, &p1, &p2, &p3, &p4, &p5, &comment)
		return fmt.Sprint(opcode), err
	}, "explain")
	if err != nil {
		return nil, err
	}
	var walk []string
	for _, op := range ops {
		switch {
		case strings.HasPrefix(op, "Seek"), op == "Prev", op == "Next", op == "IdxLT", op == "IdxLE", op == "IdxGT", op == "IdxGE",
			strings.HasPrefix(op, "Sorter"), op == "OpenEphemeral":
			walk = append(walk, op)
		}
	}
	return append(plan, "opcodes: "+strings.Join(walk, " ")), nil
}

// CachedStatements returns how many statements the writer's and the
// reader's caches hold (SQLite; 0, 0 on PostgreSQL).
func (db *DB) CachedStatements() (writer, reader int) {
	if db.writerStmts == nil {
		return 0, 0
	}
	count := func(sc *stmtCache) int {
		sc.mu.RLock()
		defer sc.mu.RUnlock()
		return len(sc.m)
	}
	return count(db.writerStmts), count(db.readerStmts)
}

// ExecForTest runs a write statement (? placeholders) in a database
// transaction of its own: a test's way to make the rows another release
// of the server, or a race, would leave.
func (db *DB) ExecForTest(ctx context.Context, query string, args ...any) error {
	return db.update(ctx, func(c conn) error {
		_, err := c.exec(ctx, query, args...)
		return err
	})
}

// HoldEventWrite runs a store write transaction that takes its id, calls
// held while it runs with no event inserted yet, waits for release, and
// then inserts ev and commits (a slow event writer, for the told
// horizon's tests).
func (db *DB) HoldEventWrite(ctx context.Context, held func(), release <-chan struct{}, ev instore.OutboxEvent) error {
	return db.update(ctx, func(c conn) error {
		if _, err := c.exec(ctx, `SELECT pg_current_xact_id()`); err != nil {
			return err
		}
		held()
		<-release
		return insertOutbox(ctx, c, []instore.OutboxEvent{ev})
	})
}

// HorizonBound is the highest event number that no running event writer
// of the store can still take (oldestRunning), before the WAL flush that
// tells it.
func (db *DB) HorizonBound(ctx context.Context) (int64, error) {
	xid, _, err := db.oldestRunning(ctx)
	return xid<<toldShift - 1, err
}

// AdvanceToldOnce makes one attempt to raise the told horizon.
func (db *DB) AdvanceToldOnce(ctx context.Context) error {
	_, err := db.advanceToldOnce(ctx)
	return err
}

// RebindPostgres is q, written with ? placeholders, as PostgreSQL takes it.
func RebindPostgres(q string) string { return newPostgres().rebind(q) }

// ToldNudgeAfter and ToldNudgeTimeout are the told horizon's own WAL
// flush's wait and bound (flushWAL).
const (
	ToldNudgeAfter   = toldNudgeAfter
	ToldNudgeTimeout = toldNudgeTimeout
)
