package sqlstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/sqlstore"
)

// BenchmarkRecordAttempts measures the dispatcher's write of one round of
// an endpoint's attempts (RecordAttempts: the attempts, the deliveries'
// ends, the endpoint's health), on each backend: a round of 16 successes
// of an endpoint that is not failing (the common round), and a round whose
// last attempt fails (its health changes).
//
//	go test -run='^$' -bench=BenchmarkRecordAttempts -benchmem ./internal/sqlstore/
func BenchmarkRecordAttempts(b *testing.B) {
	for _, be := range backends(b) {
		b.Run(be.name, func(b *testing.B) {
			db := mustOpen(b, be.dsn(b), sqlstore.Options{})
			ctx := context.Background()
			at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
			must(b, db.CreateCustomer(ctx, &instore.Customer{ID: "cus_1", Name: "c", CreatedAt: at}))
			must(b, db.CreateMerchant(ctx, &instore.Merchant{ID: "mer_1", CustomerID: "cus_1", Name: "m", Active: true, CreatedAt: at}))
			must(b, db.CreateWebhook(ctx, &instore.Webhook{ID: "whk_1", MerchantID: "mer_1", URL: "https://example.com/h",
				Status: instore.WebhookEnabled, Secret: "whsec_x", CreatedAt: at, Concurrency: 16}, 16))
			evs := make([]instore.OutboxEvent, 16)
			for i := range evs {
				evs[i] = instore.OutboxEvent{MerchantID: "mer_1", Type: instore.EventTerminalOnline, At: at, Data: []byte(`{}`)}
			}
			must(b, db.AppendEvents(ctx, evs))
			if _, err := db.SequenceEvents(ctx, 100); err != nil {
				b.Fatal(err)
			}
			now := at.Add(time.Minute)
			due, err := db.ClaimDeliveries(ctx, now, now.Add(time.Hour), instore.ClaimQuota{Limit: 16, Run: 16})
			must(b, err)
			if len(due) == 0 {
				b.Fatal("no delivery claimed")
			}
			round := func(failLast bool) []instore.AttemptRecord {
				rs := make([]instore.AttemptRecord, len(due))
				for i, d := range due {
					o := &instore.AttemptOutcome{Succeeded: true, Attempt: instore.WebhookAttempt{N: 1, At: now, StatusCode: 204}}
					if failLast && i == len(due)-1 {
						o = &instore.AttemptOutcome{NextAt: now.Add(time.Minute), DisableBefore: now.Add(-120 * time.Hour),
							DisableReason: "failing", Attempt: instore.WebhookAttempt{N: 1, At: now, StatusCode: 500}}
					}
					rs[i] = instore.AttemptRecord{Delivery: d, Outcome: o}
				}
				return rs
			}
			for _, c := range []struct {
				name     string
				failLast bool
			}{{"successes", false}, {"last fails", true}} {
				rs := round(c.failLast)
				b.Run(c.name, func(b *testing.B) {
					b.ReportAllocs()
					for b.Loop() {
						if err := db.RecordAttempts(ctx, rs); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		})
	}
}
