package webhook

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/instore-dev/instore"
)

// queueStore is one endpoint's queue of deliveries in memory: a claim
// gets its head while it is not leased (ClaimDeliveries and RecordAttempts
// only; the rest of the interface is not used by the dispatcher).
type queueStore struct {
	instore.WebhookStore
	mu       sync.Mutex
	wh       instore.Webhook
	pending  []int64 // event numbers, in order
	leased   bool
	recorded []int64
	done     chan struct{}
}

func (s *queueStore) ClaimDeliveries(_ context.Context, _, _ time.Time, _ instore.ClaimQuota) ([]*instore.DueDelivery, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.leased || len(s.pending) == 0 {
		return nil, nil
	}
	s.leased = true
	seq := s.pending[0]
	return []*instore.DueDelivery{{ID: seq, Webhook: s.wh, Event: instore.StoredEvent{Seq: seq, OutboxEvent: instore.OutboxEvent{
		MerchantID: "mer_1", Type: instore.EventTransactionFinal, At: time.Now(), Data: []byte(`{}`)}}}}, nil
}

func (s *queueStore) RecordAttempts(_ context.Context, rs []instore.AttemptRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.leased = false
	for _, r := range rs {
		if r.Outcome != nil && r.Outcome.Succeeded {
			s.pending = s.pending[1:]
			s.recorded = append(s.recorded, r.Delivery.Event.Seq)
			if len(s.pending) == 0 {
				close(s.done)
			}
		}
	}
	return nil
}

// TestBacklogDrainsWithoutTicks: an endpoint's queue of deliveries is sent
// one after another as each succeeds, in order and signed, without waiting
// for the dispatcher's next tick (an hour here): the next is claimed as
// soon as the previous is recorded.
func TestBacklogDrainsWithoutTicks(t *testing.T) {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	verifier, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []string
	bad := 0
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		if verifier.Verify(body, r.Header) != nil {
			bad++
			w.WriteHeader(400)
			return
		}
		got = append(got, r.Header.Get("webhook-id"))
		w.WriteHeader(204)
	}))
	defer rcv.Close()
	s := &queueStore{wh: instore.Webhook{ID: "wh_1", URL: rcv.URL, Secret: secret, Status: instore.WebhookEnabled},
		pending: []int64{1, 2, 3, 4, 5}, done: make(chan struct{})}
	d := New(Config{Store: s, AllowPrivate: true, Interval: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { d.Run(ctx); close(ran) }()
	d.Poke() // new events were numbered
	select {
	case <-s.done:
	case <-time.After(time.Minute): // a liveness bound: each took an hour's tick before
		t.Fatalf("after a minute %d of 5 deliveries recorded", len(s.recorded))
	}
	cancel()
	<-ran
	mu.Lock()
	defer mu.Unlock()
	want := []string{instore.EventID(1), instore.EventID(2), instore.EventID(3), instore.EventID(4), instore.EventID(5)}
	if len(got) != len(want) || bad != 0 {
		t.Fatalf("received %v (%d bad signatures), want %v", got, bad, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("delivery %d is %s, want %s", i, got[i], want[i])
		}
	}
	if c := d.Counts(); c["succeeded"] != 5 {
		t.Errorf("counts %v", c)
	}
}
