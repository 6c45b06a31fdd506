package instore_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/admin"
	"github.com/instore-dev/instore/internal/gateway"
	"github.com/instore-dev/instore/internal/ids"
	"github.com/instore-dev/instore/internal/sqlstore"
)

// BenchmarkTransactionLife measures the domain's own cost of a
// transaction with no network: create (one commit), the terminal's ack
// (one commit) and applying its result (one commit), on SQLite with each
// durability setting — the regression guard for purchase create and
// result apply.
//
//	go test -run='^$' -bench=BenchmarkTransactionLife -benchmem .
func BenchmarkTransactionLife(b *testing.B) {
	for _, sync := range []string{"FULL", "NORMAL"} {
		b.Run("sqlite-"+sync, func(b *testing.B) {
			ctx := context.Background()
			st, err := sqlstore.Open(ctx, filepath.Join(b.TempDir(), "bench.db"), sqlstore.Options{Synchronous: sync})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			ad := admin.New(st)
			cus, _ := ad.CreateCustomer(ctx, "c")
			mer, _ := ad.CreateMerchant(ctx, cus.ID, "m", true)
			if _, _, err := ad.CreateDevice(ctx, "B-1", instore.ModelCountertop, cus.ID); err != nil {
				b.Fatal(err)
			}
			ts, err := ad.AllocateTerminals(ctx, mer.ID, 1)
			if err != nil {
				b.Fatal(err)
			}
			if _, _, err := st.LinkTerminal(ctx, ts[0].TerminalID, "B-1", time.Now()); err != nil {
				b.Fatal(err)
			}
			meta := instore.DefaultMetadata()
			svc := &instore.Service{Store: st, Metadata: &meta, Now: time.Now, NewRef: func() string { return ids.New("txn") }}
			svc.Gateway = gateway.New(gateway.Config{Events: svc})
			defer svc.Close()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				now := time.Now().UTC().Truncate(time.Microsecond)
				t := &instore.Transaction{ID: svc.NewRef(), MerchantID: mer.ID, TerminalID: ts[0].TerminalID, SerialNumber: "B-1",
					Type: instore.TypePurchase, Amount: 1250, Currency: "SEK", StatusID: instore.StatusPending,
					Progress: instore.ProgressSent, CreatedAt: now}
				if err := st.CreateTransaction(ctx, t); err != nil {
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
