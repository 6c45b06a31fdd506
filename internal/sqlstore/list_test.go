package sqlstore_test

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/sqlstore"
)

// benchTransactionsEnv sets how many transactions BenchmarkListTransactions
// stores before it measures.
const benchTransactionsEnv = "INSTORE_BENCH_TRANSACTIONS"

// benchEnd is the end of the benchmark's 90 days of transactions.
var benchEnd = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

const (
	benchDays      = 90
	benchTerminals = 10
)

// BenchmarkListTransactions measures what must cost the same however
// large the store grows, over a merchant with $INSTORE_BENCH_TRANSACTIONS
// (default 10000) transactions over 10 terminal IDs and 90 days, each with
// an integrator event and its webhook delivery, on SQLite and, with
// $INSTORE_TEST_DATABASE_URL, on PostgreSQL: ListTransactions (a page of
// at most 100 by each filter), a status lookup by id, the event stream's
// replay (ListEvents), a webhook delivery's claim (benchEvents) and a
// terminal ID's PENDING transaction. The store is seeded in bulk outside
// the timer (transactions: one transaction of prepared INSERTs on SQLite,
// COPY on PostgreSQL, followed by VACUUM ANALYZE, which autovacuum would
// do; events and deliveries: INSERT ... SELECT) and kept for the next run
// of the same size (cachedBench). With -v it logs each listing's plan.
//
//	INSTORE_BENCH_TRANSACTIONS=1000000 go test -run='^$' -bench=BenchmarkListTransactions ./internal/sqlstore/
func BenchmarkListTransactions(b *testing.B) {
	n := benchCount(b)
	for _, be := range backends(b) {
		b.Run(be.name, func(b *testing.B) {
			db, fx := seededBench(b, be, n)

			month := benchEnd.Add(-instore.MaxListRange)
			for _, q := range []struct {
				name string
				f    instore.TransactionFilter
			}{
				{"first-page-24h", instore.TransactionFilter{From: benchEnd.Add(-24 * time.Hour), To: benchEnd}},
				{"deep-page-cursor", instore.TransactionFilter{From: month, To: benchEnd, After: &fx.Deep}},
				{"terminal", instore.TransactionFilter{From: month, To: benchEnd, TransactionSelection: instore.TransactionSelection{TerminalID: fx.Terminals[3]}}},
				{"status", instore.TransactionFilter{From: month, To: benchEnd, TransactionSelection: instore.TransactionSelection{StatusID: ptr(instore.StatusTransactionDeclined)}}},
				{"ecr-reference", instore.TransactionFilter{From: month, To: benchEnd, TransactionSelection: instore.TransactionSelection{ECRReference: fx.ECRReference}}},
				{"terminal-status", instore.TransactionFilter{From: month, To: benchEnd, TransactionSelection: instore.TransactionSelection{TerminalID: fx.Terminals[3], StatusID: ptr(instore.StatusTransactionDeclined)}}},
			} {
				q.f.MerchantID, q.f.Limit = "mer_bench", instore.DefaultListLimit
				b.Run(q.name, func(b *testing.B) {
					ctx := context.Background()
					got, err := db.ListTransactions(ctx, q.f)
					if err != nil {
						b.Fatalf("ListTransactions() = %v", err)
					}
					if len(got) == 0 {
						b.Fatalf("ListTransactions(%s) found nothing: the benchmark would measure an empty page", q.name)
					}
					if testing.Verbose() {
						plan, err := db.ExplainListTransactions(ctx, q.f)
						if err != nil {
							b.Fatalf("explain: %v", err)
						}
						b.Logf("%d rows; plan:\n\t%s", len(got), strings.Join(plan, "\n\t"))
					}
					for b.Loop() {
						if _, err := db.ListTransactions(ctx, q.f); err != nil {
							b.Fatalf("ListTransactions() = %v", err)
						}
					}
				})
			}

			// The lookups of one transaction: by id, cycling through ids
			// spread over the whole range, and a terminal ID's PENDING
			// transaction (none here: ErrNotFound is the usual answer).
			benchCycle(b, "status-by-id", fx.IDs, func(b *testing.B, ctx context.Context, id string) {
				t, err := db.Transaction(ctx, id)
				if err != nil {
					b.Fatalf("Transaction(%s) = %v", id, err)
				}
				if t.ID != id {
					b.Fatalf("Transaction(%s) returned %s", id, t.ID)
				}
			})
			benchEvents(b, db, fx)
			benchCycle(b, "active-by-terminal", fx.Terminals, func(b *testing.B, ctx context.Context, term string) {
				if _, err := db.ActiveTransaction(ctx, term); err != nil && !errors.Is(err, instore.ErrNotFound) {
					b.Fatalf("ActiveTransaction(%s) = %v", term, err)
				}
			})
		})
	}
}

// benchCycle runs the sub-benchmark name of one lookup: each iteration
// calls lookup with the next of keys, round and round.
func benchCycle(b *testing.B, name string, keys []string, lookup func(b *testing.B, ctx context.Context, key string)) {
	b.Run(name, func(b *testing.B) {
		ctx := context.Background()
		i := 0
		for b.Loop() {
			lookup(b, ctx, keys[i%len(keys)])
			i++
		}
	})
}

func ptr[T any](v T) *T { return &v }

// benchFixture is what seedBench stored: the terminal IDs, a cursor half
// way through the last 30 days, an ECR reference of one transaction
// in them, and the ids of about 1000 transactions spread over all of them.
type benchFixture struct {
	Terminals    []string
	Deep         instore.TransactionCursor
	ECRReference string
	IDs          []string
	// TopEvent is the newest event's number (seedEvents).
	TopEvent int64
}

// benchColumns are the columns seedBench fills.
var benchColumns = []string{
	"id", "merchant_id", "terminal_id", "device_serial", "type", "amount", "cashback_amount", "vat_amount",
	"currency", "payment_method_id", "ecr_reference", "print_receipt", "status_id", "error_id", "progress",
	"version", "original_id", "result", "result_message_id", "delivered", "created_at", "acknowledged_at",
	"deadline_at", "completed_at",
}

// benchResult is the result of an approved transaction, ~400 bytes of JSON
// like a terminal's.
var benchResult = `{"entryMode":"CONTACTLESS","cardBrand":"VISA","maskedPan":"************4242",` +
	`"authorizationCode":"A1B2C3","paymentMethodId":2,"receipt":{"customer":["ACME RETAIL",` +
	`"Storgatan 1, Stockholm","","KÖP","SEK 125,00","VISA CONTACTLESS ************4242",` +
	`"AUTH A1B2C3","GODKÄND"],"merchant":["ACME RETAIL","MERCHANT COPY","SEK 125,00",` +
	`"VISA ************4242","AUTH A1B2C3","GODKÄND","TERMINAL 10000001"]}}`

// seedBench stores customer cus_bench, merchant mer_bench, 10 terminal IDs
// and n transactions in creation order, as a live store would have them:
// evenly over 90 days up to benchEnd, about 88% approved and the rest
// declined, aborted, failed or reversed, 4% refunds of the purchase before,
// 70% with a unique ECR reference, ids time-sortable like the service's.
// The data are the same on every run (a fixed seed).
func seedBench(b testing.TB, db *sqlstore.DB, driver, dsn string, n int) *benchFixture {
	b.Helper()
	ctx := context.Background()
	created := benchEnd.Add(-benchDays * 24 * time.Hour)
	if err := db.CreateCustomer(ctx, &instore.Customer{ID: "cus_bench", Name: "Bench", CreatedAt: created}); err != nil {
		b.Fatal(err)
	}
	if err := db.CreateMerchant(ctx, &instore.Merchant{ID: "mer_bench", CustomerID: "cus_bench", Name: "Bench", Active: true, CreatedAt: created}); err != nil {
		b.Fatal(err)
	}
	fx := &benchFixture{}
	for range benchTerminals {
		t := &instore.Terminal{CustomerID: "cus_bench", MerchantID: "mer_bench", CreatedAt: created}
		if err := db.AllocateTerminalID(ctx, t); err != nil {
			b.Fatal(err)
		}
		fx.Terminals = append(fx.Terminals, t.TerminalID)
	}

	rng := rand.New(rand.NewPCG(1, 2))
	span := int64(benchDays * 24 * time.Hour / time.Microsecond)
	startUS := benchEnd.UnixMicro() - span
	deepAt := benchEnd.Add(-instore.MaxListRange / 2).UnixMicro()
	ecrAt := benchEnd.Add(-instore.MaxListRange / 3).UnixMicro()
	var lastPurchase string
	i := 0
	next := func() ([]any, error) {
		if i == n {
			return nil, nil
		}
		// Evenly spread and increasing, with jitter.
		// i*span/n in 128 bits: i*span overflows 64 from 1,186,000 on.
		hi, lo := bits.Mul64(uint64(i), uint64(span))
		q, _ := bits.Div64(hi, lo, uint64(n))
		at := startUS + int64(q) + rng.Int64N(span/int64(n))
		var id [16]byte
		binary.BigEndian.PutUint64(id[:8], uint64(at/1000)<<16|0x7000|uint64(rng.IntN(0x1000)))
		binary.BigEndian.PutUint64(id[8:], rng.Uint64()&^(3<<62)|1<<63)
		txnID := "txn_" + hex.EncodeToString(id[:])
		term := rng.IntN(benchTerminals)

		status, errorID := instore.StatusApproved, any(nil)
		switch r := rng.IntN(100); {
		case r < 5:
			status = instore.StatusTransactionDeclined
		case r < 8:
			status = instore.StatusAbortedByCardholder
		case r < 10:
			status = instore.StatusWrongPIN
		case r < 11:
			status, errorID = instore.StatusTechnicalError, 36
		case r < 12:
			status = instore.StatusReversed
		}
		typ, original := instore.TypePurchase, any(nil)
		if lastPurchase != "" && rng.IntN(100) < 4 {
			typ, original = instore.TypeRefund, lastPurchase
		} else if status == instore.StatusApproved || status == instore.StatusReversed {
			lastPurchase = txnID
		}
		var ecr any
		if rng.IntN(100) < 70 {
			ecr = fmt.Sprintf("POS-%d-%08d", term, i)
		}
		var result, resultMessageID any
		if status == instore.StatusApproved {
			result, resultMessageID = benchResult, fmt.Sprintf("msg-%d", i)
		}
		if at <= deepAt {
			fx.Deep = instore.TransactionCursor{CreatedAt: time.UnixMicro(at).UTC(), ID: txnID}
		}
		if fx.ECRReference == "" && at >= ecrAt && ecr != nil {
			fx.ECRReference = ecr.(string)
		}
		if i%max(1, n/1000) == 0 {
			fx.IDs = append(fx.IDs, txnID)
		}
		i++
		return []any{
			txnID, "mer_bench", fx.Terminals[term], fmt.Sprintf("SN-%d", term), typ, int64(100 + rng.IntN(100000)),
			int64(0), int64(rng.IntN(2000)), "SEK", int64(rng.IntN(3)), ecr, rng.IntN(2) == 0, int64(status),
			errorID, instore.ProgressFinal, int64(3), original, result, resultMessageID, true, at,
			at + 800_000, at + 60_000_000, at + 9_000_000,
		}, nil
	}

	if driver == "pgx" {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close(ctx)
		if _, err := conn.CopyFrom(ctx, pgx.Identifier{"transactions"}, benchColumns, pgx.CopyFromFunc(next)); err != nil {
			b.Fatalf("copy transactions: %v", err)
		}
		if _, err := conn.Exec(ctx, "VACUUM ANALYZE transactions"); err != nil {
			b.Fatal(err)
		}
		return fx
	}

	// In transactions of 200,000 rows: one of 10,000,000 would grow the
	// WAL to the database's size before its checkpoint.
	raw := rawOpen(b, driver, dsn)
	insert := "INSERT INTO transactions (" + strings.Join(benchColumns, ", ") +
		") VALUES (?" + strings.Repeat(", ?", len(benchColumns)-1) + ")"
	for more := true; more; {
		tx, err := raw.BeginTx(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		stmt, err := tx.PrepareContext(ctx, insert)
		if err != nil {
			b.Fatal(err)
		}
		for range 200_000 {
			row, err := next()
			if err != nil {
				b.Fatal(err)
			}
			if more = row != nil; !more {
				break
			}
			if _, err := stmt.ExecContext(ctx, row...); err != nil {
				b.Fatalf("insert transaction: %v", err)
			}
		}
		stmt.Close()
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	return fx
}

// TestListTransactionsPlan checks that every filter combination, with and
// without a cursor, reads one range of one index backwards, with no sort:
// on SQLite the index listIndex names; on PostgreSQL (with statistics, over
// a few thousand transactions) an Index Scan Backward.
func TestListTransactionsPlan(t *testing.T) {
	forEachSeeded(t, 5000, func(t *testing.T, be backend, db *sqlstore.DB, fx *benchFixture) {
		month := benchEnd.Add(-instore.MaxListRange)
		for i := range 16 {
			f := instore.TransactionFilter{MerchantID: "mer_bench", From: month, To: benchEnd, Limit: instore.DefaultListLimit}
			var want []string
			if i&1 != 0 {
				f.TerminalID = fx.Terminals[3]
				want = append(want, "terminal_id=?")
			}
			if i&2 != 0 {
				f.StatusID = ptr(instore.StatusTransactionDeclined)
				want = append(want, "status_id=?")
			}
			if i&4 != 0 {
				f.ECRReference = fx.ECRReference
				want = []string{"ecr_reference=?"}
			}
			if i&8 != 0 {
				f.After = &fx.Deep
			}
			plan, text := explainList(t, db, f)
			name := fmt.Sprintf("terminal %v, status %v, ECR reference %v, cursor %v", i&1 != 0, i&2 != 0, i&4 != 0, i&8 != 0)
			switch be.name {
			case "sqlite":
				// One step, a search of the index by merchant, the
				// filtered columns and created_at, walked backwards
				// (Prev) and never sorted.
				prefix := "SEARCH transactions USING INDEX transactions_merchant_"
				cols := "(merchant_id=? AND " + strings.Join(append(want, "created_at>? AND created_at<?)"), " AND ")
				if len(plan) != 2 || !strings.HasPrefix(plan[0], prefix) || !strings.HasSuffix(plan[0], cols) ||
					!strings.Contains(plan[1], "Prev") || strings.Contains(plan[1], "Next") ||
					strings.Contains(plan[1], "Sorter") || strings.Contains(plan[1], "OpenEphemeral") {
					t.Errorf("%s: plan\n%s\nwant one backward search %s... %s and no sort", name, text, prefix, cols)
				}
			default:
				if !strings.Contains(text, "Index Scan Backward using transactions_merchant_") ||
					strings.Contains(text, "Sort") || strings.Contains(text, "Seq Scan") || strings.Contains(text, "Bitmap") {
					t.Errorf("%s: plan\n%s\nwant an Index Scan Backward and no sort", name, text)
				}
			}
		}
	})
}

// forEachSeeded runs test on each backend (backends) over a fresh store
// that seedBench filled with n transactions: the tests of a query's plan.
func forEachSeeded(t *testing.T, n int, test func(t *testing.T, be backend, db *sqlstore.DB, fx *benchFixture)) {
	forEachBackend(t, func(t *testing.T, be backend) {
		dsn := be.dsn(t)
		db := mustOpen(t, dsn, sqlstore.Options{})
		test(t, be, db, seedBench(t, db, be.driver, dsn, n))
	})
}

// explainList returns the plan of ListTransactions(f)
// (ExplainListTransactions), and its lines joined for a message.
func explainList(t *testing.T, db *sqlstore.DB, f instore.TransactionFilter) (plan []string, text string) {
	t.Helper()
	plan, err := db.ExplainListTransactions(t.Context(), f)
	return plan, explained(t)(plan, err)
}

// explained returns the function that joins the lines of a plan (one of
// the store's Explain...) for a message, failing t if the EXPLAIN failed.
func explained(t *testing.T) func(plan []string, err error) string {
	return func(plan []string, err error) string {
		t.Helper()
		if err != nil {
			t.Fatalf("explain: %v", err)
		}
		return strings.Join(plan, "\n")
	}
}
