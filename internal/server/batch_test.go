package server_test

import (
	"encoding/json"
	"testing"

	"github.com/instore-dev/instore"
)

// closeBatch closes the terminal's batch and decodes the 201.
func (s *sandbox) closeBatch(t *testing.T, term string) instore.BatchWire {
	t.Helper()
	r := s.post(t, "/in-store/api/v1/terminal/"+term+"/close", nil, nil)
	if r.resp.StatusCode != 201 {
		t.Fatalf("close = %d %s, want 201", r.resp.StatusCode, r.body)
	}
	var b instore.BatchWire
	must(t, json.Unmarshal(r.body, &b))
	return b
}

// TestBatchClose drives day closes end to end on both backends with a
// virtual terminal: purchases and a refund, then a close that matches;
// a sale the service never saw (batch-extra), then a close with one
// MISSING_IN_SERVICE and only what came after the first close, numbered
// one more; a close while a purchase runs (WP09 naming it); the listing
// (paged, its cursor refused by GET /transactions), GET /batch and the
// event batch.closed. A purchase while a close runs: device_batch_test.go.
func TestBatchClose(t *testing.T) {
	sandboxes(t, func(t *testing.T, s *sandbox) {
		term := s.terminals[0]
		sale := s.approved(t, map[string]any{"terminalId": term, "amount": 1250, "currency": "SEK"})
		s.approved(t, map[string]any{"terminalId": term, "amount": 4000, "currency": "SEK"})
		declined := s.final(t, s.purchase(t, term, 1011).tx(t, 201).OnlineAPIRefID)
		if declined.StatusID == instore.StatusApproved {
			t.Fatalf("a purchase of ...11 was approved")
		}
		refund := s.post(t, "/in-store/api/v1/refund", map[string]any{"terminalId": term, "amount": 250, "currency": "SEK",
			"originalOnlineAPIRefId": sale.OnlineAPIRefID}, nil).tx(t, 201)
		if got := s.final(t, refund.OnlineAPIRefID); got.StatusID != instore.StatusApproved {
			t.Fatalf("refund ended %d, want APPROVED", got.StatusID)
		}

		first := s.closeBatch(t, term)
		want := []instore.BatchTotal{
			{Currency: "SEK", Type: instore.TypePurchase, Count: 2, Amount: 5250},
			{Currency: "SEK", Type: instore.TypeRefund, Count: 1, Amount: 250},
		}
		if !first.Matched || len(first.Differences) != 0 || first.State != instore.BatchClosed {
			t.Errorf("first close: state %s, matched %v, differences %+v; want CLOSED, matched", first.State, first.Matched, first.Differences)
		}
		if !equalTotals(first.TerminalTotals, want) || !equalTotals(first.ServiceTotals, want) {
			t.Errorf("first close totals: terminal %+v, service %+v; want %+v", first.TerminalTotals, first.ServiceTotals, want)
		}
		if first.Number == nil || *first.Number != 1 {
			t.Errorf("first close number = %v, want 1", first.Number)
		}

		// A close while a purchase runs: WP09; the terminal is free again
		// once it ended.
		slow := s.purchase(t, term, 1094).tx(t, 201)
		if p := s.post(t, "/in-store/api/v1/terminal/"+term+"/close", nil, nil).problem(t, 409, "WP09"); p.OnlineAPIRefID != slow.OnlineAPIRefID {
			t.Errorf("WP09 of a close names %q, want the running purchase %q", p.OnlineAPIRefID, slow.OnlineAPIRefID)
		}
		s.post(t, "/in-store/api/v1/cancel", map[string]any{"terminalId": term, "onlineAPIRefId": slow.OnlineAPIRefID}, nil)
		s.final(t, slow.OnlineAPIRefID)

		after := s.approved(t, map[string]any{"terminalId": term, "amount": 700, "currency": "SEK"})
		extra := s.post(t, "/sandbox/v1/terminals/"+term+"/batch-extra", map[string]any{"amount": 1000, "type": "PURCHASE"}, nil)
		if extra.resp.StatusCode != 200 {
			t.Fatalf("batch-extra = %d %s", extra.resp.StatusCode, extra.body)
		}
		var ex struct {
			Reference string `json:"reference"`
		}
		must(t, json.Unmarshal(extra.body, &ex))

		second := s.closeBatch(t, term)
		if second.Number == nil || *second.Number != 2 || !second.OpenedAt.Equal(first.ClosedAt) {
			t.Errorf("second close: number %v, openedAt %v; want 2 and the first's closedAt %v", second.Number, second.OpenedAt, first.ClosedAt)
		}
		if second.Matched || len(second.Differences) != 1 {
			t.Fatalf("second close: matched %v, differences %+v; want one", second.Matched, second.Differences)
		}
		if d := second.Differences[0]; d.Kind != instore.MissingInService || d.OnlineAPIRefID != ex.Reference || d.Terminal == nil || d.Terminal.Amount != 1000 || d.Service != nil {
			t.Errorf("second close difference = %+v, want MISSING_IN_SERVICE %s of 1000", d, ex.Reference)
		}
		// Only what came after the first close: the slow purchase (aborted)
		// and the 700.
		if want := []instore.BatchTotal{{Currency: "SEK", Type: instore.TypePurchase, Count: 1, Amount: 700}}; !equalTotals(second.ServiceTotals, want) {
			t.Errorf("second close service totals %+v, want %+v (after %s)", second.ServiceTotals, want, after.OnlineAPIRefID)
		}
		if want := []instore.BatchTotal{{Currency: "SEK", Type: instore.TypePurchase, Count: 2, Amount: 1700}}; !equalTotals(second.TerminalTotals, want) {
			t.Errorf("second close terminal totals %+v, want %+v", second.TerminalTotals, want)
		}

		// GET /batch, GET /batches (paged), the event.
		var got instore.BatchWire
		s.get(t, "/in-store/api/v1/batch/"+second.BatchID).decode(t, 200, &got)
		if got.BatchID != second.BatchID || len(got.Differences) != 1 {
			t.Errorf("GET /batch = %+v", got)
		}
		s.get(t, "/in-store/api/v1/batch/bat_0000").problem(t, 404, "not-found")
		var page struct {
			Batches    []instore.BatchWire `json:"batches"`
			NextCursor *string             `json:"nextCursor"`
		}
		s.get(t, "/in-store/api/v1/batches?terminalId="+term+"&limit=1").decode(t, 200, &page)
		if len(page.Batches) != 1 || page.Batches[0].BatchID != second.BatchID || page.NextCursor == nil {
			t.Fatalf("GET /batches page 1 = %+v", page)
		}
		cursor := *page.NextCursor
		s.get(t, "/in-store/api/v1/batches?terminalId="+term+"&limit=1&cursor="+cursor).decode(t, 200, &page)
		if len(page.Batches) != 1 || page.Batches[0].BatchID != first.BatchID {
			t.Errorf("GET /batches page 2 = %+v", page)
		}
		s.get(t, "/in-store/api/v1/batches?limit=1&cursor="+cursor).problem(t, 400, "validation")
		s.get(t, "/in-store/api/v1/batches?statusId=0").problem(t, 400, "validation")
		s.get(t, "/in-store/api/v1/transactions?limit=1&cursor="+cursor).problem(t, 400, "validation")
		evs := s.waitEvents(t, "", func(evs []instore.EventWire) bool {
			n := 0
			for _, e := range evs {
				if e.Type == instore.EventBatchClosed {
					n++
				}
			}
			return n == 2
		})
		if len(evs) == 0 {
			t.Error("no batch.closed events")
		}
	})
}

func equalTotals(a, b []instore.BatchTotal) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
