package sqlstore

import "sync/atomic"

// commitCounts counts the write transactions of a store that committed:
// durable ones (answered once on disk: PostgreSQL's writer pool, SQLite's
// FULL group commits) and relaxed ones (answered before: PostgreSQL's
// synchronous_commit off, SQLite's NORMAL commits of a FULL store). On
// SQLite each write counts, not each group commit that holds several (they
// share one fsync). A write that finds nothing to change counts too.
type commitCounts struct {
	durable, relaxed atomic.Int64
}

// counted counts a write that ended with err (relaxed: it did not wait
// for the disk) and returns err.
func (db *DB) counted(relaxed bool, err error) error {
	switch {
	case err != nil:
	case relaxed:
		db.commits.relaxed.Add(1)
	default:
		db.commits.durable.Add(1)
	}
	return err
}

// Commits returns how many durable and relaxed write transactions the
// store has committed since it was opened (the load tool's commits per
// life, through the metric instore_store_commits_total).
func (db *DB) Commits() (durable, relaxed int64) {
	return db.commits.durable.Load(), db.commits.relaxed.Load()
}

// Pipelined returns how many groups of more than one single-statement
// write PostgreSQL's pipelines sent as one transaction, the statements
// they held, and the groups whose statements then ran alone (a statement
// refused, or a connection found dead): pipeline. All 0 on SQLite.
func (db *DB) Pipelined() (groups, statements, fallbacks int64) {
	for _, p := range []*pipeline{db.pipe, db.relaxedPipe} {
		if p != nil {
			groups += p.groups.Load()
			statements += p.grouped.Load()
			fallbacks += p.fallbacks.Load()
		}
	}
	return groups, statements, fallbacks
}

// ReadsGrouped returns how many groups of more than one short read
// PostgreSQL's read pipeline sent in one round trip, and the reads they
// held (readPipe). Both 0 on SQLite.
func (db *DB) ReadsGrouped() (groups, reads int64) {
	if db.reads == nil {
		return 0, 0
	}
	return db.reads.groups.Load(), db.reads.grouped.Load()
}

// ToldFlushes returns how many times the told horizon flushed
// PostgreSQL's WAL itself (flushWAL: an event waited above the horizon for
// the flush of a record no commit followed) and how many of those flushes
// failed (each tried again later). Both 0 on SQLite.
func (db *DB) ToldFlushes() (flushes, failed int64) {
	return db.pending.flushes.Load(), db.pending.failed.Load()
}
