package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/client"
	"github.com/instore-dev/instore/internal/server"
	"github.com/instore-dev/instore/internal/sqlstore"
	"github.com/instore-dev/instore/internal/testwait"
)

// acked is a purchase whose final status the ECR was told, and when.
type acked struct {
	ref    string
	status instore.TransactionStatus
	at     time.Time
}

// TestAdminBackupUnderPurchaseLoad backs a demo's SQLite store up with
// `instore admin backup` while an ECR per virtual terminal sells without
// pause, checks that the sales went on during the backup, that `admin
// restore` is refused while the demo holds the data directory, then stops
// the demo, restores the backup over its store and finds in it every
// purchase whose final status an ECR was told before the backup began,
// with that status.
func TestAdminBackupUnderPurchaseLoad(t *testing.T) {
	dir := t.TempDir()
	info, _, stopDemo := runDemo(t, "--data", dir, "--sim-delay", "0")
	ecrEnv(t, info)
	c := ecrClient(t)

	var mu sync.Mutex
	var done []acked
	var wg sync.WaitGroup
	defer wg.Wait()
	selling, stopSelling := context.WithCancel(context.Background())
	defer stopSelling()
	for _, term := range info.Terminals {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for selling.Err() == nil {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				tx, err := c.Purchase(ctx, client.PurchaseParams{TerminalID: term.TerminalID, Amount: 1000, Currency: "SEK"})
				if err == nil {
					tx, err = c.WaitForFinal(ctx, tx.OnlineAPIRefID, nil)
				}
				cancel()
				if err != nil {
					t.Errorf("purchase on %s: %v", term.Model, err)
					return
				}
				mu.Lock()
				done = append(done, acked{tx.OnlineAPIRefID, tx.StatusID, time.Now()})
				mu.Unlock()
			}
		}()
	}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(done)
	}
	waitFor := func(n int) {
		t.Helper()
		testwait.For(t, fmt.Sprintf("%d purchases", n), func() bool { return count() >= n })
	}
	waitFor(200)

	backup := filepath.Join(t.TempDir(), "instore-backup.db")
	began := time.Now()
	if _, errs, code := runCmd(t, "admin", "--data", dir, "backup", backup); code != 0 {
		t.Fatalf("admin backup = exit %d: %s", code, errs)
	}
	ended := count()
	// The demo goes on selling after the backup: it was never stopped.
	waitFor(ended + 10)

	_, errs, code := runCmd(t, "admin", "--data", dir, "restore", backup)
	if code != 2 || !strings.Contains(errs, "is serving the data directory") || !strings.Contains(errs, "stop it") {
		t.Errorf("admin restore while the demo runs = exit %d, %q; want 2 and why", code, errs)
	}
	stopSelling()
	wg.Wait()
	stopDemo()

	out, errs, code := runCmd(t, "admin", "--data", dir, "--json", "restore", backup)
	if code != 0 {
		t.Fatalf("admin restore = exit %d: %s", code, errs)
	}
	if !strings.Contains(out, `"replaced":`) {
		t.Errorf("admin restore printed %s, want where the replaced store is kept", out)
	}
	st, err := sqlstore.Open(context.Background(), filepath.Join(dir, server.DatabaseFile), sqlstore.Options{})
	must(t, err)
	defer st.Close()
	var before, missing int
	for _, a := range done {
		if !a.at.Before(began) {
			continue
		}
		before++
		tx, err := st.Transaction(context.Background(), a.ref)
		switch {
		case err != nil:
			missing++
			t.Errorf("purchase told %d before the backup began: %v", a.status, err)
		case tx.StatusID != a.status:
			t.Errorf("purchase told %d before the backup began is %d in the backup", a.status, tx.StatusID)
		}
	}
	t.Logf("%d purchases told before the backup, %d in all; %d missing from the restored store", before, len(done), missing)
}

// TestAdminBackupOnPostgresSaysHow: instore does not pretend to back up
// PostgreSQL; it names the tools.
func TestAdminBackupOnPostgresSaysHow(t *testing.T) {
	for _, cmd := range []string{"backup", "restore"} {
		_, errs, code := runCmd(t, "admin", "--database-url", "postgres://127.0.0.1:1/none", cmd, filepath.Join(t.TempDir(), "x.db"))
		if code != 2 || !strings.Contains(errs, "pg_basebackup") || !strings.Contains(errs, "docs/operations.md") {
			t.Errorf("admin %s on PostgreSQL = exit %d, %q; want 2 and the tools to use", cmd, code, errs)
		}
	}
}
