package instore

import "testing"

// TestRunOf: an endpoint's run is Run times its deliveries in flight, at
// most RunScale times, and at least one delivery.
func TestRunOf(t *testing.T) {
	for _, c := range []struct{ run, inFlight, want int }{
		{128, 0, 128}, {128, 1, 128}, {128, 2, 256}, {128, 4, 512}, {128, 16, 512}, {0, 1, 1}, {0, 8, 4}, {1, 3, 3},
	} {
		if got := (ClaimQuota{Run: c.run}).RunOf(c.inFlight); got != c.want {
			t.Errorf("Run %d, in flight %d: %d, want %d", c.run, c.inFlight, got, c.want)
		}
	}
}

// TestWebhookRequestApply: a request sets the fields it gives and leaves
// the others; an endpoint's InFlight is its concurrency, at least 1.
func TestWebhookRequestApply(t *testing.T) {
	w := Webhook{URL: "https://a.example/h", Description: "till", Concurrency: 2, EventTypes: []EventType{EventTransactionFinal}}
	four, d := 4, "bar"
	(&WebhookRequest{Concurrency: &four, Description: &d}).Apply(&w)
	if w.URL != "https://a.example/h" || w.Description != "bar" || w.Concurrency != 4 || len(w.EventTypes) != 1 || w.InFlight() != 4 {
		t.Fatalf("after Apply: %+v", w)
	}
	if (&Webhook{}).InFlight() != 1 {
		t.Fatal("an endpoint without concurrency has more than one delivery in flight")
	}
}
