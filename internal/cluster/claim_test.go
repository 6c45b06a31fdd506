package cluster

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/instore-dev/instore/internal/pgtest"
	"github.com/instore-dev/instore/internal/sqlstore"
	"github.com/instore-dev/instore/internal/testwait"
)

// TestClaimsTogether: the hellos of a storm claim their sessions together.
// While one claim waits for the database (its row locked by another
// transaction), 40 more queue (one device twice) and are then made in one
// statement: their rows share the statement's connected_at. Every epoch
// grows past the one the device had (another node's session of it is now
// stale), and the two hellos of one device get its one new epoch.
func TestClaimsTogether(t *testing.T) {
	url := pgtest.Schema(t, "cluster")
	if url == "" {
		t.Skip("set " + pgtest.Env + " to run the cluster's claims on PostgreSQL")
	}
	ctx := context.Background()
	db, err := sqlstore.Open(ctx, url, sqlstore.Options{}) // the migrations
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	n, err := New(ctx, Config{DatabaseURL: url, NodeID: "node_a"})
	if err != nil {
		t.Fatal(err)
	}
	defer n.beats.Close()
	defer n.pool.Close()

	serials := []string{"held"}
	for i := range 39 {
		serials = append(serials, fmt.Sprintf("dev-%02d", i))
	}
	serials = append(serials, "dev-00") // a device twice
	// Each device had a session of epoch 7 on another node.
	for _, s := range serials[:40] {
		if _, err := n.pool.Exec(ctx, `INSERT INTO terminal_sessions (serial_number, node_id, epoch, connected_at)
			VALUES ($1, 'node_b', 7, now() - interval '1 hour')`, s); err != nil {
			t.Fatal(err)
		}
	}

	lock, err := n.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lock.Exec(ctx, `SELECT 1 FROM terminal_sessions WHERE serial_number = 'held' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	epochs := make([]int64, len(serials))
	errs := make([]error, len(serials))
	var wg sync.WaitGroup
	claim := func(i int) {
		defer wg.Done()
		epochs[i], errs[i] = n.claim(ctx, serials[i])
	}
	wg.Add(1)
	go claim(0) // the first batch: held by the lock
	testwait.For(t, "the first claim waiting for the locked row", func() bool {
		var waiting bool
		err := n.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE 'INSERT INTO terminal_sessions%')`).Scan(&waiting)
		return err == nil && waiting
	})
	for i := 1; i < len(serials); i++ {
		wg.Add(1)
		go claim(i)
	}
	testwait.For(t, "the other claims queued behind it", func() bool { return n.claims.Queued() == len(serials)-1 })
	if err := lock.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()

	for i, s := range serials {
		if errs[i] != nil {
			t.Fatalf("claim %s: %v", s, errs[i])
		}
		if epochs[i] != 8 {
			t.Errorf("claim %s: epoch %d, want 8 (past the other node's 7)", s, epochs[i])
		}
	}
	var owners, times int
	if err := n.pool.QueryRow(ctx, `SELECT COUNT(DISTINCT node_id), COUNT(DISTINCT connected_at)
		FROM terminal_sessions WHERE serial_number <> 'held'`).Scan(&owners, &times); err != nil {
		t.Fatal(err)
	}
	if owners != 1 || times != 1 {
		t.Errorf("the queued claims: %d owners and %d connection times, want 1 and 1 (one statement)", owners, times)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.epochs) != 40 || n.epochs["dev-00"] != 8 {
		t.Errorf("the node's sessions: %d, dev-00 at %d; want 40, at 8", len(n.epochs), n.epochs["dev-00"])
	}
}
