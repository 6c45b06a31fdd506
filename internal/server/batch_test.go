package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/logging"
	"github.com/instore-dev/instore/internal/protocol"
	"github.com/instore-dev/instore/internal/server"
	"github.com/instore-dev/instore/internal/testserver"
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

// startClose posts the close of term from a goroutine and returns the
// close the device d receives (its Ref is the batchId) and where the
// close's answer arrives.
func (s *sandbox) startClose(t *testing.T, d *rawDevice, term string) (protocol.Envelope, <-chan reply) {
	t.Helper()
	done := make(chan reply, 1)
	go func() { done <- s.post(t, "/in-store/api/v1/terminal/"+term+"/close", nil, nil) }()
	return d.expect(protocol.TypeClose), done
}

// batchOf decodes a batch answer.
func batchOf(t *testing.T, r reply, status int) instore.BatchWire {
	t.Helper()
	if r.resp.StatusCode != status {
		t.Fatalf("answer = %d %s, want %d", r.resp.StatusCode, r.body, status)
	}
	var b instore.BatchWire
	must(t, json.Unmarshal(r.body, &b))
	return b
}

// approvedOn runs a purchase of amount on the raw device d to APPROVED.
func (s *sandbox) approvedOn(t *testing.T, d *rawDevice, term string, amount int64) protocol.Envelope {
	t.Helper()
	cmd := s.ackedPurchase(t, d, term, amount)
	d.result(cmd.Ref, instore.StatusApproved, protocol.TypeConfirm)
	return cmd
}

// TestBatchAnsweredTwice: while a close runs, a purchase is WP09
// BATCH_CLOSE (found by the store, without a read of its own); the
// terminal's batch is applied once and confirmed each time it is sent.
// On both backends.
func TestBatchAnsweredTwice(t *testing.T) {
	eachBackend(t, func(t *testing.T, backend func(*server.Config)) { batchAnsweredTwice(t, backend) })
}

func batchAnsweredTwice(t *testing.T, backend func(*server.Config)) {
	s := rawEnv(t, backend, func(c *server.Config) { c.AckTimeout = 30 * time.Second; c.TransactionDeadline = 30 * time.Second })
	term, d := s.rawTerminal(t, "RAW-BATCH-1")
	sale := s.approvedOn(t, d, term, 5000)

	cl, done := s.startClose(t, d, term)
	var view struct {
		Busy    bool    `json:"busy"`
		Current *string `json:"currentOnlineAPIRefId"`
	}
	must(t, json.Unmarshal(s.get(t, "/in-store/api/v1/terminal/"+term).body, &view))
	if !view.Busy || view.Current != nil {
		t.Errorf("the terminal during its close = %+v, want busy without a transaction", view)
	}
	if p := s.purchase(t, term, 1000).problem(t, 409, "WP09"); p.Reason != instore.ReasonBatchClose {
		t.Errorf("a purchase during the close: reason %q, want BATCH_CLOSE", p.Reason)
	}
	if p := s.post(t, "/in-store/api/v1/terminal/"+term+"/close", nil, nil).problem(t, 409, "WP09"); p.Reason != instore.ReasonBatchClose {
		t.Errorf("a second close: reason %q, want BATCH_CLOSE", p.Reason)
	}
	report := protocol.Batch{Number: 7, Transactions: []protocol.BatchTransaction{
		{Reference: sale.Ref, Type: instore.TypePurchase, StatusID: instore.StatusApproved, Amount: 5000, Currency: "SEK"},
	}}
	id := d.send(protocol.TypeBatch, "", "", cl.Ref, report)
	if c := d.expect(protocol.TypeConfirm); c.Re != id {
		t.Fatalf("confirm re %q, want %q", c.Re, id)
	}
	b := batchOf(t, <-done, 201)
	if b.BatchID != cl.Ref || b.State != instore.BatchClosed || !b.Matched || b.Number == nil || *b.Number != 7 {
		t.Fatalf("close = %+v, want %s CLOSED, matched, number 7", b, cl.Ref)
	}

	// The same message again (its confirm lost): confirmed, not applied
	// again, even with other content.
	report.Number, report.Transactions[0].Amount = 8, 4000
	d.send(protocol.TypeBatch, id, "", cl.Ref, report)
	if c := d.expect(protocol.TypeConfirm); c.Re != id {
		t.Fatalf("second confirm re %q, want %q", c.Re, id)
	}
	again := batchOf(t, s.get(t, "/in-store/api/v1/batch/"+cl.Ref), 200)
	if *again.Number != 7 || !again.Matched || len(again.Differences) != 0 {
		t.Errorf("after the resend: %+v, want the first answer", again)
	}
	// The terminal is free again.
	next, pc := s.startPurchase(t, d, term, 1000)
	d.send(protocol.TypeAck, "", next.ID, next.Ref, nil)
	(<-pc).tx(t, 201)
}

// TestBatchLateAnswer: a close the terminal does not answer in time ends
// FAILED with WP25; the terminal's late batch still closes it, the error
// kept, with batch.closed. On both backends.
func TestBatchLateAnswer(t *testing.T) {
	eachBackend(t, func(t *testing.T, backend func(*server.Config)) { batchLateAnswer(t, backend) })
}

func batchLateAnswer(t *testing.T, backend func(*server.Config)) {
	ck, clock := newClock()
	s := rawEnv(t, backend, clock)
	term, d := s.rawTerminal(t, "RAW-BATCH-2")
	cl, done := s.startClose(t, d, term)
	advance(t, ck, time.Second) // the ack time-out
	if p := (<-done).problem(t, 504, "WP25"); p.OnlineAPIRefID != "" {
		t.Errorf("WP25 of a close names a transaction %q", p.OnlineAPIRefID)
	}
	failed := batchOf(t, s.get(t, "/in-store/api/v1/batch/"+cl.Ref), 200)
	if failed.State != instore.BatchFailed || failed.ErrorCode != "WP25" || failed.Number != nil {
		t.Fatalf("after the time-out: %+v, want FAILED with WP25 and no number", failed)
	}
	// The terminal is free: a purchase is sent.
	cmd, pc := s.startPurchase(t, d, term, 1000)
	d.send(protocol.TypeAck, "", cmd.ID, cmd.Ref, nil)
	(<-pc).tx(t, 201)

	id := d.send(protocol.TypeBatch, "", "", cl.Ref, protocol.Batch{Number: 3, Transactions: []protocol.BatchTransaction{}})
	if c := d.expect(protocol.TypeConfirm); c.Re != id {
		t.Fatalf("confirm re %q, want %q", c.Re, id)
	}
	late := batchOf(t, s.get(t, "/in-store/api/v1/batch/"+cl.Ref), 200)
	if late.State != instore.BatchClosed || late.ErrorCode != "WP25" || late.Number == nil || *late.Number != 3 || !late.Matched {
		t.Errorf("after the late answer: %+v, want CLOSED, number 3, WP25 kept", late)
	}
	s.waitEvents(t, "", func(evs []instore.EventWire) bool {
		for _, e := range evs {
			if e.Type == instore.EventBatchClosed {
				return true
			}
		}
		return false
	})
}

// TestBatchCloseSurvivesRestart: the server stops while its close waits
// for the terminal; the restarted server keeps the close PENDING (the
// terminal still busy), sends it again after the device's hello, and the
// terminal's answer closes it.
func TestBatchCloseSurvivesRestart(t *testing.T) {
	s := rawEnv(t, func(c *server.Config) { c.AckTimeout = 30 * time.Second; c.TransactionDeadline = 30 * time.Second })
	term, d := s.rawTerminal(t, "RAW-BATCH-3")
	sale := s.approvedOn(t, d, term, 2500)

	// The ECR's close, on a client of its own; the ECR gives up before the
	// stop (a stop waits for the requests under way).
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", s.online+"/in-store/api/v1/terminal/"+term+"/close", nil)
	for k, v := range s.auth(s.token, s.key) {
		req.Header.Set(k, v)
	}
	req.Header.Set("Idempotency-Key", "close-after-restart")
	go func() {
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	cl := d.expect(protocol.TypeClose)

	addrs := map[string]string{}
	for _, n := range []string{"online", "access", "ops"} {
		addrs[n] = s.srv.URL(n)[len("http://"):]
	}
	addrs["terminal"] = s.srv.URL("terminal")[len("ws://"):]
	cancel()
	must(t, s.srv.Close())
	s.srv = testserver.Start(t, server.Config{
		ListenOnline: addrs["online"], ListenAccess: addrs["access"], ListenTerminal: addrs["terminal"], ListenOps: addrs["ops"],
		DataDir: s.srv.DataDir(), SQLiteSynchronous: "FULL", TransactionDeadline: 30 * time.Second, AckTimeout: 30 * time.Second,
		Logger: logging.New(s.logs, logging.Options{Format: "json"}),
	})

	pending := batchOf(t, s.get(t, "/in-store/api/v1/batch/"+cl.Ref), 200)
	if pending.State != instore.BatchPending {
		t.Fatalf("after the restart: %+v, want PENDING", pending)
	}
	if p := s.purchase(t, term, 1000).problem(t, 409, "WP23"); p.ErrorCode != "WP23" {
		t.Errorf("before the device is back: %+v", p)
	}
	d2 := s.redial(t, d)
	if again := d2.expect(protocol.TypeClose); again.Ref != cl.Ref {
		t.Fatalf("close resent for %q, want %q", again.Ref, cl.Ref)
	}
	if p := s.purchase(t, term, 1000).problem(t, 409, "WP09"); p.Reason != instore.ReasonBatchClose {
		t.Errorf("a purchase while the resumed close runs: reason %q, want BATCH_CLOSE", p.Reason)
	}
	// The ECR retries its close with the same Idempotency-Key: the key is
	// tied to the close it created (in the same database transaction), so
	// the retry waits for that close and answers it, and closes nothing
	// again.
	retry := make(chan reply, 1)
	go func() {
		retry <- s.post(t, "/in-store/api/v1/terminal/"+term+"/close", nil, map[string]string{"Idempotency-Key": "close-after-restart"})
	}()
	id := d2.send(protocol.TypeBatch, "", "", cl.Ref, protocol.Batch{Number: 1, Transactions: []protocol.BatchTransaction{
		{Reference: sale.Ref, Type: instore.TypePurchase, StatusID: instore.StatusApproved, Amount: 2500, Currency: "SEK"},
	}})
	if c := d2.expect(protocol.TypeConfirm); c.Re != id {
		t.Fatalf("confirm re %q, want %q", c.Re, id)
	}
	closed := batchOf(t, s.get(t, "/in-store/api/v1/batch/"+cl.Ref), 200)
	if closed.State != instore.BatchClosed || !closed.Matched || closed.ErrorCode != "" {
		t.Errorf("after the answer: %+v, want CLOSED and matched, without error", closed)
	}
	r := <-retry
	if got := batchOf(t, r, 201); got.BatchID != cl.Ref || r.resp.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("the retried close answered batch %q (replayed %q), want the first close %q replayed", got.BatchID, r.resp.Header.Get("Idempotent-Replayed"), cl.Ref)
	}
	if list := s.get(t, "/in-store/api/v1/batches?terminalId="+term); strings.Count(string(list.body), `"batchId"`) != 1 {
		t.Errorf("batches after the retry: %s, want the one close", list.body)
	}
}
