package webhook

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/clocktest"
	"github.com/instore-dev/instore/internal/service"
)

// runRecorder keeps what RecordAttempts was given.
type runRecorder struct {
	instore.WebhookStore
	mu    sync.Mutex
	calls [][]instore.AttemptRecord
}

func (s *runRecorder) RecordAttempts(_ context.Context, rs []instore.AttemptRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, rs)
	return nil
}

// run is n deliveries of one endpoint at url, events 1..n.
func run(url string, n int) []*instore.DueDelivery {
	wh := instore.Webhook{ID: "wh_1", MerchantID: "mer_1", URL: url, Secret: service.NewWebhookSecret(), Status: instore.WebhookEnabled}
	var out []*instore.DueDelivery
	for i := range n {
		out = append(out, &instore.DueDelivery{ID: int64(i + 1), Webhook: wh, Event: instore.StoredEvent{Seq: int64(i + 1),
			OutboxEvent: instore.OutboxEvent{MerchantID: "mer_1", Type: instore.EventTransactionFinal, At: time.Now(), Data: []byte(`{}`)}}})
	}
	return out
}

// failingReceiver is an endpoint that answers 503 to the nth request
// (from 1) if fail(n, its webhook-id) says so, 204 to the others; received
// returns the ids of the requests so far, in the order they came.
func failingReceiver(t *testing.T, fail func(n int, id string) bool) (rcv *httptest.Server, received func() []string) {
	var mu sync.Mutex
	var got []string
	rcv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		id := r.Header.Get("webhook-id")
		got = append(got, id)
		if fail(len(got), id) {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rcv.Close)
	return rcv, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
}

// outcomes is what each record says, by delivery: "ok", "retry", "gave up" or
// "unsent".
func outcomes(rs []instore.AttemptRecord) []string {
	// By delivery: the record takes them in the order the attempts began.
	rs = slices.Clone(rs)
	slices.SortFunc(rs, func(a, b instore.AttemptRecord) int { return int(a.Delivery.ID - b.Delivery.ID) })
	var out []string
	for _, r := range rs {
		switch o := r.Outcome; {
		case o == nil:
			out = append(out, "unsent")
		case o.Succeeded:
			out = append(out, "ok")
		case o.GiveUp:
			out = append(out, "gave up")
		default:
			out = append(out, "retry")
		}
	}
	return out
}

// TestRunStopsAtARetry: a run is sent in order, one at a time, and
// recorded in one call; a delivery to be retried ends it (the next waits
// for it: in order per endpoint) and those after it are given back unsent.
func TestRunStopsAtARetry(t *testing.T) {
	rcv, received := failingReceiver(t, func(n int, _ string) bool { return n == 3 })
	s := &runRecorder{}
	d := New(Config{Store: s, AllowPrivate: true})
	d.sendRun(t.Context(), run(rcv.URL, 5), time.Now().Add(Lease))
	want := []string{"ok", "ok", "retry", "unsent", "unsent"}
	if len(s.calls) != 1 || len(s.calls[0]) != 5 {
		t.Fatalf("recorded %d calls, want one of 5 records", len(s.calls))
	}
	for i, o := range outcomes(s.calls[0]) {
		if o != want[i] {
			t.Fatalf("recorded %v, want %v", outcomes(s.calls[0]), want)
		}
	}
	if got := received(); len(got) != 3 || got[0] != instore.EventID(1) || got[2] != instore.EventID(3) {
		t.Fatalf("received %v, want events 1-3 in order", got)
	}
}

// TestRunStopsBeforeItsLease: after a run's first delivery, an attempt
// begins only if it ends (Timeout) with leaseMargin left of the lease;
// the rest is given back unsent, so that no delivery is in flight when
// another node may claim it.
func TestRunStopsBeforeItsLease(t *testing.T) {
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer rcv.Close()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	s := &runRecorder{}
	d := New(Config{Store: s, AllowPrivate: true, Clock: clocktest.New(now), Timeout: time.Second})
	d.sendRun(t.Context(), run(rcv.URL, 3), now.Add(time.Second+leaseMargin-time.Nanosecond))
	if o := outcomes(s.calls[0]); len(o) != 3 || o[0] != "ok" || o[1] != "unsent" || o[2] != "unsent" {
		t.Fatalf("recorded %v, want the first sent and the rest given back", o)
	}
	s.calls = nil
	d.sendRun(t.Context(), run(rcv.URL, 3), now.Add(time.Second+leaseMargin))
	if o := outcomes(s.calls[0]); len(o) != 3 || o[2] != "ok" {
		t.Fatalf("recorded %v, want all three sent", o)
	}
}

// laneRun is run with the endpoint's concurrency set and the events'
// terminals taken in turn from terminals.
func laneRun(url string, n, concurrency int, terminals ...string) []*instore.DueDelivery {
	r := run(url, n)
	for i, dd := range r {
		dd.Webhook.Concurrency = concurrency
		dd.Event.TerminalID = terminals[i%len(terminals)]
	}
	return r
}

// terminalOf maps a run's event ids to their terminals.
func terminalOf(r []*instore.DueDelivery) map[string]string {
	m := map[string]string{}
	for _, dd := range r {
		m[instore.EventID(dd.Event.Seq)] = dd.Event.TerminalID
	}
	return m
}

// TestLanesAtOnceInOrderPerTerminal: an endpoint with concurrency 3 gets
// a run of three terminals' events three at a time (the receiver holds
// the first requests until three are in flight together), each terminal's
// in their order, all recorded in one call; with concurrency 1 the same
// run goes one at a time in the events' order.
func TestLanesAtOnceInOrderPerTerminal(t *testing.T) {
	var mu sync.Mutex
	var got []string
	inFlight, most := 0, 0
	three := make(chan struct{})
	var once sync.Once
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("webhook-id"))
		inFlight++
		most = max(most, inFlight)
		if inFlight == 3 {
			once.Do(func() { close(three) })
		}
		mu.Unlock()
		// The first requests wait for the third in flight (a bound only
		// so that a broken sender fails the test instead of hanging it).
		select {
		case <-three:
		case <-time.After(20 * time.Second):
		}
		mu.Lock()
		inFlight--
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer rcv.Close()
	s := &runRecorder{}
	d := New(Config{Store: s, AllowPrivate: true})
	r := laneRun(rcv.URL, 12, 3, "T1", "T2", "T3")
	d.sendRun(t.Context(), r, time.Now().Add(Lease))
	if len(s.calls) != 1 || len(s.calls[0]) != 12 || slices.ContainsFunc(outcomes(s.calls[0]), func(o string) bool { return o != "ok" }) {
		t.Fatalf("recorded %d calls (%v), want one of 12 successes", len(s.calls), outcomes(s.calls[0]))
	}
	if most != 3 {
		t.Fatalf("at most %d deliveries in flight, want 3 (the endpoint's concurrency)", most)
	}
	checkPerTerminal(t, got, terminalOf(r))

	// Concurrency 1: one at a time, in the events' order.
	got, most, inFlight = nil, 0, 0
	s.calls = nil
	r = laneRun(rcv.URL, 6, 1, "T1", "T2", "T3")
	d.sendRun(t.Context(), r, time.Now().Add(Lease))
	if most != 1 {
		t.Fatalf("concurrency 1: %d in flight at once", most)
	}
	for i, id := range got {
		if id != instore.EventID(int64(i+1)) {
			t.Fatalf("concurrency 1: received %v, want events 1-6 in order", got)
		}
	}
}

// checkPerTerminal fails unless each terminal's events were received once,
// in their order.
func checkPerTerminal(t *testing.T, got []string, terminal map[string]string) {
	t.Helper()
	last := map[string]int64{}
	for _, id := range got {
		seq, _ := instore.ParseEventID(id)
		term := terminal[id]
		if seq <= last[term] {
			t.Fatalf("received %v: %s of %s after %s's event %d", got, id, term, term, last[term])
		}
		last[term] = seq
	}
	if len(got) != len(terminal) {
		t.Fatalf("received %d deliveries, want %d", len(got), len(terminal))
	}
}

// TestLaneFailureHoldsItsTerminal: with concurrency 2, T1's first event
// fails (to be retried): T1's later events are not sent and are given
// back, and no delivery starts after the failure was recorded in the run
// (the failed one heads the endpoint's queue again); T2's, which may be in
// flight at once, are recorded as they ended.
func TestLaneFailureHoldsItsTerminal(t *testing.T) {
	rcv, received := failingReceiver(t, func(_ int, id string) bool { return id == instore.EventID(1) })
	s := &runRecorder{}
	d := New(Config{Store: s, AllowPrivate: true})
	r := laneRun(rcv.URL, 6, 2, "T1", "T2") // T1: 1, 3, 5; T2: 2, 4, 6
	d.sendRun(t.Context(), r, time.Now().Add(Lease))
	o := outcomes(s.calls[0])
	if o[0] != "retry" || o[2] != "unsent" || o[4] != "unsent" {
		t.Fatalf("recorded %v, want T1's first to be retried and its others unsent", o)
	}
	for i := 1; i < 6; i += 2 {
		if o[i] != "ok" && o[i] != "unsent" || o[i] == "ok" && i > 1 && o[i-2] != "ok" {
			t.Fatalf("recorded %v: T2's deliveries must succeed in order or be given back", o)
		}
	}
	// Recorded in the order the attempts began, the unsent last.
	rec := s.calls[0]
	for i := 1; i < len(rec); i++ {
		a, b := rec[i-1].Outcome, rec[i].Outcome
		if a == nil && b != nil || a != nil && b != nil && b.Attempt.At.Before(a.Attempt.At) {
			t.Fatalf("record %d out of the attempts' order: %+v after %+v", i, b, a)
		}
	}
	for _, id := range received() {
		if id == instore.EventID(3) || id == instore.EventID(5) {
			t.Fatalf("received %v: T1's later events were sent while its first failed", received())
		}
	}
}

// TestSynchronousLanesTakeTurns: the simulation's synchronous sender makes
// one attempt at a time, the lanes in flight (the endpoint's concurrency)
// in turns, a waiting lane starting when one ends; a failure stops the
// run there, the rest given back.
func TestSynchronousLanesTakeTurns(t *testing.T) {
	var got []string
	fail := ""
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("webhook-id"))
		if r.Header.Get("webhook-id") == fail {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer rcv.Close()
	s := &runRecorder{}
	d := New(Config{Store: s, AllowPrivate: true, Synchronous: true})
	// Events 1-7 of terminals A A B C B A C; concurrency 2: lanes A and B
	// take turns, then C once A's ends... B ends first: A, B, A, B, A, C, C.
	r := run(rcv.URL, 7)
	for i, term := range []string{"A", "A", "B", "C", "B", "A", "C"} {
		r[i].Webhook.Concurrency, r[i].Event.TerminalID = 2, term
	}
	d.sendRun(t.Context(), r, time.Now().Add(Lease))
	want := []string{instore.EventID(1), instore.EventID(3), instore.EventID(2), instore.EventID(5), instore.EventID(6),
		instore.EventID(4), instore.EventID(7)}
	if !slices.Equal(got, want) {
		t.Fatalf("received %v, want %v", got, want)
	}
	got, s.calls, fail = nil, nil, instore.EventID(3)
	d.sendRun(t.Context(), r, time.Now().Add(Lease))
	if o := outcomes(s.calls[0]); !slices.Equal(o, []string{"ok", "unsent", "retry", "unsent", "unsent", "unsent", "unsent"}) {
		t.Fatalf("with B's first failing: recorded %v", o)
	}
	// A's first fails: B's first, in flight in the same turn, ends and is
	// recorded; nothing starts after.
	got, s.calls, fail = nil, nil, instore.EventID(1)
	d.sendRun(t.Context(), r, time.Now().Add(Lease))
	if o := outcomes(s.calls[0]); !slices.Equal(o, []string{"retry", "unsent", "ok", "unsent", "unsent", "unsent", "unsent"}) {
		t.Fatalf("with A's first failing: recorded %v", o)
	}
}

// TestRetriedHeadGoesAlone: with several in flight, a run whose head
// failed before sends the head alone first: failing again, nothing else
// is sent (one request per retry, not one per lane); succeeding, the
// lanes open behind it.
func TestRetriedHeadGoesAlone(t *testing.T) {
	for _, synchronous := range []bool{false, true} {
		down := true
		rcv, received := failingReceiver(t, func(int, string) bool { return down })
		s := &runRecorder{}
		d := New(Config{Store: s, AllowPrivate: true, Synchronous: synchronous})
		r := laneRun(rcv.URL, 6, 4, "T1", "T2", "T3")
		r[0].Attempts = 2
		d.sendRun(t.Context(), r, time.Now().Add(Lease))
		if o := outcomes(s.calls[0]); len(received()) != 1 || !slices.Equal(o, []string{"retry", "unsent", "unsent", "unsent", "unsent", "unsent"}) {
			t.Fatalf("synchronous %v, endpoint down: received %v, recorded %v; want the head alone", synchronous, received(), o)
		}
		down, s.calls = false, nil
		d.sendRun(t.Context(), r, time.Now().Add(Lease))
		if o := outcomes(s.calls[0]); slices.ContainsFunc(o, func(o string) bool { return o != "ok" }) || received()[1] != instore.EventID(1) {
			t.Fatalf("synchronous %v, endpoint back: received %v, recorded %v; want the head first, then all", synchronous, received(), o)
		}
	}
}

// TestRetriesAligned: the deliveries of a run left to be retried get the
// earliest of their retry times; successes, give-ups and unsent ones keep
// theirs.
func TestRetriesAligned(t *testing.T) {
	at := func(h int) time.Time { return time.Date(2026, 3, 1, h, 0, 0, 0, time.UTC) }
	recs := []instore.AttemptRecord{
		{Outcome: &instore.AttemptOutcome{NextAt: at(12)}},
		{Outcome: &instore.AttemptOutcome{Succeeded: true}},
		{Outcome: &instore.AttemptOutcome{NextAt: at(9)}},
		{Outcome: &instore.AttemptOutcome{GiveUp: true, NextAt: at(3)}},
		{},
		{Outcome: &instore.AttemptOutcome{NextAt: at(11)}},
	}
	alignRetries(recs)
	for i, want := range []time.Time{at(9), {}, at(9), at(3), {}, at(9)} {
		if o := recs[i].Outcome; o != nil && !o.NextAt.Equal(want) {
			t.Errorf("record %d: next at %v, want %v", i, o.NextAt, want)
		}
	}
}
