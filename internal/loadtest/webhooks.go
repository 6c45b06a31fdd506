package loadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/webhook"
)

// runWebhooks is the webhooks scenario: how many deliveries per second one
// node sends. N endpoints (--webhooks, default 8) of every event type at
// the receiver; purchases run while the receiver holds every request (so
// each endpoint's first delivery is in flight and the rest queue behind
// it, in order) until the backlog holds --max-requests deliveries (default
// 5,000) or 8 s passed (under the dispatcher's 10 s time-out); then the
// purchases stop, the receiver answers, and the time from its release to
// the last of the backlog delivered gives the rate. The baseline: a bare
// sender in this process (as many workers as the dispatcher, each delivery
// signed with the reference library and posted to the same receiver) sends
// as many; the ratio is the node's rate over the bare sender's.
func runWebhooks(ctx context.Context, o *Options) (*Result, error) {
	if o.Webhooks <= 0 {
		o.Webhooks = 8
	}
	backlog := o.MaxRequests
	if backlog <= 0 {
		backlog = 5000
	}
	e, r, client, done, err := startLives(ctx, o, WebhooksScenario)
	if err != nil {
		return nil, err
	}
	defer done()
	rcv := e.rcv

	// The baseline first, on the idle server: the receiver's and the
	// signing's cost of as many deliveries.
	base, err := bareSender(ctx, rcv, backlog)
	if err != nil {
		return nil, err
	}
	r.Baseline = base
	// The events so far (the terminals' links and sessions) are owed to no
	// endpoint: the backlog counts those after them. The sequencer numbers
	// what committed within a second.
	sleepUntil(ctx, time.Now().Add(1100*time.Millisecond), nil)
	_, cursor, err := e.countEvents(ctx, "")
	if err != nil {
		return nil, err
	}

	rcv.holdAll()
	ids, _, err := e.webhooks(ctx, rcv, o.Webhooks, nil, o.WebhookConcurrency)
	if err != nil {
		return nil, fmt.Errorf("register the webhook endpoints: %w", err)
	}
	var counts lifeCounts
	lives := e.purchaseOp(client, &refRing{}, &counts)
	// Each life makes the same events; a life's share of the backlog is
	// known after the first ones (6 events each today, one delivery per
	// endpoint each).
	const perLifeGuess = 6
	wantLives := max(1, backlog/int64(perLifeGuess*o.Webhooks))
	fill, stopFill := context.WithTimeout(ctx, 8*time.Second)
	var wg sync.WaitGroup
	var fillErr atomic.Pointer[string]
	for w := range lives.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for fill.Err() == nil && counts.lives.Load() < wantLives {
				if err := lives.fn(fill, w); err != nil && fill.Err() == nil {
					msg := err.Error()
					fillErr.CompareAndSwap(nil, &msg)
					return
				}
			}
		}()
	}
	wg.Wait()
	stopFill()
	if p := fillErr.Load(); p != nil {
		return nil, errors.New(*p)
	}
	// Every event of those lives numbered and fanned out: the events' list
	// holds them all.
	var total int64
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, _, err := e.countEvents(ctx, cursor)
		if err != nil {
			return nil, err
		}
		if n >= counts.lives.Load()*perLifeGuess || time.Now().After(deadline) {
			total = n * int64(o.Webhooks)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	e.logf("webhooks: %d deliveries queued for %d endpoints (%d purchase lives); releasing the receiver", total, o.Webhooks, counts.lives.Load())
	before, _ := e.srv.stats()
	cpu0, _ := readProc(0)
	rcv.firstAt.Store(0)
	start := time.Now()
	rcv.release()
	deadline = start.Add(5 * time.Minute)
	for rcv.deliveries.Load() < total && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
	after, _ := e.srv.stats()
	cpu1, _ := readProc(0)
	end := time.Now()
	if last := rcv.lastAt.Load(); last != 0 {
		end = time.Unix(0, last)
	}
	secs := end.Sub(start).Seconds()
	got := rcv.deliveries.Load()
	r.Ours = Side{Name: "instore dispatcher (one node)", Unit: "deliveries/s", Count: got, Seconds: secs,
		ServerRSSBytes: after.RSS}
	if secs > 0 {
		r.Ours.Rate = float64(got) / secs
		r.Ours.ServerCPU = 100 * (after.CPU - before.CPU).Seconds() / secs
		r.Ours.ClientCPU = 100 * (cpu1.CPU - cpu0.CPU).Seconds() / secs
	}
	if got < total {
		r.Ours.Errors = total - got
		r.Ours.FirstError = fmt.Sprintf("%d of %d deliveries arrived within 5 minutes", got, total)
	}
	r.BaselineRate = r.Baseline.Rate
	r.Ratio = safeRatio(r.Ours.Rate, r.Baseline.Rate)
	r.Consumers = &consumerFigures{Webhooks: o.Webhooks, Deliveries: got, DeliveryRate: r.Ours.Rate,
		BadSignatures: rcv.badSignatures.Load(), OutOfOrder: rcv.outOfOrder.Load(), Repeats: rcv.repeats.Load()}
	r.ConsumerErrors = r.Consumers.BadSignatures + r.Consumers.OutOfOrder
	e.logf("webhooks: %d deliveries to %d endpoints in %.2f s", got, len(ids), secs)
	return r, nil
}

// countEvents counts the run's numbered events after the cursor (the list
// of the API, page by page) and returns the last one's id.
func (e *env) countEvents(ctx context.Context, after string) (int64, string, error) {
	var n int64
	for {
		var page struct {
			Events     []instore.EventWire `json:"events"`
			NextCursor *string             `json:"nextCursor"`
		}
		q := "/in-store/api/v1/events?limit=500"
		if after != "" {
			q += "&after=" + after
		}
		if err := e.api(ctx, "GET", q, nil, http.StatusOK, &page); err != nil {
			return 0, "", err
		}
		n += int64(len(page.Events))
		if len(page.Events) == 0 {
			return n, after, nil
		}
		after = page.Events[len(page.Events)-1].ID
	}
}

// bareSender delivers n signed events to the receiver from webhookWorkers
// goroutines of this process, as the dispatcher does minus the store: the
// rate the receiver and the signing allow on this machine.
func bareSender(ctx context.Context, rcv *receiver, n int64) (Side, error) {
	secret := "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	k, err := rcv.endpoint(secret, lagAll, 1)
	if err != nil {
		return Side{}, err
	}
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		return Side{}, err
	}
	body, _ := json.Marshal(instore.EventWire{ID: instore.EventID(1), Type: instore.EventTransactionFinal,
		CreatedAt: time.Now().UTC().Format(instore.MicroRFC3339), Data: json.RawMessage(`{"onlineAPIRefId":"txn_loadtest","statusId":0}`)})
	client, err := rcv.trustingClient(webhookWorkers)
	if err != nil {
		return Side{}, err
	}
	url := fmt.Sprintf("%s/hook/%d", rcv.url, k)
	var next, seq atomic.Int64
	var firstErr atomic.Pointer[string]
	var h hist
	var hmu sync.Mutex
	cpu0, _ := readProc(0)
	start := time.Now()
	var wg sync.WaitGroup
	for range webhookWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine hist
			defer func() { hmu.Lock(); h.merge(&mine); hmu.Unlock() }()
			for next.Add(1) <= n && ctx.Err() == nil {
				t0 := time.Now()
				req, err := signedDelivery(ctx, wh, url, instore.EventID(seq.Add(1)), t0, body)
				if err != nil {
					msg := err.Error()
					firstErr.CompareAndSwap(nil, &msg)
					return
				}
				resp, err := client.Do(req)
				if err != nil {
					msg := err.Error()
					firstErr.CompareAndSwap(nil, &msg)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				mine.record(time.Since(t0))
			}
		}()
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	cpu1, _ := readProc(0)
	s := Side{Name: fmt.Sprintf("bare sender (%d workers, no store)", webhookWorkers), Unit: "deliveries/s",
		Count: min(n, seq.Load()), Seconds: secs, P50Ms: ms(h.quantile(0.5)), P90Ms: ms(h.quantile(0.9)),
		P99Ms: ms(h.quantile(0.99)), P999Ms: ms(h.quantile(0.999)), MeanMs: ms(h.mean()), MaxMs: ms(h.max)}
	if secs > 0 {
		s.Rate = float64(s.Count) / secs
		s.ClientCPU = 100 * (cpu1.CPU - cpu0.CPU).Seconds() / secs
	}
	if p := firstErr.Load(); p != nil {
		return s, errors.New("bare sender: " + *p)
	}
	// The receiver's counts are the node's from here (the bare workers
	// deliver to their endpoint out of order, concurrently).
	rcv.deliveries.Store(0)
	rcv.lastAt.Store(0)
	rcv.outOfOrder.Store(0)
	rcv.repeats.Store(0)
	return s, nil
}

// webhookWorkers is how many deliveries a node sends at once for one
// merchant, the run's (webhook.PerMerchant).
const webhookWorkers = webhook.PerMerchant

// signedDelivery is a webhook delivery of body as the dispatcher sends it:
// POST url with the Standard Webhooks headers (webhook-id, its timestamp
// at, the signature by wh).
func signedDelivery(ctx context.Context, wh *standardwebhooks.Webhook, url, id string, at time.Time, body []byte) (*http.Request, error) {
	sig, err := wh.Sign(id, at, body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(at.Unix(), 10))
	req.Header.Set("webhook-signature", sig)
	return req, nil
}
