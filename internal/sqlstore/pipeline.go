package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// maxPipe bounds the statements one pipelined transaction holds.
const maxPipe = 64

// pipeWorkers is how many pipelined transactions of one pool may be in
// flight at once: one fills while another runs.
const pipeWorkers = 2

// maxRegroup bounds the rounds of a group after its first (sent again
// without a statement the server refused, or not sent because its callers
// left while it awaited a connection); then its statements run alone.
const maxRegroup = 3

// pipeLockTimeout is the longest a group waits for a row lock (see
// together).
const pipeLockTimeout = "100ms"

// loneHold is the longest a worker waits for a statement it runs alone
// (holdAlone).
const loneHold = 50 * time.Millisecond

// pipeTimeout bounds one pipelined transaction, so that a connection that
// stops answering holds up its statements no longer than that (their
// callers stop waiting at their own contexts' end).
const pipeTimeout = 30 * time.Second

// pipeline is PostgreSQL's group commit for the writes that are one
// statement on their own (DB.single, a relaxed Commit, relaxedWrite): the
// statements that callers make at once go to the database together, in
// one round trip, as one transaction (BEGIN, a lock timeout, the events'
// mark of beginWriter, the statements in the order they came, COMMIT). On
// a loaded server most of what such a statement costs PostgreSQL is not
// the statement but its round trip and its own transaction (pgbench,
// docs/benchmarks.md "Writes in groups on PostgreSQL"); this shares them. A
// statement that comes alone runs at once, as before, without waiting for
// company.
//
// Each caller's outcome is its own, exactly as if its statement had run
// alone:
//   - The group commits: every statement is answered with its own rows
//     affected, once the commit is made (durable on the writer pool;
//     without waiting for the disk on the relaxed one).
//   - The server refuses one statement (an ERROR: a constraint, a row lock
//     waited for too long, ...): PostgreSQL rolls back the whole group, so
//     nothing of it was written; that statement runs again alone and is
//     answered with its own outcome, and the others are sent again
//     together (TestPipelineFailureIsolated). Nothing of the group reached
//     the server (a connection found dead, an argument pgx cannot encode):
//     each runs alone (TestPipelineEncodeErrorIsolated).
//   - The connection fails, the server goes away, a FATAL or PANIC error,
//     or no answer within pipeTimeout: what was written is not known, as
//     for a statement that ran alone; every caller gets the error (a 503:
//     Unavailable).
//   - A caller that gives up before its group is sent (its context ended,
//     while the group waited for a connection too) is answered so and its
//     statement is not sent (TestPipelineGoneWhileAwaitingConnection).
//
// A statement run alone runs on a goroutine of its own with its caller's
// context; a worker waits for it at most loneHold, so one that waits for a
// row holds up the others' writes no longer than that
// (TestPipelineLoneWaitHoldsNoOne).
//
// A statement of the group sees the writes of the statements before it,
// which are committed with it or not at all: nothing any caller could
// tell apart from statements run one after the other. Reads (the
// explanations a single write reads after its statement) are not grouped.
type pipeline struct {
	pool *sql.DB
	crew[*pipeJob]
	// groups counts the transactions of more than one statement sent,
	// grouped the statements they held, fallbacks the groups rolled back
	// or not sent whose statements then ran again (alone, or the rest
	// together).
	groups, grouped, fallbacks atomic.Int64
}

type pipeJob struct {
	ctx   context.Context
	query string // rebound ($n placeholders)
	args  []any
	done  chan pipeResult
}

type pipeResult struct {
	n   int64
	err error
}

func newPipeline(pool *sql.DB) *pipeline {
	p := &pipeline{pool: pool}
	p.start(p.send)
	return p
}

// exec runs the write statement query in the next group and returns its
// rows affected. A caller whose ctx ends stops waiting (its statement's
// outcome is then unknown, as for a statement cancelled mid-way).
func (p *pipeline) exec(ctx context.Context, query string, args []any) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	j := &pipeJob{ctx: ctx, query: query, args: args, done: make(chan pipeResult, 1)}
	if err := p.jobs.send(ctx, j); err != nil {
		return 0, err
	}
	select {
	case r := <-j.done:
		return r.n, r.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// send runs a group: alone if it is one statement (or one is left whose
// caller still waits), else in one pipelined transaction. Every statement
// run alone runs on a goroutine of its own with its caller's context; the
// worker waits for a lone one at most loneHold (holdAlone).
func (p *pipeline) send(group []*pipeJob) {
	live := waiting(group)
	for range maxRegroup + 1 {
		switch len(live) {
		case 0:
			return
		case 1:
			p.holdAlone(live[0])
			return
		}
		sent, failed, err := p.together(live)
		if errors.Is(err, errRegroup) {
			live = sent
			continue
		}
		live = sent
		switch {
		case err == nil:
			return
		case refused(err) && failed >= 0:
			// Rolled back whole because of one statement: that one
			// runs alone (where it may well succeed: it may have
			// waited for a lock, or seen a write of the group), the
			// others go again together. A purchase on a busy terminal
			// (its insert refused) thus costs the others one round.
			p.fallbacks.Add(1)
			p.goAlone(live[failed])
			live = waiting(append(live[:failed:failed], live[failed+1:]...))
			continue
		case refused(err) || notSent(err):
			// Rolled back whole (by its start or its commit), or never
			// sent: each statement alone.
			p.fallbacks.Add(1)
		default:
			for _, j := range live {
				j.done <- pipeResult{err: err}
			}
			return
		}
		break
	}
	// Refused too often, or not by one statement: each alone.
	for _, j := range live {
		p.goAlone(j)
	}
}

// errGroupTimeout answers the statements of a group that the database did
// not answer within pipeTimeout: what was written is not known, and the
// database is taken to be unavailable (Unavailable).
var errGroupTimeout = errors.New("sqlstore: the database did not answer a group of writes within " + pipeTimeout.String())

// errRegroup: fewer than two statements were left to send once the
// connection came (their callers gone), so none was.
var errRegroup = errors.New("sqlstore: regroup")

// waiting answers the jobs of group whose callers have gone (their
// statements never sent: nothing written) and returns the others.
func waiting(group []*pipeJob) []*pipeJob {
	live := make([]*pipeJob, 0, len(group))
	for _, j := range group {
		if err := j.ctx.Err(); err != nil {
			j.done <- pipeResult{err: err}
			continue
		}
		live = append(live, j)
	}
	return live
}

// refused reports whether err is the server's refusal of a statement, after
// which PostgreSQL has rolled the transaction back: an error of severity
// ERROR, not a lost connection, a server going away or a FATAL or PANIC
// error (a failure of the commit itself, say), after which what was written
// is not known.
func refused(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || Unavailable(err) {
		return false
	}
	sev := pe.SeverityUnlocalized
	if sev == "" {
		sev = pe.Severity
	}
	return sev == "ERROR"
}

// notSent reports whether err says that nothing of the group reached the
// server: no connection for it, a connection found dead before anything
// was written to it, or an argument pgx could not encode (one caller's bad
// value must not fail the others; see pipelinable).
func notSent(err error) bool {
	var pre pgx.ErrPreprocessingBatch
	return pgconn.SafeToRetry(err) || errors.As(err, &pre) || errors.Is(err, errNoConn)
}

// errNoConn: the group got no connection (within pipeTimeout): nothing of
// it was sent.
var errNoConn = errors.New("sqlstore: no connection for a group of writes")

// holdAlone runs j's statement alone and waits for it up to loneHold: the
// writes that come meanwhile queue, and go together next (a worker that
// went on at once would send every statement alone), but a statement that
// waits for a row holds up the others no longer than that.
func (p *pipeline) holdAlone(j *pipeJob) { holdFor(p.goAlone(j)) }

// holdFor waits until done is closed, at most loneHold.
func holdFor(done <-chan struct{}) {
	t := time.NewTimer(loneHold)
	select {
	case <-done:
	case <-t.C:
	}
	t.Stop()
}

// goAlone runs j's statement alone on a goroutine of its own; the channel
// is closed once it is answered.
func (p *pipeline) goAlone(j *pipeJob) <-chan struct{} {
	done := make(chan struct{})
	p.spawn(func() {
		p.alone(j)
		close(done)
	})
	return done
}

// alone runs j's statement on its own (autocommit), with its caller's
// context.
func (p *pipeline) alone(j *pipeJob) {
	res, err := p.pool.ExecContext(j.ctx, j.query, j.args...)
	var n int64
	if err == nil {
		n, err = res.RowsAffected()
	}
	j.done <- pipeResult{n: n, err: err}
}

// together runs the statements of group whose callers still wait, once it
// has a connection, in one transaction sent in one round trip, and answers
// them if it commits. It returns the statements it sent (the others were
// answered as gone) and, when the server refused one of them, its index
// in sent (else -1).
func (p *pipeline) together(group []*pipeJob) (sent []*pipeJob, failed int, err error) {
	cctx, cancel := context.WithTimeout(context.Background(), pipeTimeout)
	sc, err := p.pool.Conn(cctx)
	cancel()
	if err != nil {
		// Nothing sent: each runs alone, with its caller's context.
		return group, -1, fmt.Errorf("%w: %w", errNoConn, err)
	}
	defer sc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), pipeTimeout)
	defer cancel()
	// A caller that gave up while the connection was awaited is answered
	// now, and its statement is not sent: it would be written after its
	// caller heard that it was not.
	sent = waiting(group)
	if len(sent) < 2 {
		return sent, -1, errRegroup
	}
	p.groups.Add(1)
	p.grouped.Add(int64(len(sent)))
	ns := make([]int64, len(sent))
	// pre counts the statements of the group's start that ran, ran the
	// group's own: the first error is the statement after the last run.
	var pre, ran int
	started := func(pgconn.CommandTag) error { pre++; return nil }
	err = sc.Raw(func(dc any) error {
		b := &pgx.Batch{}
		b.Queue(`BEGIN`).Exec(started)
		// A group holds the row locks of its first statements while a
		// later one waits: each wait gives up well before PostgreSQL
		// looks for a deadlock (deadlock_timeout, 1 s by default), so a
		// group that a lock holds up lets its rows go instead of
		// making another transaction a deadlock's likely victim (a group
		// of several slow waits, or a server with a lower
		// deadlock_timeout, can still meet one: its statements then run
		// as after a refusal, and the other transaction is the store's
		// own, which a deadlock may abort as before). The events' mark
		// below waits no longer either (a CREATE INDEX on events, say).
		b.Queue(`SET LOCAL lock_timeout = '` + pipeLockTimeout + `'`).Exec(started)
		// beginWriter's mark: the told horizon counts this transaction
		// before any of its statements gives it an id (horizon.go).
		b.Queue(`LOCK TABLE events IN ROW EXCLUSIVE MODE`).Exec(started)
		for i, j := range sent {
			b.Queue(j.query, j.args...).Exec(func(ct pgconn.CommandTag) error {
				ns[i] = ct.RowsAffected()
				ran++
				return nil
			})
		}
		b.Queue(`COMMIT`).Exec(func(ct pgconn.CommandTag) error {
			if ct.String() != "COMMIT" {
				return errRolledBack
			}
			return nil
		})
		c := dc.(*stdlib.Conn).Conn()
		err := c.SendBatch(ctx, b).Close()
		if err != nil && c.IsClosed() {
			// Not to be used again (database/sql then discards it).
			err = errors.Join(err, driver.ErrBadConn)
		}
		return err
	})
	if err != nil {
		rollback(sc)
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			// The group's own bound, not a caller's: the database did
			// not answer (a 503, as for a lost connection).
			return sent, -1, errGroupTimeout
		}
		if pre == 3 && ran < len(sent) {
			return sent, ran, err
		}
		return sent, -1, err
	}
	for i, j := range sent {
		j.done <- pipeResult{n: ns[i]}
	}
	return sent, -1, nil
}

// querier returns the querier of a conn whose write statements go
// through p, or pool itself when there is no pipeline (nil: the URL asks
// for a query mode pipelinable refuses).
func (p *pipeline) querier(pool *sql.DB) querier {
	if p == nil {
		return pool
	}
	return pipelined{p}
}

// pipelinable reports whether the PostgreSQL URL dsn leaves pgx's query
// mode one that describes statements before it runs them (the default,
// cache_statement, or cache_describe, describe_exec): only then does pgx
// refuse an argument it cannot encode before it sends a batch
// (pgx.ErrPreprocessingBatch), which lets the pipeline run the others'
// statements. With default_query_exec_mode=exec or simple_protocol (set
// for PgBouncer, say) every statement runs alone, as without groups.
func pipelinable(dsn string) bool {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return false
	}
	switch cfg.DefaultQueryExecMode {
	case pgx.QueryExecModeCacheStatement, pgx.QueryExecModeCacheDescribe, pgx.QueryExecModeDescribeExec:
		return true
	}
	return false
}

// pipelined is the querier of a conn whose write statements go through a
// pipeline (exec) and whose reads run on the pipeline's pool.
type pipelined struct{ p *pipeline }

func (q pipelined) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	n, err := q.p.exec(ctx, query, args)
	if err != nil {
		return nil, err
	}
	return rowsAffected(n), nil
}

func (q pipelined) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return q.p.pool.QueryContext(ctx, query, args...)
}

func (q pipelined) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return q.p.pool.QueryRowContext(ctx, query, args...)
}

// rowsAffected is the sql.Result of a pipelined statement.
type rowsAffected int64

func (n rowsAffected) LastInsertId() (int64, error) {
	return 0, errors.New("sqlstore: no LastInsertId on PostgreSQL")
}

func (n rowsAffected) RowsAffected() (int64, error) { return int64(n), nil }
