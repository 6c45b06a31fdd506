package sqlstore_test

import (
	"context"
	"path/filepath"
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
	must(db.CreateCustomer(ctx, &instore.Customer{ID: "cus_1", Name: "C", CreatedAt: at}))
	must(db.CreateMerchant(ctx, &instore.Merchant{ID: "mer_1", CustomerID: "cus_1", Name: "M", CreatedAt: at}))
	must(db.CreateDevice(ctx, &instore.Device{SerialNumber: "S-1", Model: instore.ModelCountertop, CustomerID: "cus_1",
		SecretHash: []byte("h"), SoftwareVersion: "1.0.0", CreatedAt: at}))
	term := &instore.Terminal{CustomerID: "cus_1", MerchantID: "mer_1", CreatedAt: at}
	must(db.AllocateTerminalID(ctx, term))
	_, _, err = db.LinkTerminal(ctx, term.TerminalID, "S-1", at)
	must(err)
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
