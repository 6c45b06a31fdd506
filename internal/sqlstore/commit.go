package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
)

// maxGroup bounds how many write transactions one group commit holds.
const maxGroup = 64

// errClosed answers a write to a closed store.
var errClosed = errors.New("sqlstore: the store is closed")

// groupCommitter runs SQLite's write transactions (one writer connection)
// as group commits: the writes that queued while a commit was being made
// to disk go together in the next database transaction, each inside a
// savepoint of its own, and share its one fsync. Each caller's write is
// applied, or rolled back alone (its savepoint), exactly as if it had its
// own transaction; a caller returns only once the commit that holds its
// write is durable, so nothing acknowledged is ever lost. A lone write
// runs at once, without waiting for company: this adds no latency, and
// under concurrent load it turns N fsyncs into one (the purchase load
// test: docs/benchmarks.md).
//
// A write whose fn panics is rolled back alone and the panic is raised
// again on its caller's goroutine (TestGroupCommitPanic).
//
// A relaxed write (doRelaxed: a progress stage, which the terminal reports
// again if it is lost) need not wait for the disk. When the store runs
// with synchronous FULL, the relaxed writes of a group are committed first,
// in a transaction of their own with synchronous NORMAL (in WAL mode: the
// commit is written to the WAL but not flushed), and answered at once; the
// group's other writes then commit with FULL, whose fsync flushes the
// relaxed ones too (the WAL is one file, written in order). A crash can
// lose a relaxed write, never a later durable one, the same promise as
// PostgreSQL's synchronous_commit off (Commit of a relaxed change).
//
// PostgreSQL needs none of this: it has a pool of connections, and its
// WAL writer flushes concurrent commits together by itself.
type groupCommitter struct {
	db   *DB
	jobs gate[*writeJob]
	done chan struct{}
	// full: the store's synchronous is FULL, so relaxed writes are worth a
	// transaction of their own (with NORMAL, every commit is relaxed).
	full bool
	// normalNow: the writer connection was last set to synchronous NORMAL
	// (only the committer's goroutine touches it).
	normalNow bool
	// groups counts the database transactions committed or tried.
	groups atomic.Int64
}

type writeJob struct {
	fn      func(c conn) error
	err     chan error
	relaxed bool
}

func newGroupCommitter(db *DB, full bool) *groupCommitter {
	g := &groupCommitter{db: db, jobs: newGate[*writeJob](maxGroup), done: make(chan struct{}), full: full}
	go g.run()
	return g
}

// do runs fn in the next group and returns its outcome once that group is
// committed (or fn's own error). A write once queued is waited for even if
// ctx ends, so that an error always means "not committed".
func (g *groupCommitter) do(ctx context.Context, fn func(c conn) error) error {
	return g.submit(ctx, &writeJob{fn: fn, err: make(chan error, 1)})
}

// doRelaxed is do for a write that need not reach the disk before it is
// answered (see groupCommitter).
func (g *groupCommitter) doRelaxed(ctx context.Context, fn func(c conn) error) error {
	return g.submit(ctx, &writeJob{fn: fn, err: make(chan error, 1), relaxed: g.full})
}

func (g *groupCommitter) submit(ctx context.Context, j *writeJob) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := g.jobs.send(ctx, j); err != nil {
		return err
	}
	err := <-j.err
	var p *jobPanic
	if errors.As(err, &p) {
		panic(p.value) // on the caller's goroutine, as if fn had run there
	}
	return err
}

// jobPanic carries a panic of a write's fn from the committer to its
// caller: the write is rolled back alone and the committer goes on.
type jobPanic struct{ value any }

func (p *jobPanic) Error() string { return fmt.Sprintf("sqlstore: write panicked: %v", p.value) }

// run calls fn, turning a panic into a *jobPanic error.
func run(fn func(c conn) error, c conn) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &jobPanic{value: v}
		}
	}()
	return fn(c)
}

// close runs what is queued and stops.
func (g *groupCommitter) close() {
	g.jobs.close()
	<-g.done
}

func (g *groupCommitter) run() {
	defer close(g.done)
	durable := make([]*writeJob, 0, maxGroup)
	relaxed := make([]*writeJob, 0, maxGroup)
	for j := range g.jobs.ch {
		durable, relaxed = durable[:0], relaxed[:0]
		add := func(j *writeJob) {
			if j.relaxed {
				relaxed = append(relaxed, j)
			} else {
				durable = append(durable, j)
			}
		}
		add(j)
	gather:
		for len(durable)+len(relaxed) < maxGroup {
			select {
			case j, ok := <-g.jobs.ch:
				if !ok {
					break gather
				}
				add(j)
			default:
				break gather
			}
		}
		if len(relaxed) > 0 {
			g.commit(relaxed, "NORMAL")
		}
		if len(durable) > 0 {
			g.commit(durable, "FULL")
		}
	}
}

// setSynchronous sets the writer connection's synchronous pragma for the
// next commit when the store runs with FULL; outside a transaction, as
// SQLite wants. A failure to go back to FULL fails the durable group.
func (g *groupCommitter) setSynchronous(ctx context.Context, mode string) error {
	if !g.full || g.normalNow == (mode == "NORMAL") {
		return nil
	}
	g.normalNow = true // unknown until it succeeds: set it again next time
	if _, err := g.db.writer.ExecContext(ctx, "PRAGMA synchronous = "+mode); err != nil {
		return fmt.Errorf("set synchronous %s: %w", mode, err)
	}
	g.normalNow = mode == "NORMAL"
	return nil
}

// commit runs one group in one database transaction, with the writer
// connection's synchronous set to mode.
func (g *groupCommitter) commit(group []*writeJob, mode string) {
	g.groups.Add(1)
	db := g.db
	// The writes run detached from their callers' contexts: an interrupted
	// statement would roll back the whole SQLite transaction, and with it
	// the others' writes. They are short, and their callers wait for them.
	ctx := context.Background()
	errs := make([]error, len(group))
	fail := func(err error) {
		for i, j := range group {
			if errs[i] == nil {
				errs[i] = err
			}
			j.err <- errs[i]
		}
	}
	if err := g.setSynchronous(ctx, mode); err != nil {
		fail(err)
		return
	}
	tx, err := db.writer.BeginTx(ctx, nil)
	if err != nil {
		fail(fmt.Errorf("begin: %w", err))
		return
	}
	ts := &txStmts{cache: db.writerStmts, tx: tx}
	c := conn{d: db.d, q: tx, tx: ts, detached: true}
	if len(group) == 1 {
		if errs[0] = run(group[0].fn, c); errs[0] != nil {
			tx.Rollback()
			group[0].err <- errs[0]
			return
		}
	} else {
		for i, j := range group {
			if _, err := c.exec(ctx, "SAVEPOINT w"); err != nil {
				tx.Rollback()
				fail(fmt.Errorf("savepoint: %w", err))
				return
			}
			if errs[i] = run(j.fn, c); errs[i] != nil {
				if _, err := c.exec(ctx, "ROLLBACK TO w"); err != nil {
					// The error ended the whole transaction: nobody's write stays.
					tx.Rollback()
					fail(fmt.Errorf("rollback to savepoint: %w", err))
					return
				}
			}
			if _, err := c.exec(ctx, "RELEASE w"); err != nil {
				tx.Rollback()
				fail(fmt.Errorf("release savepoint: %w", err))
				return
			}
		}
	}
	// A durable commit tells the events up to the highest number it holds
	// (horizon.go): its fsync flushes the relaxed commits before it too.
	told := int64(-1)
	if mode == "FULL" {
		if told, err = toldAtDurableCommit(ctx, c); err != nil {
			tx.Rollback()
			fail(fmt.Errorf("read the events' horizon: %w", err))
			return
		}
	}
	if err := tx.Commit(); err != nil {
		fail(fmt.Errorf("commit: %w", err))
		return
	}
	db.publishTold(told)
	if len(ts.missed) > 0 {
		ts.prepareMissed(ctx)
	}
	for i, j := range group {
		j.err <- errs[i]
	}
}
