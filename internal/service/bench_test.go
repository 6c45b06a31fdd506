package service_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/instore-dev/instore"
)

// BenchmarkTransactionLife measures the domain's own cost of a
// transaction with no network: create (one commit), the terminal's ack
// (one commit) and applying its result (one commit), on SQLite with each
// durability setting — the regression guard for purchase create and
// result apply.
//
//	go test -run='^$' -bench=BenchmarkTransactionLife -benchmem ./internal/service/
func BenchmarkTransactionLife(b *testing.B) {
	for _, sync := range []string{"FULL", "NORMAL"} {
		b.Run("sqlite-"+sync, func(b *testing.B) {
			ctx := context.Background()
			f := newFixture(b, sync, "B-1")
			st, svc := f.st, f.svc
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				now := time.Now().UTC().Truncate(time.Microsecond)
				t := &instore.Transaction{ID: svc.NewRef(), MerchantID: f.merchant, TerminalID: f.terminal, SerialNumber: "B-1",
					Type: instore.TypePurchase, Amount: 1250, Currency: "SEK", StatusID: instore.StatusPending,
					Progress: instore.ProgressSent, CreatedAt: now}
				if err := st.CreateTransaction(ctx, &instore.Change{T: t}); err != nil {
					b.Fatal(err)
				}
				if err := svc.TerminalAcknowledged(ctx, "B-1", t.ID); err != nil {
					b.Fatal(err)
				}
				if err := svc.TerminalResult(ctx, "B-1", instore.TerminalResult{MessageID: fmt.Sprint("m-", i), Ref: t.ID, StatusID: 0}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
