package server_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/server"
)

// timeline reads a transaction's timeline over the API.
func (s *sandbox) timeline(t *testing.T, ref string) []instore.TransactionEvent {
	t.Helper()
	r := s.get(t, "/in-store/api/v1/transaction/"+ref+"/events")
	if r.resp.StatusCode != 200 {
		t.Fatalf("events of %s = %d %s", ref, r.resp.StatusCode, r.body)
	}
	var out struct {
		Events []instore.TransactionEvent `json:"events"`
	}
	must(t, json.Unmarshal(r.body, &out))
	return out.Events
}

func kinds(es []instore.TransactionEvent) []string {
	var out []string
	for _, e := range es {
		if e.Kind != instore.EventProgress {
			out = append(out, fmt.Sprintf("%s:%s:%s", e.Kind, e.Actor, e.StatusAfter))
		}
	}
	return out
}

// TestTimelineOfEachOutcome drives purchases through the sandbox's
// outcomes and reads what happened to each from its timeline: created,
// acknowledged, the stages and the result; a cancel; an ack time-out; a
// deadline; a reversal, which shows on its purchase too. Versions are the
// transaction's, one entry per change, and the last one is the
// transaction's version.
func TestTimelineOfEachOutcome(t *testing.T) {
	eachBackend(t, func(t *testing.T, mutate func(*server.Config)) {
		ck, clock := newClock()
		s := startSandbox(t, mutate, clock)
		term := s.terminals[0]
		check := func(name, ref string, want ...string) []instore.TransactionEvent {
			t.Helper()
			es := s.timeline(t, ref)
			if got := kinds(es); !slices.Equal(got, want) {
				t.Errorf("%s: timeline %v, want %v", name, got, want)
			}
			tx := s.transaction(t, ref)
			for i, e := range es {
				if e.Version != int64(i+1) {
					t.Errorf("%s: event %d has version %d (a change without its entry?)", name, i, e.Version)
				}
			}
			if len(es) > 0 && es[len(es)-1].Version != tx.Version {
				t.Errorf("%s: last event version %d, transaction version %d", name, es[len(es)-1].Version, tx.Version)
			}
			return es
		}

		approved := s.purchase(t, term, 1000).tx(t, 201)
		s.final(t, approved.OnlineAPIRefID)
		es := check("approved", approved.OnlineAPIRefID,
			"CREATED:ECR:PENDING", "ACKNOWLEDGED:TERMINAL:PENDING", "RESULT:TERMINAL:APPROVED")
		if !slices.ContainsFunc(es, func(e instore.TransactionEvent) bool { return e.Kind == instore.EventProgress && e.Detail != "" }) {
			t.Errorf("approved: no progress stage in %+v", es)
		}
		for _, e := range es {
			if strings.Contains(e.Detail, "4761") || strings.Contains(e.Detail, "5413") {
				t.Errorf("card data in the timeline: %+v", e)
			}
		}

		declined := s.purchase(t, term, 1011).tx(t, 201)
		s.final(t, declined.OnlineAPIRefID)
		check("declined", declined.OnlineAPIRefID,
			"CREATED:ECR:PENDING", "ACKNOWLEDGED:TERMINAL:PENDING", "RESULT:TERMINAL:TRANSACTION_DECLINED")

		slow := s.purchase(t, term, 1092).tx(t, 201)
		s.post(t, "/in-store/api/v1/cancel", map[string]any{"terminalId": term, "onlineAPIRefId": slow.OnlineAPIRefID}, nil).tx(t, 202)
		s.final(t, slow.OnlineAPIRefID)
		check("cancelled", slow.OnlineAPIRefID,
			"CREATED:ECR:PENDING", "ACKNOWLEDGED:TERMINAL:PENDING", "CANCEL_REQUESTED:ECR:PENDING", "RESULT:TERMINAL:ABORTED_BY_CASHIER")

		noAck := make(chan reply, 1)
		go func() { noAck <- s.purchase(t, term, 1091) }()
		advance(t, ck, testAck)
		p := (<-noAck).problem(t, 504, "WP25")
		check("no ack", p.OnlineAPIRefID, "CREATED:ECR:PENDING", "ACK_TIMEOUT:TIMER:TECHNICAL_ERROR")

		// A reversal: its own timeline, and REVERSED on the purchase.
		sale := s.purchase(t, term, 1000).tx(t, 201)
		s.final(t, sale.OnlineAPIRefID)
		rev := s.post(t, "/in-store/api/v1/reversal", map[string]any{"onlineAPIRefId": sale.OnlineAPIRefID}, nil).tx(t, 201)
		s.final(t, rev.OnlineAPIRefID)
		check("reversal", rev.OnlineAPIRefID,
			"CREATED:ECR:PENDING", "ACKNOWLEDGED:TERMINAL:PENDING", "RESULT:TERMINAL:APPROVED")
		es = check("reversed purchase", sale.OnlineAPIRefID,
			"CREATED:ECR:PENDING", "ACKNOWLEDGED:TERMINAL:PENDING", "RESULT:TERMINAL:APPROVED", "REVERSED:TERMINAL:REVERSED")
		if last := es[len(es)-1]; !strings.Contains(last.Detail, rev.OnlineAPIRefID) {
			t.Errorf("REVERSED does not name the reversal: %+v", last)
		}

		// What an integrator hears equals the timelines: each change with
		// an event type is one event carrying the transaction at that
		// version, in the timeline's order, and there is no other.
		want := map[string][]string{}
		integratorType := map[instore.TimelineKind]instore.EventType{instore.EventCreated: instore.EventTransactionCreated,
			instore.EventAcknowledged: instore.EventTransactionAcknowledged, instore.EventProgress: instore.EventTransactionProgress}
		refs := []string{approved.OnlineAPIRefID, declined.OnlineAPIRefID, slow.OnlineAPIRefID, p.OnlineAPIRefID, sale.OnlineAPIRefID, rev.OnlineAPIRefID}
		for _, ref := range refs {
			for _, e := range s.timeline(t, ref) {
				typ, ok := integratorType[e.Kind]
				if !ok && e.StatusAfter != e.StatusBefore && e.StatusAfter != "PENDING" {
					typ, ok = instore.EventTransactionFinal, true
				}
				if ok {
					want[ref] = append(want[ref], fmt.Sprintf("%s v%d", typ, e.Version))
				}
			}
		}
		all := s.waitEvents(t, "&types=transaction.created,transaction.acknowledged,transaction.progress,transaction.final",
			func(evs []instore.EventWire) bool {
				n := 0
				for _, w := range want {
					n += len(w)
				}
				return len(evs) >= n
			})
		got := map[string][]string{}
		for _, e := range all {
			var v txJSON
			must(t, json.Unmarshal(e.Data, &v))
			got[v.OnlineAPIRefID] = append(got[v.OnlineAPIRefID], fmt.Sprintf("%s v%d", e.Type, v.Version))
		}
		for _, ref := range refs {
			if !slices.Equal(got[ref], want[ref]) {
				t.Errorf("events of %s: %v, want the timeline's %v", ref, got[ref], want[ref])
			}
		}

		// Another merchant's or an unknown transaction: WP04.
		s.get(t, "/in-store/api/v1/transaction/txn_unknown/events").problem(t, 404, "WP04")
		s.get(t, "/in-store/api/v1/transaction/not%20a%20ref/events").problem(t, 404, "WP04")
	})
}
