// Package sqlstore implements instore.Store on database/sql, for SQLite
// (modernc.org/sqlite, the embedded default) and PostgreSQL (pgx), with
// embedded migrations per dialect applied at Open.
package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/instore-dev/instore"
)

var _ instore.Store = (*DB)(nil)

// Options tunes a store. The zero value is the safe default.
type Options struct {
	// Synchronous is the SQLite synchronous pragma: "FULL" (the default when
	// empty) makes an acknowledged write survive a power cut; "NORMAL" is
	// several times faster and survives only a process crash. PostgreSQL
	// ignores it.
	Synchronous string
	// MaxConns bounds a node's PostgreSQL connections (default
	// DefaultMaxConns, at least MinMaxConns): two fifths for writes, two
	// fifths for reads, the rest for progress stages. Size it with
	// max_connections and the number of nodes. SQLite ignores it.
	MaxConns int
}

// Bounds of Options.MaxConns.
const (
	DefaultMaxConns = 2*postgresMaxConns + postgresRelaxedConns
	MinMaxConns     = 5
)

// poolSizes splits a node's connections over its three PostgreSQL pools.
func poolSizes(max int) (writer, reader, relaxed int) {
	if max <= 0 {
		return postgresMaxConns, postgresMaxConns, postgresRelaxedConns
	}
	max = maxInt(max, MinMaxConns)
	writer = max * 2 / 5
	return writer, writer, max - 2*writer
}

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// DB is an instore.Store on SQLite or PostgreSQL. It is safe for concurrent
// use.
type DB struct {
	d *dialect
	// writer runs every write. On SQLite it holds one connection whose
	// transactions start with BEGIN IMMEDIATE, so writers queue in the pool
	// instead of failing with "database is locked".
	writer *sql.DB
	// reader serves reads: a query_only pool on SQLite, a pool of its own on
	// PostgreSQL (see postgresMaxConns).
	reader *sql.DB
	// Prepared statements of each pool (SQLite only, see stmtCache).
	writerStmts, readerStmts *stmtCache
	// group runs the writes (SQLite only, see groupCommitter).
	group *groupCommitter
	// relaxed is the PostgreSQL pool for a relaxed Commit (instore.Change.Relaxed): its sessions have
	// synchronous_commit off.
	relaxed *sql.DB
	// pipe and relaxedPipe group the single-statement writes of the writer
	// and relaxed pools (PostgreSQL only, see pipeline).
	pipe, relaxedPipe *pipeline
	// reads groups the short reads of the reader pool (PostgreSQL only,
	// see readPipe).
	reads *readPipe
	// told is the highest event number readers may show, pending a
	// PostgreSQL bound waiting for the WAL flush (horizon.go).
	// reported is how far SequenceEvents has reported (it wakes readers).
	told, reported atomic.Int64
	pending        toldState
	// commits counts the write transactions committed (commits.go).
	commits commitCounts
}

// Open opens the store named by dsn and applies pending migrations. A dsn
// starting with postgres:// or postgresql:// opens PostgreSQL; anything else
// is the path of a SQLite file, created when missing (its directory must
// exist). Open refuses a database migrated by a newer binary.
func Open(ctx context.Context, dsn string, opts Options) (*DB, error) {
	synchronous := strings.ToUpper(opts.Synchronous)
	switch synchronous {
	case "":
		synchronous = "FULL"
	case "FULL", "NORMAL":
	default:
		return nil, fmt.Errorf("sqlstore: synchronous must be FULL or NORMAL, not %q", opts.Synchronous)
	}

	db := &DB{}
	if isPostgres(dsn) {
		nw, nr, nx := poolSizes(opts.MaxConns)
		writer, err := openPostgres(ctx, dsn, nw)
		if err != nil {
			return nil, err
		}
		reader, err := openPostgres(ctx, dsn, nr)
		if err != nil {
			writer.Close()
			return nil, err
		}
		relaxed, err := openPostgres(ctx, dsn, nx, "synchronous_commit", "off")
		if err != nil {
			writer.Close()
			reader.Close()
			return nil, err
		}
		db.d, db.writer, db.reader, db.relaxed = newPostgres(), writer, reader, relaxed
		if pipelinable(dsn) {
			db.pipe, db.relaxedPipe = newPipeline(writer), newPipeline(relaxed)
			db.reads = newReadPipe(reader)
		}
	} else {
		writer, reader, err := openSQLite(ctx, dsn, synchronous)
		if err != nil {
			return nil, err
		}
		db.d, db.writer, db.reader = newSQLite(), writer, reader
		db.writerStmts, db.readerStmts = newStmtCache(writer), newStmtCache(reader)
	}
	if err := db.migrate(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlstore: migrate %s: %w", db.d.name, err)
	}
	// What the database holds when it is opened is told (SQLite: on disk
	// as far as it will ever be; PostgreSQL: as far as flushed).
	var err error
	if db.d.name == "postgres" {
		_, err = db.advanceToldOnce(ctx)
	} else {
		var top int64
		top, err = toldAtDurableCommit(ctx, db.read())
		db.publishTold(top)
	}
	db.reported.Store(db.told.Load())
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlstore: read the events' horizon: %w", err)
	}
	if db.writerStmts != nil {
		db.group = newGroupCommitter(db, synchronous == "FULL")
	}
	return db, nil
}

// Close closes the database connections.
func (db *DB) Close() error {
	if db.group != nil {
		db.group.close()
	}
	if db.pipe != nil {
		db.pipe.close()
		db.relaxedPipe.close()
		db.reads.close()
	}
	if db.writerStmts != nil {
		db.writerStmts.close()
		db.readerStmts.close()
	}
	err := db.writer.Close()
	if db.reader != db.writer {
		err = errors.Join(err, db.reader.Close())
	}
	if db.relaxed != nil {
		err = errors.Join(err, db.relaxed.Close())
	}
	return err
}

// Pools returns the connection pools by name ("writer", "reader" and, on
// PostgreSQL, "relaxed"), for their statistics (sql.DB.Stats) in metrics.
// A pool serving two roles is listed once.
func (db *DB) Pools() map[string]*sql.DB {
	pools := map[string]*sql.DB{"writer": db.writer}
	if db.reader != db.writer {
		pools["reader"] = db.reader
	}
	if db.relaxed != nil {
		pools["relaxed"] = db.relaxed
	}
	return pools
}

// Ping reports whether the database answers a query on the read path.
func (db *DB) Ping(ctx context.Context) error {
	var one int
	if err := db.reader.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		return fmt.Errorf("ping %s: %w", db.d.name, err)
	}
	return nil
}

// querier is what *sql.DB, *sql.Conn and *sql.Tx have in common.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// conn runs portable SQL (? placeholders) on a transaction or a pool.
// Helpers take one, so the same helper serves a read on the reader pool and
// a step of a write transaction.
type conn struct {
	d *dialect
	q querier
	// Prepared statements (SQLite): pool for reads on the reader pool, tx
	// inside a write transaction; both nil otherwise.
	pool *stmtCache
	tx   *txStmts
	// detached: the statements ignore the context's end (group commits).
	detached bool
	// reads: queryRow and getFew go through this read pipeline
	// (PostgreSQL's reader pool), nil otherwise.
	reads *readPipe
}

// context returns the context a statement runs with.
func (c conn) context(ctx context.Context) context.Context {
	if c.detached {
		return context.WithoutCancel(ctx)
	}
	return ctx
}

// stmt returns the prepared statement of query for this conn, or nil to
// run it unprepared.
func (c conn) stmt(ctx context.Context, query string) *sql.Stmt {
	switch {
	case c.tx != nil:
		return c.tx.stmt(ctx, query)
	case c.pool != nil:
		return c.pool.prepare(ctx, query)
	}
	return nil
}

func (c conn) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	ctx = c.context(ctx)
	if st := c.stmt(ctx, query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return c.q.ExecContext(ctx, c.d.rebind(query), args...)
}

// execAffected runs exec and returns how many rows the statement changed.
func (c conn) execAffected(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := c.exec(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (c conn) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	ctx = c.context(ctx)
	if st := c.stmt(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return c.q.QueryContext(ctx, c.d.rebind(query), args...)
}

func (c conn) queryRow(ctx context.Context, query string, args ...any) scanner {
	ctx = c.context(ctx)
	if st := c.stmt(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	if c.reads != nil {
		return pipedRow{p: c.reads, ctx: ctx, query: c.d.rebind(query), args: args}
	}
	return c.q.QueryRowContext(ctx, c.d.rebind(query), args...)
}

// read returns the read path.
func (db *DB) read() conn {
	return conn{d: db.d, q: db.reader, pool: db.readerStmts, reads: db.reads}
}

// update runs fn in one write transaction and commits it when fn returns
// nil. On SQLite, concurrent updates share a group commit (groupCommitter):
// fn then runs in a savepoint of a transaction that may hold others' writes
// too, which it must not depend on.
func (db *DB) update(ctx context.Context, fn func(c conn) error) error {
	if db.group != nil {
		return db.counted(false, db.group.do(ctx, fn))
	}
	// PostgreSQL (SQLite's writes all go through the group committer).
	return db.counted(false, db.writeTx(ctx, db.writer, fn))
}

// updateOutbox is update that also inserts evs, the integrator events of
// the change fn writes (a link, an unlink, a device's hello, a print job's
// end, an update's status), after fn in its database transaction.
func (db *DB) updateOutbox(ctx context.Context, evs []instore.OutboxEvent, fn func(c conn) error) error {
	if len(evs) == 0 {
		return db.update(ctx, fn)
	}
	return db.update(ctx, func(c conn) error {
		if err := fn(c); err != nil {
			return err
		}
		return insertOutbox(ctx, c, evs)
	})
}

// updateValue is updateOutbox for an fn that finds a value: the value fn
// returned when its write commits, T's zero value with the error otherwise.
func updateValue[T any](ctx context.Context, db *DB, evs []instore.OutboxEvent, fn func(c conn) (T, error)) (T, error) {
	var v T
	err := db.updateOutbox(ctx, evs, func(c conn) error {
		var err error
		v, err = fn(c)
		return err
	})
	if err != nil {
		var zero T
		return zero, err
	}
	return v, nil
}

// single runs fn, which makes exactly one write statement (and reads only
// after it, to explain a failure), as update does. On PostgreSQL the
// statement needs no transaction of its own: a single statement is atomic
// and durable by itself, and it costs one round trip instead of three
// (BEGIN, the statement, COMMIT); it goes through the writer's pipeline,
// which sends the statements made at once together. On SQLite it joins a
// group commit like any write.
func (db *DB) single(ctx context.Context, fn func(c conn) error) error {
	if db.group != nil {
		return db.update(ctx, fn)
	}
	return db.counted(false, fn(conn{d: db.d, q: db.pipe.querier(db.writer)}))
}

// conflictErr turns a unique or foreign-key violation of op into a wrapped
// instore.ErrConflict and any other error into a wrapped error.
func (db *DB) conflictErr(op string, err error) error {
	return conn{d: db.d}.conflictErr(op, err)
}

// create runs insert in a write transaction; a constraint it breaks is
// instore.ErrConflict, with op naming the step.
func (db *DB) create(ctx context.Context, op string, insert func(c conn) error) error {
	return db.update(ctx, func(c conn) error {
		if err := insert(c); err != nil {
			return db.conflictErr(op, err)
		}
		return nil
	})
}

// conflictErr is DB.conflictErr for a step of a transaction.
func (c conn) conflictErr(op string, err error) error {
	if why, ok := c.d.conflict(err); ok {
		return fmt.Errorf("%s: %w (%s)", op, instore.ErrConflict, why)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// mustAffect returns a wrapped instore.ErrNotFound naming what when res
// changed no row.
func mustAffect(res sql.Result, what string) error {
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("%s %w", what, instore.ErrNotFound)
	}
	return nil
}

// notUpdated explains why a compare-and-set update of row id of table, op
// in errors, changed no row: a missing row is instore.ErrNotFound naming
// what, one that is there instore.ErrConflict for the reason given (its
// state moved on). table is one of the package's constants, never input.
func notUpdated(ctx context.Context, c conn, table, what, id, op, reason string) error {
	var exists int
	if err := c.queryRow(ctx, `SELECT COUNT(*) FROM `+table+` WHERE id = ?`, id).Scan(&exists); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if exists == 0 {
		return fmt.Errorf("%s %w", what, instore.ErrNotFound)
	}
	return fmt.Errorf("%s: %w (%s)", op, instore.ErrConflict, reason)
}

// notFound maps sql.ErrNoRows to a wrapped instore.ErrNotFound naming what;
// the id is never part of the message (ids are sensitive and errors reach
// logs).
func notFound(err error, what string) error {
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%s %w", what, instore.ErrNotFound)
	}
	return fmt.Errorf("get %s: %w", what, err)
}

// micros is t as stored: unix microseconds.
func micros(t time.Time) int64 { return t.UnixMicro() }

// fromMicros is a stored time as returned: UTC, microsecond precision.
func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

// nullMicros stores a nil time as NULL.
func nullMicros(t *time.Time) sql.NullInt64 {
	if t == nil {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: micros(*t), Valid: true}
}

// fromNullMicros returns a stored nullable time.
func fromNullMicros(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := fromMicros(v.Int64)
	return &t
}

// nullString stores an empty string as NULL (optional references).
func nullString[S ~string](s S) sql.NullString {
	return sql.NullString{String: string(s), Valid: s != ""}
}
