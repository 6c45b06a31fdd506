package server_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/apitest"
	"github.com/instore-dev/instore/internal/server"
	"github.com/instore-dev/instore/internal/testwait"
)

// eventPage is a page of GET /events.
type eventPage struct {
	Events     []instore.EventWire `json:"events"`
	NextCursor *string             `json:"nextCursor"`
}

// events reads every event of the merchant after after (JSON pages).
func (s *sandbox) events(t *testing.T, query string) []instore.EventWire {
	t.Helper()
	var out []instore.EventWire
	after := ""
	for {
		q := "/in-store/api/v1/events?limit=3" + query
		if after != "" {
			q += "&after=" + after
		}
		var p eventPage
		s.get(t, q).decode(t, 200, &p)
		out = append(out, p.Events...)
		if len(p.Events) < 3 {
			return out
		}
		after = *p.NextCursor
	}
}

// waitEvents reads the events until cond holds (bounded).
func (s *sandbox) waitEvents(t *testing.T, query string, cond func([]instore.EventWire) bool) []instore.EventWire {
	t.Helper()
	var evs []instore.EventWire
	testwait.ForNil(t, "the events to reach the expected state", func() error {
		if evs = s.events(t, query); !cond(evs) {
			return fmt.Errorf("%+v", types(evs))
		}
		return nil
	})
	return evs
}

func types(evs []instore.EventWire) []instore.EventType {
	out := make([]instore.EventType, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

// refOf is the onlineAPIRefId of a transaction event's data.
func refOf(t *testing.T, e instore.EventWire) string {
	t.Helper()
	var tx txJSON
	if err := json.Unmarshal(e.Data, &tx); err != nil {
		t.Fatalf("event %s data: %v", e.ID, err)
	}
	return tx.OnlineAPIRefID
}

// TestEventsOfAPurchase: a purchase's changes are events, numbered in
// order, each with the transaction as it was then; the pages, the filters
// and the stream (resumed after Last-Event-ID, then live) show the same
// list with nothing lost or repeated; bad queries are 400s.
func TestEventsOfAPurchase(t *testing.T) {
	eachBackend(t, func(t *testing.T, mutate func(*server.Config)) {
		s := startSandbox(t, mutate)
		term := s.terminals[0]
		// Linking the three terminals made events too.
		linked := s.waitEvents(t, "&types=terminal.linked", func(evs []instore.EventWire) bool { return len(evs) == 3 })
		for _, e := range linked {
			var v struct {
				TerminalID string `json:"terminalId"`
				Linked     bool   `json:"linked"`
			}
			must(t, json.Unmarshal(e.Data, &v))
			if !v.Linked || !slices.Contains(s.terminals, v.TerminalID) {
				t.Errorf("terminal.linked data %s", e.Data)
			}
		}

		sale := s.purchase(t, term, 1000).tx(t, 201)
		s.final(t, sale.OnlineAPIRefID)
		mine := func(evs []instore.EventWire) []instore.EventWire {
			var out []instore.EventWire
			for _, e := range evs {
				if strings.HasPrefix(string(e.Type), "transaction.") && refOf(t, e) == sale.OnlineAPIRefID {
					out = append(out, e)
				}
			}
			return out
		}
		all := s.waitEvents(t, "", func(evs []instore.EventWire) bool {
			m := mine(evs)
			return len(m) > 0 && m[len(m)-1].Type == instore.EventTransactionFinal
		})
		got := mine(all)
		want := []instore.EventType{instore.EventTransactionCreated, instore.EventTransactionAcknowledged}
		for range len(got) - 3 {
			want = append(want, instore.EventTransactionProgress)
		}
		want = append(want, instore.EventTransactionFinal)
		if !slices.Equal(types(got), want) || len(got) < 4 {
			t.Fatalf("events of the purchase %v, want %v", types(got), want)
		}
		for i, e := range all {
			if i > 0 && e.ID <= all[i-1].ID {
				t.Errorf("event ids out of order: %s after %s", e.ID, all[i-1].ID)
			}
			if _, err := time.Parse(time.RFC3339Nano, e.CreatedAt); err != nil || !strings.HasSuffix(e.CreatedAt, "Z") {
				t.Errorf("createdAt %q is not RFC 3339 UTC", e.CreatedAt)
			}
		}
		var first, last txJSON
		must(t, json.Unmarshal(got[0].Data, &first))
		must(t, json.Unmarshal(got[len(got)-1].Data, &last))
		if first.Status != "PENDING" || first.Version != 1 || last.Status != "APPROVED" || last.Version != int64(len(got)) {
			t.Errorf("first event's transaction %s v%d, last %s v%d; want PENDING v1, APPROVED v%d",
				first.Status, first.Version, last.Status, last.Version, len(got))
		}

		// Filters.
		finals := s.events(t, "&types=transaction.final,transaction.created")
		for _, e := range finals {
			if e.Type != instore.EventTransactionFinal && e.Type != instore.EventTransactionCreated {
				t.Errorf("types filter let %s through", e.Type)
			}
		}
		if other := s.events(t, "&terminalId="+s.terminals[1]+"&types=transaction.created"); len(other) != 0 {
			t.Errorf("terminalId filter: %d events of another terminal", len(other))
		}
		for _, q := range []string{"types=transaction.nope", "after=evt_x", "limit=0", "limit=501", "terminalId=12", "after=1&after=2"} {
			s.get(t, "/in-store/api/v1/events?"+q).problem(t, 400, "")
			if !strings.HasPrefix(q, "limit") {
				s.get(t, "/in-store/api/v1/events/stream?"+q).problem(t, 400, "")
			}
		}

		// The stream: resume after the second event of the purchase, then
		// live.
		req, err := http.NewRequestWithContext(t.Context(), "GET", s.online+"/in-store/api/v1/events?types="+
			instore.JoinEventTypes([]instore.EventType{instore.EventTransactionCreated, instore.EventTransactionAcknowledged,
				instore.EventTransactionProgress, instore.EventTransactionFinal}, ","), nil)
		must(t, err)
		for k, v := range s.auth(s.token, s.key) {
			req.Header.Set(k, v)
		}
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Last-Event-ID", got[1].ID)
		resp, err := http.DefaultClient.Do(req)
		must(t, err)
		defer resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		msgs := make(chan instore.EventWire, 100)
		go func() {
			defer close(msgs)
			sc := bufio.NewScanner(resp.Body)
			var id string
			var typ instore.EventType
			for sc.Scan() {
				line := sc.Text()
				switch {
				case strings.HasPrefix(line, "id: "):
					id = line[4:]
				case strings.HasPrefix(line, "event: "):
					typ = instore.EventType(line[7:])
				case strings.HasPrefix(line, "data: "):
					var e instore.EventWire
					if json.Unmarshal([]byte(line[6:]), &e) != nil || e.ID != id || e.Type != typ {
						t.Errorf("stream message id %q event %q data %s disagree", id, typ, line[6:])
					}
					msgs <- e
				}
			}
		}()
		next := func() instore.EventWire {
			t.Helper()
			select {
			case e, ok := <-msgs:
				if !ok {
					t.Fatal("stream ended")
				}
				return e
			case <-time.After(15 * time.Second):
				t.Fatal("no event on the stream")
			}
			return instore.EventWire{}
		}
		for _, w := range got[2:] {
			if e := next(); e.ID != w.ID {
				t.Fatalf("replayed %s (%s), want %s (%s)", e.ID, e.Type, w.ID, w.Type)
			}
		}
		sale2 := s.purchase(t, term, 1000).tx(t, 201)
		s.final(t, sale2.OnlineAPIRefID)
		var live []instore.EventType
		for {
			e := next()
			if refOf(t, e) != sale2.OnlineAPIRefID {
				t.Fatalf("live event %s %s of %s, want the new purchase's", e.ID, e.Type, refOf(t, e))
			}
			live = append(live, e.Type)
			if e.Type == instore.EventTransactionFinal {
				break
			}
		}
		if live[0] != instore.EventTransactionCreated || len(live) < 4 {
			t.Errorf("live events %v", live)
		}
	})
}

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
