package webhook

import (
	"context"
	"net/http"
	"net/http/httptest"
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

// outcomes is what each record says: "ok", "retry", "gave up" or
// "unsent".
func outcomes(rs []instore.AttemptRecord) []string {
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
	var mu sync.Mutex
	var got []string
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, r.Header.Get("webhook-id"))
		if len(got) == 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer rcv.Close()
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
	if len(got) != 3 || got[0] != instore.EventID(1) || got[2] != instore.EventID(3) {
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
