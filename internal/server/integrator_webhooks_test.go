package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/apitest"
	"github.com/instore-dev/instore/internal/server"
	"github.com/instore-dev/instore/internal/testwait"
)

// receiver is a real HTTP endpoint that verifies Standard Webhooks
// signatures with the specification's library and records what arrived.
type receiver struct {
	*httptest.Server
	mu       sync.Mutex
	secrets  []string
	fail     int // answer 503 to this many more requests
	got      []instore.EventWire
	ids      map[string]int
	badSigs  int
	sigCount []int
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{ids: map[string]int{}}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		if !apitest.WebhookSigned(body, req.Header, r.secrets...) {
			r.badSigs++
			w.WriteHeader(400)
			return
		}
		if r.fail > 0 {
			r.fail--
			http.Error(w, "try later", 503)
			return
		}
		var e instore.EventWire
		if json.Unmarshal(body, &e) != nil || e.ID != req.Header.Get("webhook-id") {
			r.badSigs++
			w.WriteHeader(400)
			return
		}
		r.ids[e.ID]++
		r.got = append(r.got, e)
		r.sigCount = append(r.sigCount, len(strings.Fields(req.Header.Get("webhook-signature"))))
		w.WriteHeader(204)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) events() []instore.EventWire {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// TestWebhookDeliveries: a registered endpoint gets the merchant's events
// of its types, signed, once each, in order, through a failure (retried
// on request, the later ones waiting behind it); each attempt is listed;
// rotation signs with both secrets; disabled and deleted endpoints get
// nothing; bad registrations are 400s.
func TestWebhookDeliveries(t *testing.T) {
	eachBackend(t, func(t *testing.T, mutate func(*server.Config)) {
		s := startSandbox(t, mutate)
		term := s.terminals[0]
		rcv := newReceiver(t)
		for _, body := range []map[string]any{
			{"url": "ftp://example.com/hook"},
			{"url": rcv.URL, "eventTypes": []string{"transaction.nope"}},
			{},
			{"url": rcv.URL, "status": "disabled"},
			{"url": rcv.URL, "description": "bell\u0007"},
		} {
			s.post(t, "/in-store/api/v1/webhooks", body, nil).problem(t, 400, "")
		}
		var wh instore.WebhookWire
		s.post(t, "/in-store/api/v1/webhooks", map[string]any{"url": rcv.URL + "/hook",
			"eventTypes": []instore.EventType{instore.EventTransactionCreated, instore.EventTransactionFinal}, "description": "till 1"}, nil).
			decode(t, 201, &wh)
		if !strings.HasPrefix(wh.Secret, "whsec_") || wh.Status != "enabled" {
			t.Fatalf("created webhook %+v", wh)
		}
		rcv.mu.Lock()
		rcv.secrets, rcv.fail = []string{wh.Secret}, 1
		rcv.mu.Unlock()
		var got instore.WebhookWire
		s.get(t, "/in-store/api/v1/webhooks/"+wh.WebhookID).decode(t, 200, &got)
		if got.Secret != "" {
			t.Errorf("GET /webhooks/{id} shows the secret")
		}
		var list struct{ Webhooks []instore.WebhookWire }
		s.get(t, "/in-store/api/v1/webhooks").decode(t, 200, &list)
		if len(list.Webhooks) != 1 || list.Webhooks[0].WebhookID != wh.WebhookID {
			t.Errorf("GET /webhooks = %+v", list)
		}

		var refs []string
		for _, amount := range []int64{1000, 1011, 1000} {
			tx := s.purchase(t, term, amount).tx(t, 201)
			s.final(t, tx.OnlineAPIRefID)
			refs = append(refs, tx.OnlineAPIRefID)
		}
		want := s.waitEvents(t, "&types=transaction.created,transaction.final", func(evs []instore.EventWire) bool { return len(evs) == 6 })

		// The first attempt failed (503): the head waits for its retry,
		// the others behind it. Retry it now.
		var deliveries struct {
			Deliveries []instore.DeliveryWire
		}
		testwait.ForNil(t, "the deliveries to show the failed first attempt", func() error {
			s.get(t, "/in-store/api/v1/webhooks/"+wh.WebhookID+"/deliveries").decode(t, 200, &deliveries)
			if n := len(deliveries.Deliveries); n != 6 || len(deliveries.Deliveries[n-1].Attempts) != 1 {
				return fmt.Errorf("%+v", deliveries)
			}
			return nil
		})
		head := deliveries.Deliveries[5]
		if a := head.Attempts[0]; a.StatusCode != 503 || !strings.Contains(a.Response, "try later") || head.Status != "pending" || head.EventID != want[0].ID {
			t.Errorf("first delivery %+v", head)
		}
		if n := len(rcv.events()); n != 0 {
			t.Errorf("%d events delivered past a failed head", n)
		}
		var retried instore.DeliveryWire
		s.post(t, "/in-store/api/v1/webhooks/"+wh.WebhookID+"/deliveries/"+head.DeliveryID+"/retry", nil, nil).decode(t, 202, &retried)
		s.post(t, "/in-store/api/v1/webhooks/"+wh.WebhookID+"/deliveries/dlv_999999/retry", nil, nil).problem(t, 404, "")

		testwait.For(t, "six deliveries", func() bool { return len(rcv.events()) == 6 })
		delivered := rcv.events()
		for i, e := range delivered {
			if e.ID != want[i].ID || e.Type != want[i].Type || string(e.Data) != string(want[i].Data) {
				t.Errorf("delivery %d: %s %s, want %s %s", i, e.ID, e.Type, want[i].ID, want[i].Type)
			}
		}
		rcv.mu.Lock()
		for id, n := range rcv.ids {
			if n != 1 {
				t.Errorf("event %s delivered %d times", id, n)
			}
		}
		if rcv.badSigs != 0 {
			t.Errorf("%d deliveries failed verification", rcv.badSigs)
		}
		rcv.mu.Unlock()

		// Rotation: both secrets sign during the overlap.
		var rotated instore.WebhookWire
		s.post(t, "/in-store/api/v1/webhooks/"+wh.WebhookID+"/rotate-secret", nil, nil).decode(t, 200, &rotated)
		if rotated.Secret == wh.Secret || !strings.HasPrefix(rotated.Secret, "whsec_") {
			t.Fatalf("rotated secret %q", rotated.Secret)
		}
		rcv.mu.Lock()
		rcv.secrets = []string{rotated.Secret} // only the new one: the old one's signature must not be needed
		rcv.mu.Unlock()
		tx := s.purchase(t, term, 1000).tx(t, 201)
		s.final(t, tx.OnlineAPIRefID)
		testwait.For(t, "two more deliveries", func() bool { return len(rcv.events()) == 8 })
		rcv.mu.Lock()
		if c := rcv.sigCount[len(rcv.sigCount)-1]; c != 2 {
			t.Errorf("after rotation a delivery carried %d signatures, want 2", c)
		}
		rcv.mu.Unlock()

		// Disabled, then deleted: nothing more arrives.
		var patched instore.WebhookWire
		req := map[string]any{"status": "disabled"}
		s.send(t, "PATCH", "/in-store/api/v1/webhooks/"+wh.WebhookID, req, nil).decode(t, 200, &patched)
		if patched.Status != "disabled" || patched.DisabledReason == nil {
			t.Errorf("patched %+v", patched)
		}
		s.send(t, "PATCH", "/in-store/api/v1/webhooks/"+wh.WebhookID, map[string]any{"status": "paused"}, nil).problem(t, 400, "")
		tx = s.purchase(t, term, 1000).tx(t, 201)
		s.final(t, tx.OnlineAPIRefID)
		s.waitEvents(t, "&types=transaction.final", func(evs []instore.EventWire) bool { return len(evs) == 5 })
		resp, _ := s.send(t, "DELETE", "/in-store/api/v1/webhooks/"+wh.WebhookID, nil, nil).parts()
		if resp.StatusCode != 204 {
			t.Errorf("DELETE = %d", resp.StatusCode)
		}
		s.get(t, "/in-store/api/v1/webhooks/"+wh.WebhookID).problem(t, 404, "")
		if n := len(rcv.events()); n != 8 {
			t.Errorf("%d deliveries, want 8 (none to a disabled endpoint)", n)
		}
	})
}

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
		// The purchases' events: the endpoint starts at the horizon told
		// when it was made, which may be past before (an event of the
		// sandbox's start told in between is not the endpoint's).
		purchases := func(evs []instore.EventWire) []instore.EventWire {
			var out []instore.EventWire
			for _, e := range evs {
				if seq, _ := instore.ParseEventID(e.ID); seq > before && strings.HasPrefix(string(e.Type), "transaction.") {
					out = append(out, e)
				}
			}
			return out
		}
		want := purchases(s.waitEvents(t, "", func(evs []instore.EventWire) bool {
			rcv.mu.Lock()
			defer rcv.mu.Unlock()
			return len(purchases(evs)) >= 18 && len(purchases(rcv.got)) >= len(purchases(evs))
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
		if got := len(purchases(rcv.got)); got != len(want) || rcv.badSigs != 0 {
			t.Fatalf("received %d deliveries of the purchases' events (%d bad), want the %d events", got, rcv.badSigs, len(want))
		}
	})
}
