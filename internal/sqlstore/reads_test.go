package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/instore-dev/instore/internal/testwait"
)

// readJobOf is a job reading pipe_t's v of row id into *v.
func readJobOf(ctx context.Context, db *DB, query string, v *int, args ...any) *readJob {
	return &readJob{ctx: ctx, query: db.d.rebind(query), args: args, done: make(chan struct{}),
		scan: func(rows pgx.Rows) error {
			if !rows.Next() {
				if err := rows.Err(); err != nil {
					return err
				}
				return sql.ErrNoRows
			}
			return rows.Scan(v)
		}}
}

// TestReadsGroupedEachItsOwn: the reads of a group are sent together and
// each is answered with its own row, or its own error: no row
// (sql.ErrNoRows), or a statement the server refuses, which stops the
// group; that one and those after it run again alone, where each gets
// its own outcome.
func TestReadsGroupedEachItsOwn(t *testing.T) {
	db := openPostgresTest(t)
	ctx := t.Context()
	pipeTable(t, db, 4)
	if _, err := db.writer.ExecContext(ctx, `UPDATE pipe_t SET v = id * 10 WHERE id <> 3`); err != nil {
		t.Fatal(err)
	}
	got := make([]int, 6)
	group := []*readJob{
		readJobOf(ctx, db, `SELECT v FROM pipe_t WHERE id = ?`, &got[0], 1),
		readJobOf(ctx, db, `SELECT v FROM pipe_t WHERE id = ?`, &got[1], 99),      // no row
		readJobOf(ctx, db, `SELECT 100 / v FROM pipe_t WHERE id = ?`, &got[2], 2), // 5
		readJobOf(ctx, db, `SELECT 100 / v FROM pipe_t WHERE id = ?`, &got[3], 3), // division by zero
		readJobOf(ctx, db, `SELECT v FROM pipe_t WHERE id = ?`, &got[4], 4),       // after the refusal
		readJobOf(ctx, db, `SELECT v + 1 FROM pipe_t WHERE id = ?`, &got[5], 2),   // after it too
	}
	g0 := db.reads.groups.Load()
	db.reads.together(group)
	for _, j := range group {
		<-j.done
	}
	if g := db.reads.groups.Load() - g0; g != 1 {
		t.Errorf("%d groups sent, want 1", g)
	}
	var pe *pgconn.PgError
	for i, want := range []int{10, 0, 5, 0, 40, 21} {
		err := group[i].err
		switch i {
		case 1:
			if !errors.Is(err, sql.ErrNoRows) {
				t.Errorf("read %d (no row): %v, want sql.ErrNoRows", i, err)
			}
		case 3:
			if !errors.As(err, &pe) || pe.Code != "22012" {
				t.Errorf("read %d (division by zero): %v, want its own error 22012", i, err)
			}
		default:
			if err != nil || got[i] != want {
				t.Errorf("read %d: %d, %v; want %d", i, got[i], err, want)
			}
		}
	}
}

// TestReadsGoneCallerNotScanned: a caller whose context ends is answered
// at once; its read is not sent, or its rows are dropped, never scanned
// into its destinations after it returned.
func TestReadsGoneCallerNotScanned(t *testing.T) {
	db := openPostgresTest(t)
	ctx := t.Context()
	pipeTable(t, db, 2)
	gone, cancel := context.WithCancel(ctx)
	cancel()
	if err := db.read().queryRow(gone, `SELECT v FROM pipe_t WHERE id = ?`, 1).Scan(new(int)); !errors.Is(err, context.Canceled) {
		t.Errorf("a read with an ended context: %v, want context.Canceled", err)
	}
	// A job its caller left while it was queued: the group scans the
	// others and leaves its destination alone.
	left, kept := -1, -1
	group := []*readJob{
		readJobOf(ctx, db, `SELECT v + 7 FROM pipe_t WHERE id = ?`, &left, 1),
		readJobOf(ctx, db, `SELECT v + 8 FROM pipe_t WHERE id = ?`, &kept, 2),
	}
	if !group[0].state.CompareAndSwap(readQueued, readGone) {
		t.Fatal("a queued job could not be left")
	}
	db.reads.together(group)
	<-group[1].done
	if left != -1 || kept != 8 || group[1].err != nil {
		t.Errorf("left %d (want -1: not scanned), kept %d, %v (want 8)", left, kept, group[1].err)
	}
	// Callers leaving while their reads are in flight, under the race
	// detector: each either gets its row or an error once its context
	// ended (its own, or a connection's dial cut short by it).
	var wg sync.WaitGroup
	errs := make(chan error, 400)
	for i := range 400 {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, time.Duration(i%5)*100*time.Microsecond)
			defer cancel()
			deadline, _ := cctx.Deadline()
			v := -1
			err := db.read().queryRow(cctx, `SELECT v + ? FROM pipe_t WHERE id = 1`, i).Scan(&v)
			switch {
			case err == nil && v != i:
				errs <- fmt.Errorf("read %d: %d", i, v)
			case err != nil && time.Now().Before(deadline):
				// (Its deadline, not cctx.Err: a dial gives up at the
				// deadline, maybe before the context's timer has run.)
				errs <- fmt.Errorf("read %d: %v before its context ended", i, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestReadsConcurrent: reads made at once by many callers, one-row and
// few-row, each get their own rows.
func TestReadsConcurrent(t *testing.T) {
	db := openPostgresTest(t)
	ctx := t.Context()
	const n = 64
	pipeTable(t, db, n)
	if _, err := db.writer.ExecContext(ctx, `UPDATE pipe_t SET v = id`); err != nil {
		t.Fatal(err)
	}
	scanInt := func(s scanner) (int, error) { var v int; return v, s.Scan(&v) }
	var wg sync.WaitGroup
	errs := make(chan error, n*20)
	for i := range n {
		wg.Go(func() {
			id := i + 1
			for k := range 10 {
				v, err := getOne(ctx, db.read(), scanInt, "row", `SELECT v + ? FROM pipe_t WHERE id = ?`, k, id)
				if err != nil || v != id+k {
					errs <- fmt.Errorf("row %d, read %d: %d, %v", id, k, v, err)
				}
				list, err := getFew(ctx, db.read(), scanInt, "rows", `SELECT v FROM pipe_t WHERE id <= ? ORDER BY id`, id%5)
				if err != nil || len(list) != id%5 || id%5 > 0 && list[len(list)-1] != id%5 {
					errs <- fmt.Errorf("rows up to %d: %v, %v", id%5, list, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("groups %d holding %d reads", db.reads.groups.Load(), db.reads.grouped.Load())
}

// TestReadsDeadConnectionRetried: a read whose pooled connection the
// server has closed runs again on another, as database/sql does.
func TestReadsDeadConnectionRetried(t *testing.T) {
	db := openPostgresTest(t)
	ctx := t.Context()
	pipeTable(t, db, 1)
	db.reader.SetMaxOpenConns(1)
	var pid int
	if err := db.reader.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	var ok bool
	if err := db.writer.QueryRowContext(ctx, `SELECT pg_terminate_backend($1, 5000)`, pid).Scan(&ok); err != nil || !ok {
		t.Fatalf("terminate the reader's connection: %v, %v", ok, err)
	}
	var v int
	if err := db.read().queryRow(ctx, `SELECT v + 3 FROM pipe_t WHERE id = ?`, 1).Scan(&v); err != nil || v != 3 {
		t.Errorf("read on a dead connection: %d, %v; want 3 (run again on a new one)", v, err)
	}
}

// TestReadsSlowReadHoldsNoOne: a read slower than readTimeout (a lock
// waited for, a long scan) is cancelled in its group, whose other reads
// are answered, and runs again alone with its caller's context; nothing
// of it keeps running once its caller has gone.
func TestReadsSlowReadHoldsNoOne(t *testing.T) {
	db := openPostgresTest(t)
	ctx := t.Context()
	pipeTable(t, db, 2)
	slowCtx, leave := context.WithCancel(ctx)
	defer leave()
	a, slow, b := -1, -1, -1
	group := []*readJob{
		readJobOf(ctx, db, `SELECT v + 1 FROM pipe_t WHERE id = ?`, &a, 1),
		readJobOf(slowCtx, db, `SELECT 0 FROM pg_sleep(600)`, &slow),
		readJobOf(ctx, db, `SELECT v + 2 FROM pipe_t WHERE id = ?`, &b, 2),
	}
	go db.reads.together(group)
	answered := func(j *readJob) bool {
		select {
		case <-j.done:
			return true
		default:
			return false
		}
	}
	testwait.For(t, "the group's fast reads answered", func() bool { return answered(group[0]) && answered(group[2]) })
	if a != 1 || b != 2 || group[0].err != nil || group[2].err != nil {
		t.Errorf("fast reads: %d, %v; %d, %v; want 1 and 2", a, group[0].err, b, group[2].err)
	}
	if answered(group[1]) {
		t.Errorf("the slow read answered (%v) while its caller still waits: want it run again alone", group[1].err)
	}
	leave()
	testwait.For(t, "the slow read answered once its caller left", func() bool { return answered(group[1]) })
	if slow != -1 || group[1].err == nil {
		t.Errorf("the slow read: %d, %v; want an error and nothing scanned", slow, group[1].err)
	}
	testwait.For(t, "no pg_sleep left running", func() bool {
		var n int
		err := db.writer.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(600)%' AND pid <> pg_backend_pid()`).Scan(&n)
		return err == nil && n == 0
	})
}
