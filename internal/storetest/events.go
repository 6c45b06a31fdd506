package storetest

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/instore-dev/instore"
)

var eventTests = []test{
	{"WrittenWithTheirWrite", func(t *testing.T, s instore.Store) {
		// The events of a write that is no transaction's are passed with
		// it: stored when it commits, not when it is refused.
		ctx := t.Context()
		a := seed(t, s)
		ev := func(typ instore.EventType, i int) instore.OutboxEvent {
			return instore.OutboxEvent{MerchantID: "mer_1", Type: typ, TerminalID: a, At: at(i), Data: []byte(`{}`)}
		}
		must(t, s.DevicesSeen(ctx, seenOne("SN-1", "1.0.0", at(1), ev(instore.EventTerminalOnline, 1))))
		mustCreateTransaction(t, s, newTransaction("txn_1", "mer_1", a, "SN-1", instore.StatusPending, at(2)))
		if _, err := s.UnlinkTerminal(ctx, a, ev(instore.EventTerminalUnlinked, 3)); !errors.Is(err, instore.ErrConflict) {
			t.Fatalf("UnlinkTerminal(a PENDING transaction) = %v, want ErrConflict", err)
		}
		if _, err := s.SequenceEvents(ctx, 100); err != nil {
			t.Fatal(err)
		}
		l, err := s.ListEvents(ctx, instore.EventFilter{MerchantID: "mer_1", Limit: 10})
		if err != nil || len(l) != 1 || l[0].Type != instore.EventTerminalOnline || l[0].TerminalID != a {
			t.Errorf("ListEvents = %+v, %v; want the hello's terminal.online only", l, err)
		}
	}},
	{"ManyInOneWrite", func(t *testing.T, s instore.Store) {
		// A write of many events (a batch of hellos) keeps their order:
		// 341 of them, more than one statement's worth of every size.
		ctx := t.Context()
		var evs []instore.OutboxEvent
		for i := range 341 {
			evs = append(evs, instore.OutboxEvent{MerchantID: "mer_1", Type: instore.EventTerminalOnline,
				TerminalID: fmt.Sprintf("1%07d", i), At: at(1), Data: []byte(`{}`)})
		}
		must(t, s.AppendEvents(ctx, evs))
		if _, err := s.SequenceEvents(ctx, 1000); err != nil {
			t.Fatal(err)
		}
		all, err := s.ListEvents(ctx, instore.EventFilter{MerchantID: "mer_1", Limit: 500})
		if err != nil || len(all) != len(evs) {
			t.Fatalf("ListEvents = %d events, %v; want %d", len(all), err, len(evs))
		}
		for i, e := range all {
			if e.TerminalID != evs[i].TerminalID {
				t.Fatalf("event %d is of terminal %s, want %s: out of the order written", i, e.TerminalID, evs[i].TerminalID)
			}
		}
	}},
	{"SequenceAndList", func(t *testing.T, s instore.Store) {
		// Appended events are numbered in order, listed oldest first per
		// merchant after a number, filtered by type and terminal ID.
		ctx := t.Context()
		ev := func(merchant string, typ instore.EventType, terminal string, i int) instore.OutboxEvent {
			return instore.OutboxEvent{MerchantID: merchant, Type: typ, TerminalID: terminal, At: at(i), Data: []byte(`{"i":1}`)}
		}
		must(t, s.AppendEvents(ctx, []instore.OutboxEvent{
			ev("mer_1", instore.EventTerminalOnline, "10000001", 1),
			ev("mer_2", instore.EventTerminalOnline, "20000001", 2),
			ev("mer_1", instore.EventTerminalOffline, "10000002", 3),
		}))
		if _, err := s.ListEvents(ctx, instore.EventFilter{MerchantID: "mer_1", Limit: 10}); err != nil {
			t.Fatal(err)
		}
		n, err := s.SequenceEvents(ctx, 100)
		if err != nil || n != 3 {
			t.Fatalf("SequenceEvents = %d, %v; want 3", n, err)
		}
		if n, err := s.SequenceEvents(ctx, 100); err != nil || n != 0 {
			t.Fatalf("SequenceEvents again = %d, %v; want 0", n, err)
		}
		all, err := s.ListEvents(ctx, instore.EventFilter{MerchantID: "mer_1", Limit: 10})
		if err != nil || len(all) != 2 || all[0].Seq >= all[1].Seq || all[0].Type != instore.EventTerminalOnline ||
			!all[0].At.Equal(stored(at(1))) || string(all[0].Data) != `{"i":1}` {
			t.Fatalf("ListEvents(mer_1) = %+v, %v", all, err)
		}
		if l, _ := s.ListEvents(ctx, instore.EventFilter{MerchantID: "mer_1", After: all[0].Seq, Limit: 10}); len(l) != 1 || l[0].Seq != all[1].Seq {
			t.Errorf("ListEvents(after the first) = %+v", l)
		}
		if l, _ := s.ListEvents(ctx, instore.EventFilter{MerchantID: "mer_1", Types: []instore.EventType{instore.EventTerminalOffline}, Limit: 10}); len(l) != 1 || l[0].TerminalID != "10000002" {
			t.Errorf("ListEvents(offline) = %+v", l)
		}
		if l, _ := s.ListEvents(ctx, instore.EventFilter{MerchantID: "mer_1", TerminalID: "10000001", Limit: 10}); len(l) != 1 || l[0].Seq != all[0].Seq {
			t.Errorf("ListEvents(terminal) = %+v", l)
		}
		if last, err := s.LastEventSeq(ctx, "mer_1"); err != nil || last != all[1].Seq {
			t.Errorf("LastEventSeq(mer_1) = %d, %v; want %d", last, err, all[1].Seq)
		}
	}},
	{"Expire", func(t *testing.T, s instore.Store) {
		// Old events go, except one still owed to a webhook and the newest
		// of all, after which numbering goes on: a number is never given
		// twice, even when every event has expired.
		ctx := t.Context()
		mustCreateCustomer(t, s, "cus_1", at(0))
		mustCreateMerchant(t, s, "mer_1", "cus_1", at(0))
		must(t, s.CreateWebhook(ctx, &instore.Webhook{ID: "whk_1", MerchantID: "mer_1", URL: "https://example.com/h",
			EventTypes: []instore.EventType{instore.EventTerminalLinked}, Status: instore.WebhookEnabled, Secret: "whsec_x", CreatedAt: at(0)}, 16))
		ev := func(typ instore.EventType, i int) instore.OutboxEvent {
			return instore.OutboxEvent{MerchantID: "mer_1", Type: typ, At: at(i), Data: []byte(`{}`)}
		}
		must(t, s.AppendEvents(ctx, []instore.OutboxEvent{ev(instore.EventTerminalOnline, 1), ev(instore.EventTerminalLinked, 2),
			ev(instore.EventTerminalOnline, 3), ev(instore.EventTerminalOnline, 4)}))
		if _, err := s.SequenceEvents(ctx, 100); err != nil {
			t.Fatal(err)
		}
		before, _ := s.ListEvents(ctx, instore.EventFilter{MerchantID: "mer_1", Limit: 10})
		if len(before) != 4 {
			t.Fatalf("events %+v", before)
		}
		// The endpoint is given its delivery (the linked event) and passes
		// the others: it holds no event but the one it is owed.
		if _, err := s.ClaimDeliveries(ctx, at(10), at(11), instore.ClaimQuota{Limit: 10}); err != nil {
			t.Fatal(err)
		}
		n, err := s.ExpireEvents(ctx, at(10))
		if err != nil || n != 2 {
			t.Fatalf("ExpireEvents = %d, %v; want 2 (the delivery's event and the newest kept)", n, err)
		}
		kept, _ := s.ListEvents(ctx, instore.EventFilter{MerchantID: "mer_1", Limit: 10})
		if len(kept) != 2 || kept[0].Seq != before[1].Seq || kept[1].Seq != before[3].Seq {
			t.Fatalf("kept %+v, want the linked event (a delivery is pending) and the newest", kept)
		}
		must(t, s.AppendEvents(ctx, []instore.OutboxEvent{ev(instore.EventTerminalOffline, 11)}))
		if _, err := s.SequenceEvents(ctx, 100); err != nil {
			t.Fatal(err)
		}
		next, _ := s.ListEvents(ctx, instore.EventFilter{MerchantID: "mer_1", After: before[3].Seq, Limit: 10})
		if len(next) != 1 || next[0].Seq <= before[3].Seq {
			t.Fatalf("after the expiry: %+v, want one event numbered after %d", next, before[3].Seq)
		}
	}},
}

// deliveryTests: an endpoint is given the deliveries of the events it
// wants, in number order, a bounded number ahead of the one sent, as the
// dispatcher claims; it holds the events it has yet to be given (expiry
// keeps them); a disabled endpoint is given nothing and, enabled again,
// resumes where it stopped; a new endpoint starts with the events
// numbered after its creation.
var deliveryTests = []test{
	{"FillAndClaim", func(t *testing.T, s instore.Store) {
		ctx := t.Context()
		mustCreateCustomer(t, s, "cus_1", at(0))
		mustCreateMerchant(t, s, "mer_1", "cus_1", at(0))
		mustCreateMerchant(t, s, "mer_2", "cus_1", at(0))
		ev := func(m string, typ instore.EventType, i int) instore.OutboxEvent {
			return instore.OutboxEvent{MerchantID: m, Type: typ, At: at(i), Data: []byte(`{}`)}
		}
		must(t, s.AppendEvents(ctx, []instore.OutboxEvent{ev("mer_1", instore.EventTerminalOnline, 1)}))
		if _, err := s.SequenceEvents(ctx, 100); err != nil {
			t.Fatal(err)
		}
		must(t, s.CreateWebhook(ctx, &instore.Webhook{ID: "whk_1", MerchantID: "mer_1", URL: "https://example.com/h",
			EventTypes: []instore.EventType{instore.EventTerminalOffline}, Status: instore.WebhookEnabled, Secret: "whsec_x", CreatedAt: at(0)}, 16))
		// 100 events after its creation: every third an offline of mer_1
		// (wanted), the others an online of mer_1 or an offline of mer_2.
		var evs []instore.OutboxEvent
		var wanted int
		for i := range 100 {
			switch i % 3 {
			case 0:
				evs = append(evs, ev("mer_1", instore.EventTerminalOffline, 2))
				wanted++
			case 1:
				evs = append(evs, ev("mer_1", instore.EventTerminalOnline, 2))
			default:
				evs = append(evs, ev("mer_2", instore.EventTerminalOffline, 2))
			}
		}
		must(t, s.AppendEvents(ctx, evs))
		if _, err := s.SequenceEvents(ctx, 1000); err != nil {
			t.Fatal(err)
		}
		all, _ := s.ListEvents(ctx, instore.EventFilter{MerchantID: "mer_1", Types: []instore.EventType{instore.EventTerminalOffline}, Limit: 500})
		if len(all) != wanted {
			t.Fatalf("%d wanted events listed, want %d", len(all), wanted)
		}
		var sent []int64
		now := at(10)
		for round := 0; len(sent) < wanted && round < 200; round++ {
			due, err := s.ClaimDeliveries(ctx, now, now.Add(time.Minute), instore.ClaimQuota{Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			if len(due) != 1 {
				t.Fatalf("round %d: %d deliveries claimed, want the endpoint's head", round, len(due))
			}
			d := due[0]
			page, err := s.WebhookDeliveries(ctx, "whk_1", 0, 500)
			if err != nil {
				t.Fatal(err)
			}
			pending := 0
			for _, x := range page {
				if x.Status == instore.DeliveryPending {
					pending++
				}
			}
			if pending > 512 || pending == 0 {
				t.Fatalf("round %d: %d pending deliveries, want 1-512", round, pending)
			}
			sent = append(sent, d.Event.Seq)
			must(t, s.RecordAttempts(ctx, []instore.AttemptRecord{{Delivery: d, Outcome: &instore.AttemptOutcome{Succeeded: true,
				Attempt: instore.WebhookAttempt{At: now, StatusCode: 204}}}}))
		}
		for i, e := range all {
			if i >= len(sent) || sent[i] != e.Seq {
				t.Fatalf("sent %v, want the wanted events in order %d...", sent, e.Seq)
			}
		}
		if due, _ := s.ClaimDeliveries(ctx, now, now.Add(time.Minute), instore.ClaimQuota{Limit: 10}); len(due) != 0 {
			t.Fatalf("after the last: %d more claimed", len(due))
		}
		// Disabled: given nothing; the events meanwhile are not held for
		// it; enabled again, it resumes with what is kept.
		setStatus := func(status instore.WebhookStatus) {
			t.Helper()
			_, err := s.ChangeWebhook(ctx, "mer_1", "whk_1", func(w *instore.Webhook) error {
				w.Status = status
				return nil
			})
			must(t, err)
		}
		setStatus(instore.WebhookDisabled)
		must(t, s.AppendEvents(ctx, []instore.OutboxEvent{ev("mer_1", instore.EventTerminalOffline, 3)}))
		if _, err := s.SequenceEvents(ctx, 100); err != nil {
			t.Fatal(err)
		}
		if due, _ := s.ClaimDeliveries(ctx, now, now.Add(time.Minute), instore.ClaimQuota{Limit: 10}); len(due) != 0 {
			t.Fatalf("a disabled endpoint was given %d deliveries", len(due))
		}
		setStatus(instore.WebhookEnabled)
		due, err := s.ClaimDeliveries(ctx, now, now.Add(time.Minute), instore.ClaimQuota{Limit: 10})
		if err != nil || len(due) != 1 || due[0].Event.Type != instore.EventTerminalOffline || due[0].Event.Seq <= sent[len(sent)-1] {
			t.Fatalf("enabled again: %+v, %v; want the event numbered while it was disabled", due, err)
		}
		// A new endpoint starts after the events numbered before it.
		must(t, s.CreateWebhook(ctx, &instore.Webhook{ID: "whk_2", MerchantID: "mer_1", URL: "https://example.com/h2",
			Status: instore.WebhookEnabled, Secret: "whsec_y", CreatedAt: at(0)}, 16))
		if page, _ := s.WebhookDeliveries(ctx, "whk_2", 0, 10); len(page) != 0 {
			t.Fatalf("a new endpoint has deliveries %+v", page)
		}
		if due, _ := s.ClaimDeliveries(ctx, now, now.Add(time.Minute), instore.ClaimQuota{Limit: 10}); len(due) != 0 {
			t.Fatalf("a new endpoint was given %d deliveries of older events", len(due))
		}
	}},
	// A claim takes the merchants in turns and within their quota: each
	// merchant's earliest due head before any merchant's second, at most
	// PerMerchant of one merchant less those it has in flight.
	{"ClaimInTurns", func(t *testing.T, s instore.Store) {
		ctx := t.Context()
		mustCreateCustomer(t, s, "cus_1", at(0))
		for _, m := range []string{"mer_a", "mer_b"} {
			mustCreateMerchant(t, s, m, "cus_1", at(0))
		}
		for i := range 6 {
			must(t, s.CreateWebhook(ctx, &instore.Webhook{ID: fmt.Sprintf("whk_a%d", i), MerchantID: "mer_a",
				URL: "https://example.com/a", Status: instore.WebhookEnabled, Secret: "whsec_x", CreatedAt: at(0)}, 16))
		}
		must(t, s.CreateWebhook(ctx, &instore.Webhook{ID: "whk_b", MerchantID: "mer_b", URL: "https://example.com/b",
			Status: instore.WebhookEnabled, Secret: "whsec_x", CreatedAt: at(0)}, 16))
		// mer_a's event is due before mer_b's.
		must(t, s.AppendEvents(ctx, []instore.OutboxEvent{{MerchantID: "mer_a", Type: instore.EventTerminalOnline, At: at(1), Data: []byte(`{}`)}}))
		must(t, s.AppendEvents(ctx, []instore.OutboxEvent{{MerchantID: "mer_b", Type: instore.EventTerminalOnline, At: at(2), Data: []byte(`{}`)}}))
		if _, err := s.SequenceEvents(ctx, 100); err != nil {
			t.Fatal(err)
		}
		now := at(10)
		merchants := func(due []*instore.DueDelivery) []string {
			var ms []string
			for _, d := range due {
				ms = append(ms, d.Webhook.MerchantID)
			}
			return ms
		}
		// mer_a is at its quota: nothing of it.
		due, err := s.ClaimDeliveries(ctx, now, now.Add(time.Minute), instore.ClaimQuota{Limit: 10, PerMerchant: 2,
			Busy: map[string]int{"mer_a": 2}})
		must(t, err)
		if d := diff([]string{"mer_b"}, merchants(due)); d != "" {
			t.Fatalf("mer_a at its quota: claimed (-want +got):\n%s", d)
		}
		// Turns: mer_a's first, mer_b's (claimed already: leased), then
		// mer_a's second; mer_a has one in flight and room for two more.
		due, err = s.ClaimDeliveries(ctx, now, now.Add(time.Minute), instore.ClaimQuota{Limit: 10, PerMerchant: 3,
			Busy: map[string]int{"mer_a": 1}})
		must(t, err)
		if d := diff([]string{"mer_a", "mer_a"}, merchants(due)); d != "" {
			t.Fatalf("mer_a with room for 2: claimed (-want +got):\n%s", d)
		}
		// Limit bounds the claim; no bound per merchant takes the rest.
		due, err = s.ClaimDeliveries(ctx, now, now.Add(time.Minute), instore.ClaimQuota{Limit: 3})
		must(t, err)
		if len(due) != 3 {
			t.Fatalf("Limit 3: claimed %d", len(due))
		}
		due, err = s.ClaimDeliveries(ctx, now, now.Add(time.Minute), instore.ClaimQuota{Limit: 10})
		must(t, err)
		if d := diff([]string{"mer_a"}, merchants(due)); d != "" {
			t.Fatalf("the rest: claimed (-want +got):\n%s", d)
		}
	}},
	// The limit of endpoints per merchant is decided inside the
	// transaction that inserts: 40 creations at once for one merchant
	// leave exactly the limit (each beyond it ErrConflict), and another
	// merchant's creations are not counted against it.
	{"LimitUnderConcurrency", func(t *testing.T, s instore.Store) {
		ctx := t.Context()
		const max, racers = 16, 40
		mustCreateCustomer(t, s, "cus_1", at(0))
		mustCreateMerchant(t, s, "mer_1", "cus_1", at(0))
		mustCreateMerchant(t, s, "mer_2", "cus_1", at(0))
		errs := atOnce(racers, func(i int) error {
			return s.CreateWebhook(ctx, &instore.Webhook{ID: fmt.Sprintf("whk_%02d", i), MerchantID: "mer_1",
				URL: "https://example.com/h", Status: instore.WebhookEnabled, Secret: "whsec_x", CreatedAt: at(i)}, max)
		})
		created := 0
		for i, err := range errs {
			switch {
			case err == nil:
				created++
			case !errors.Is(err, instore.ErrConflict):
				t.Errorf("creation %d: %v, want nil or ErrConflict", i, err)
			}
		}
		ws, err := s.Webhooks(ctx, "mer_1")
		must(t, err)
		if created != max || len(ws) != max {
			t.Fatalf("%d concurrent creations: %d succeeded, %d stored; want exactly %d", racers, created, len(ws), max)
		}
		must(t, s.CreateWebhook(ctx, &instore.Webhook{ID: "whk_other", MerchantID: "mer_2", URL: "https://example.com/o",
			Status: instore.WebhookEnabled, Secret: "whsec_x", CreatedAt: at(0)}, max))
		// A deleted endpoint frees its place.
		must(t, s.DeleteWebhook(ctx, "mer_1", ws[0].ID, at(50)))
		must(t, s.CreateWebhook(ctx, &instore.Webhook{ID: "whk_again", MerchantID: "mer_1", URL: "https://example.com/h",
			Status: instore.WebhookEnabled, Secret: "whsec_x", CreatedAt: at(51)}, max))
		checkConflict(t, "CreateWebhook beyond the limit", s.CreateWebhook(ctx, &instore.Webhook{ID: "whk_over",
			MerchantID: "mer_1", URL: "https://example.com/h", Status: instore.WebhookEnabled, Secret: "whsec_x", CreatedAt: at(52)}, max))
	}},
}

// webhookTests: an endpoint is changed (ChangeWebhook) as last committed,
// so that no change undoes another made meanwhile.
var webhookTests = []test{
	{"ChangeSeesTheLatest", func(t *testing.T, s instore.Store) {
		// A change is decided on the endpoint as stored, not on a copy a
		// caller read before: a PATCH begun before a rotation cannot write
		// the old secret back, nor clear a failing time it never saw.
		ctx := t.Context()
		mer1Endpoints(t, s, "whk_1")
		stale, err := s.Webhook(ctx, "mer_1", "whk_1")
		must(t, err)
		until, failing := at(60), at(30)
		rotated, err := s.ChangeWebhook(ctx, "mer_1", "whk_1", func(w *instore.Webhook) error {
			w.PreviousSecret, w.PreviousUntil, w.Secret, w.FailingSince = w.Secret, &until, "whsec_b", &failing
			return nil
		})
		must(t, err)
		if got, err := s.Webhook(ctx, "mer_1", "whk_1"); err != nil || diff(got, rotated) != "" {
			t.Fatalf("ChangeWebhook returned %+v, stored %+v (%v); want what is stored", rotated, got, err)
		}
		var seen instore.Webhook
		patched, err := s.ChangeWebhook(ctx, "mer_1", "whk_1", func(w *instore.Webhook) error {
			seen = *w
			w.Description = stale.Description + " (edited)"
			return nil
		})
		must(t, err)
		if diff(&seen, rotated) != "" {
			t.Fatalf("the change was given %+v, want the endpoint as last committed %+v", &seen, rotated)
		}
		if patched.Secret != "whsec_b" || patched.PreviousSecret != "whsec_a" || !patched.PreviousUntil.Equal(stored(until)) ||
			!patched.FailingSince.Equal(stored(failing)) || patched.Description != "d (edited)" {
			t.Fatalf("after the rotation and a change of the description: %+v", patched)
		}
	}},
	{"ChangeNotFound", func(t *testing.T, s instore.Store) {
		// No endpoint, another merchant's, a deleted one: ErrNotFound and
		// the change is not called; a change's error is returned and
		// nothing is written.
		ctx := t.Context()
		mer1Endpoints(t, s, "whk_1", "whk_gone")
		mustCreateMerchant(t, s, "mer_2", "cus_1", at(0))
		must(t, s.DeleteWebhook(ctx, "mer_1", "whk_gone", at(1)))
		called := func(*instore.Webhook) error {
			t.Error("the change was called")
			return nil
		}
		for _, c := range []struct{ merchant, id string }{{"mer_1", "whk_none"}, {"mer_2", "whk_1"}, {"mer_1", "whk_gone"}} {
			_, err := s.ChangeWebhook(ctx, c.merchant, c.id, called)
			checkNotFound(t, fmt.Sprintf("ChangeWebhook(%s, %s)", c.merchant, c.id), err, c.id)
		}
		refused := errors.New("refused")
		_, err := s.ChangeWebhook(ctx, "mer_1", "whk_1", func(w *instore.Webhook) error {
			w.Secret = "whsec_b"
			return refused
		})
		if !errors.Is(err, refused) {
			t.Fatalf("ChangeWebhook with a failing change = %v, want its error", err)
		}
		if w, err := s.Webhook(ctx, "mer_1", "whk_1"); err != nil || w.Secret != "whsec_a" {
			t.Fatalf("after a failed change: %+v, %v; want it unchanged", w, err)
		}
	}},
	{"ConcurrentChanges", func(t *testing.T, s instore.Store) {
		// Racing changes of one endpoint are made one after the other,
		// each on the one before: every change to the description is
		// kept, and the rotations form one chain of secrets.
		ctx := t.Context()
		mer1Endpoints(t, s, "whk_1")
		const n = 12
		next := map[string]string{} // a rotation's secret before → after
		var got [n]*instore.Webhook
		errs := atOnce(n, func(i int) (err error) {
			got[i], err = s.ChangeWebhook(ctx, "mer_1", "whk_1", func(w *instore.Webhook) error {
				w.Description += string(rune('A' + i))
				w.PreviousSecret, w.Secret = w.Secret, fmt.Sprintf("whsec_%d", i)
				return nil
			})
			return err
		})
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("concurrent ChangeWebhook: %v", err)
		}
		for _, w := range got {
			next[w.PreviousSecret] = w.Secret
		}
		w, err := s.Webhook(ctx, "mer_1", "whk_1")
		must(t, err)
		for i := range n {
			if c := strings.Count(w.Description, string(rune('A'+i))); c != 1 {
				t.Errorf("description %q holds change %d %d times, want once", w.Description, i, c)
			}
		}
		chain, secret := 0, "whsec_a"
		for ; next[secret] != "" && chain <= n; secret = next[secret] {
			chain++
		}
		if chain != n || secret != w.Secret {
			t.Errorf("the rotations chain %d secrets to %q (stored %q), want all %d to the stored one: a change was decided on a stale endpoint",
				chain, secret, w.Secret, n)
		}
	}},
}

// mer1Endpoints creates the customer cus_1, its merchant mer_1, and
// mer_1's endpoints ids, enabled, described "d", with the secret whsec_a.
func mer1Endpoints(t *testing.T, s instore.Store, ids ...string) {
	t.Helper()
	mustCreateCustomer(t, s, "cus_1", at(0))
	mustCreateMerchant(t, s, "mer_1", "cus_1", at(0))
	for _, id := range ids {
		must(t, s.CreateWebhook(t.Context(), &instore.Webhook{ID: id, MerchantID: "mer_1", URL: "https://example.com/" + id,
			Description: "d", Status: instore.WebhookEnabled, Secret: "whsec_a", CreatedAt: at(0)}, 16))
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
