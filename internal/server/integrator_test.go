package server_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/client"
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
		resp, err := apitest.Caller{Base: s.online, Key: s.key, Token: s.token}.Open(t.Context(), "/in-store/api/v1/events?types="+
			instore.JoinEventTypes([]instore.EventType{instore.EventTransactionCreated, instore.EventTransactionAcknowledged,
				instore.EventTransactionProgress, instore.EventTransactionFinal}, ","),
			map[string]string{"Accept": "text/event-stream", "Last-Event-ID": got[1].ID})
		must(t, err)
		defer resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		msgs := make(chan instore.EventWire, 100)
		go func() {
			defer close(msgs)
			sr := client.NewEventStreamReader(resp.Body)
			for {
				m, err := sr.Next()
				if err != nil {
					return
				}
				if !m.HasData {
					continue
				}
				var e instore.EventWire
				if json.Unmarshal([]byte(m.Data), &e) != nil || e.ID != m.ID || e.Type != instore.EventType(m.Event) {
					t.Errorf("stream message id %q event %q data %s disagree", m.ID, m.Event, m.Data)
				}
				msgs <- e
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
