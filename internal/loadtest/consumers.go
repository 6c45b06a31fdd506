package loadtest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	crand "crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/webhook"
)

// The consumers of events: webhook endpoints pointing at a real receiver in
// this process (it verifies every signature with the Standard Webhooks
// reference library, as an integrator's would) and followers of the event
// stream (GET /events/stream), docs/events.md.

// receiver is the webhook endpoints' HTTPS server: one path per endpoint
// (/hook/{i}), each with its secret. Its certificate is its own (for
// 127.0.0.1): the server is told to trust it with SSL_CERT_FILE (the
// server takes http:// endpoints in the sandbox only, and a real receiver
// is https). It answers 204 to a delivery whose
// signature verifies, 400 otherwise; while held, it keeps requests waiting
// (under the dispatcher's 10 s time-out) until released.
type receiver struct {
	srv      *http.Server
	url      string
	certFile string // PEM of its certificate

	mu      sync.Mutex
	secrets []*standardwebhooks.Webhook
	last    []string // per endpoint: the last event id delivered
	hold    chan struct{}

	deliveries, badSignatures, outOfOrder, repeats atomic.Int64
	// firstAt and lastAt are the first and last deliveries' times (Unix
	// nanoseconds) since reset.
	firstAt, lastAt atomic.Int64
}

// newReceiver starts a receiver; its certificate goes to dir.
func newReceiver(dir string) (*receiver, error) {
	cert, certPEM, err := selfSigned()
	if err != nil {
		return nil, err
	}
	certFile := filepath.Join(dir, "receiver-cert.pem")
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &receiver{url: "https://" + ln.Addr().String(), certFile: certFile}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /hook/{i}", r.serve)
	r.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}, ErrorLog: log.New(io.Discard, "", 0)}
	go r.srv.ServeTLS(ln, "", "")
	return r, nil
}

// selfSigned returns the receivers' certificate for 127.0.0.1, valid for
// a day: one per process, since an in-process server (and Go's TLS
// clients in general) reads SSL_CERT_FILE only once.
func selfSigned() (tls.Certificate, []byte, error) {
	c := receiverCert()
	return c.cert, c.pem, c.err
}

type certPEM struct {
	cert tls.Certificate
	pem  []byte
	err  error
}

var receiverCert = sync.OnceValue(func() certPEM {
	cert, p, err := makeCert()
	return certPEM{cert, p, err}
})

func makeCert() (tls.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), crand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "instore loadtest receiver"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(crand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

// trustingClient is an HTTP client that trusts the receiver's certificate.
func (r *receiver) trustingClient(workers int) (*http.Client, error) {
	pemBytes, err := os.ReadFile(r.certFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pemBytes)
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: workers,
		TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}, nil
}

func (r *receiver) close() {
	r.release()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	r.srv.Shutdown(ctx)
	r.srv.Close()
}

// endpoint adds an endpoint's secret and returns its index.
func (r *receiver) endpoint(secret string) (int, error) {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		return 0, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.secrets = append(r.secrets, wh)
	r.last = append(r.last, "")
	return len(r.secrets) - 1, nil
}

// holdAll makes the deliveries wait until release.
func (r *receiver) holdAll() {
	r.mu.Lock()
	if r.hold == nil {
		r.hold = make(chan struct{})
	}
	r.mu.Unlock()
}

func (r *receiver) release() {
	r.mu.Lock()
	if r.hold != nil {
		close(r.hold)
		r.hold = nil
	}
	r.mu.Unlock()
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	if err != nil {
		return
	}
	var i int
	if _, err := fmt.Sscan(req.PathValue("i"), &i); err != nil {
		http.Error(w, "no such endpoint", 404)
		return
	}
	r.mu.Lock()
	if i < 0 || i >= len(r.secrets) {
		r.mu.Unlock()
		http.Error(w, "no such endpoint", 404)
		return
	}
	wh, hold := r.secrets[i], r.hold
	r.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-req.Context().Done():
			return
		}
	}
	if wh.Verify(body, req.Header) != nil {
		r.badSignatures.Add(1)
		http.Error(w, "bad signature", 400)
		return
	}
	id := req.Header.Get("webhook-id")
	r.mu.Lock()
	switch last := r.last[i]; {
	case id == last:
		r.repeats.Add(1) // at least once: a delivery sent again
	case id < last:
		r.outOfOrder.Add(1)
	default:
		r.last[i] = id
	}
	r.mu.Unlock()
	now := time.Now().UnixNano()
	r.firstAt.CompareAndSwap(0, now)
	r.lastAt.Store(now)
	r.deliveries.Add(1)
	w.WriteHeader(http.StatusNoContent)
}

// api sends a request of the Online API with the run's credentials and
// decodes a JSON answer of status want into out (nil: discarded).
func (e *env) api(ctx context.Context, method, path string, body any, want int, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, e.srv.online+path, rd)
	if err != nil {
		return err
	}
	h := e.authHeaders()
	for i := 0; i+1 < len(h); i += 2 {
		req.Header.Set(h[i], h[i+1])
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: HTTP %d %s", method, path, resp.StatusCode, truncate(b, 200))
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

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

// followers are M followers of the event stream, started live at each
// window of the side with consumers and stopped at its end; each checks
// that its events come in order without a repeat.
type followers struct {
	e      *env
	n      int
	client *http.Client

	cancel  context.CancelFunc
	wg      sync.WaitGroup
	events  atomic.Int64
	errors  atomic.Int64
	bad     atomic.Int64 // out of order or repeated within a connection
	lastErr atomic.Pointer[string]
}

func (e *env) newFollowers(n int) *followers {
	return &followers{e: e, n: n, client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n + 1}}}
}

// start connects the followers and returns once each has its answer's
// headers (it is live).
func (f *followers) start(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	f.cancel = cancel
	ready := make(chan error, f.n)
	for range f.n {
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			f.follow(ctx, ready)
		}()
	}
	for range f.n {
		if err := <-ready; err != nil {
			f.stop()
			return err
		}
	}
	return nil
}

func (f *followers) stop() {
	if f.cancel != nil {
		f.cancel()
	}
	f.wg.Wait()
	f.cancel = nil
}

func (f *followers) follow(ctx context.Context, ready chan<- error) {
	req, err := http.NewRequestWithContext(ctx, "GET", f.e.srv.online+"/in-store/api/v1/events/stream", nil)
	if err != nil {
		ready <- err
		return
	}
	h := f.e.authHeaders()
	for i := 0; i+1 < len(h); i += 2 {
		req.Header.Set(h[i], h[i+1])
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := f.client.Do(req)
	if err != nil {
		ready <- fmt.Errorf("event stream: %w", err)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		ready <- fmt.Errorf("event stream: HTTP %d %s", resp.StatusCode, b)
		return
	}
	ready <- nil
	last := ""
	err = readSSE(resp.Body, func(id, _ string, _ []byte) {
		if id <= last {
			f.bad.Add(1)
		}
		last = id
		f.events.Add(1)
	})
	if err != nil && ctx.Err() == nil {
		f.errors.Add(1)
		msg := err.Error()
		f.lastErr.Store(&msg)
	}
}

// readSSE reads server-sent events until the stream ends, calling fn with
// each message's id, event and data.
func readSSE(r io.Reader, fn func(id, event string, data []byte)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var id, event string
	var data []byte
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if data != nil {
				fn(id, event, data)
			}
			event, data = "", nil
		case strings.HasPrefix(line, ":"):
		default:
			k, v, _ := strings.Cut(line, ":")
			v = strings.TrimPrefix(v, " ")
			switch k {
			case "id":
				id = v
			case "event":
				event = v
			case "data":
				if data != nil {
					data = append(data, '\n')
				}
				data = append(data, v...)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return io.ErrUnexpectedEOF
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
	e, err := newEnv(ctx, o)
	if err != nil {
		return nil, err
	}
	defer e.close()
	r := e.newResult(WebhooksScenario)
	r.Terminals, r.ECRs = o.Terminals, o.ECRs
	stop, err := e.serveTerminals(ctx, o.Terminals)
	if err != nil {
		return nil, err
	}
	defer stop()
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
	ids, err := e.webhooks(ctx, rcv, o.Webhooks)
	if err != nil {
		return nil, fmt.Errorf("register the webhook endpoints: %w", err)
	}
	tr := &http.Transport{MaxIdleConnsPerHost: o.ECRs + 8, MaxIdleConns: o.ECRs + 8}
	defer tr.CloseIdleConnections()
	var counts lifeCounts
	lives := e.purchaseOp(&http.Client{Transport: tr, Timeout: 2 * time.Minute}, &refRing{}, &counts)
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
	k, err := rcv.endpoint(secret)
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
				id := instore.EventID(seq.Add(1))
				sig, err := wh.Sign(id, t0, body)
				if err != nil {
					msg := err.Error()
					firstErr.CompareAndSwap(nil, &msg)
					return
				}
				req, _ := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("webhook-id", id)
				req.Header.Set("webhook-timestamp", fmt.Sprint(t0.Unix()))
				req.Header.Set("webhook-signature", sig)
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
