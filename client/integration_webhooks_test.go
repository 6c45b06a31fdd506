package client_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/client"
	"github.com/instore-dev/instore/internal/testwait"
)

// webhookReceiver is a webhook endpoint as an integrator writes one: it
// verifies every delivery with client.VerifyWebhook and answers 2xx only
// then. The first fail deliveries it answers 503.
type webhookReceiver struct {
	*httptest.Server
	mu sync.Mutex
	// secrets verify deliveries: each one must verify with every one.
	secrets []string
	fail    int
	events  []*client.Event
	// signatures is how many v1 signatures each delivery carried.
	signatures []int
	bad        []error
	got        chan struct{}
}

func newWebhookReceiver(t *testing.T) *webhookReceiver {
	r := &webhookReceiver{got: make(chan struct{}, 100)}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
		if err != nil {
			http.Error(w, "read", http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.fail > 0 {
			r.fail--
			http.Error(w, "try later", http.StatusServiceUnavailable)
			return
		}
		var ev *client.Event
		for _, s := range r.secrets {
			if ev, err = client.VerifyWebhook(s, req.Header, body); err != nil {
				r.bad = append(r.bad, err)
				http.Error(w, "bad signature", http.StatusBadRequest)
				return
			}
		}
		if ev == nil {
			http.Error(w, "no secret yet", http.StatusServiceUnavailable)
			return
		}
		r.events = append(r.events, ev)
		r.signatures = append(r.signatures, len(strings.Fields(req.Header.Get(client.HeaderWebhookSignature))))
		w.WriteHeader(http.StatusNoContent)
		select {
		case r.got <- struct{}{}:
		default:
		}
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *webhookReceiver) setSecrets(s ...string) {
	r.mu.Lock()
	r.secrets = s
	r.mu.Unlock()
}

// waitFor waits until the receiver has the final event of ref and
// returns the events received of ref, in the order received, once each.
func (r *webhookReceiver) waitFor(t *testing.T, ctx context.Context, ref string) []*client.Event {
	t.Helper()
	for {
		r.mu.Lock()
		var mine []*client.Event
		seen := map[string]bool{}
		done := false
		for _, ev := range r.events {
			tx, err := ev.Transaction()
			if err != nil || tx.OnlineAPIRefID != ref || seen[ev.ID] {
				continue
			}
			seen[ev.ID] = true
			mine = append(mine, ev)
			done = done || ev.Type == instore.EventTransactionFinal
		}
		bad := slices.Clone(r.bad)
		r.mu.Unlock()
		if len(bad) > 0 {
			t.Fatalf("deliveries that did not verify: %v", bad)
		}
		if done {
			return mine
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the receiver never got the final event of %s: %v", ref, context.Cause(ctx))
		case <-r.got:
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// exerciseWebhooks manages a webhook endpoint through the SDK from
// registration to deletion, with a real receiver verifying each delivery:
// every webhook operation of api/online-api.yaml is called.
func exerciseWebhooks(t *testing.T, e *itEnv) {
	ctx, c, term := e.onFirstTerminal(t)
	rcv := newWebhookReceiver(t)
	rcv.fail = 1

	// Invalid registrations are validation problems with the field.
	for _, p := range []client.WebhookParams{
		{URL: "ftp://example.com/hook"},
		{URL: rcv.URL, EventTypes: []instore.EventType{"transaction.nope"}},
	} {
		var ce *client.Error
		if _, err := c.CreateWebhook(ctx, p); !errors.As(err, &ce) || ce.StatusCode != 400 || ce.Code() != instore.EValidation || len(ce.Errors) == 0 {
			t.Errorf("CreateWebhook(%+v) = %v, want a 400 validation problem naming the field", p, err)
		}
	}

	types := []instore.EventType{instore.EventTransactionCreated, instore.EventTransactionFinal}
	wh := mustOK[*client.Webhook](t, "CreateWebhook")(c.CreateWebhook(ctx, client.WebhookParams{URL: rcv.URL + "/hook", EventTypes: types, Description: "till 1"}))
	if !strings.HasPrefix(wh.Secret, "whsec_") || wh.Status != client.WebhookEnabled || wh.URL != rcv.URL+"/hook" ||
		!slices.Equal(wh.EventTypes, types) || wh.Description != "till 1" || wh.CreatedAt.IsZero() || wh.DisabledReason != "" {
		t.Fatalf("CreateWebhook = %v, want it enabled with a secret", wh)
	}
	if s := wh.String(); strings.Contains(s, wh.Secret) || !strings.Contains(s, "Secret:set") {
		t.Errorf("Webhook.String() = %q, want the secret hidden", s)
	}
	rcv.setSecrets(wh.Secret)
	if got := mustOK[*client.Webhook](t, "Webhook")(c.Webhook(ctx, wh.WebhookID)); got.Secret != "" || got.WebhookID != wh.WebhookID || !got.CreatedAt.Equal(wh.CreatedAt) {
		t.Errorf("Webhook = %v, want %s without its secret", got, wh.WebhookID)
	}
	if list := mustOK[[]*client.Webhook](t, "Webhooks")(c.Webhooks(ctx)); len(list) != 1 || list[0].WebhookID != wh.WebhookID || list[0].Secret != "" {
		t.Errorf("Webhooks = %v, want %s alone, without its secret", list, wh.WebhookID)
	}

	// A purchase: the first delivery fails (503) and waits for its retry,
	// the later ones behind it. Retry it now.
	tx := payFinal(t, c, client.PurchaseParams{TerminalID: term, Amount: 1250, Currency: "SEK"})
	var head *client.WebhookDelivery
	testwait.For(t, "the first delivery to be attempted", func() bool {
		page := mustOK[*client.DeliveryPage](t, "WebhookDeliveries")(c.WebhookDeliveries(ctx, wh.WebhookID, client.DeliveryQuery{}))
		if n := len(page.Deliveries); n > 0 && len(page.Deliveries[n-1].Attempts) > 0 {
			head = page.Deliveries[n-1]
		}
		return head != nil
	})
	if a := head.Attempts[0]; a.StatusCode != http.StatusServiceUnavailable || !strings.Contains(a.Response, "try later") || head.EventType != instore.EventTransactionCreated {
		t.Errorf("the first delivery = %+v, attempt %+v; want transaction.created answered 503", head, a)
	}
	retried := mustOK[*client.WebhookDelivery](t, "RetryWebhookDelivery")(c.RetryWebhookDelivery(ctx, wh.WebhookID, head.DeliveryID))
	if retried.DeliveryID != head.DeliveryID || retried.Status != client.DeliveryPending || retried.NextAttemptAt == nil {
		t.Errorf("RetryWebhookDelivery = %+v, want %s pending", retried, head.DeliveryID)
	}
	got := rcv.waitFor(t, ctx, tx.OnlineAPIRefID)
	var gotTypes []instore.EventType
	for _, ev := range got {
		gotTypes = append(gotTypes, ev.Type)
	}
	if !slices.Equal(gotTypes, types) {
		t.Errorf("delivered events of %s = %v, want %v", tx.OnlineAPIRefID, gotTypes, types)
	}
	if ft, err := got[len(got)-1].Transaction(); err != nil || !ft.Approved() || ft.Version != tx.Version {
		t.Errorf("delivered transaction.final = %v, %v; want version %d APPROVED", ft, err, tx.Version)
	}

	// Deliveries page by page (cursor) equal one page of all of them.
	all := mustOK[*client.DeliveryPage](t, "WebhookDeliveries")(c.WebhookDeliveries(ctx, wh.WebhookID, client.DeliveryQuery{Limit: 100}))
	var paged []string
	for d, err := range c.AllWebhookDeliveries(ctx, wh.WebhookID, client.DeliveryQuery{Limit: 1}) {
		if err != nil {
			t.Fatalf("AllWebhookDeliveries: %v", err)
		}
		paged = append(paged, d.DeliveryID)
	}
	var ids []string
	for _, d := range all.Deliveries {
		ids = append(ids, d.DeliveryID)
	}
	if len(ids) != 2 || !slices.Equal(paged, ids) || all.NextCursor != "" {
		t.Errorf("deliveries one by one = %v, in one page %v (next %q); want the same 2", paged, ids, all.NextCursor)
	}
	if _, err := c.WebhookDeliveries(ctx, wh.WebhookID, client.DeliveryQuery{Cursor: "nope"}); !client.IsCode(err, instore.EValidation) {
		t.Errorf("WebhookDeliveries with a bad cursor = %v, want validation", err)
	}

	// Rotation: the old secret signs beside the new one, and a receiver
	// holding either verifies.
	rot := mustOK[*client.Webhook](t, "RotateWebhookSecret")(c.RotateWebhookSecret(ctx, wh.WebhookID))
	if !strings.HasPrefix(rot.Secret, "whsec_") || rot.Secret == wh.Secret {
		t.Fatalf("RotateWebhookSecret gave no new secret")
	}
	rcv.setSecrets(wh.Secret, rot.Secret)
	tx2 := payFinal(t, c, client.PurchaseParams{TerminalID: term, Amount: 1300, Currency: "SEK"})
	rcv.waitFor(t, ctx, tx2.OnlineAPIRefID)
	rcv.mu.Lock()
	if n := rcv.signatures[len(rcv.signatures)-1]; n != 2 {
		t.Errorf("a delivery after rotation carried %d signatures, want 2", n)
	}
	rcv.mu.Unlock()

	// Patch: the description, then disabled and enabled again.
	up := mustOK[*client.Webhook](t, "UpdateWebhook")(c.UpdateWebhook(ctx, wh.WebhookID, client.WebhookUpdate{Description: client.String("till 2"), EventTypes: &[]instore.EventType{}}))
	if up.Description != "till 2" || len(up.EventTypes) != 0 || up.URL != wh.URL || up.Status != client.WebhookEnabled || up.Secret != "" {
		t.Errorf("UpdateWebhook(description, all types) = %v", up)
	}
	if up := mustOK[*client.Webhook](t, "UpdateWebhook")(c.UpdateWebhook(ctx, wh.WebhookID, client.WebhookUpdate{Status: client.WebhookDisabled})); up.Status != client.WebhookDisabled || up.DisabledReason == "" {
		t.Errorf("UpdateWebhook(disabled) = %v, want disabled with a reason", up)
	}
	if up := mustOK[*client.Webhook](t, "UpdateWebhook")(c.UpdateWebhook(ctx, wh.WebhookID, client.WebhookUpdate{Status: client.WebhookEnabled})); up.Status != client.WebhookEnabled || up.DisabledReason != "" {
		t.Errorf("UpdateWebhook(enabled) = %v, want enabled without a reason", up)
	}
	if _, err := c.UpdateWebhook(ctx, wh.WebhookID, client.WebhookUpdate{Status: "paused"}); !client.IsCode(err, instore.EValidation) {
		t.Errorf("UpdateWebhook(status paused) = %v, want validation", err)
	}

	// Delete: the endpoint is gone.
	if err := c.DeleteWebhook(ctx, wh.WebhookID); err != nil {
		t.Fatalf("DeleteWebhook: %v", err)
	}
	if _, err := c.Webhook(ctx, wh.WebhookID); !client.IsCode(err, instore.ENotFound) {
		t.Errorf("Webhook after DeleteWebhook = %v, want not-found", err)
	}
	if err := c.DeleteWebhook(ctx, wh.WebhookID); !client.IsCode(err, instore.ENotFound) {
		t.Errorf("DeleteWebhook again = %v, want not-found", err)
	}

	// A delete whose answer was lost is retried; the retry's not-found
	// means the first attempt deleted it: success.
	gone := mustOK[*client.Webhook](t, "CreateWebhook")(c.CreateWebhook(ctx, client.WebhookParams{URL: rcv.URL + "/gone"}))
	path := client.Prefix + "/webhooks/" + gone.WebhookID
	e.rec.dropFirst(http.MethodDelete, path)
	var r client.Response
	err := c.DeleteWebhook(ctx, gone.WebhookID, client.SaveResponse(&r))
	e.rec.mu.Lock()
	e.rec.drop = nil
	e.rec.mu.Unlock()
	if xs := e.rec.exchanges(http.MethodDelete, path); err != nil || r.Attempts != 2 || len(xs) != 2 || !xs[0].dropped || xs[1].status != http.StatusNotFound {
		t.Errorf("DeleteWebhook with its first answer lost = %v after %d attempts (%+v), want success after a 404 retry", err, r.Attempts, xs)
	}
	if list := mustOK[[]*client.Webhook](t, "Webhooks")(c.Webhooks(ctx)); len(list) != 0 {
		t.Errorf("Webhooks after delete = %v, want none", list)
	}
}
