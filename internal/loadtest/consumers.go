package loadtest

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/instore-dev/instore"
)

// The consumers of events: webhook endpoints pointing at a real receiver in
// this process (it verifies every signature with the Standard Webhooks
// reference library, as an integrator's would) and followers of the event
// stream (GET /events/stream), docs/events.md.

// webhooks registers n endpoints of the run's merchant at the receiver
// and returns their ids and the receiver's indexes of them: the first
// half (rounded up) subscribe to types if any are given, the others (and
// all without types) to every event type.
func (e *env) webhooks(ctx context.Context, rcv *receiver, n int, types []string, concurrency int) ([]string, []int, error) {
	var ids []string
	var ks []int
	for i := range n {
		var wh instore.WebhookWire
		rcv.mu.Lock()
		k := len(rcv.secrets) // the index the receiver gives it next
		rcv.mu.Unlock()
		body := map[string]any{"url": fmt.Sprintf("%s/hook/%d", rcv.url, k), "description": "loadtest"}
		if concurrency > 0 {
			body["concurrency"] = concurrency
		}
		class := lagAll
		if len(types) > 0 && i < (n+1)/2 {
			body["eventTypes"], class = types, lagTyped
		}
		if err := e.api(ctx, "POST", "/in-store/api/v1/webhooks", body, http.StatusCreated, &wh); err != nil {
			return nil, nil, err
		}
		if got, err := rcv.endpoint(wh.Secret, class, wh.Concurrency); err != nil || got != k {
			return nil, nil, fmt.Errorf("receiver endpoint %d, want %d: %v", got, k, err)
		}
		ids, ks = append(ids, wh.WebhookID), append(ks, k)
	}
	return ids, ks, nil
}

// deleteWebhooks deletes the endpoints (their pending deliveries end).
func (e *env) deleteWebhooks(ctx context.Context, ids []string) error {
	for _, id := range ids {
		if err := e.api(ctx, "DELETE", "/in-store/api/v1/webhooks/"+id, nil, http.StatusNoContent, nil); err != nil {
			return err
		}
	}
	return nil
}

// consumerFigures are the consumers' figures of a run.
type consumerFigures struct {
	Webhooks int `json:"webhooks,omitempty"`
	Streams  int `json:"streams,omitempty"`
	// Deliveries is the webhook deliveries the receiver verified and
	// accepted (during the consumers' windows: DeliveryRate per second of
	// them; the webhooks scenario: the backlog drained, DeliveryRate its
	// rate); BadSignatures those it refused, OutOfOrder those that came
	// before an event already delivered to the endpoint, Repeats those
	// delivered again (at least once).
	Deliveries    int64   `json:"deliveries,omitempty"`
	DeliveryRate  float64 `json:"deliveryRate,omitempty"`
	BadSignatures int64   `json:"badSignatures,omitempty"`
	OutOfOrder    int64   `json:"outOfOrder,omitempty"`
	Repeats       int64   `json:"repeats,omitempty"`
	// StreamEvents is the events the stream followers read, StreamRate
	// per second of the consumers' windows, StreamDisorder those out of
	// order or repeated within a connection.
	StreamEvents   int64   `json:"streamEvents,omitempty"`
	StreamRate     float64 `json:"streamRate,omitempty"`
	StreamDisorder int64   `json:"streamDisorder,omitempty"`
	// Lags are the webhook deliveries' lags behind their events, per
	// class of endpoints (every event; --webhook-types), during the
	// windows with consumers (consumers_lag.go).
	Lags []lagFigures `json:"lags,omitempty"`
}

// purchaseWithConsumers is purchase --webhooks N --streams M: the purchase
// lives with the consumers of events (side 1) against the same lives
// without them (side 0), on the same server, in alternating windows. The
// consumers run only in side 1's windows: the endpoints are registered at
// each of its windows' start (a new endpoint is owed the events numbered
// after it) and deleted at their end, when how far each is behind is
// taken; the stream followers connect live and close. The ratio is with
// over without. Each delivery's lag behind its event is measured
// (consumers_lag.go).
func (e *env) purchaseWithConsumers(ctx context.Context, r *Result, client *http.Client) error {
	o := e.o
	rcv := e.rcv
	if rcv == nil {
		rcv = &receiver{} // no endpoints: its counts stay 0
	}
	fl := e.newFollowers(o.Streams)
	recent := &refRing{}
	var counts lifeCounts
	without := e.purchaseOp(client, recent, &counts)
	without.name = "lives, no consumers"
	with := e.purchaseOp(client, recent, &counts)
	with.name = fmt.Sprintf("lives, %d webhooks + %d streams", o.Webhooks, o.Streams)

	var (
		on                 time.Duration
		since              time.Time
		ids                []string
		ks                 []int
		d0, s0             int64
		delivered, streamN int64
		problems           []string
	)
	problem := func(err error) {
		if len(problems) < 5 {
			problems = append(problems, err.Error())
		}
	}
	enter := func(ctx context.Context) {
		var err error
		if ids, ks, err = e.webhooks(ctx, rcv, o.Webhooks, o.WebhookTypes, o.WebhookConcurrency); err != nil {
			problem(fmt.Errorf("register the webhook endpoints: %w", err))
		}
		rcv.lags.start()
		if fl.n > 0 {
			if err := fl.start(ctx); err != nil {
				problem(err)
			}
		}
		since, d0, s0 = time.Now(), rcv.deliveries.Load(), fl.events.Load()
	}
	leave := func(ctx context.Context) {
		now := time.Now()
		on += now.Sub(since)
		rcv.lags.stop(ks, since, now)
		delivered += rcv.deliveries.Load() - d0
		fl.stop()
		streamN += fl.events.Load() - s0
		if err := e.deleteWebhooks(ctx, ids); err != nil {
			problem(err)
		}
	}
	e.logf("purchase: %d terminals and %d ECR clients, lives without consumers against lives with %d webhook endpoints and %d stream followers, %s per side in %d interleaved rounds",
		o.Terminals, o.ECRs, o.Webhooks, o.Streams, o.Duration, o.Rounds)
	il := e.interleave(ilSide{op: without, stats: e.srv.stats, dbCPU: e.dbCPU()},
		ilSide{op: with, stats: e.srv.stats, dbCPU: e.dbCPU(), onStart: e.profileHook(), enter: enter, leave: leave})
	il.ramp = min(o.Warmup, purchaseRamp)
	res := il.run(ctx)
	if n := counts.lives.Load(); n > 0 {
		r.RequestsPerLife = float64(counts.requests.Load()) / float64(n)
	}
	r.Ours, r.Baseline = res.sides[1], res.sides[0]
	r.BaselineRate = r.Baseline.Rate
	r.Ratio = safeRatio(r.Ours.Rate, r.Baseline.Rate)
	r.Rounds, r.RoundRatios = len(res.roundRatios), res.roundRatios
	c := &consumerFigures{Webhooks: o.Webhooks, Streams: o.Streams, Deliveries: delivered, StreamEvents: streamN,
		BadSignatures: rcv.badSignatures.Load(), OutOfOrder: rcv.outOfOrder.Load(), Repeats: rcv.repeats.Load(),
		StreamDisorder: fl.bad.Load()}
	if on > 0 {
		c.DeliveryRate = float64(delivered) / on.Seconds()
		c.StreamRate = float64(streamN) / on.Seconds()
	}
	c.Lags = rcv.lags.figures(strings.Join(o.WebhookTypes, ","), on)
	r.Consumers = c
	if e.hasStore() {
		if _, n, err := e.countCommits(ctx); err == nil {
			r.CommitsPerLife = n
		}
	}
	for _, p := range problems {
		r.Notes = append(r.Notes, "consumers: "+p)
	}
	if n := fl.errors.Load(); n > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("consumers: %d event streams broke; the last: %s", n, *fl.lastErr.Load()))
	}
	r.ConsumerErrors = c.BadSignatures + c.OutOfOrder + c.StreamDisorder + fl.errors.Load() + int64(len(problems))
	return nil
}
