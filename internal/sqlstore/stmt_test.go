package sqlstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/sqlstore"
)

// TestStatementCache: on SQLite the store's statements are prepared once
// and then reused, in write transactions and on the reader pool, and
// preparing never deadlocks with a transaction holding the single writer
// connection (a first version held the cache's lock while preparing and
// hung here).
func TestStatementCache(t *testing.T) {
	db := mustOpen(t, sqlitePath(t), sqlstore.Options{})
	ctx := t.Context()
	w0, r0 := db.CachedStatements()

	c := &instore.Customer{ID: "cus_1", Name: "Acme", CreatedAt: time.Now().UTC().Truncate(time.Microsecond)}
	if err := db.CreateCustomer(ctx, c); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Customer(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	w1, r1 := db.CachedStatements()
	if w1 <= w0 || r1 <= r0 {
		t.Fatalf("statements cached after a write and a read: writer %d -> %d, reader %d -> %d; want both to grow", w0, w1, r0, r1)
	}
	// The same operations again prepare nothing new.
	if err := db.CreateCustomer(ctx, &instore.Customer{ID: "cus_2", Name: "B", CreatedAt: c.CreatedAt}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Customer(ctx, "cus_2"); err != nil {
		t.Fatal(err)
	}
	if w2, r2 := db.CachedStatements(); w2 != w1 || r2 != r1 {
		t.Errorf("repeating the operations grew the caches: writer %d -> %d, reader %d -> %d", w1, w2, r1, r2)
	}

	// Writers and readers of statements not cached yet, at once: every one
	// finishes (bounded by the context) and sees its own write.
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 8 {
		wg.Go(func() {
			for i := range 20 {
				id := fmt.Sprintf("cus_g%d_%d", g, i)
				if err := db.CreateCustomer(ctx, &instore.Customer{ID: id, Name: id, CreatedAt: c.CreatedAt}); err != nil {
					errs <- err
					return
				}
				m := &instore.Merchant{ID: "mer_" + id, CustomerID: id, Name: id, Active: true, CreatedAt: c.CreatedAt}
				if err := db.CreateMerchant(ctx, m); err != nil {
					errs <- err
					return
				}
				if got, err := db.Merchant(ctx, m.ID); err != nil || got.CustomerID != id {
					errs <- fmt.Errorf("merchant %s = %+v, %v", m.ID, got, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if ctx.Err() != nil {
		t.Fatal("the writers did not finish in 30 s: preparing and writing deadlocked")
	}
}
