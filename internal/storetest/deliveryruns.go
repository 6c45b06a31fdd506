package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/instore-dev/instore"
)

// deliveryRunTests: a claim leases an endpoint's head with the due
// deliveries behind it (a run), in order, to one caller; the run is
// recorded in one call: what succeeded ends, a failure waits for its
// retry and the deliveries behind it wait for it (in order per endpoint),
// the endpoint's failing time follows the attempts in their order; a run
// whose holder died (never recorded) is claimed again after its lease.
var deliveryRunTests = []test{
	{"ClaimAndRecordRuns", func(t *testing.T, s instore.Store) {
		ctx := t.Context()
		mustCreateCustomer(t, s, "cus_1", at(0))
		mustCreateMerchant(t, s, "mer_1", "cus_1", at(0))
		for _, id := range []string{"whk_1", "whk_2"} {
			must(t, s.CreateWebhook(ctx, &instore.Webhook{ID: id, MerchantID: "mer_1", URL: "https://example.com/" + id,
				Status: instore.WebhookEnabled, Secret: "whsec_x", CreatedAt: at(0)}, 16))
		}
		var evs []instore.OutboxEvent
		for range 10 {
			evs = append(evs, instore.OutboxEvent{MerchantID: "mer_1", Type: instore.EventTerminalOnline, At: at(1), Data: []byte(`{}`)})
		}
		must(t, s.AppendEvents(ctx, evs))
		if _, err := s.SequenceEvents(ctx, 100); err != nil {
			t.Fatal(err)
		}
		all, err := s.ListEvents(ctx, instore.EventFilter{MerchantID: "mer_1", Limit: 100})
		must(t, err)
		seqs := func(run []*instore.DueDelivery, webhookID string) []int64 {
			var out []int64
			for _, d := range run {
				if d.Webhook.ID == webhookID {
					out = append(out, d.Event.Seq)
				}
			}
			return out
		}
		want := func(from, to int) []int64 {
			var out []int64
			for _, e := range all[from:to] {
				out = append(out, e.Seq)
			}
			return out
		}
		now := at(10)
		q := instore.ClaimQuota{Limit: 10, Run: 4}
		due, err := s.ClaimDeliveries(ctx, now, now.Add(time.Minute), q)
		must(t, err)
		if d := diff(want(0, 4), seqs(due, "whk_1")); d != "" {
			t.Fatalf("whk_1's run (-want +got):\n%s", d)
		}
		if d := diff(want(0, 4), seqs(due, "whk_2")); d != "" {
			t.Fatalf("whk_2's run (-want +got):\n%s", d)
		}
		for i := 1; i < len(due); i++ {
			if due[i].Webhook.ID == due[i-1].Webhook.ID && due[i].Event.Seq <= due[i-1].Event.Seq {
				t.Fatalf("a run out of order: %d after %d", due[i].Event.Seq, due[i-1].Event.Seq)
			}
		}
		// Leased: another node gets nothing of either endpoint.
		if again, err := s.ClaimDeliveries(ctx, now, now.Add(time.Minute), q); err != nil || len(again) != 0 {
			t.Fatalf("claimed again while leased: %d, %v", len(again), err)
		}
		// whk_1: two succeed, the third fails (retried at 20), the fourth
		// is given back unsent.
		var r1, r2 []*instore.DueDelivery
		for _, d := range due {
			if d.Webhook.ID == "whk_1" {
				r1 = append(r1, d)
			} else {
				r2 = append(r2, d)
			}
		}
		ok := func(d *instore.DueDelivery, at time.Time) instore.AttemptRecord {
			return instore.AttemptRecord{Delivery: d, Outcome: &instore.AttemptOutcome{Succeeded: true,
				Attempt: instore.WebhookAttempt{N: d.Attempts + 1, At: at, StatusCode: 204}}}
		}
		retry := instore.AttemptRecord{Delivery: r1[2], Outcome: &instore.AttemptOutcome{NextAt: at(20),
			DisableBefore: at(-1), DisableReason: "failing", Attempt: instore.WebhookAttempt{N: 1, At: now, StatusCode: 500}}}
		must(t, s.RecordAttempts(ctx, []instore.AttemptRecord{ok(r1[0], now), ok(r1[1], now), retry, {Delivery: r1[3]}}))
		w, err := s.Webhook(ctx, "mer_1", "whk_1")
		must(t, err)
		if w.FailingSince == nil || !w.FailingSince.Equal(now.Truncate(time.Microsecond)) || w.Status != instore.WebhookEnabled {
			t.Fatalf("whk_1 after a failure: failing since %v, %s; want %v, enabled", w.FailingSince, w.Status, now)
		}
		// whk_2: its whole run succeeds.
		must(t, s.RecordAttempts(ctx, []instore.AttemptRecord{ok(r2[0], now), ok(r2[1], now), ok(r2[2], now), ok(r2[3], now)}))
		due, err = s.ClaimDeliveries(ctx, now, now.Add(time.Minute), q)
		must(t, err)
		if len(seqs(due, "whk_1")) != 0 {
			t.Fatalf("whk_1 claimed %v before its failed head's retry is due", seqs(due, "whk_1"))
		}
		if d := diff(want(4, 8), seqs(due, "whk_2")); d != "" {
			t.Fatalf("whk_2's second run (-want +got):\n%s", d)
		}
		// whk_2's holder dies: after the lease, the same run again.
		later := now.Add(2 * time.Minute)
		due, err = s.ClaimDeliveries(ctx, later, later.Add(time.Minute), q)
		must(t, err)
		if d := diff(want(4, 8), seqs(due, "whk_2")); d != "" {
			t.Fatalf("whk_2's run after its lease (-want +got):\n%s", d)
		}
		// whk_1's retry is due: the run starts at the failed delivery.
		retryAt := at(20)
		due, err = s.ClaimDeliveries(ctx, retryAt, retryAt.Add(time.Minute), q)
		must(t, err)
		if d := diff(want(2, 6), seqs(due, "whk_1")); d != "" {
			t.Fatalf("whk_1's run at its retry (-want +got):\n%s", d)
		}
		for _, d := range due {
			if d.Webhook.ID == "whk_1" && d.Event.Seq == all[2].Seq && d.Attempts != 1 {
				t.Fatalf("the retried delivery has %d attempts, want 1", d.Attempts)
			}
		}
		r1 = nil
		for _, d := range due {
			if d.Webhook.ID == "whk_1" {
				r1 = append(r1, d)
			}
		}
		must(t, s.RecordAttempts(ctx, []instore.AttemptRecord{ok(r1[0], retryAt), ok(r1[1], retryAt)}))
		w, err = s.Webhook(ctx, "mer_1", "whk_1")
		must(t, err)
		if w.FailingSince != nil {
			t.Fatalf("whk_1 after a success: failing since %v", w.FailingSince)
		}
		page, err := s.WebhookDeliveries(ctx, "whk_1", 0, 100)
		must(t, err)
		states := map[int64]string{}
		for _, d := range page {
			states[d.EventSeq] = fmt.Sprintf("%s/%d", d.Status, len(d.Attempts))
		}
		wantStates := map[int64]string{all[0].Seq: "succeeded/1", all[1].Seq: "succeeded/1", all[2].Seq: "succeeded/2",
			all[3].Seq: "succeeded/1", all[4].Seq: "pending/0", all[5].Seq: "pending/0"}
		for seq, st := range wantStates {
			if states[seq] != st {
				t.Errorf("whk_1's delivery of event %d: %s, want %s", seq, states[seq], st)
			}
		}
		// What was given back unrecorded (r1[2], r1[3] of the last run)
		// is claimable at once.
		must(t, s.RecordAttempts(ctx, []instore.AttemptRecord{{Delivery: r1[2]}, {Delivery: r1[3]}}))
		due, err = s.ClaimDeliveries(ctx, retryAt, retryAt.Add(time.Minute), q)
		must(t, err)
		if d := diff(want(4, 8), seqs(due, "whk_1")); d != "" {
			t.Fatalf("whk_1 after its run was given back (-want +got):\n%s", d)
		}
	}},
	// An endpoint's concurrency is stored (1 when unset) and changed,
	// and comes with its claimed runs; a run of lanes (several in flight)
	// may record a later delivery succeeded behind an earlier one to be
	// retried: the later one is done, the earlier one heads the queue
	// until its retry is due, and then its run starts at it, without the
	// one done.
	{"ConcurrencyAndLanes", func(t *testing.T, s instore.Store) {
		ctx := t.Context()
		mustCreateCustomer(t, s, "cus_1", at(0))
		mustCreateMerchant(t, s, "mer_1", "cus_1", at(0))
		must(t, s.CreateWebhook(ctx, &instore.Webhook{ID: "whk_0", MerchantID: "mer_1", URL: "https://example.com/0",
			Status: instore.WebhookEnabled, Secret: "whsec_x", CreatedAt: at(0)}, 16))
		must(t, s.CreateWebhook(ctx, &instore.Webhook{ID: "whk_4", MerchantID: "mer_1", URL: "https://example.com/4",
			Status: instore.WebhookEnabled, Secret: "whsec_x", CreatedAt: at(0), Concurrency: 4}, 16))
		for id, want := range map[string]int{"whk_0": 1, "whk_4": 4} {
			w, err := s.Webhook(ctx, "mer_1", id)
			must(t, err)
			if w.Concurrency != want {
				t.Fatalf("%s: concurrency %d, want %d", id, w.Concurrency, want)
			}
		}
		_, err := s.ChangeWebhook(ctx, "mer_1", "whk_0", func(w *instore.Webhook) error {
			w.Concurrency, w.Status = 16, instore.WebhookDisabled
			return nil
		})
		must(t, err)
		if w, err := s.Webhook(ctx, "mer_1", "whk_0"); err != nil || w.Concurrency != 16 {
			t.Fatalf("whk_0 after its update: %+v, %v; want concurrency 16", w, err)
		}
		var evs []instore.OutboxEvent
		for i := range 4 {
			evs = append(evs, instore.OutboxEvent{MerchantID: "mer_1", Type: instore.EventTerminalOnline, At: at(1),
				TerminalID: []string{"T1", "T2"}[i%2], Data: []byte(`{}`)})
		}
		must(t, s.AppendEvents(ctx, evs))
		if _, err := s.SequenceEvents(ctx, 100); err != nil {
			t.Fatal(err)
		}
		now := at(10)
		// Run 1, concurrency 4: a run of 4 (ClaimQuota.RunOf).
		q := instore.ClaimQuota{Limit: 10, Run: 1}
		due, err := s.ClaimDeliveries(ctx, now, now.Add(time.Minute), q)
		must(t, err)
		if len(due) != 4 || due[0].Webhook.Concurrency != 4 || due[0].Event.TerminalID != "T1" || due[1].Event.TerminalID != "T2" {
			t.Fatalf("claimed %d deliveries (first %+v), want whk_4's four with its concurrency and terminals", len(due), due[0])
		}
		// T1's first fails, T2's first succeeds meanwhile; the rest unsent.
		retry := instore.AttemptRecord{Delivery: due[0], Outcome: &instore.AttemptOutcome{NextAt: at(20),
			DisableBefore: at(-1), DisableReason: "failing", Attempt: instore.WebhookAttempt{N: 1, At: now, StatusCode: 500}}}
		okT2 := instore.AttemptRecord{Delivery: due[1], Outcome: &instore.AttemptOutcome{Succeeded: true,
			Attempt: instore.WebhookAttempt{N: 1, At: now, StatusCode: 204}}}
		must(t, s.RecordAttempts(ctx, []instore.AttemptRecord{retry, okT2, {Delivery: due[2]}, {Delivery: due[3]}}))
		if again, err := s.ClaimDeliveries(ctx, now, now.Add(time.Minute), q); err != nil || len(again) != 0 {
			t.Fatalf("claimed %d before the head's retry is due (%v)", len(again), err)
		}
		due2, err := s.ClaimDeliveries(ctx, at(20), at(20).Add(time.Minute), q)
		must(t, err)
		var got []int64
		for _, d := range due2 {
			got = append(got, d.Event.Seq)
		}
		if d := diff([]int64{due[0].Event.Seq, due[2].Event.Seq, due[3].Event.Seq}, got); d != "" {
			t.Fatalf("the run at the retry (-want +got):\n%s", d)
		}
		if due2[0].Attempts != 1 {
			t.Fatalf("the retried delivery has %d attempts, want 1", due2[0].Attempts)
		}
	}},
}
