package crashtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/client"
	"github.com/instore-dev/instore/internal/apitest"
	"github.com/instore-dev/instore/internal/testwait"
)

// Times of TestClusterWebhooks' receiver.
const (
	// whSlow is how long a slow answer takes: well under the dispatcher's
	// 10 s time-out, long enough to kill its sender meanwhile.
	whSlow = 2500 * time.Millisecond
	// whDown is how long the receiver is down: shorter than the first
	// retry (5 s, -20 % jitter), so the delivery that found it down is
	// sent again once it is back, not in 5 minutes.
	whDown = 3 * time.Second
)

// TestClusterWebhooks kills nodes of the cluster while they deliver
// webhooks. Three nodes on PostgreSQL behind HAProxy (as TestCluster), with
// two webhook endpoints (every event; four types) at a real HTTPS receiver
// that verifies every Standard Webhooks signature with the reference
// library, fails some attempts (503), is slow for some (2.5 s), and is down
// for 3 s, then comes back. Purchases run through the terminals' sandbox
// outcomes (approved, declined, wrong PIN, ...) on every node while each
// node is killed with SIGKILL once, the first while it is sending a slow
// delivery, and started again. Then every event of GET /events (JSON pages)
// after the endpoints' creation must have arrived at each endpoint that
// wants its type, correctly signed, the first arrivals exactly in the
// list's order, none missing; an event may arrive twice only if an
// attempt to send it was cut by a kill (reported). A delivery whose retry
// would come in minutes (its second failure) is retried through the API,
// as a merchant would. Meanwhile a follower of the event stream
// (text/event-stream, through HAProxy) resumes with Last-Event-ID after each
// break: what it saw must equal the list exactly, no gap and no repeat.
func TestClusterWebhooks(t *testing.T) {
	u, haproxy := clusterNeeds(t, "webhook cluster test", "kills nodes while they deliver")
	// Built before SSL_CERT_FILE names the receiver's certificate alone:
	// go build may fetch modules over HTTPS.
	bin := buildInstore(t, t.TempDir())
	start := time.Now()
	rcv := startWHReceiver(t)
	// The nodes (children) trust the receiver's certificate and may
	// deliver to loopback; the terminals and `instore admin` ignore both.
	t.Setenv("SSL_CERT_FILE", rcv.certFile)
	t.Setenv("INSTORE_WEBHOOK_ALLOW_PRIVATE", "true")

	set := loadSettings(t)
	set.terminals = 4
	t.Logf("%d terminals, 3 nodes (the kills follow the deliveries, not a seed)", set.terminals)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e := newCrashEnv(t, set, bin, u)
	c := e.startCluster(ctx, haproxy)
	for _, n := range c.nodes {
		if n.p == nil {
			t.Fatal("a node is not running")
		}
	}
	t.Logf("cluster up in %s", time.Since(start).Round(time.Millisecond))

	// The links' events are numbered within a second; the endpoints are
	// owed what comes after them.
	sleep(ctx, 1500*time.Millisecond)
	before := e.listEvents(ctx, "")
	cursor := ""
	if len(before) > 0 {
		cursor = before[len(before)-1].ID
	}
	types := []instore.EventType{instore.EventTransactionCreated, instore.EventTransactionFinal, instore.EventTerminalOnline, instore.EventTerminalOffline}
	hooks := map[string]string{} // endpoint name -> webhookId
	for _, ep := range []struct {
		name  string
		types []instore.EventType
	}{{"all", nil}, {"some", types}} {
		body, _ := json.Marshal(map[string]any{"url": rcv.url + "/hook/" + ep.name, "eventTypes": ep.types, "description": "crash test " + ep.name})
		a := e.ecr.do(ctx, "POST", "/in-store/api/v1/webhooks", body, "")
		var wh instore.WebhookWire
		if a.err != nil || a.status != http.StatusCreated || json.Unmarshal(a.body, &wh) != nil {
			t.Fatalf("create the webhook endpoint %s: %s %s", ep.name, a, a.body)
		}
		rcv.add(t, ep.name, wh.Secret, ep.types)
		hooks[ep.name] = wh.WebhookID
	}

	follow := &sseFollower{api: e.ecr.api}
	followCtx, stopFollow := context.WithCancel(ctx)
	var followDone sync.WaitGroup
	followDone.Add(1)
	go func() { defer followDone.Done(); follow.run(followCtx) }()
	defer func() { stopFollow(); followDone.Wait() }()

	// Purchases on every terminal (through HAProxy: every node), each
	// ending by its amount's sandbox outcome.
	phase, stopSales := context.WithCancel(ctx)
	var sales sync.WaitGroup
	var salesMu sync.Mutex
	finals := map[instore.TransactionStatus]int{}
	for i := range e.procs {
		sales.Add(1)
		go func() {
			defer sales.Done()
			outcomes := []int64{0, 11, 12, 0, 4, 7, 0, 3}
			for n := 0; phase.Err() == nil; n++ {
				amount := 100*int64(10+n) + outcomes[(n+i)%len(outcomes)]
				out := e.ecr.purchase(ctx, i, e.terms[i], amount, fmt.Sprintf("wh-t%d-%d", i, n))
				if out.kind == "acked" {
					if st, ok := e.ecr.final(ctx, out.ref); ok {
						salesMu.Lock()
						finals[st]++
						salesMu.Unlock()
					}
				}
				sleep(phase, 300*time.Millisecond)
			}
		}()
	}

	// Each node killed once while deliveries are in flight: the first
	// while it sends a slow one; the receiver down for a moment between.
	killed := map[*server]bool{}
	kill := func(victim *server, why string) {
		ports, inFlight := rcv.inFlightOf(victim.p.cmd.Process.Pid)
		victim.kill9()
		c.kills++
		at := time.Since(start).Round(time.Millisecond)
		lost := rcv.unrecorded(ports, e.succeeded(ctx, hooks))
		t.Logf("SIGKILL %s (%s) at %s; its deliveries: in flight %v, answered and not recorded %v", filepath.Base(victim.dir), why,
			at, inFlight, lost)
		sleep(ctx, 300*time.Millisecond)
		if err := victim.start(ctx); err != nil {
			stopSales()
			t.Fatalf("restart %s: %v", filepath.Base(victim.dir), err)
		}
		killed[victim] = true
	}
	sleep(ctx, 2*time.Second)
	victim, why := (*server)(nil), "no slow delivery in flight within 8 s: the first node"
	testwait.Until(8*time.Second, func() bool {
		for _, n := range c.nodes {
			if rcv.sendsSlow(n.p.cmd.Process.Pid) {
				victim, why = n, "sending a slow delivery"
			}
		}
		return victim != nil || ctx.Err() != nil
	})
	if victim == nil {
		victim = c.nodes[0]
	}
	kill(victim, why)
	sleep(ctx, 1500*time.Millisecond)
	rcv.setDown(t, true)
	sleep(ctx, whDown)
	rcv.setDown(t, false)
	for _, n := range c.nodes {
		if !killed[n] {
			sleep(ctx, 1500*time.Millisecond)
			// In turn, once it has a delivery in flight (within 3 s).
			why := "in turn; no delivery of it seen in flight within 3 s"
			if testwait.Until(3*time.Second, func() bool { return ctx.Err() != nil || rcv.sending(n.p.cmd.Process.Pid) }) && ctx.Err() == nil {
				why = "in turn, sending a delivery"
			}
			kill(n, why)
		}
	}
	sleep(ctx, time.Second)
	stopSales()
	sales.Wait()
	t.Logf("purchases stopped at %s; final statuses by id: %v", time.Since(start).Round(time.Millisecond), finals)

	// Every event delivered: wait, retrying (as a merchant) what would
	// otherwise wait minutes. A cut attempt waits for its lease (30 s).
	var want []instore.EventWire
	retried := 0
	lastSweep := time.Time{}
	deadline := time.Now().Add(60 * time.Second)
	for {
		want = e.listEvents(ctx, cursor)
		if time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		// Complete, and no event came meanwhile (a terminal's session
		// moving after the last restart).
		if rcv.complete(want) && len(e.listEvents(ctx, cursor)) == len(want) {
			break
		}
		if time.Since(lastSweep) > 2*time.Second {
			for _, id := range hooks {
				retried += e.retryLate(ctx, id)
			}
			lastSweep = time.Now()
		}
		sleep(ctx, 200*time.Millisecond)
	}
	t.Logf("deliveries settled at %s; %d deliveries retried through the API", time.Since(start).Round(time.Millisecond), retried)
	for _, name := range []string{"all", "some"} {
		t.Logf("endpoint %s: failed attempts recorded by the nodes: %v", name, e.failedAttempts(ctx, hooks[name]))
	}
	rcv.check(t, want)

	// The stream: every event of the list, once each, in its order.
	var all []instore.EventWire
	deadline = time.Now().Add(20 * time.Second)
	for {
		all = e.listEvents(ctx, "")
		for follow.count() < len(all) && time.Now().Before(deadline) {
			sleep(ctx, 100*time.Millisecond)
		}
		if len(e.listEvents(ctx, "")) == len(all) || time.Now().After(deadline) {
			break
		}
	}
	stopFollow()
	followDone.Wait()
	seen, breaks := follow.result()
	if breaks == 0 {
		t.Errorf("the event stream never broke: no node it was on was killed")
	}
	if len(seen) != len(all) {
		t.Errorf("the stream showed %d events, the list has %d", len(seen), len(all))
	}
	for i := range min(len(seen), len(all)) {
		if seen[i].ID != all[i].ID || seen[i].Type != all[i].Type || !bytes.Equal(seen[i].Data, all[i].Data) {
			t.Errorf("stream event %d is %s %s, the list's %s %s", i, seen[i].ID, seen[i].Type, all[i].ID, all[i].Type)
			break
		}
	}
	for _, v := range e.led.takeViolations() {
		t.Errorf("ECR: %s", v)
	}
	t.Logf("stream: %d events through %d breaks (resumed with Last-Event-ID); %d node kills; whole test %s",
		len(seen), breaks, c.kills, time.Since(start).Round(time.Millisecond))
}

// listEvents reads every event after the cursor, page by page (JSON).
func (e *crashEnv) listEvents(ctx context.Context, after string) []instore.EventWire {
	var out []instore.EventWire
	for {
		q := "/in-store/api/v1/events?limit=500"
		if after != "" {
			q += "&after=" + after
		}
		a := e.ecr.do(ctx, "GET", q, nil, "")
		var page struct {
			Events []instore.EventWire `json:"events"`
		}
		if a.err != nil || a.status != http.StatusOK || json.Unmarshal(a.body, &page) != nil {
			if ctx.Err() != nil {
				return out
			}
			// A node just killed: HAProxy answers for a moment.
			sleep(ctx, 200*time.Millisecond)
			continue
		}
		if len(page.Events) == 0 {
			return out
		}
		out = append(out, page.Events...)
		after = page.Events[len(page.Events)-1].ID
	}
}

// eachDelivery calls f with each of an endpoint's deliveries, page by
// page through the API, until the last page or a failed read.
func (e *crashEnv) eachDelivery(ctx context.Context, webhookID string, f func(instore.DeliveryWire)) (complete bool) {
	cursor := ""
	for {
		q := "/in-store/api/v1/webhooks/" + webhookID + "/deliveries?limit=100"
		if cursor != "" {
			q += "&cursor=" + cursor
		}
		a := e.ecr.do(ctx, "GET", q, nil, "")
		var page struct {
			Deliveries []instore.DeliveryWire `json:"deliveries"`
			NextCursor *string                `json:"nextCursor"`
		}
		if a.err != nil || a.status != http.StatusOK || json.Unmarshal(a.body, &page) != nil {
			return false
		}
		for _, d := range page.Deliveries {
			f(d)
		}
		if page.NextCursor == nil {
			return true
		}
		cursor = *page.NextCursor
	}
}

// succeeded reads the events each endpoint (by name) has recorded
// delivered, retrying while a request fails (a node just killed).
func (e *crashEnv) succeeded(ctx context.Context, hooks map[string]string) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for name, id := range hooks {
		var got map[string]bool
		testwait.Until(20*time.Second, func() bool {
			got = map[string]bool{}
			complete := e.eachDelivery(ctx, id, func(d instore.DeliveryWire) {
				if d.Status == instore.DeliverySucceeded {
					got[d.EventID] = true
				}
			})
			return complete || ctx.Err() != nil
		})
		out[name] = got
	}
	return out
}

// retryLate retries, through the API, an endpoint's pending deliveries
// whose next attempt is more than 8 s away (a second failure waits 5
// minutes), and returns how many.
func (e *crashEnv) retryLate(ctx context.Context, webhookID string) int {
	n := 0
	e.eachDelivery(ctx, webhookID, func(d instore.DeliveryWire) {
		if d.Status != "pending" || d.NextAt == nil {
			return
		}
		next, err := time.Parse(time.RFC3339Nano, *d.NextAt)
		if err != nil || time.Until(next) < 8*time.Second {
			return
		}
		r := e.ecr.do(ctx, "POST", "/in-store/api/v1/webhooks/"+webhookID+"/deliveries/"+d.DeliveryID+"/retry", nil, "")
		if r.err == nil && r.status == http.StatusAccepted {
			n++
		}
	})
	return n
}

// failedAttempts counts an endpoint's failed attempts as the nodes
// recorded them, by HTTP status (0: no answer: refused, reset, time-out).
func (e *crashEnv) failedAttempts(ctx context.Context, webhookID string) map[int]int {
	out := map[int]int{}
	e.eachDelivery(ctx, webhookID, func(d instore.DeliveryWire) {
		for _, at := range d.Attempts {
			if at.StatusCode < 200 || at.StatusCode > 299 {
				out[at.StatusCode]++
			}
		}
	})
	return out
}

// sseFollower follows the event stream through the load balancer from the
// first event, resuming with Last-Event-ID after every break.
type sseFollower struct {
	api apitest.Caller

	mu     sync.Mutex
	seen   []instore.EventWire
	breaks int
}

func (f *sseFollower) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.seen)
}

func (f *sseFollower) result() ([]instore.EventWire, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.seen), f.breaks
}

func (f *sseFollower) run(ctx context.Context) {
	hc := &http.Client{}
	last := instore.EventID(0)
	for ctx.Err() == nil {
		req, _ := f.api.Request(ctx, "GET", "/in-store/api/v1/events", nil, map[string]string{"Accept": "text/event-stream", "Last-Event-ID": last})
		resp, err := hc.Do(req)
		if err != nil {
			sleep(ctx, 200*time.Millisecond)
			continue
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			sleep(ctx, 200*time.Millisecond)
			continue
		}
		sr := client.NewEventStreamReader(resp.Body)
		for {
			m, err := sr.Next()
			if err != nil {
				break
			}
			var ev instore.EventWire
			if m.HasData && json.Unmarshal([]byte(m.Data), &ev) == nil {
				f.mu.Lock()
				f.seen = append(f.seen, ev)
				f.mu.Unlock()
				last = ev.ID
			}
		}
		resp.Body.Close()
		if ctx.Err() == nil {
			f.mu.Lock()
			f.breaks++
			f.mu.Unlock()
			sleep(ctx, 100*time.Millisecond)
		}
	}
}
