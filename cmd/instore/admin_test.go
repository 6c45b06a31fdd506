package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
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

// TestAdminPackagesListPrintsIntegers imports a catalogue into a real
// store and lists it for a person: sizes are printed as the integers they
// are, never in float notation.
func TestAdminPackagesListPrintsIntegers(t *testing.T) {
	dir := t.TempDir()
	catalogue := filepath.Join(t.TempDir(), "packages.json")
	must(t, os.WriteFile(catalogue, []byte(`{"packages": [
  {"packageId": "countertop-1.2.0", "model": "countertop", "name": "Countertop payment application", "version": "1.2.0",
   "sizeBytes": 50331648, "sha256": "2ef7c7926a0d8d72bd75d83db2c0cd53bacfbe34b11536101ca35b9ce4f8f7c4", "releasedAt": "2026-02-02T08:00:00Z"},
  {"packageId": "countertop-1.3.0", "model": "countertop", "name": "Countertop payment application", "version": "1.3.0", "mandatory": true,
   "sizeBytes": 1099511627776, "sha256": "3ef7c7926a0d8d72bd75d83db2c0cd53bacfbe34b11536101ca35b9ce4f8f7c4", "releasedAt": "2026-03-02T08:00:00Z"}
]}`), 0o600))
	if _, errs, code := runCmd(t, "admin", "--data", dir, "packages", "import", catalogue); code != 0 {
		t.Fatalf("packages import = exit %d: %s", code, errs)
	}
	out, errs, code := runCmd(t, "admin", "--data", dir, "packages", "list", "--model", "countertop")
	if code != 0 {
		t.Fatalf("packages list = exit %d: %s", code, errs)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^sizeBytes\s+50331648$`),
		regexp.MustCompile(`(?m)^sizeBytes\s+1099511627776$`),
		regexp.MustCompile(`(?m)^mandatory\s+true$`),
	} {
		if !want.MatchString(out) {
			t.Errorf("packages list output lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "e+") {
		t.Errorf("packages list prints a number in float notation:\n%s", out)
	}
}

// instore admin backup and restore.

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
