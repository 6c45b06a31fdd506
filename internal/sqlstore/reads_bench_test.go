package sqlstore_test

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/sqlstore"
)

// BenchmarkRowReads measures the reads every request or hello makes of
// one row by its key, on SQLite (the rows' scans, with the driver's and
// database/sql's cost around them): a terminal ID (each purchase), a
// device (each hello not cached) and an API client (each token not
// cached).
//
//	go test -run='^$' -bench=BenchmarkRowReads -benchmem ./internal/sqlstore/
func BenchmarkRowReads(b *testing.B) {
	ctx := context.Background()
	db, err := sqlstore.Open(ctx, filepath.Join(b.TempDir(), "instore.db"), sqlstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	at := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	must := func(err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	term := seedLinked(b, db, at, "S-1")
	must(db.CreateAPIClient(ctx, &instore.APIClient{ID: "cli_1", Surface: instore.SurfaceOnline, CustomerID: "cus_1",
		MerchantID: "mer_1", Name: "N", SecretHash: []byte("h"), CreatedAt: at}))
	b.Run("terminal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := db.Terminal(ctx, term.TerminalID); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("device", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := db.Device(ctx, "S-1"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("apiclient", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := db.APIClient(ctx, "cli_1"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// seedLinked stores customer cus_1, its merchant mer_1, the devices
// serials and a terminal ID of mer_1 linked to the first, and returns
// that terminal ID.
func seedLinked(tb testing.TB, db *sqlstore.DB, at time.Time, serials ...string) *instore.Terminal {
	tb.Helper()
	ctx := context.Background()
	must := func(err error) {
		tb.Helper()
		if err != nil {
			tb.Fatal(err)
		}
	}
	must(db.CreateCustomer(ctx, &instore.Customer{ID: "cus_1", Name: "C", CreatedAt: at}))
	must(db.CreateMerchant(ctx, &instore.Merchant{ID: "mer_1", CustomerID: "cus_1", Name: "M", Active: true, CreatedAt: at}))
	for _, serial := range serials {
		must(db.CreateDevice(ctx, &instore.Device{SerialNumber: serial, Model: instore.ModelCountertop, CustomerID: "cus_1",
			SecretHash: []byte("h"), SoftwareVersion: "1.0.0", CreatedAt: at}))
	}
	term := &instore.Terminal{CustomerID: "cus_1", MerchantID: "mer_1", CreatedAt: at}
	must(db.AllocateTerminalID(ctx, term))
	_, _, err := db.LinkTerminal(ctx, term.TerminalID, serials[0], at)
	must(err)
	return term
}

// BenchmarkCreation: a purchase's creation (with its first timeline entry)
// and its end, with and without the condition that the terminal ID is
// still linked to the device (Change.OnDevice: the insert reads the
// terminal's row FOR KEY SHARE on PostgreSQL), on each backend, in one
// run. One terminal ID, so each creation follows the end of the one
// before.
//
//	INSTORE_TEST_DATABASE_URL=postgres://... go test -run='^$' -bench=BenchmarkCreation -count=6 ./internal/sqlstore/
func BenchmarkCreation(b *testing.B) {
	for _, be := range backends(b) {
		b.Run(be.name, func(b *testing.B) {
			dsn, _ := be.migrated(b)
			db := mustOpen(b, dsn, sqlstore.Options{})
			at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
			term := seedLinked(b, db, at, "S-1")
			n := 0
			for _, onDevice := range []string{"", "S-1"} {
				name := "unconditional"
				if onDevice != "" {
					name = "onDevice"
				}
				b.Run(name, func(b *testing.B) {
					ctx := context.Background()
					for b.Loop() {
						n++
						tx := &instore.Transaction{ID: "txn_b" + strconv.Itoa(n), MerchantID: "mer_1", TerminalID: term.TerminalID,
							SerialNumber: "S-1", Type: instore.TypePurchase, Amount: 100, Currency: "SEK",
							StatusID: instore.StatusPending, Progress: instore.ProgressSent, CreatedAt: at}
						ch := &instore.Change{T: tx, OnDevice: onDevice, Events: []instore.TransactionEvent{
							{Version: 1, Kind: instore.EventCreated, At: at, Actor: instore.ActorECR, StatusAfter: "PENDING"}}}
						if err := db.CreateTransaction(ctx, ch); err != nil {
							b.Fatal(err)
						}
						tx.StatusID, tx.Progress = instore.StatusApproved, instore.ProgressFinal
						if err := db.Commit(ctx, &instore.Change{T: tx, From: 1}); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		})
	}
}
