package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/testwait"
)

// TestGroupCommit: writes queued behind a running commit go together in
// one database transaction, each applied or rolled back alone: a failing
// write leaves nothing (not even its earlier statements) and takes nobody
// else's with it; a caller whose context ends while queued still gets its
// write committed and told so.
func TestGroupCommit(t *testing.T) {
	db, err := Open(t.Context(), filepath.Join(t.TempDir(), "instore.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if db.group == nil {
		t.Fatal("SQLite store without a group committer")
	}
	ctx := t.Context()

	// Hold the writer with a first write until the others are queued.
	release, first := holdWriter(ctx, db, func(c conn) error { return insertSettingIfAbsent(ctx, c, "first", "1") })
	const n = 20
	boom := errors.New("boom")
	cancelled, cancel := context.WithCancel(ctx)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			jctx := ctx
			if i == 2 {
				jctx = cancelled
			}
			errs[i] = db.update(jctx, func(c conn) error {
				if err := insertSettingIfAbsent(jctx, c, fmt.Sprintf("k%02d", i), "a"); err != nil {
					return err
				}
				if err := insertSettingIfAbsent(jctx, c, fmt.Sprintf("k%02d-second", i), "b"); err != nil {
					return err
				}
				if i%2 == 1 {
					return boom // after two statements: both must go
				}
				return nil
			})
		})
	}
	testwait.For(t, fmt.Sprintf("%d writes queued", n), func() bool { return len(db.group.jobs.ch) >= n })
	before := db.group.groups.Load()
	cancel() // job 2's caller gives up while queued
	release()
	wg.Wait()
	if err := <-first; err != nil {
		t.Fatalf("first write: %v", err)
	}
	if got := db.group.groups.Load() - before; got != 1 {
		t.Errorf("the %d queued writes took %d database transactions, want 1", n, got)
	}
	for i := range n {
		want := error(nil)
		if i%2 == 1 {
			want = boom
		}
		if !errors.Is(errs[i], want) && errs[i] != want {
			t.Errorf("write %d = %v, want %v", i, errs[i], want)
		}
		for _, key := range []string{fmt.Sprintf("k%02d", i), fmt.Sprintf("k%02d-second", i)} {
			_, err := db.Setting(ctx, key)
			switch {
			case i%2 == 0 && err != nil:
				t.Errorf("write %d succeeded but %s is not stored: %v", i, key, err)
			case i%2 == 1 && !errors.Is(err, instore.ErrNotFound):
				t.Errorf("write %d failed but %s is stored (%v)", i, key, err)
			}
		}
	}

	// Closed: the queue is run, then writes are refused.
	db.Close()
	if err := db.update(ctx, func(c conn) error { return nil }); !errors.Is(err, errClosed) {
		t.Errorf("write after Close = %v, want errClosed", err)
	}
}

// TestGroupCommitPanic: a write that panics is rolled back alone, its
// caller gets the panic, and the committer goes on serving writes.
func TestGroupCommitPanic(t *testing.T) {
	db, err := Open(t.Context(), filepath.Join(t.TempDir(), "instore.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := t.Context()
	func() {
		defer func() {
			if v := recover(); v != "boom" {
				t.Errorf("the caller recovered %v, want the write's panic", v)
			}
		}()
		db.update(ctx, func(c conn) error {
			if err := insertSettingIfAbsent(ctx, c, "half", "1"); err != nil {
				return err
			}
			panic("boom")
		})
	}()
	if _, err := db.Setting(ctx, "half"); !errors.Is(err, instore.ErrNotFound) {
		t.Errorf("the panicked write's first statement is stored (%v), want it rolled back", err)
	}
	if _, err := db.InitSetting(ctx, "after", "1"); err != nil {
		t.Errorf("a write after the panic = %v, want the committer still serving", err)
	}
}

// TestGroupCommitRelaxed: with synchronous FULL, the relaxed writes
// (Commit of a relaxed change) queued with durable ones are committed first, in a
// database transaction of their own with synchronous NORMAL, and the
// durable ones then with FULL; the writer is left at FULL. With NORMAL
// everything goes in one group as before.
func TestGroupCommitRelaxed(t *testing.T) {
	for _, tc := range []struct {
		synchronous      string
		relaxed, durable int64 // PRAGMA synchronous seen inside each kind of write
		groups           int64
	}{
		{"FULL", 1, 2, 2},
		{"NORMAL", 1, 1, 1},
	} {
		t.Run(tc.synchronous, func(t *testing.T) {
			db, err := Open(t.Context(), filepath.Join(t.TempDir(), "instore.db"), Options{Synchronous: tc.synchronous})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			ctx := t.Context()
			release, first := holdWriter(ctx, db, func(conn) error { return nil })
			const n = 10
			seen := make([]int64, n)
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					write := db.group.do
					if i%2 == 0 {
						write = db.group.doRelaxed
					}
					errs[i] = write(ctx, func(c conn) error {
						if err := synchronousNow(ctx, c, &seen[i]); err != nil {
							return err
						}
						return insertSettingIfAbsent(ctx, c, fmt.Sprintf("k%02d", i), "v")
					})
				})
			}
			testwait.For(t, fmt.Sprintf("%d writes queued", n), func() bool { return len(db.group.jobs.ch) >= n })
			before := db.group.groups.Load()
			release()
			wg.Wait()
			if err := <-first; err != nil {
				t.Fatal(err)
			}
			if got := db.group.groups.Load() - before; got != tc.groups {
				t.Errorf("the queued writes took %d database transactions, want %d", got, tc.groups)
			}
			for i := range n {
				want := tc.durable
				if i%2 == 0 {
					want = tc.relaxed
				}
				if errs[i] != nil {
					t.Errorf("write %d = %v", i, errs[i])
				} else if seen[i] != want {
					t.Errorf("write %d (relaxed %v) ran with synchronous %d, want %d", i, i%2 == 0, seen[i], want)
				}
				if _, err := db.Setting(ctx, fmt.Sprintf("k%02d", i)); err != nil {
					t.Errorf("write %d is not stored: %v", i, err)
				}
			}
			// The next write, alone, is durable again.
			var after int64
			if err := db.update(ctx, func(c conn) error {
				return synchronousNow(ctx, c, &after)
			}); err != nil || after != tc.durable {
				t.Errorf("a durable write after them ran with synchronous %d (%v), want %d", after, err, tc.durable)
			}
		})
	}
}

// synchronousNow reads the writer connection's synchronous pragma in a
// statement prepared now: SQLite puts its value in the statement when it is
// prepared, so a cached one would answer what it was then.
func synchronousNow(ctx context.Context, c conn, v *int64) error {
	return c.q.QueryRowContext(ctx, "PRAGMA synchronous").Scan(v)
}

// holdWriter starts a write that holds db's writer until release is called
// and then runs write; it returns once the writer is held. first receives
// the held write's error.
func holdWriter(ctx context.Context, db *DB, write func(c conn) error) (release func(), first <-chan error) {
	hold, held := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- db.update(ctx, func(c conn) error {
			close(held)
			<-hold
			return write(c)
		})
	}()
	<-held
	return func() { close(hold) }, done
}
