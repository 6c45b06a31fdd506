package sqlstore

import (
	"context"
	"database/sql"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// The told horizon: the highest event number (seq) readers of the stream may
// show. Numbers are taken at insert (migration 0018), so what decides that
// an event may be shown is not a number given afterwards but that nothing
// could still commit below it, and that it is on disk:
//
//   - PostgreSQL: seq is the inserting transaction's id shifted left by 20
//     bits (plus an order within it). Below the oldest of the store's
//     event-writing transactions still running (oldestRunning: the ones
//     marked by a lock on events taken before their id) every transaction
//     that could insert an event has committed or never will, so every
//     event numbered below its id<<20 that will ever exist is visible to a
//     later reader. The bound is told once the WAL up to the position read
//     with it is flushed (pg_current_wal_flush_lsn): a relaxed commit
//     (synchronous_commit off) is visible before it is on disk, and an
//     event told, then lost in a crash, could have its number taken again.
//     A store write transaction left open holds the horizon (and the
//     stream) back until it ends; another application's transaction in the
//     same database does not: docs/events.md.
//   - SQLite: one writer commits in row id order. The bound is the highest
//     number committed by a durable group commit (groupCommitter: its fsync
//     flushes the relaxed writes before it too).
//
// The horizon only grows. Each store handle (each node) keeps its own,
// and may adopt another's (Tell: on PostgreSQL the bound is the
// database's); a reader that saw N on one node and goes on on another sees
// the events after N there as that node's horizon passes them, and never
// one below N that it missed (every event below N had committed when N was
// told).

// toldShift is how far a PostgreSQL transaction id is shifted in seq.
const toldShift = 20

// toldState is a PostgreSQL candidate bound waiting for the WAL flush.
type toldState struct {
	mu       sync.Mutex
	bound    int64 // a bound to tell once the WAL is flushed to lsn
	lsn      int64
	hasBound bool
	since    time.Time // when the candidate was taken
	nudged   bool      // a flush was asked for it (toldNudgeAfter)

	// flushes and failed count the store's own WAL flushes (flushWAL)
	// and those of them that failed: ToldFlushes.
	flushes, failed atomic.Int64
}

// publishTold raises the told horizon to n (never lowers it).
func (db *DB) publishTold(n int64) {
	for {
		cur := db.told.Load()
		if n <= cur || db.told.CompareAndSwap(cur, n) {
			return
		}
	}
}

// advanceTold raises the told horizon to what has committed and is on
// disk; while events committed before it was called wait above it (a
// transaction below them still running, the WAL not yet flushed, or on
// SQLite no durable commit since), it tries again, for up to toldWait.
func (db *DB) advanceTold(ctx context.Context) error {
	deadline := time.Now().Add(toldWait)
	target := int64(-1)
	for wait := toldRetry; ; wait = min(2*wait, toldRetryMax) {
		top, err := db.advanceToldOnce(ctx)
		if target < 0 {
			target = top
		}
		if err != nil || db.told.Load() >= target || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

// toldRetry is the first pause of advanceTold between two attempts; each
// next one is twice the one before, up to toldRetryMax. Every attempt on
// PostgreSQL reads the lock table (oldestRunning), which takes the lock
// manager's partition locks that every writer of the database needs too:
// the transaction holding the horizon back is a store write, which ends
// within milliseconds.
const (
	toldRetry    = 2 * time.Millisecond
	toldRetryMax = 16 * time.Millisecond
)

// toldWait bounds how long advanceTold waits for events committed above
// the horizon: on PostgreSQL the oldest running event writer of the
// store holds it.
const toldWait = 5 * time.Second

// advanceToldOnce makes one attempt and returns the highest number
// committed (told or not).
func (db *DB) advanceToldOnce(ctx context.Context) (top int64, err error) {
	if db.d.name != "postgres" {
		if err := db.read().queryRow(ctx, `SELECT COALESCE(MAX(seq), 0) FROM events`).Scan(&top); err != nil {
			return 0, err
		}
		if top > db.told.Load() {
			// A durable commit tells what is below it (groupCommitter); one
			// that writes, so that it reaches the disk.
			err = db.update(ctx, func(c conn) error {
				_, err := c.exec(ctx, `INSERT INTO settings (name, value) VALUES ('events.told', ?)
					ON CONFLICT (name) DO UPDATE SET value = excluded.value`, strconv.FormatInt(top, 10))
				return err
			})
		}
		return top, err
	}
	xmin, top, err := db.oldestRunning(ctx)
	if err != nil {
		return 0, err
	}
	var inserted, flushed int64
	if err := db.reader.QueryRowContext(ctx, `SELECT (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::bigint,
		(pg_current_wal_flush_lsn() - '0/0'::pg_lsn)::bigint`).Scan(&inserted, &flushed); err != nil {
		return 0, err
	}
	bound := xmin<<toldShift - 1
	p := &db.pending
	p.mu.Lock()
	if p.hasBound && p.lsn <= flushed {
		db.publishTold(p.bound)
		p.hasBound = false
	}
	switch {
	case inserted <= flushed:
		db.publishTold(bound)
		p.hasBound = false
	case bound > db.told.Load() && !p.hasBound:
		// (While a candidate waits, a newer one is taken at the attempt
		// after it is told, so that the first is told soon.)
		p.bound, p.lsn, p.hasBound = bound, inserted, true
		p.since, p.nudged = time.Now(), false
	}
	// A nudge only when an event waits above the horizon (another
	// application's transactions move the bound too).
	nudge := p.hasBound && !p.nudged && top > db.told.Load() && time.Since(p.since) >= toldNudgeAfter
	p.nudged = p.nudged || nudge
	waiting := p.bound
	p.mu.Unlock()
	if !nudge {
		return top, nil
	}
	p.flushes.Add(1)
	if db.flushWAL(ctx, waiting) != nil {
		p.failed.Add(1)
		// It only hastens the telling: a failure (the writers busy, a
		// lock wait, the database gone) is tried again toldNudgeAfter
		// later, unless the candidate is told meanwhile.
		p.mu.Lock()
		if p.hasBound && p.bound == waiting {
			p.nudged, p.since = false, time.Now()
		}
		p.mu.Unlock()
	}
	return top, nil
}

// flushWAL makes PostgreSQL flush its WAL through a commit of its own,
// past every record inserted before it. The WAL writer flushes the
// relaxed commits, but not a record after the last of them while no
// commit follows: one of a transaction still open (a row lock), or an
// insert position just past a page's header when the last record ended a
// page. On a quiet database a candidate bound would then wait for the
// next write of the database, and the last events before the quiet stay
// untold (TestHorizonToldOnAQuietDatabase).
//
// The commit writes the store's `events.told` setting (nothing reads it on
// PostgreSQL). It inserts no event, so it takes no mark (oldestRunning)
// and holds no horizon back; it waits for the local disk only
// (synchronous_commit local: a synchronous standby that is down does not
// hold it), for toldNudgeTimeout at the most, whatever ctx.
func (db *DB) flushWAL(ctx context.Context, bound int64) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), toldNudgeTimeout)
	defer cancel()
	tx, err := db.writer.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `SET LOCAL synchronous_commit = local`); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO settings (name, value) VALUES ('events.told', $1)
		ON CONFLICT (name) DO UPDATE SET value = excluded.value`, strconv.FormatInt(bound, 10)); err != nil {
		return err
	}
	return tx.Commit()
}

// toldNudgeAfter is how long a PostgreSQL candidate bound waits for the
// WAL writer (wal_writer_delay, 200 ms by default, flushes the relaxed
// commits) before advanceToldOnce flushes the WAL itself (flushWAL): at
// most one flush a candidate (another one toldNudgeAfter after a failed
// one), and only while an event waits above the horizon.
const toldNudgeAfter = 250 * time.Millisecond

// toldNudgeTimeout bounds a flushWAL (a lock wait on the setting's row,
// a busy writer pool).
const toldNudgeTimeout = time.Second

// oldestRunning returns, on PostgreSQL, a transaction id below which no
// transaction that may write events still runs (the oldest such one
// running, or the next id to be given when none runs), and the highest
// event number committed.
//
// Only the store's event writers count: every write transaction of the
// store (but flushWAL's, which inserts no event) takes a ROW EXCLUSIVE
// lock on events (its mark) before it takes an id (writeTx's beginWriter;
// a single statement that inserts events locks the table when it is
// planned, before it runs), and a transaction holds it to its end. Another transaction of the database (a bulk load, another
// application's job) never inserts events and does not hold the horizon.
//
// Why no event is missed: an event numbered X<<20+k is inserted by the
// transaction with id X. The snapshot (its xmax) is taken first, when the
// statement starts; the marks (pg_locks) and the ids of their holders
// (pg_stat_activity's backend_xid, read from the transaction's own slot,
// set when the id is given) are read after it. If X >= xmax, the bound is
// at most xmax<<20-1, below the event. If X < xmax, X was given before the
// snapshot, so its transaction already held the mark then: either it ended
// before the marks were read (committed or not, every later reader sees
// its outcome), or it is seen holding the mark with its id X, and the
// bound stays below X<<20. A holder read with no id, or with an id given
// after the snapshot, has or will have an id >= xmax. (The id's own lock
// in pg_locks is not used: it is taken a moment after the id is given.)
// Only this database's events table counts (the relation's oid and the
// database's); prepared transactions (two-phase commit, which instore does
// not use) would not be seen.
func (db *DB) oldestRunning(ctx context.Context) (xid, top int64, err error) {
	var next int64
	var oldest sql.NullInt64
	err = db.reader.QueryRowContext(ctx, `SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint,
		COALESCE((SELECT MAX(seq) FROM events), 0),
		(SELECT MIN(a.backend_xid::text::bigint) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
			WHERE l.locktype = 'relation' AND l.relation = 'events'::regclass
			AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
			AND l.mode NOT IN ('AccessShareLock', 'RowShareLock') AND a.backend_xid IS NOT NULL)`).Scan(&next, &top, &oldest)
	if err != nil || !oldest.Valid {
		return next, top, err
	}
	// pg_locks shows 32-bit ids: the epoch is the snapshot's (or the one
	// before, for an id above the next one's low bits).
	x := next&^0xffffffff | oldest.Int64
	if x > next {
		x -= 1 << 32
	}
	return min(x, next), top, nil
}

// toldAtDurableCommit is what a durable group commit of SQLite tells: the
// highest number written, read in its transaction (c) before the commit.
func toldAtDurableCommit(ctx context.Context, c conn) (int64, error) {
	var top int64
	err := c.queryRow(ctx, `SELECT COALESCE(MAX(seq), 0) FROM events`).Scan(&top)
	return top, err
}

// Told returns the store's told horizon: on PostgreSQL a fact of the
// database, not of this handle (every event writer of every node holds the
// mark oldestRunning reads), so another node may tell it (Tell).
func (db *DB) Told() int64 { return db.told.Load() }

// Tell raises the told horizon to n, told by another handle of the same
// PostgreSQL database (internal/cluster): every event below it committed
// and is on disk. It never lowers it.
func (db *DB) Tell(n int64) {
	if db.d.name == "postgres" {
		db.publishTold(n)
	}
}
