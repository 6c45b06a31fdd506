package server_test

import (
	"encoding/json"
	"testing"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/server"
)

// TestWebhookConcurrency: an endpoint's concurrency is 1 unless set, 1 to
// 16 on POST and PATCH (anything else a 400 naming /concurrency, the
// endpoint unchanged), shown in every answer; an endpoint at 3 gets every
// event of purchases on the sandbox's three terminals once, each
// terminal's in their order.
func TestWebhookConcurrency(t *testing.T) {
	eachBackend(t, func(t *testing.T, mutate func(*server.Config)) {
		s := startSandbox(t, mutate)
		rcv := newReceiver(t)
		for _, bad := range []any{0, 17, -1, 1.5, "4", true, []int{2}} {
			p := s.post(t, "/in-store/api/v1/webhooks", map[string]any{"url": rcv.URL, "concurrency": bad}, nil).problem(t, 400, "")
			if len(p.Errors) != 1 || p.Errors[0].Field != "/concurrency" {
				t.Fatalf("concurrency %v: %+v, want one error of /concurrency", bad, p)
			}
		}
		var plain, wh instore.WebhookWire
		s.post(t, "/in-store/api/v1/webhooks", map[string]any{"url": rcv.URL + "/plain"}, nil).decode(t, 201, &plain)
		if plain.Concurrency != 1 {
			t.Fatalf("an endpoint made without concurrency shows %d, want 1", plain.Concurrency)
		}
		s.send(t, "DELETE", "/in-store/api/v1/webhooks/"+plain.WebhookID, nil, nil)
		// The endpoint gets the events numbered after its creation.
		before := int64(0)
		for _, e := range s.events(t, "") {
			seq, _ := instore.ParseEventID(e.ID)
			before = max(before, seq)
		}
		s.post(t, "/in-store/api/v1/webhooks", map[string]any{"url": rcv.URL + "/hook", "concurrency": 16}, nil).decode(t, 201, &wh)
		if wh.Concurrency != 16 {
			t.Fatalf("created with 16: %d", wh.Concurrency)
		}
		for _, bad := range []any{0, 17} {
			s.send(t, "PATCH", "/in-store/api/v1/webhooks/"+wh.WebhookID, map[string]any{"concurrency": bad}, nil).problem(t, 400, "")
		}
		var got instore.WebhookWire
		s.get(t, "/in-store/api/v1/webhooks/"+wh.WebhookID).decode(t, 200, &got)
		if got.Concurrency != 16 {
			t.Fatalf("after refused PATCHes: concurrency %d, want 16", got.Concurrency)
		}
		s.send(t, "PATCH", "/in-store/api/v1/webhooks/"+wh.WebhookID, map[string]any{"concurrency": 3}, nil).decode(t, 200, &got)
		var list struct{ Webhooks []instore.WebhookWire }
		s.get(t, "/in-store/api/v1/webhooks").decode(t, 200, &list)
		if got.Concurrency != 3 || len(list.Webhooks) != 1 || list.Webhooks[0].Concurrency != 3 {
			t.Fatalf("after PATCH 3: %d, listed %+v", got.Concurrency, list.Webhooks)
		}
		rcv.mu.Lock()
		rcv.secrets = []string{wh.Secret}
		rcv.mu.Unlock()

		for range 3 {
			for _, term := range s.terminals {
				tx := s.purchase(t, term, 1000).tx(t, 201)
				s.final(t, tx.OnlineAPIRefID)
			}
		}
		after := func(evs []instore.EventWire) []instore.EventWire {
			var out []instore.EventWire
			for _, e := range evs {
				if seq, _ := instore.ParseEventID(e.ID); seq > before {
					out = append(out, e)
				}
			}
			return out
		}
		want := after(s.waitEvents(t, "", func(evs []instore.EventWire) bool {
			rcv.mu.Lock()
			defer rcv.mu.Unlock()
			return len(after(evs)) >= 18 && len(rcv.got) >= len(after(evs))
		}))
		rcv.mu.Lock()
		defer rcv.mu.Unlock()
		last := map[string]int64{}
		for _, e := range rcv.got {
			var d struct {
				TerminalID string `json:"terminalId"`
			}
			if err := json.Unmarshal(e.Data, &d); err != nil {
				t.Fatal(err)
			}
			seq, _ := instore.ParseEventID(e.ID)
			if seq <= last[d.TerminalID] {
				t.Fatalf("%s (%s) of terminal %q arrived after its event %d", e.ID, e.Type, d.TerminalID, last[d.TerminalID])
			}
			last[d.TerminalID] = seq
		}
		for _, e := range want {
			if rcv.ids[e.ID] != 1 {
				t.Fatalf("event %s (%s) received %d times, want once", e.ID, e.Type, rcv.ids[e.ID])
			}
		}
		if len(rcv.got) != len(want) || rcv.badSigs != 0 {
			t.Fatalf("received %d deliveries (%d bad), want the %d events", len(rcv.got), rcv.badSigs, len(want))
		}
	})
}
