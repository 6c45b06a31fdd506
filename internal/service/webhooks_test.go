package service_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/lifecycle"
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

// racingStore runs race once, as another request or node would commit it
// while a change of an endpoint is under way: after the change read the
// endpoint (Webhook), or as the change reaches the store (ChangeWebhook,
// before its transaction).
type racingStore struct {
	instore.Store
	race func()
}

func (s *racingStore) raced() {
	if r := s.race; r != nil {
		s.race = nil
		r()
	}
}

func (s *racingStore) Webhook(ctx context.Context, merchantID, id string) (*instore.Webhook, error) {
	w, err := s.Store.Webhook(ctx, merchantID, id)
	s.raced()
	return w, err
}

func (s *racingStore) ChangeWebhook(ctx context.Context, merchantID, id string, change func(*instore.Webhook) error) (*instore.Webhook, error) {
	s.raced()
	return s.Store.ChangeWebhook(ctx, merchantID, id, change)
}

// TestWebhookPatchKeepsRacingChanges: a PATCH of an endpoint's description
// committed after a rotation, or after the dispatcher disabled the
// endpoint, both made while the PATCH was under way, keeps them: the
// secret the rotation answered signs, and the endpoint stays disabled
// with its reason and failing time.
func TestWebhookPatchKeepsRacingChanges(t *testing.T) {
	ctx := t.Context()
	f := newFixture(t, "NORMAL", "S-1")
	p := &instore.Principal{MerchantID: f.merchant}
	rs := &racingStore{Store: f.st}
	f.svc.Store = rs
	register := func() string {
		t.Helper()
		u := "https://example.com/hook"
		w, err := f.svc.CreateWebhook(ctx, p, &instore.WebhookRequest{URL: &u})
		if err != nil {
			t.Fatal(err)
		}
		return w.WebhookID
	}
	patch := func(id, desc string) *instore.Webhook {
		t.Helper()
		if _, err := f.svc.UpdateWebhook(ctx, p, id, &instore.WebhookRequest{Description: &desc}); err != nil {
			t.Fatal(err)
		}
		if rs.race != nil {
			t.Fatal("the PATCH made no call the change could race")
		}
		w, err := f.st.Webhook(ctx, f.merchant, id)
		if err != nil {
			t.Fatal(err)
		}
		if w.Description != desc {
			t.Errorf("description %q, want the PATCH's %q", w.Description, desc)
		}
		return w
	}

	// A rotation.
	id := register()
	var rotated *instore.WebhookWire
	rs.race = func() {
		var err error
		if rotated, err = f.svc.RotateWebhookSecret(ctx, p, id); err != nil {
			t.Fatal(err)
		}
	}
	if w := patch(id, "after a rotation"); w.Secret != rotated.Secret || w.PreviousSecret == "" {
		t.Errorf("after a PATCH racing a rotation: secret %q (previous %q), want the rotation's %q beside the one before",
			w.Secret, w.PreviousSecret, rotated.Secret)
	}

	// The dispatcher's failing attempt, which disables the endpoint
	// (failing since before DisableBefore); the endpoint before is gone,
	// so that the event is owed to this one only.
	if err := f.svc.DeleteWebhook(ctx, p, id); err != nil {
		t.Fatal(err)
	}
	id = register()
	rs.race = func() {
		now := time.Now()
		ev := instore.OutboxEvent{MerchantID: f.merchant, Type: instore.EventTerminalOnline, At: now, Data: []byte(`{}`)}
		if err := f.st.AppendEvents(ctx, []instore.OutboxEvent{ev}); err != nil {
			t.Fatal(err)
		}
		if _, err := f.st.SequenceEvents(ctx, 10); err != nil {
			t.Fatal(err)
		}
		due, err := f.st.ClaimDeliveries(ctx, now.Add(time.Second), now.Add(time.Minute), instore.ClaimQuota{Limit: 10})
		if err != nil || len(due) != 1 || due[0].Webhook.ID != id {
			t.Fatalf("claimed %d deliveries (%v), want the endpoint's one", len(due), err)
		}
		err = f.st.RecordAttempts(ctx, []instore.AttemptRecord{{Delivery: due[0], Outcome: &instore.AttemptOutcome{
			Attempt: instore.WebhookAttempt{N: 1, At: now, StatusCode: 500}, NextAt: now.Add(time.Minute),
			DisableBefore: now.Add(time.Hour), DisableReason: lifecycle.DisabledReason()}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	if w := patch(id, "after a failure"); w.Status != instore.WebhookDisabled || w.DisabledReason != lifecycle.DisabledReason() || w.FailingSince == nil {
		t.Errorf("after a PATCH racing the disabling: status %s (%q), failing since %v; want disabled for failing",
			w.Status, w.DisabledReason, w.FailingSince)
	}
}

// TestWebhookRegistrationRefusesBadShapes: a port outside 1-65535 (or an
// empty one), an event type listed twice, and a path value that is no
// reference's shape are refused before anything is stored: 400 naming the
// field, or 404 for the path value (PostgreSQL's text refuses NUL and
// bytes that are not UTF-8, which answered 500 before).
func TestWebhookRegistrationRefusesBadShapes(t *testing.T) {
	f := newFixture(t, "NORMAL", "S-1")
	p := &instore.Principal{MerchantID: f.merchant}
	field := func(err error) string {
		var e *instore.Error
		if !errors.As(err, &e) || e.Code != instore.EValidation || len(e.Fields) != 1 {
			return ""
		}
		return e.Fields[0].Field
	}
	for _, u := range []string{"https://example.com:99999/hook", "https://example.com:0/hook", "https://example.com:/hook",
		"https://example.com:65536/hook", "https://example.com:-1/hook"} {
		if _, err := f.svc.CreateWebhook(t.Context(), p, &instore.WebhookRequest{URL: &u}); field(err) != "/url" {
			t.Errorf("%s: %v, want a validation error naming /url", u, err)
		}
	}
	u := "https://example.com:8443/hook"
	twice := []instore.EventType{instore.EventTransactionFinal, instore.EventTransactionCreated, instore.EventTransactionFinal}
	if _, err := f.svc.CreateWebhook(t.Context(), p, &instore.WebhookRequest{URL: &u, EventTypes: &twice}); field(err) != "/eventTypes" {
		t.Errorf("an event type twice: %v, want a validation error naming /eventTypes", err)
	}
	if ws, err := f.svc.Webhooks(t.Context(), p); err != nil || len(ws) != 0 {
		t.Fatalf("refused registrations stored %d endpoints (%v)", len(ws), err)
	}
	w, err := f.svc.CreateWebhook(t.Context(), p, &instore.WebhookRequest{URL: &u})
	if err != nil {
		t.Fatalf("%s: %v, want it registered", u, err)
	}
	if _, err := f.svc.UpdateWebhook(t.Context(), p, w.WebhookID, &instore.WebhookRequest{EventTypes: &twice}); field(err) != "/eventTypes" {
		t.Errorf("PATCH with an event type twice: %v, want a validation error naming /eventTypes", err)
	}
	for _, id := range []string{"wh_\x00", "wh_\xff", "", "wh_a/b"} {
		var e *instore.Error
		if _, err := f.svc.Webhook(t.Context(), p, id); !errors.As(err, &e) || e.Code != instore.ENotFound {
			t.Errorf("GET webhook %q: %v, want not-found", id, err)
		}
		if _, err := f.svc.RotateWebhookSecret(t.Context(), p, id); !errors.As(err, &e) || e.Code != instore.ENotFound {
			t.Errorf("rotate webhook %q: %v, want not-found", id, err)
		}
	}
}
