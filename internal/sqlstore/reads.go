package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// readPipe is the pipeline of PostgreSQL's short reads on the reader pool:
// the one-row reads (conn.queryRow, getOne) and the few-row reads by an
// index (getFew: a device's open effects). Each of a purchase life's
// reads (its terminal with its update, the effects owed to its device, a
// status request) was a round trip of its own; the reads that callers make
// at once now go to PostgreSQL together, in one round trip (a pgx batch:
// each statement with its own snapshot, as alone under READ COMMITTED),
// as the writes do (pipeline). A read that comes alone runs at once,
// alone; a worker waits for it at most loneHold, so that what comes
// meanwhile queues and goes together.
//
// A read's outcome is its own, as if it had run alone: its rows, or its
// own error (no row: sql.ErrNoRows). When a group fails (a statement
// refused, one slower than readTimeout, the connection lost, nothing
// sent), the reads it had not answered run again alone with their
// callers' contexts: a read changes nothing, so running it again is safe.
// A caller that gives up is answered at once; its read is then not sent,
// or its rows are dropped.
//
// Every read on this path, grouped or alone, is scanned by pgx itself
// (not database/sql), so that the store suite, whose reads mostly come
// alone, tests the scanning the groups use.
type readPipe struct {
	pool *sql.DB
	crew[*readJob]
	// groups counts the groups of more than one read sent, grouped the
	// reads they held.
	groups, grouped atomic.Int64
}

// A readJob's state: queued until a worker takes its rows (scanning) or
// its caller leaves (gone); a job being scanned is waited for.
const (
	readQueued int32 = iota
	readScanning
	readGone
)

type readJob struct {
	ctx   context.Context
	query string // rebound ($n placeholders)
	args  []any
	// scan reads the statement's rows into the caller's destinations; it
	// runs only while the job is scanning (its caller waits).
	scan  func(pgx.Rows) error
	state atomic.Int32
	// answered is the worker's: the job's done is closed.
	answered bool
	err      error
	done     chan struct{}
}

func newReadPipe(pool *sql.DB) *readPipe {
	p := &readPipe{pool: pool}
	p.start(p.send)
	return p
}

// do runs query in the next group and scans its rows with scan, or ends
// with ctx (the rows then dropped, never scanned after do returned).
func (p *readPipe) do(ctx context.Context, query string, args []any, scan func(pgx.Rows) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	j := &readJob{ctx: ctx, query: query, args: args, scan: scan, done: make(chan struct{})}
	if err := p.jobs.send(ctx, j); err != nil {
		return err
	}
	select {
	case <-j.done:
		return j.err
	case <-ctx.Done():
		if j.state.CompareAndSwap(readQueued, readGone) {
			return ctx.Err()
		}
		<-j.done // being scanned: a moment
		return j.err
	}
}

// answer ends j with err.
func (j *readJob) answer(err error) {
	j.err, j.answered = err, true
	close(j.done)
}

// take scans rows for j, unless its caller left, and answers it; when the
// statement itself failed (rows.Err: refused, its connection lost, or its
// rows not scanned) j is not answered but queued again, and the error is
// returned: a group's failed read runs again alone, and a lone one's
// caller decides.
func (j *readJob) take(rows pgx.Rows) error {
	if !j.state.CompareAndSwap(readQueued, readScanning) {
		rows.Close()
		return nil // its caller left: the rows are dropped
	}
	err := j.scan(rows)
	rows.Close()
	if rerr := rows.Err(); rerr != nil {
		j.state.Store(readQueued)
		return rerr
	}
	j.answer(err)
	return nil
}

// send runs a group's reads whose callers still wait: alone if one is
// left, else together.
func (p *readPipe) send(group []*readJob) {
	live := group[:0:0]
	for _, j := range group {
		if j.state.Load() == readQueued && j.ctx.Err() == nil {
			live = append(live, j)
		}
	}
	switch len(live) {
	case 0:
	case 1:
		holdFor(p.goAlone(live[0]))
	default:
		p.together(live)
	}
}

// readTimeout bounds each statement of a group of reads (and so its
// waits for locks): a read that takes longer is cancelled, which fails the
// group, and runs again alone with its caller's context, as before the
// groups. The reads grouped are point lookups that take microseconds; one
// slow read (a lock held by a migration, say) must not hold up the others
// of its group, nor keep a worker from the next groups.
const readTimeout = "100ms"

// together runs group's reads in one round trip, in a transaction that
// bounds each of them (readTimeout); those it did not answer (the group
// failed) run again alone.
func (p *readPipe) together(group []*readJob) {
	cctx, cancel := context.WithTimeout(context.Background(), pipeTimeout)
	sc, err := p.pool.Conn(cctx)
	cancel()
	if err == nil {
		p.groups.Add(1)
		p.grouped.Add(int64(len(group)))
		ctx, cancel := context.WithTimeout(context.Background(), pipeTimeout)
		err = sc.Raw(func(dc any) error {
			b := &pgx.Batch{}
			// A transaction of its own, so that the timeout is the
			// group's only (each read still takes its own snapshot:
			// READ COMMITTED).
			b.Queue(`BEGIN`)
			b.Queue(`SET LOCAL statement_timeout = '` + readTimeout + `'`)
			for _, j := range group {
				b.Queue(j.query, j.args...).Query(j.take)
			}
			b.Queue(`COMMIT`)
			c := dc.(*stdlib.Conn).Conn()
			err := c.SendBatch(ctx, b).Close()
			if err != nil && c.IsClosed() {
				err = errors.Join(err, driver.ErrBadConn)
			}
			return err
		})
		cancel()
		if err != nil {
			rollback(sc)
		}
		sc.Close()
	}
	if err == nil {
		return
	}
	for _, j := range group {
		if !j.answered {
			p.goAlone(j)
		}
	}
}

// goAlone runs j alone on a goroutine of its own; the channel is closed
// once it is answered.
func (p *readPipe) goAlone(j *readJob) <-chan struct{} {
	p.spawn(func() { p.alone(j) })
	return j.done
}

// alone runs j's read on its own with its caller's context, once more
// when nothing was sent or its connection was found dead (as database/sql
// does).
func (p *readPipe) alone(j *readJob) {
	for try := 0; ; try++ {
		if j.state.Load() == readGone {
			j.answer(context.Canceled) // nobody waits
			return
		}
		sc, err := p.pool.Conn(j.ctx)
		if err != nil {
			j.answer(err)
			return
		}
		var closed bool
		err = sc.Raw(func(dc any) error {
			c := dc.(*stdlib.Conn).Conn()
			rows, _ := c.Query(j.ctx, j.query, j.args...)
			err := j.take(rows)
			if closed = c.IsClosed(); closed {
				// Not to be used again (database/sql then discards it).
				return errors.Join(err, driver.ErrBadConn)
			}
			return err
		})
		sc.Close()
		switch {
		case j.answered:
			return
		case j.state.Load() == readGone:
			j.answer(context.Canceled)
			return
		case try == 0 && j.ctx.Err() == nil && (closed || pgconn.SafeToRetry(err)):
			continue
		}
		j.answer(err)
		return
	}
}

// pipedRow is conn.queryRow's row on the reader pool of PostgreSQL: Scan
// runs the statement through the read pipeline.
type pipedRow struct {
	p     *readPipe
	ctx   context.Context
	query string
	args  []any
}

func (r pipedRow) Scan(dest ...any) error {
	return r.p.do(r.ctx, r.query, r.args, func(rows pgx.Rows) error {
		if !rows.Next() {
			if err := rows.Err(); err != nil {
				return err
			}
			return sql.ErrNoRows
		}
		return rows.Scan(dest...)
	})
}

// getFew is getAll for a read of a few rows by an index, which goes
// through the read pipeline on PostgreSQL.
func getFew[T any](ctx context.Context, c conn, scan func(scanner) (T, error), op, query string, args ...any) ([]T, error) {
	if c.reads == nil {
		return getAll(ctx, c, scan, op, query, args...)
	}
	var list []T
	err := c.reads.do(ctx, c.d.rebind(query), args, func(rows pgx.Rows) error {
		list = []T{}
		for rows.Next() {
			v, err := scan(rows)
			if err != nil {
				return err
			}
			list = append(list, v)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return list, nil
}
