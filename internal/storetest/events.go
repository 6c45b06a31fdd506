package storetest

import (
	"testing"

	"github.com/instore-dev/instore"
)

var eventTests = []test{
	{"SequenceAndList", func(t *testing.T, s instore.Store) {
		// Appended events are numbered in order, listed oldest first per
		// merchant after a number, filtered by type and terminal ID.
		ctx := t.Context()
		ev := func(merchant, typ, terminal string, i int) instore.OutboxEvent {
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
		if l, _ := s.ListEvents(ctx, instore.EventFilter{MerchantID: "mer_1", Types: []string{instore.EventTerminalOffline}, Limit: 10}); len(l) != 1 || l[0].TerminalID != "10000002" {
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
			EventTypes: []string{instore.EventTerminalLinked}, Status: instore.WebhookEnabled, Secret: "whsec_x", CreatedAt: at(0)}, 16))
		ev := func(typ string, i int) instore.OutboxEvent {
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

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
