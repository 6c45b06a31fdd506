package service_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/instore-dev/instore"
)

// TestWebhookRegistrationRefusesSpecialAddresses: a URL whose host is a
// literal address that is not globally routable unicast (or localhost) is
// refused at registration with a 400 naming the field, and nothing is
// stored; with WebhookAllowPrivate (--webhook-allow-private, the sandbox)
// it is registered. A public address and a name are registered (a name's
// addresses are checked when a delivery connects).
func TestWebhookRegistrationRefusesSpecialAddresses(t *testing.T) {
	f := newFixture(t, "NORMAL", "S-1")
	p := &instore.Principal{MerchantID: f.merchant}
	create := func(u string) error {
		_, err := f.svc.CreateWebhook(t.Context(), p, &instore.WebhookRequest{URL: &u})
		return err
	}
	for _, host := range []string{"192.0.2.2", "0.1.2.3", "[::7f00:1]", "[64:ff9b::7f00:1]", "[2002:7f00:1::]",
		"127.0.0.1", "[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "10.1.2.3", "169.254.169.254", "[fd00::1]",
		"[fe80::1%25eth0]", "100.64.0.1", "[2001:db8::1]", "localhost", "LOCALHOST.", "api.localhost"} {
		err := create("https://" + host + "/hook")
		var e *instore.Error
		if !errors.As(err, &e) || e.Code != instore.EValidation || len(e.Fields) != 1 || e.Fields[0].Field != "/url" ||
			!strings.Contains(e.Fields[0].Message, "public internet") {
			t.Errorf("https://%s/hook: %v, want a validation error (400) naming /url", host, err)
		}
	}
	if ws, err := f.svc.Webhooks(t.Context(), p); err != nil || len(ws) != 0 {
		t.Fatalf("refused registrations stored %d endpoints (%v)", len(ws), err)
	}
	for _, u := range []string{"https://8.8.8.8/hook", "https://[2606:4700::1111]/hook", "https://example.com/hook"} {
		if err := create(u); err != nil {
			t.Errorf("%s: %v, want it registered", u, err)
		}
	}
	f.svc.WebhookAllowPrivate = true
	if err := create("https://127.0.0.1/hook"); err != nil {
		t.Errorf("with WebhookAllowPrivate: %v, want it registered", err)
	}
}
