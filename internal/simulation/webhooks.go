package simulation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
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

// Webhooks: the merchant has two endpoints, registered through the real
// Online API in the template: the first (receiverURL) takes one delivery
// at a time, in order per endpoint; the second (lanesURL) has a
// concurrency of 2 to 4, drawn per seed, and takes its deliveries in
// lanes, in order per terminal. Each node runs the real dispatcher
// (internal/webhook) as a periodic task whose transport is the simulated
// receivers, which fail, time out or accept as the seed says.

const (
	// dispatchEvery is how often a node's dispatcher claims due deliveries.
	dispatchEvery = time.Second
	receiverURL   = "http://receiver.sim/hooks"
	lanesURL      = "http://receiver.sim/lanes"
	// maxRetryWait bounds how far the world's clock jumps, after its quiet
	// period, to the next attempt of a delivery (RetrySchedule's longest
	// wait and its jitter).
	maxRetryWait = 13 * time.Hour
)

// registerWebhooks registers the merchant's endpoints through the Online
// API on the template's store, before any event of a history is
// numbered: every event of a history is owed to each. The store fills and
// claims the endpoints' deliveries in the order of their ids, which are
// random: so that a seed runs the same from any template (TestReplay
// prepares its own), the lanes endpoint is registered again (the other
// deleted) until its id sorts after the first's.
func registerWebhooks(ctx context.Context, db *sqlstore.DB, tpl *Template) error {
	call, err := onlineCaller(ctx, db, tpl)
	if err != nil {
		return err
	}
	register := func(body string) (*instore.WebhookWire, error) {
		code, b := call(http.MethodPost, "/webhooks", body)
		var v instore.WebhookWire
		if code != http.StatusCreated || json.Unmarshal(b, &v) != nil || v.Secret == "" {
			return nil, fmt.Errorf("register a webhook endpoint: %d %s", code, b)
		}
		return &v, nil
	}
	const (
		first = `{"url": "` + receiverURL + `", "description": "the simulation's receiver", "concurrency": 1}`
		lanes = `{"url": "` + lanesURL + `", "description": "the simulation's receiver in lanes", "concurrency": 2}`
	)
	a, err := register(first)
	if err != nil {
		return err
	}
	b, err := register(lanes)
	if err != nil {
		return err
	}
	if b.WebhookID < a.WebhookID {
		// Ids are random: the lanes endpoint must be the one whose id
		// sorts after, so the two swap what they are.
		for _, x := range []struct{ id, body string }{{a.WebhookID, lanes}, {b.WebhookID, first}} {
			if code, body := call(http.MethodPatch, "/webhooks/"+x.id, x.body); code != http.StatusOK {
				return fmt.Errorf("swap the webhook endpoints: %d %s", code, body)
			}
		}
		a, b = b, a
	}
	tpl.webhookID, tpl.webhookSecret = a.WebhookID, a.Secret
	tpl.lanesID, tpl.lanesSecret = b.WebhookID, b.Secret
	return nil
}

// setConcurrency sets the lanes endpoint's concurrency in a history's
// store, through the Online API, to 2 to 4 as the seed says.
func setConcurrency(ctx context.Context, db *sqlstore.DB, tpl *Template, seed uint64) (int, error) {
	call, err := onlineCaller(ctx, db, tpl)
	if err != nil {
		return 0, err
	}
	n := 2 + rand.New(rand.NewChaCha8(seedBytes(seed, "lanes"))).IntN(3)
	code, b := call(http.MethodPatch, "/webhooks/"+tpl.lanesID, fmt.Sprintf(`{"concurrency": %d}`, n))
	var v instore.WebhookWire
	if code != http.StatusOK || json.Unmarshal(b, &v) != nil || v.Concurrency != n {
		return 0, fmt.Errorf("set the lanes endpoint's concurrency to %d: %d %s", n, code, b)
	}
	return n, nil
}

// onlineCaller calls the Online API, as the merchant's client, on db
// outside any history (no node runs).
func onlineCaller(ctx context.Context, db *sqlstore.DB, tpl *Template) (func(method, path, body string) (int, []byte), error) {
	meta := instore.DefaultMetadata()
	svc := &service.Service{Store: db, Metadata: &meta, Logger: slog.New(slog.DiscardHandler), SecretMatches: auth.Matches,
		Clock: clocktest.New(epoch), WebhookAllowHTTP: true, WebhookAllowPrivate: true}
	h, authn := onlineHandler(svc, nil)
	token, _, err := authn.Mint(tpl.client, time.Hour)
	if err != nil {
		return nil, err
	}
	return func(method, path, body string) (int, []byte) {
		r := httptest.NewRequestWithContext(ctx, method, "http://instore"+onlineapi.Prefix+path, strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer "+token)
		r.Header.Set("Ocp-Apim-Subscription-Key", tpl.subscriptionKey)
		if body != "" {
			r.Header.Set("Content-Type", "application/json")
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return rec.Code, rec.Body.Bytes()
	}, nil
}

// dispatcher is the node's webhook dispatcher: synchronous (its rounds are
// the node's tasks), its jitter from the seed, its transport the
// receivers.
func (n *node) dispatcher() *webhook.Dispatcher {
	return webhook.New(webhook.Config{Store: n.svc.Store, Logger: n.logger(), Clock: n.svc.Clock,
		Transport: n.w.receivers, Rand: n.w.ids.rng.Float64, Synchronous: true})
}

// receivers are the merchant's webhook endpoints' servers, by URL path.
type receivers []*receiver

func (rs receivers) RoundTrip(req *http.Request) (*http.Response, error) {
	for _, r := range rs {
		if r.path == req.URL.Path {
			return r.RoundTrip(req)
		}
	}
	return nil, fmt.Errorf("simulation: no receiver at %s", req.URL)
}

// receiver is one of the merchant's webhook endpoints: it verifies each
// delivery's signature, then fails (500), times out or accepts as the
// seed's storm level says (always accepts once the world is calm), and
// records the events it accepted. It checks that its deliveries come in
// order per order key: the endpoint (one key, "") or, for the lanes
// endpoint (perTerminal), the event's terminal (its terminalId, "" for
// none: docs/events.md).
type receiver struct {
	w                 *world
	path              string // its URL's path
	webhookID, secret string
	perTerminal       bool
	invariant         string
	// learns: the ECRs learn from what it accepted (the first endpoint is
	// their back office's; the lanes endpoint another system's).
	learns bool
	// accepted counts the 2xx answers by event number.
	accepted map[int64]int
	// latest is the highest event accepted, by order key; failing the
	// event whose attempts failed since the key's last acceptance (0:
	// none), by order key.
	latest, failing map[string]int64
	// failingNow: an attempt failed since the last one accepted, the
	// first of them at failingSince (the endpoint's health, as the store
	// keeps it).
	failingNow   bool
	failingSince time.Time
	// terminal is each event's terminal (read from the store as they
	// come), known up to the event known.
	terminal map[int64]string
	known    int64
}

func newReceiver(w *world, url, webhookID, secret string, perTerminal bool) *receiver {
	r := &receiver{w: w, path: strings.TrimPrefix(url, "http://receiver.sim"), webhookID: webhookID, secret: secret,
		perTerminal: perTerminal, invariant: "webhooks in order per endpoint", learns: !perTerminal,
		accepted: map[int64]int{}, latest: map[string]int64{}, failing: map[string]int64{}, terminal: map[int64]string{}}
	if perTerminal {
		r.invariant = "webhooks in order per terminal"
	}
	return r
}

// orderKey is what orders event seq's deliveries to r: "" for the
// endpoint, the event's terminal for the lanes endpoint. It reads the
// store directly, as the world's checks do: the receiver runs in the
// dispatcher's task, which holds the baton (nothing else runs), and the
// read is the world's, not a node's.
func (r *receiver) orderKey(seq int64) string {
	if !r.perTerminal {
		return ""
	}
	if seq > r.known {
		evs, err := r.w.db.ListEvents(context.Background(), instore.EventFilter{MerchantID: r.w.merchantID, After: r.known, Limit: 1 << 20})
		if err != nil {
			r.w.fail("store readable", "%v", err)
		}
		for _, e := range evs {
			r.terminal[e.Seq] = e.TerminalID
			r.known = max(r.known, e.Seq)
		}
	}
	t, ok := r.terminal[seq]
	if !ok {
		r.w.fail("store readable", "event %d delivered to %s is not in the store", seq, r.path)
	}
	return t
}

// keyName names an order key in a failure (a terminal ID by its ECR: its
// device may change, relink.go).
func (r *receiver) keyName(key string) string {
	if !r.perTerminal {
		return "the endpoint"
	}
	if key == "" {
		return "no terminal"
	}
	for _, e := range r.w.ecrs {
		if e.terminalID == key {
			return "the terminal ID of " + e.name
		}
	}
	return "another terminal"
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
		w.fail("webhook signatures verify", "delivery %q to %s: %v", id, r.path, err)
		return r.answer(req, http.StatusBadRequest), nil
	}
	if ts := req.Header.Get("webhook-timestamp"); ts != strconv.FormatInt(w.sched.now.Unix(), 10) {
		w.fail("webhook signatures verify", "delivery %s to %s signed at %s, the world's time is %d", id, r.path, ts, w.sched.now.Unix())
	}
	// In order per key: an event not accepted yet comes after none of its
	// key's later events was accepted, and while one of its key's is owed
	// (its attempts failed), only that one is sent.
	key := r.orderKey(seq)
	if latest, failing := r.latest[key], r.failing[key]; r.accepted[seq] == 0 && (seq < latest || failing != 0 && seq != failing) {
		w.fail(r.invariant, "%s sent to %s after %d of %s was accepted, while %d was owed", id, r.path, latest, r.keyName(key), failing)
	}
	code, timedOut := w.faults.hookAnswer()
	if r.perTerminal {
		w.note("webhook %s %s %d timedOut=%v", r.path, id, code, timedOut)
	} else {
		w.note("webhook %s %d timedOut=%v", id, code, timedOut)
	}
	if timedOut || code >= 300 {
		if r.failing[key] == 0 {
			r.failing[key] = seq
		}
		if !r.failingNow {
			r.failingNow, r.failingSince = true, w.sched.now
		}
		if timedOut {
			return nil, errTimedOut
		}
		return r.answer(req, code), nil
	}
	r.accepted[seq]++
	r.latest[key], r.failing[key], r.failingNow = max(r.latest[key], seq), 0, false
	if r.learns {
		w.learn(body)
	}
	return r.answer(req, code), nil
}

func (r *receiver) answer(req *http.Request, code int) *http.Response {
	return &http.Response{StatusCode: code, Status: http.StatusText(code), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{}, Body: io.NopCloser(bytes.NewReader(nil)), Request: req}
}

// awaitDeliveries runs the calm world on, past its quiet period, until
// the receivers have every event: while the heads of the endpoints'
// queues wait for their next attempt (RetrySchedule's waits reach hours),
// the clock jumps to the earliest, and the world runs on a while after
// each jump (what the time that passed brings is numbered and owed too).
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

// enabled tells whether r's endpoint is enabled (a disabled one is owed
// nothing more: checkWebhooks checks why it was disabled).
func (w *world) enabled(r *receiver) bool {
	wh, err := w.db.Webhook(context.Background(), w.merchantID, r.webhookID)
	if err != nil {
		w.fail("store readable", "%v", err)
		return false
	}
	return wh.Status == instore.WebhookEnabled
}

// missingEvents numbers the events committed (as checkEvents does) and
// counts, over the enabled endpoints, the merchant's numbered events
// their receivers never accepted.
func (w *world) missingEvents() int {
	evs, ok := w.merchantEvents(context.Background())
	if !ok {
		return 0
	}
	n := 0
	for _, r := range w.receivers {
		if w.enabled(r) {
			n += r.missing(evs)
		}
	}
	return n
}

// missing counts the events of evs owed to r that it never accepted.
func (r *receiver) missing(evs []instore.StoredEvent) int {
	n := 0
	for _, e := range evs {
		if e.Seq > r.w.eventsBefore && r.accepted[e.Seq] == 0 {
			n++
		}
	}
	return n
}

// nextAttempt is the earliest of the enabled endpoints' next attempts:
// when the head of an endpoint's queue, its pending delivery of the
// earliest event, is due (those behind it wait for it; in lanes, those of
// later events).
func (w *world) nextAttempt() (time.Time, bool) {
	var next time.Time
	found := false
	for _, r := range w.receivers {
		if !w.enabled(r) {
			continue
		}
		if at, ok := w.headDue(r.webhookID); ok && (!found || at.Before(next)) {
			next, found = at, true
		}
	}
	return next, found
}

// headDue is when the head of an endpoint's queue is due.
func (w *world) headDue(webhookID string) (time.Time, bool) {
	ds, err := w.db.WebhookDeliveries(context.Background(), webhookID, 0, 1<<20)
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

// checkWebhooks: every numbered event of the merchant was accepted by
// each endpoint at least once, unless the endpoint was disabled, which it
// may be only after failing for instore.WebhookDisableAfter.
func (w *world) checkWebhooks(ctx context.Context) {
	evs, ok := w.merchantEvents(ctx)
	if !ok {
		return
	}
	for _, r := range w.receivers {
		wh, err := w.db.Webhook(ctx, w.merchantID, r.webhookID)
		if err != nil {
			w.fail("store readable", "%v", err)
			return
		}
		if wh.Status != instore.WebhookEnabled {
			if !r.failingNow || w.sched.now.Sub(r.failingSince) < instore.WebhookDisableAfter {
				w.fail("an endpoint disabled only when failing", "%s disabled (%s), failing since %v", r.path, wh.DisabledReason, r.failingSince)
			}
			w.note("the endpoint %s was disabled (%s): its events are not checked", r.path, wh.DisabledReason)
			continue
		}
		if n := r.missing(evs); n > 0 {
			next, _ := w.headDue(r.webhookID)
			w.fail("every event delivered with a 2xx", "%d events never accepted by %s; the next attempt is due at %v", n, r.path, next)
		}
	}
}
