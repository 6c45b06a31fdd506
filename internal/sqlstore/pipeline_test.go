package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/instore-dev/instore/internal/testwait"
)

// pipeTable makes a table of rows 1..n with v = 0 (v may not be negative).
func pipeTable(t *testing.T, db *DB, n int) {
	t.Helper()
	ctx := t.Context()
	if _, err := db.writer.ExecContext(ctx, `CREATE TABLE pipe_t (id INT PRIMARY KEY, v INT NOT NULL CHECK (v >= 0))`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.writer.ExecContext(ctx, `INSERT INTO pipe_t SELECT g, 0 FROM generate_series(1, $1) g`, n); err != nil {
		t.Fatal(err)
	}
}

func pipeJobOf(ctx context.Context, db *DB, query string, args ...any) *pipeJob {
	return &pipeJob{ctx: ctx, query: db.d.rebind(query), args: args, done: make(chan pipeResult, 1)}
}

// xmins returns the id of the transaction that wrote each row.
func xmins(t *testing.T, db *DB, ids ...int) []string {
	t.Helper()
	out := make([]string, len(ids))
	for i, id := range ids {
		if err := db.reader.QueryRowContext(t.Context(), `SELECT xmin::text FROM pipe_t WHERE id = $1`, id).Scan(&out[i]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func pipeValue(t *testing.T, db *DB, id int) int {
	t.Helper()
	var v int
	if err := db.reader.QueryRowContext(t.Context(), `SELECT v FROM pipe_t WHERE id = $1`, id).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// holdRow opens a transaction of the reader pool holding row id of
// pipe_t (rolled back at the test's end).
func holdRow(t *testing.T, db *DB, id int) *sql.Tx {
	t.Helper()
	holder, err := db.reader.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Rollback() })
	if _, err := holder.ExecContext(t.Context(), `SELECT 1 FROM pipe_t WHERE id = $1 FOR UPDATE`, id); err != nil {
		t.Fatal(err)
	}
	return holder
}

// TestPipelineGroupsOneTransaction: the statements of a group are written
// by one transaction, and each is answered with its own rows affected (a
// compare-and-set that finds nothing is 0, not an error).
func TestPipelineGroupsOneTransaction(t *testing.T) {
	db := openPostgresTest(t)
	ctx := t.Context()
	pipeTable(t, db, 3)
	group := []*pipeJob{
		pipeJobOf(ctx, db, `UPDATE pipe_t SET v = 1 WHERE id = 1`),
		pipeJobOf(ctx, db, `UPDATE pipe_t SET v = 2 WHERE id = ?`, 2),
		pipeJobOf(ctx, db, `UPDATE pipe_t SET v = 3 WHERE id = ? AND v = ?`, 3, 7),
		pipeJobOf(ctx, db, `UPDATE pipe_t SET v = v + 1 WHERE id < 3`),
	}
	g0, f0 := db.pipe.groups.Load(), db.pipe.fallbacks.Load()
	db.pipe.send(group)
	for i, want := range []int64{1, 1, 0, 2} {
		if r := <-group[i].done; r.err != nil || r.n != want {
			t.Errorf("statement %d: %d rows, %v; want %d rows", i, r.n, r.err, want)
		}
	}
	if g, f := db.pipe.groups.Load()-g0, db.pipe.fallbacks.Load()-f0; g != 1 || f != 0 {
		t.Errorf("groups %d, fallbacks %d; want 1, 0", g, f)
	}
	if x := xmins(t, db, 1, 2); x[0] != x[1] {
		t.Errorf("rows 1 and 2 written by transactions %v: want one", x)
	}
	for id, want := range map[int]int{1: 2, 2: 3, 3: 0} {
		if v := pipeValue(t, db, id); v != want {
			t.Errorf("row %d: v = %d, want %d (the later statement sees the earlier one's write)", id, v, want)
		}
	}
}

// TestPipelineFailureIsolated: a statement the server refuses rolls its
// group back; it then runs alone and is answered with its own error, and
// the others go again together and are written once.
func TestPipelineFailureIsolated(t *testing.T) {
	db := openPostgresTest(t)
	ctx := t.Context()
	pipeTable(t, db, 3)
	group := []*pipeJob{
		pipeJobOf(ctx, db, `UPDATE pipe_t SET v = v + 10 WHERE id = 1`),
		pipeJobOf(ctx, db, `UPDATE pipe_t SET v = -1 WHERE id = 2`),
		pipeJobOf(ctx, db, `UPDATE pipe_t SET v = v + 10 WHERE id = 3`),
	}
	g0, f0 := db.pipe.groups.Load(), db.pipe.fallbacks.Load()
	db.pipe.send(group)
	results := make([]pipeResult, len(group))
	for i, j := range group {
		results[i] = <-j.done
	}
	var pe *pgconn.PgError
	if !errors.As(results[1].err, &pe) || pe.Code != "23514" {
		t.Errorf("the refused statement: %v, want its check_violation", results[1].err)
	}
	for _, i := range []int{0, 2} {
		if r := results[i]; r.err != nil || r.n != 1 {
			t.Errorf("statement %d: %d rows, %v; want 1 row", i, r.n, r.err)
		}
	}
	for id, want := range map[int]int{1: 10, 2: 0, 3: 10} {
		if v := pipeValue(t, db, id); v != want {
			t.Errorf("row %d: v = %d, want %d", id, v, want)
		}
	}
	if g, f := db.pipe.groups.Load()-g0, db.pipe.fallbacks.Load()-f0; g != 2 || f != 1 {
		t.Errorf("groups %d, fallbacks %d; want 2 (the first, then the others again), 1", g, f)
	}
	if x := xmins(t, db, 1, 3); x[0] != x[1] {
		t.Errorf("rows 1 and 3 written by transactions %v: want one (sent again together)", x)
	}
}

// TestPipelineLockWaitGivesUp: a group whose later statement waits for a
// row another transaction holds does not keep its earlier statements'
// rows locked until that transaction ends: it gives up (pipeLockTimeout)
// and its statements run alone, so the first is answered while the other
// transaction still holds its row, and the second once it is released.
// Holding them would make a transaction that then wanted the first row a
// deadlock's possible victim.
func TestPipelineLockWaitGivesUp(t *testing.T) {
	db := openPostgresTest(t)
	ctx := t.Context()
	pipeTable(t, db, 2)
	holder := holdRow(t, db, 2)
	group := []*pipeJob{
		pipeJobOf(ctx, db, `UPDATE pipe_t SET v = 1 WHERE id = 1`),
		pipeJobOf(ctx, db, `UPDATE pipe_t SET v = 2 WHERE id = 2`),
	}
	go db.pipe.send(group)
	var first pipeResult
	select {
	case first = <-group[0].done:
	case <-time.After(30 * time.Second):
		t.Fatal("the first statement was not answered within 30 s while another transaction held the second's row")
	}
	if first.err != nil || first.n != 1 {
		t.Fatalf("first statement: %d rows, %v; want 1 row", first.n, first.err)
	}
	// The holder can take the first row now: the group let it go.
	if _, err := holder.ExecContext(ctx, `UPDATE pipe_t SET v = v + 100 WHERE id = 1`); err != nil {
		t.Fatalf("the holder's update of the first row: %v", err)
	}
	if err := holder.Commit(); err != nil {
		t.Fatal(err)
	}
	if r := <-group[1].done; r.err != nil || r.n != 1 {
		t.Errorf("second statement: %d rows, %v; want 1 row", r.n, r.err)
	}
	if v1, v2 := pipeValue(t, db, 1), pipeValue(t, db, 2); v1 != 101 || v2 != 2 {
		t.Errorf("rows: %d, %d; want 101, 2", v1, v2)
	}
}

// TestPipelineConcurrentSingles: many single-statement writes at once
// through DB.single (grouped as they come), some refused: each caller
// gets its own outcome, and every accepted write is there exactly once.
func TestPipelineConcurrentSingles(t *testing.T) {
	db := openPostgresTest(t)
	ctx := t.Context()
	const n = 64
	pipeTable(t, db, n)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			for k := range 10 {
				delta := 1
				if (i+k)%7 == 0 {
					delta = -1000 // refused: v may not be negative
				}
				err := db.single(ctx, func(c conn) error {
					n, err := c.execAffected(ctx, `UPDATE pipe_t SET v = v + ? WHERE id = ?`, delta, i+1)
					if err == nil && n != 1 {
						err = fmt.Errorf("%d rows", n)
					}
					return err
				})
				if (err != nil) != (delta < 0) {
					errs[i] = fmt.Errorf("row %d, write %d (delta %d): %v", i+1, k, delta, err)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	for i := range n {
		want := 0
		for k := range 10 {
			if (i+k)%7 != 0 {
				want++
			}
		}
		if v := pipeValue(t, db, i+1); v != want {
			t.Errorf("row %d: v = %d, want %d", i+1, v, want)
		}
	}
	t.Logf("groups %d holding %d statements, fallbacks %d", db.pipe.groups.Load(), db.pipe.grouped.Load(), db.pipe.fallbacks.Load())
}

// TestPipelineWaitsAreBounded: a caller whose context ends stops waiting,
// and a statement whose caller has gone before its group is sent is not
// run.
func TestPipelineWaitsAreBounded(t *testing.T) {
	db := openPostgresTest(t)
	pipeTable(t, db, 2)
	gone, cancel := context.WithCancel(t.Context())
	cancel()
	group := []*pipeJob{
		pipeJobOf(gone, db, `UPDATE pipe_t SET v = 5 WHERE id = 1`),
		pipeJobOf(t.Context(), db, `UPDATE pipe_t SET v = 6 WHERE id = 2`),
	}
	db.pipe.send(group)
	if r := <-group[0].done; !errors.Is(r.err, context.Canceled) {
		t.Errorf("the gone caller's statement: %v, want context.Canceled", r.err)
	}
	if r := <-group[1].done; r.err != nil || r.n != 1 {
		t.Errorf("the other statement: %d rows, %v", r.n, r.err)
	}
	if v1, v2 := pipeValue(t, db, 1), pipeValue(t, db, 2); v1 != 0 || v2 != 6 {
		t.Errorf("rows: %d, %d; want 0 (never run), 6", v1, v2)
	}
	if _, err := db.pipe.exec(gone, `UPDATE pipe_t SET v = 7 WHERE id = 1`, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("exec with an ended context: %v", err)
	}
}

// TestPipelineGoneWhileAwaitingConnection: callers that give up while
// their group waits for a connection are answered so, and their
// statements are never sent (they would be written after their callers
// heard they were not).
func TestPipelineGoneWhileAwaitingConnection(t *testing.T) {
	db := openPostgresTest(t)
	ctx := t.Context()
	pipeTable(t, db, 3)
	db.writer.SetMaxOpenConns(1)
	held, err := db.writer.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p := &pipeline{pool: db.writer}
	c1, cancel1 := context.WithCancel(ctx)
	c2, cancel2 := context.WithCancel(ctx)
	group := []*pipeJob{
		pipeJobOf(c1, db, `UPDATE pipe_t SET v = 5 WHERE id = 1`),
		pipeJobOf(c2, db, `UPDATE pipe_t SET v = 5 WHERE id = 2`),
		pipeJobOf(ctx, db, `UPDATE pipe_t SET v = 5 WHERE id = 3`),
	}
	go p.send(group)
	testwait.For(t, "the group waiting for the pool's connection", func() bool { return db.writer.Stats().WaitCount > 0 })
	cancel1()
	cancel2()
	held.Close()
	for i, j := range group[:2] {
		if r := <-j.done; !errors.Is(r.err, context.Canceled) {
			t.Errorf("statement %d: %d rows, %v; want context.Canceled", i, r.n, r.err)
		}
	}
	// The one left whose caller waits runs alone.
	if r := <-group[2].done; r.err != nil || r.n != 1 {
		t.Errorf("the waiting caller's statement: %d rows, %v; want 1 row", r.n, r.err)
	}
	p.wg.Wait()
	if v1, v2, v3 := pipeValue(t, db, 1), pipeValue(t, db, 2), pipeValue(t, db, 3); v1 != 0 || v2 != 0 || v3 != 5 {
		t.Errorf("rows: %d, %d, %d; want 0, 0 (never sent), 5", v1, v2, v3)
	}
}

// TestPipelineLoneWaitHoldsNoOne: a statement run alone that waits for a
// row holds up no other write for long: the worker goes on after loneHold.
func TestPipelineLoneWaitHoldsNoOne(t *testing.T) {
	db := openPostgresTest(t)
	ctx := t.Context()
	pipeTable(t, db, 2)
	holder := holdRow(t, db, 1)
	blocked := pipeJobOf(ctx, db, `UPDATE pipe_t SET v = 1 WHERE id = 1`)
	free := pipeJobOf(ctx, db, `UPDATE pipe_t SET v = 2 WHERE id = 2`)
	db.pipe.send([]*pipeJob{blocked})
	db.pipe.send([]*pipeJob{free})
	if r := <-free.done; r.err != nil || r.n != 1 {
		t.Fatalf("the free row's statement: %d rows, %v", r.n, r.err)
	}
	select {
	case r := <-blocked.done:
		t.Fatalf("the blocked statement was answered while its row was held: %d rows, %v", r.n, r.err)
	default:
	}
	if err := holder.Commit(); err != nil {
		t.Fatal(err)
	}
	if r := <-blocked.done; r.err != nil || r.n != 1 {
		t.Errorf("the blocked statement: %d rows, %v", r.n, r.err)
	}
}

// TestPipelineEncodeErrorIsolated: an argument pgx cannot encode fails its
// own statement only; the others of its group are written, and nobody is
// told the database is unavailable.
func TestPipelineEncodeErrorIsolated(t *testing.T) {
	db := openPostgresTest(t)
	ctx := t.Context()
	pipeTable(t, db, 3)
	group := []*pipeJob{
		pipeJobOf(ctx, db, `UPDATE pipe_t SET v = 1 WHERE id = ?`, 1),
		pipeJobOf(ctx, db, `UPDATE pipe_t SET v = ? WHERE id = ?`, int64(3_000_000_000), 2),
		pipeJobOf(ctx, db, `UPDATE pipe_t SET v = 3 WHERE id = ?`, 3),
	}
	db.pipe.send(group)
	results := make([]pipeResult, len(group))
	for i, j := range group {
		results[i] = <-j.done
	}
	if results[1].err == nil || Unavailable(results[1].err) {
		t.Errorf("the unencodable statement: %v, want its own error, not unavailable", results[1].err)
	}
	for _, i := range []int{0, 2} {
		if r := results[i]; r.err != nil || r.n != 1 {
			t.Errorf("statement %d: %d rows, %v; want 1 row", i, r.n, r.err)
		}
	}
	if v1, v2, v3 := pipeValue(t, db, 1), pipeValue(t, db, 2), pipeValue(t, db, 3); v1 != 1 || v2 != 0 || v3 != 3 {
		t.Errorf("rows: %d, %d, %d; want 1, 0, 3", v1, v2, v3)
	}
}

// TestPipelineRefused: only an ERROR of the server is a refusal (the
// group rolled back, its statements safe to run again); a FATAL or PANIC
// (a failed commit, say), or a server going away, leaves what was written
// unknown.
func TestPipelineRefused(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&pgconn.PgError{Severity: "ERROR", SeverityUnlocalized: "ERROR", Code: "23505"}, true},
		{fmt.Errorf("update: %w", &pgconn.PgError{Severity: "FEHLER", SeverityUnlocalized: "ERROR", Code: "55P03"}), true},
		{&pgconn.PgError{Severity: "PANIC", SeverityUnlocalized: "PANIC", Code: "XX000"}, false},
		{&pgconn.PgError{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: "XX000"}, false},
		{&pgconn.PgError{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: "57P01"}, false},
		{&pgconn.PgError{Severity: "ERROR", SeverityUnlocalized: "ERROR", Code: "25006"}, false},
		{errors.New("connection reset"), false},
		{errGroupTimeout, false},
	} {
		if got := refused(tc.err); got != tc.want {
			t.Errorf("refused(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
	if !Unavailable(fmt.Errorf("update: %w", errGroupTimeout)) {
		t.Error("a group the database did not answer is not unavailable")
	}
	fatal := errors.Join(&pgconn.PgError{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: "XX000"}, driver.ErrBadConn)
	if refused(fatal) || !Unavailable(fatal) {
		t.Errorf("a FATAL error with its connection lost: refused %v, unavailable %v; want false, true", refused(fatal), Unavailable(fatal))
	}
	if !notSent(fmt.Errorf("%w: %w", errNoConn, context.DeadlineExceeded)) {
		t.Error("a group that got no connection is not taken as not sent")
	}
	for dsn, want := range map[string]bool{
		"postgres://u@h/db": true,
		"postgres://u@h/db?default_query_exec_mode=cache_describe":  true,
		"postgres://u@h/db?default_query_exec_mode=exec":            false,
		"postgres://u@h/db?default_query_exec_mode=simple_protocol": false,
	} {
		if got := pipelinable(dsn); got != want {
			t.Errorf("pipelinable(%s) = %v, want %v", dsn, got, want)
		}
	}
}
