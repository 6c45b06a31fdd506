package sqlstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/sqlstore"
)

// TestClaimToleratesOddDeliveries: a delivery the release before made when
// the event was numbered (a node not yet upgraded) does not stop the fill
// of its endpoint, let alone the others'; a pending delivery whose event
// is gone (expired while it was made) is given up instead of heading its
// endpoint's queue for ever.
func TestClaimToleratesOddDeliveries(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend) {
		db := mustOpen(t, be.dsn(t), sqlstore.Options{})
		ctx := context.Background()
		at := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
		must(t, db.CreateCustomer(ctx, &instore.Customer{ID: "cus_1", Name: "c", CreatedAt: at}))
		for _, m := range []string{"mer_1", "mer_2"} {
			must(t, db.CreateMerchant(ctx, &instore.Merchant{ID: m, CustomerID: "cus_1", Name: m, Active: true, CreatedAt: at}))
			must(t, db.CreateWebhook(ctx, &instore.Webhook{ID: "whk_" + m, MerchantID: m, URL: "https://example.com/" + m,
				Status: instore.WebhookEnabled, Secret: "whsec_x", CreatedAt: at}, 16))
		}
		var evs []instore.OutboxEvent
		for i := range 6 {
			evs = append(evs, instore.OutboxEvent{MerchantID: []string{"mer_1", "mer_2"}[i%2], Type: instore.EventTerminalOnline,
				At: at, Data: []byte(`{}`)})
		}
		must(t, db.AppendEvents(ctx, evs))
		if _, err := db.SequenceEvents(ctx, 100); err != nil {
			t.Fatal(err)
		}
		first, err := db.ListEvents(ctx, instore.EventFilter{MerchantID: "mer_1", Limit: 10})
		must(t, err)
		// The old release's row for mer_1's first event, and a pending
		// delivery of mer_2 whose event does not exist.
		must(t, db.ExecForTest(ctx, `INSERT INTO webhook_deliveries (webhook_id, event_seq, status, attempts, next_at, created_at)
			VALUES ('whk_mer_1', ?, 'pending', 0, 0, 0)`, first[0].Seq))
		must(t, db.ExecForTest(ctx, `INSERT INTO webhook_deliveries (webhook_id, event_seq, status, attempts, next_at, created_at)
			VALUES ('whk_mer_2', 0, 'pending', 0, 0, 0)`))
		now := at.Add(time.Minute)
		heads := map[string]int64{}
		for range 3 {
			due, err := db.ClaimDeliveries(ctx, now, now.Add(time.Minute), instore.ClaimQuota{Limit: 10})
			must(t, err)
			for _, d := range due {
				if _, ok := heads[d.Webhook.ID]; !ok {
					heads[d.Webhook.ID] = d.Event.Seq
				}
			}
			now = now.Add(2 * time.Minute) // past the leases
		}
		second, err := db.ListEvents(ctx, instore.EventFilter{MerchantID: "mer_2", Limit: 10})
		must(t, err)
		if heads["whk_mer_1"] != first[0].Seq || heads["whk_mer_2"] != second[0].Seq {
			t.Errorf("heads claimed %v, want whk_mer_1 at %d and whk_mer_2 at %d", heads, first[0].Seq, second[0].Seq)
		}
		ds, err := db.WebhookDeliveries(ctx, "whk_mer_2", 0, 10)
		must(t, err)
		for _, d := range ds {
			if d.EventSeq == 0 && d.Status != instore.DeliveryFailed {
				t.Errorf("the delivery without its event is %s, want failed", d.Status)
			}
		}
		if n, _ := db.WebhookDeliveries(ctx, "whk_mer_1", 0, 10); len(n) != 3 {
			t.Errorf("whk_mer_1 has %d deliveries, want 3 (its three events, once each)", len(n))
		}
	})
}
