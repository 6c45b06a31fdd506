package simulation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/auth"
	"github.com/instore-dev/instore/internal/clocktest"
	"github.com/instore-dev/instore/internal/onlineapi"
	"github.com/instore-dev/instore/internal/service"
	"github.com/instore-dev/instore/internal/sqlstore"
	"github.com/instore-dev/instore/internal/webhook"
)

// Webhooks: the merchant has one endpoint, registered through the real
// Online API in the template; each node runs the real dispatcher
// (internal/webhook) as a periodic task whose transport is the simulated
// receiver, which fails, times out or accepts as the seed says.

const (
	// dispatchEvery is how often a node's dispatcher claims due deliveries.
	dispatchEvery = time.Second
	receiverURL   = "http://receiver.sim/hooks"
	// maxRetryWait bounds how far the world's clock jumps, after its quiet
	// period, to the next attempt of a delivery (RetrySchedule's longest
	// wait and its jitter).
	maxRetryWait = 13 * time.Hour
)

// registerWebhook registers the merchant's endpoint through the Online API
// on the template's store, before any event of a history is numbered:
// every event of a history is owed to it.
func registerWebhook(ctx context.Context, db *sqlstore.DB, tpl *Template) error {
	meta := instore.DefaultMetadata()
	svc := &service.Service{Store: db, Metadata: &meta, Logger: slog.New(slog.DiscardHandler), SecretMatches: auth.Matches,
		Clock: clocktest.New(epoch), WebhookAllowHTTP: true, WebhookAllowPrivate: true}
	h, authn := onlineHandler(svc, nil)
	token, _, err := authn.Mint(tpl.client, time.Hour)
	if err != nil {
		return err
	}
	r := httptest.NewRequestWithContext(ctx, http.MethodPost, "http://instore"+onlineapi.Prefix+"/webhooks",
		strings.NewReader(`{"url": "`+receiverURL+`", "description": "the simulation's receiver"}`))
	r.Header.Set("Authorization", "Bearer "+token)
	r.Header.Set("Ocp-Apim-Subscription-Key", tpl.subscriptionKey)
	r.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	var v instore.WebhookWire
	if rec.Code != http.StatusCreated || json.Unmarshal(rec.Body.Bytes(), &v) != nil || v.Secret == "" {
		return fmt.Errorf("register the webhook endpoint: %d %s", rec.Code, rec.Body.String())
	}
	tpl.webhookID, tpl.webhookSecret = v.WebhookID, v.Secret
	return nil
}

// dispatcher is the node's webhook dispatcher: synchronous (its rounds are
// the node's tasks), its jitter from the seed, its transport the receiver.
func (n *node) dispatcher() *webhook.Dispatcher {
	return webhook.New(webhook.Config{Store: n.svc.Store, Logger: n.logger(), Clock: n.svc.Clock,
		Transport: n.w.receiver, Rand: n.w.ids.rng.Float64, Synchronous: true})
}

// receiver is the merchant's webhook endpoint: it verifies each delivery's
// signature, then fails (500), times out or accepts as the seed's storm
// level says (always accepts once the world is calm), and records the
// events it accepted.
type receiver struct {
	w      *world
	secret string
	// accepted counts the 2xx answers by event number.
	accepted map[int64]int
	// latest is the highest event accepted; failing the event whose
	// attempts failed since the last acceptance (0: none), failingSince
	// when the first of them was made.
	latest, failing int64
	failingSince    time.Time
}

var errTimedOut = errors.New("simulation: the receiver did not answer in time")

func (r *receiver) RoundTrip(req *http.Request) (*http.Response, error) {
	w := r.w
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, err
	}
	id := req.Header.Get("webhook-id")
	seq, ok := instore.ParseEventID(id)
	wh, err := standardwebhooks.NewWebhook(r.secret)
	if err == nil {
		// Its time is the world's, not the wall clock's: checked below.
		err = wh.VerifyIgnoringTimestamp(body, req.Header)
	}
	if err != nil || !ok {
		w.fail("webhook signatures verify", "delivery %q: %v", id, err)
		return r.answer(req, http.StatusBadRequest), nil
	}
	if ts := req.Header.Get("webhook-timestamp"); ts != strconv.FormatInt(w.sched.now.Unix(), 10) {
		w.fail("webhook signatures verify", "delivery %s signed at %s, the world's time is %d", id, ts, w.sched.now.Unix())
	}
	if r.accepted[seq] == 0 && (seq < r.latest || r.failing != 0 && seq != r.failing) {
		w.fail("webhooks in order per endpoint", "%s sent after %d was accepted, while %d was owed", id, r.latest, r.failing)
	}
	code, timedOut := w.faults.hookAnswer()
	w.note("webhook %s %d timedOut=%v", id, code, timedOut)
	if timedOut || code >= 300 {
		if r.failing == 0 {
			r.failing, r.failingSince = seq, w.sched.now
		}
		if timedOut {
			return nil, errTimedOut
		}
		return r.answer(req, code), nil
	}
	r.accepted[seq]++
	r.latest, r.failing = max(r.latest, seq), 0
	w.learn(body)
	return r.answer(req, code), nil
}

func (r *receiver) answer(req *http.Request, code int) *http.Response {
	return &http.Response{StatusCode: code, Status: http.StatusText(code), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{}, Body: io.NopCloser(bytes.NewReader(nil)), Request: req}
}

// awaitDeliveries runs the calm world on, past its quiet period, until
// the receiver has every event: while the head of the endpoint's queue
// waits for its next attempt (RetrySchedule's waits reach hours), the
// clock jumps to it, and the world runs on a while after each jump (what
// the time that passed brings is numbered and owed too).
func (w *world) awaitDeliveries() {
	for range 20 {
		if w.failure != nil || w.missingEvents() == 0 {
			return
		}
		if next, ok := w.nextAttempt(); ok && next.After(w.sched.now) {
			if next.Sub(w.sched.now) > maxRetryWait {
				return // settled reports what is missing
			}
			w.note("jump %v to the next webhook attempt", next.Sub(w.sched.now))
			w.sched.now = next
		}
		w.runUntil(w.sched.now.Add(10 * dispatchEvery))
	}
}

// missingEvents numbers the events committed (as checkEvents does) and
// counts the merchant's numbered events the receiver never accepted.
func (w *world) missingEvents() int {
	ctx := context.Background()
	if _, err := w.db.SequenceEvents(ctx, 1<<20); err != nil {
		w.fail("store readable", "%v", err)
		return 0
	}
	evs, err := w.db.ListEvents(ctx, instore.EventFilter{MerchantID: w.merchantID, Limit: 1 << 20})
	if err != nil {
		w.fail("store readable", "%v", err)
		return 0
	}
	n := 0
	for _, e := range evs {
		if e.Seq > w.eventsBefore && w.receiver.accepted[e.Seq] == 0 {
			n++
		}
	}
	return n
}

// nextAttempt is when the head of the endpoint's queue, its pending
// delivery of the earliest event, is due (those behind it wait for it).
func (w *world) nextAttempt() (time.Time, bool) {
	ds, err := w.db.WebhookDeliveries(context.Background(), w.webhookID, 0, 1<<20)
	if err != nil {
		w.fail("store readable", "%v", err)
		return time.Time{}, false
	}
	var head *instore.WebhookDelivery
	for _, d := range ds {
		if d.Status == instore.DeliveryPending && (head == nil || d.EventSeq < head.EventSeq) {
			head = d
		}
	}
	if head == nil {
		return time.Time{}, false
	}
	return head.NextAt, true
}

// checkWebhooks: every numbered event of the merchant was accepted by its
// endpoint at least once, unless the endpoint was disabled, which it may
// be only after failing for instore.WebhookDisableAfter.
func (w *world) checkWebhooks(ctx context.Context) {
	wh, err := w.db.Webhook(ctx, w.merchantID, w.webhookID)
	if err != nil {
		w.fail("store readable", "%v", err)
		return
	}
	r := w.receiver
	if wh.Status != instore.WebhookEnabled {
		if r.failing == 0 || w.sched.now.Sub(r.failingSince) < instore.WebhookDisableAfter {
			w.fail("an endpoint disabled only when failing", "disabled (%s), failing since %v", wh.DisabledReason, r.failingSince)
		}
		w.note("the endpoint was disabled (%s): its events are not checked", wh.DisabledReason)
		return
	}
	if n := w.missingEvents(); n > 0 {
		next, _ := w.nextAttempt()
		w.fail("every event delivered with a 2xx", "%d events never accepted; the next attempt is due at %v", n, next)
	}
}
