package loadtest

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/instore-dev/instore"
)

// The consumers of events: webhook endpoints pointing at a real receiver in
// this process (it verifies every signature with the Standard Webhooks
// reference library, as an integrator's would) and followers of the event
// stream (GET /events/stream), docs/events.md.

// webhooks registers n endpoints of the run's merchant at the receiver
// (every event type) and returns their ids.
func (e *env) webhooks(ctx context.Context, rcv *receiver, n int) ([]string, error) {
	var ids []string
	for range n {
		var wh instore.WebhookWire
		rcv.mu.Lock()
		k := len(rcv.secrets) // the index the receiver gives it next
		rcv.mu.Unlock()
		if err := e.api(ctx, "POST", "/in-store/api/v1/webhooks", map[string]any{
			"url": fmt.Sprintf("%s/hook/%d", rcv.url, k), "description": "loadtest"}, http.StatusCreated, &wh); err != nil {
			return nil, err
		}
		if got, err := rcv.endpoint(wh.Secret); err != nil || got != k {
			return nil, fmt.Errorf("receiver endpoint %d, want %d: %v", got, k, err)
		}
		ids = append(ids, wh.WebhookID)
	}
	return ids, nil
}

// setWebhooks enables or disables the endpoints (PATCH status): a disabled
// endpoint is sent nothing and given no deliveries; enabled again, it
// resumes where it stopped, at the pace it is sent (which under this load
// stays behind the events: it costs the same as one enabled throughout).
func (e *env) setWebhooks(ctx context.Context, ids []string, enabled bool) error {
	status := "disabled"
	if enabled {
		status = "enabled"
	}
	for _, id := range ids {
		if err := e.api(ctx, "PATCH", "/in-store/api/v1/webhooks/"+id, map[string]any{"status": status}, http.StatusOK, nil); err != nil {
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
}

// purchaseWithConsumers is purchase --webhooks N --streams M: the purchase
// lives with the consumers of events (side 1) against the same lives
// without them (side 0), on the same server, in alternating windows. The
// consumers run only in side 1's windows: the endpoints are enabled at
// each of its windows' start and disabled at their end (a disabled endpoint
// is owed nothing of what happens meanwhile), the stream followers
// connected live and closed. The ratio is with over without.
func (e *env) purchaseWithConsumers(ctx context.Context, r *Result, client *http.Client) error {
	o := e.o
	rcv := e.rcv
	if rcv == nil {
		rcv = &receiver{} // no endpoints: its counts stay 0
	}
	ids, err := e.webhooks(ctx, rcv, o.Webhooks)
	if err != nil {
		return fmt.Errorf("register the webhook endpoints: %w", err)
	}
	if err := e.setWebhooks(ctx, ids, false); err != nil {
		return err
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
		if err := e.setWebhooks(ctx, ids, true); err != nil {
			problem(err)
		}
		if fl.n > 0 {
			if err := fl.start(ctx); err != nil {
				problem(err)
			}
		}
		since, d0, s0 = time.Now(), rcv.deliveries.Load(), fl.events.Load()
	}
	leave := func(ctx context.Context) {
		on += time.Since(since)
		delivered += rcv.deliveries.Load() - d0
		fl.stop()
		streamN += fl.events.Load() - s0
		if err := e.setWebhooks(ctx, ids, false); err != nil {
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
