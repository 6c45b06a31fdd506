package webhook

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/clocktest"
	"github.com/instore-dev/instore/internal/service"
	"github.com/instore-dev/instore/internal/sqlstore"
)

// TestHangingMerchantLeavesOthersSenders: merchant A's 16 endpoints never
// answer; merchant B's deliveries still arrive, one after the other, while
// every one of A's requests is still hanging (none answered, none cut by
// the attempt's time-out, which is an hour here and never reached: the
// service's clock stands still). A holds at most PerMerchant senders. With
// one pool of senders shared by all merchants and claims in the order of
// due time, A's earlier deliveries took every sender and B's waited for
// A's to time out.
func TestHangingMerchantLeavesOthersSenders(t *testing.T) {
	ctx := context.Background()
	st, err := sqlstore.Open(ctx, filepath.Join(t.TempDir(), "hooks.db"), sqlstore.Options{Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := clocktest.New(now)

	// A's receivers: each request is held until the test ends.
	release := make(chan struct{})
	var mu sync.Mutex
	entered, ended, most := 0, 0, 0
	hanging := make(chan struct{}, 64)
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		entered++
		most = max(most, entered-ended)
		mu.Unlock()
		hanging <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done(): // the sender gave up: a time-out
		}
		mu.Lock()
		ended++
		mu.Unlock()
	}))
	// B's receiver answers at once.
	got := make(chan string, 8)
	fast := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("webhook-id")
		w.WriteHeader(http.StatusNoContent)
	}))
	var stop func()
	defer func() {
		// A's requests end first: the servers and the dispatcher wait for
		// them.
		close(release)
		if stop != nil {
			stop()
		}
		hang.Close()
		fast.Close()
	}()

	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(st.CreateCustomer(ctx, &instore.Customer{ID: "cus_1", Name: "c", CreatedAt: now}))
	for _, m := range []string{"mer_a", "mer_b"} {
		must(st.CreateMerchant(ctx, &instore.Merchant{ID: m, CustomerID: "cus_1", Name: m, Active: true, CreatedAt: now}))
	}
	for i := range instore.MaxWebhooks {
		must(st.CreateWebhook(ctx, &instore.Webhook{ID: fmt.Sprintf("wh_a%02d", i), MerchantID: "mer_a",
			URL: fmt.Sprintf("%s/a%d", hang.URL, i), Status: instore.WebhookEnabled, Secret: service.NewWebhookSecret(), CreatedAt: now}, instore.MaxWebhooks))
	}
	must(st.CreateWebhook(ctx, &instore.Webhook{ID: "wh_b", MerchantID: "mer_b", URL: fast.URL + "/b",
		Status: instore.WebhookEnabled, Secret: service.NewWebhookSecret(), CreatedAt: now}, instore.MaxWebhooks))
	event := func(m string, at time.Time) int64 {
		t.Helper()
		must(st.AppendEvents(ctx, []instore.OutboxEvent{{MerchantID: m, Type: instore.EventTerminalOnline, At: at, Data: []byte(`{}`)}}))
		if _, err := st.SequenceEvents(ctx, 100); err != nil {
			t.Fatal(err)
		}
		evs, err := st.ListEvents(ctx, instore.EventFilter{MerchantID: m, Limit: 100})
		must(err)
		return evs[len(evs)-1].Seq
	}
	// A's event is due before B's, so A's deliveries come first.
	event("mer_a", now.Add(-2*time.Minute))
	first := event("mer_b", now.Add(-time.Minute))

	d := New(Config{Store: st, AllowPrivate: true, Interval: time.Hour, Clock: clock, Timeout: time.Hour})
	runCtx, cancel := context.WithCancel(ctx)
	ran := make(chan struct{})
	go func() { d.Run(runCtx); close(ran) }()
	stop = func() { cancel(); <-ran }
	d.Poke()

	// A takes its share of senders, and no more.
	for range PerMerchant {
		select {
		case <-hanging:
		case <-time.After(time.Minute): // a liveness bound
			t.Fatal("merchant A's deliveries were not sent")
		}
	}
	arrives := func(seq int64) {
		t.Helper()
		select {
		case id := <-got:
			if id != instore.EventID(seq) {
				t.Fatalf("B received %s, want %s", id, instore.EventID(seq))
			}
		case <-time.After(time.Minute): // a liveness bound: an hour's time-out was the only way before
			t.Fatal("merchant B's delivery did not arrive while merchant A's endpoints hang")
		}
		// No attempt of A ended before (an attempt is counted before its
		// sender is free).
		if c := d.Counts(); c["failed"] != 0 {
			t.Fatalf("B's delivery arrived after %d of A's attempts ended; want it while all of them hang", c["failed"])
		}
		mu.Lock()
		defer mu.Unlock()
		if ended != 0 {
			t.Fatalf("B's delivery arrived after %d of A's requests ended; want it while all of them hang", ended)
		}
	}
	arrives(first)
	// A later event of B (another wave) is not held either.
	second := event("mer_b", now)
	d.Poke()
	arrives(second)
	mu.Lock()
	defer mu.Unlock()
	if most > PerMerchant || entered > PerMerchant {
		t.Errorf("merchant A held %d senders at once (%d requests); want at most %d", most, entered, PerMerchant)
	}
}
