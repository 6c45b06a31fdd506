package sqlstore_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/sqlstore"
)

// benchCount is $INSTORE_BENCH_TRANSACTIONS (default 10000): how many
// transactions the benchmarks store before they measure.
func benchCount(b *testing.B) int {
	n := 10000
	if v := os.Getenv(benchTransactionsEnv); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1000 {
			b.Fatalf("%s=%q: want a number of transactions, at least 1000", benchTransactionsEnv, v)
		}
	}
	return n
}

// seededBench opens the store of be with n transactions (seedBench) and
// an event per transaction with its webhook delivery (seedEvents): kept
// from an earlier run of the same size when there is one (cachedBench).
func seededBench(b *testing.B, be backend, n int) (*sqlstore.DB, *benchFixture) {
	return cachedBench(b, be, n, func(db *sqlstore.DB, driver, dsn string) *benchFixture {
		fx := seedBench(b, db, driver, dsn, n)
		fx.TopEvent, _ = seedEvents(b, db, driver, dsn)
		return fx
	})
}

// BenchmarkBooks measures the books over the store seedBench fills
// ($INSTORE_BENCH_TRANSACTIONS transactions of one merchant over 10
// terminal IDs and 90 days: 1,000,000 make a busy merchant of about
// 11,000 a day), on SQLite and, with $INSTORE_TEST_DATABASE_URL, on
// PostgreSQL:
//
//   - totals-day, totals-day-terminal, totals-30-days: Totals over the
//     last day (of one terminal ID), and over 30 days;
//   - reconcile-10000: a reconciliation of 10,000 lines, as the service
//     runs it: the book entries of a window holding 10,000 transactions
//     read from the store, then compared (instore.Reconcile) with the ECR's
//     10,000 lines, 1% of them with a wrong amount;
//   - compare-10000: the comparison alone.
//
// With -v it logs the plan of the totals of a day.
//
//	INSTORE_BENCH_TRANSACTIONS=1000000 go test -run='^$' -bench=BenchmarkBooks -benchtime=20x ./internal/sqlstore/
func BenchmarkBooks(b *testing.B) {
	n := benchCount(b)
	for _, be := range backends(b) {
		b.Run(be.name, func(b *testing.B) {
			db, fx := seededBench(b, be, n)
			ctx := context.Background()
			day := instore.TotalsFilter{MerchantID: "mer_bench", From: benchEnd.Add(-24 * time.Hour), To: benchEnd}
			for _, q := range []struct {
				name string
				f    instore.TotalsFilter
			}{
				{"totals-day", day},
				{"totals-day-terminal", instore.TotalsFilter{MerchantID: "mer_bench", From: day.From, To: day.To, TerminalID: fx.Terminals[3]}},
				{"totals-30-days", instore.TotalsFilter{MerchantID: "mer_bench", From: benchEnd.Add(-instore.MaxListRange), To: benchEnd}},
			} {
				b.Run(q.name, func(b *testing.B) {
					got, err := db.Totals(ctx, q.f)
					if err != nil || len(got) == 0 {
						b.Fatalf("Totals() = %d groups, %v", len(got), err)
					}
					var count int64
					for _, g := range got {
						count += g.Count
					}
					if testing.Verbose() && q.name == "totals-day" {
						plan, err := db.ExplainTotals(ctx, q.f)
						if err != nil {
							b.Fatal(err)
						}
						b.Logf("%d transactions in %d groups; plan:\n\t%s", count, len(got), strings.Join(plan, "\n\t"))
					}
					for b.Loop() {
						if _, err := db.Totals(ctx, q.f); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(count), "transactions/op")
				})
			}

			// A window of 10,000 transactions, and the ECR's books of it.
			const lines = 10000
			span := time.Duration(int64(benchDays*24*time.Hour) / int64(n) * lines)
			win := instore.TotalsFilter{MerchantID: "mer_bench", From: benchEnd.Add(-span), To: benchEnd}
			md := instore.DefaultMetadata()
			entries := func() []instore.BookEntry {
				es, err := db.BookEntries(ctx, win, instore.MaxReconcileService+1)
				if err != nil {
					b.Fatal(err)
				}
				for i := range es {
					c, _ := md.TransactionStatus(es[i].StatusID)
					es[i].Status = c.Code
				}
				return es
			}
			es := entries()
			if len(es) > lines {
				es = es[len(es)-lines:]
				win.From = es[0].CreatedAt
			}
			books := make([]instore.ReconcileLine, len(es))
			for i, e := range es {
				amount := e.Amount
				if i%100 == 0 {
					amount++
				}
				books[i] = instore.ReconcileLine{OnlineAPIRefID: e.OnlineAPIRefID, Type: e.Type, Amount: &amount, Currency: e.Currency, Status: e.Status}
			}
			check := func(res instore.ReconcileResult) {
				if res.Counts.Mismatched != (len(books)+99)/100 || res.Counts.MissingInService != 0 {
					b.Fatalf("reconciliation = %+v", res.Counts)
				}
			}
			b.Run("reconcile-10000", func(b *testing.B) {
				for b.Loop() {
					check(instore.Reconcile(books, entries()))
				}
				b.ReportMetric(float64(len(books)), "lines/op")
			})
			b.Run("compare-10000", func(b *testing.B) {
				for b.Loop() {
					check(instore.Reconcile(books, es))
				}
			})
		})
	}
}

// TestTotalsPlan checks that the totals of a day read one range of
// transactions_merchant_totals and no table row: on SQLite a covering
// index search, on PostgreSQL an Index Only Scan (with statistics and the
// visibility map, as autovacuum keeps them).
func TestTotalsPlan(t *testing.T) {
	forEachSeeded(t, 5000, func(t *testing.T, be backend, db *sqlstore.DB, fx *benchFixture) {
		for _, terminal := range []string{"", fx.Terminals[2]} {
			f := instore.TotalsFilter{MerchantID: "mer_bench", From: benchEnd.Add(-24 * time.Hour), To: benchEnd, TerminalID: terminal}
			text := explained(t)(db.ExplainTotals(t.Context(), f))
			want := "USING COVERING INDEX transactions_merchant_totals"
			if be.name == "postgres" {
				want = "Index Only Scan using transactions_merchant_totals"
			}
			// One terminal's day is a few rows: PostgreSQL may as well
			// read them by the (merchant, terminal, created) index and
			// their rows; never a sequential scan.
			alt := "\x00"
			if be.name == "postgres" && terminal != "" {
				alt = "Index Scan using transactions_merchant_terminal_created"
			}
			if !strings.Contains(text, want) && !strings.Contains(text, alt) || strings.Contains(text, "Seq Scan") {
				t.Errorf("terminal %q: plan\n%s\nlacks %q", terminal, text, want)
			}
		}
	})
}

// TestTerminalTransactionsPlan checks that a day close's read of a
// terminal ID's transactions (TerminalTransactions) searches the index of
// the merchant's transactions by terminal ID and creation, the merchant
// read from the terminal's row: never a scan of the table or of the
// merchant's other terminals.
func TestTerminalTransactionsPlan(t *testing.T) {
	forEachSeeded(t, 5000, func(t *testing.T, be backend, db *sqlstore.DB, fx *benchFixture) {
		text := explained(t)(db.ExplainTerminalTransactions(t.Context(), fx.Terminals[2], benchEnd.Add(-24*time.Hour), benchEnd))
		want := "SEARCH transactions USING INDEX transactions_merchant_terminal_created (merchant_id=? AND terminal_id=? AND created_at>? AND created_at<?)"
		if be.name == "postgres" {
			want = "using transactions_merchant_terminal_created"
		}
		if !strings.Contains(text, want) || strings.Contains(text, "Seq Scan") || strings.Contains(text, "SCAN transactions") {
			t.Errorf("plan\n%s\nlacks %q", text, want)
		}
	})
}
