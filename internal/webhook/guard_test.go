package webhook

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/service"
)

// oneAttempt is a store that records the outcome of the attempts it is
// given (RecordAttempts only: sendRun is called directly).
type oneAttempt struct {
	instore.WebhookStore
	mu       sync.Mutex
	outcomes []instore.AttemptOutcome
}

func (s *oneAttempt) RecordAttempts(_ context.Context, rs []instore.AttemptRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range rs {
		s.outcomes = append(s.outcomes, *r.Outcome)
	}
	return nil
}

// attempt makes one attempt of a delivery to url and returns its recorded
// error and what was logged.
func attempt(t *testing.T, allowPrivate bool, url string) (string, string) {
	t.Helper()
	var logs bytes.Buffer
	s := &oneAttempt{}
	d := New(Config{Store: s, AllowPrivate: allowPrivate, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Timeout: 5 * time.Second})
	d.sendRun(t.Context(), []*instore.DueDelivery{{ID: 1, Webhook: instore.Webhook{ID: "wh_1", MerchantID: "mer_1", URL: url,
		Secret: service.NewWebhookSecret(), Status: instore.WebhookEnabled},
		Event: instore.StoredEvent{Seq: 7, OutboxEvent: instore.OutboxEvent{MerchantID: "mer_1",
			Type: instore.EventTerminalOnline, At: time.Now(), Data: []byte(`{}`)}}}}, time.Now().Add(Lease))
	if len(s.outcomes) != 1 {
		t.Fatalf("%s: %d attempts recorded", url, len(s.outcomes))
	}
	return s.outcomes[0].Attempt.Error, logs.String()
}

// TestDialRefusesSpecialAddresses: without --webhook-allow-private a
// delivery is refused when it connects to an address that is not
// globally routable unicast, whatever form the URL writes it in, before a
// byte is sent: the forms the review reached (a documentation address,
// 0.0.0.0/8, the IPv4-compatible, NAT64 and 6to4 forms of loopback) and
// the loopback of a live receiver by name and IPv4-mapped. With the flag
// the receiver gets the delivery.
func TestDialRefusesSpecialAddresses(t *testing.T) {
	var mu sync.Mutex
	received := 0
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		received++
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer rcv.Close()
	_, port, _ := net.SplitHostPort(rcv.Listener.Addr().String())
	for _, host := range []string{"192.0.2.2", "0.1.2.3", "[::7f00:1]", "[64:ff9b::7f00:1]", "[2002:7f00:1::]",
		"[64:ff9b:1::7f00:1]", "[2001:0:4136:e378:8000:63bf:3fff:fdd2]", "198.51.100.7", "240.0.0.1",
		"127.0.0.1", "localhost", "[::ffff:127.0.0.1]", "[::1]", "169.254.169.254", "[fe80::1%25lo]"} {
		msg, _ := attempt(t, false, "http://"+host+":"+port+"/hook")
		if !strings.Contains(msg, "refused") || !strings.Contains(msg, "--webhook-allow-private") {
			t.Errorf("%s: attempt error %q, want the address refused", host, msg)
		}
	}
	mu.Lock()
	if received != 0 {
		t.Errorf("the receiver got %d deliveries through refused addresses", received)
	}
	mu.Unlock()
	if msg, _ := attempt(t, true, "http://localhost:"+port+"/hook"); msg != "" {
		t.Errorf("with --webhook-allow-private: attempt error %q, want none", msg)
	}
	mu.Lock()
	defer mu.Unlock()
	if received != 1 {
		t.Errorf("with --webhook-allow-private the receiver got %d deliveries, want 1", received)
	}
}

// TestAttemptErrorRedactsTheURL: an attempt's recorded error and the log
// lines never hold the URL's query, userinfo or fragment, however the URL
// is written (an upper-case scheme was kept whole before).
func TestAttemptErrorRedactsTheURL(t *testing.T) {
	for _, u := range []string{
		"HTTPS://127.0.0.1:9/hook?token=S3CRET",
		"https://127.0.0.1:9/hook?token=S3CRET",
		"hTTpS://127.0.0.1:9?token=S3CRET",
		"https://127.0.0.1:9/h%6Fok?token=S3CRET#S3CRET",
		"HTTPS://us3r:S3CRET@127.0.0.1:9/hook?a=1&token=S3CRET",
		"https://[::1/hook?token=S3CRET", // does not parse
		"https://127.0.0.1:9/hook?token=S3CRET%zz",
	} {
		msg, logs := attempt(t, false, u)
		if msg == "" {
			t.Fatalf("%s: no error recorded", u)
		}
		for _, secret := range []string{"S3CRET", "us3r", "token"} {
			if strings.Contains(msg, secret) || strings.Contains(logs, secret) {
				t.Errorf("%s: %q appears in the attempt's error %q or the logs %q", u, secret, msg, logs)
			}
		}
	}
	for u, want := range map[string]string{
		"HTTPS://us3r:pw@example.com/a/b?token=x#f": "https://...@example.com/a/b?...#...",
		"https://example.com:8443/hook":             "https://example.com:8443/hook",
		"https://example.com?":                      "https://example.com?...",
		"https://[::1/hook?token=x":                 "(the endpoint's URL)",
	} {
		if got := RedactURL(u); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", u, got, want)
		}
	}
}
