package loadtest

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/protocol"
)

// nominalCommitsPerLife is the commits of a purchase life as the code
// makes them (create, ack, three progress stages, result), used only when
// the store cannot be read to count them.
const nominalCommitsPerLife = 6

// purchaseRamp bounds the lead-in of the purchase's later windows (see
// interleaveRamp): the ECRs start their lives at once after being parked,
// and the first ones complete a life's latency later (120-200 ms at 100
// terminals). A ramp past that starts the window with the lives in flight
// of a steady state instead of counting the ramp's head start.
const purchaseRamp = 300 * time.Millisecond

// runPurchase runs the purchase scenario, or mixed: purchases with
// metadata requests and status reads at the same time.
//
// The baseline (raw commits on the store) and ours (the purchase lives)
// take turns in alternating windows (see interleave): while the commits
// run, the server is up but idle, its ECR clients parked and its virtual
// terminals online and idle; while ours run, the baseline's table is
// idle.
func runPurchase(ctx context.Context, o *Options, mixed bool) (*Result, error) {
	name := "purchase"
	switch {
	case mixed:
		name = "mixed"
	case o.preauth:
		name = PreAuthScenario
	}
	e, r, client, done, err := startLives(ctx, o, name)
	if err != nil {
		return nil, err
	}
	defer done()
	if mixed {
		r.Clients, r.Readers = o.Clients, o.Readers
	}
	if o.Webhooks > 0 || o.Streams > 0 {
		if err := e.purchaseWithConsumers(ctx, r, client); err != nil {
			return nil, err
		}
		return r, nil
	}
	commits, err := e.newCommitBaseline(ctx)
	if err != nil {
		return nil, err
	}
	defer commits.close()

	recent := &refRing{}
	var counts lifeCounts
	lives := e.purchaseOp(client, recent, &counts)
	var parts []op
	if mixed {
		host, err := hostOf(e.srv.online)
		if err != nil {
			return nil, err
		}
		parts = append(parts, e.metadataOp("metadata", host, o.Clients), e.statusOp(host, recent))
	}
	r.CommitWriters = commits.op.workers
	e.logf("%s: raw single-row commits on %s (%d writers) against %d terminals and %d ECR clients, %s per side in %d interleaved rounds",
		name, e.backend, r.CommitWriters, o.Terminals, o.ECRs, o.Duration, o.Rounds)
	m0, _ := scrapeMetrics(ctx, e.srv.ops)
	res := e.purchaseInterleave(commits.op, lives, parts).run(ctx)
	r.setStoreCommits(ctx, e.srv.ops, m0, counts.lives.Load())
	// The baseline's table goes before the count (which does not read it).
	commits.close()
	if ctx.Err() == nil && res.sides[0].Count == 0 {
		msg := ""
		if res.sides[0].FirstError != "" {
			msg = ": " + res.sides[0].FirstError
		}
		return nil, errors.New("commit baseline: no commit completed" + msg)
	}
	if n := counts.lives.Load(); n > 0 {
		r.RequestsPerLife = float64(counts.requests.Load()) / float64(n)
	}

	perLife := e.nominalPerLife()
	if e.hasStore() {
		if _, n, err := e.countCommits(ctx); err == nil {
			perLife = n
		} else {
			r.Notes = append(r.Notes, err.Error())
		}
	} else {
		r.Notes = append(r.Notes, fmt.Sprintf("commits per life not counted (no store access): nominal %g", perLife))
	}
	r.setPurchase(res, perLife)
	if o.preauth && e.hasStore() {
		checked, bad, err := e.checkPreAuths(ctx)
		switch {
		case err != nil:
			r.Notes = append(r.Notes, err.Error())
		case bad > 0:
			r.Ours.Errors += bad
			r.Notes = append(r.Notes, fmt.Sprintf("%d of %d pre-auths did not end CAPTURED with the amounts of their life", bad, checked))
		}
		r.PreAuthsChecked = checked
	}
	return r, nil
}

// setStoreCommits sets the durable and relaxed commits per life from the
// server's store counters, read in m0 before the lives and now (nothing
// when the server has none: an older build).
func (r *Result) setStoreCommits(ctx context.Context, ops string, m0 map[string]float64, lives int64) {
	const durable, relaxed = "instore_store_durable_commits_total", "instore_store_relaxed_commits_total"
	m1, err := scrapeMetrics(ctx, ops)
	if err != nil || lives == 0 {
		return
	}
	if _, ok := m1[durable]; !ok {
		r.Notes = append(r.Notes, "durable and relaxed commits per life not counted: the server has no store counters")
		return
	}
	r.DurableCommitsPerLife = (m1[durable] - m0[durable]) / float64(lives)
	r.RelaxedCommitsPerLife = (m1[relaxed] - m0[relaxed]) / float64(lives)
}

// nominalPerLife is the commits of a life as the code makes them, used
// only when the store cannot be read to count them.
func (e *env) nominalPerLife() float64 {
	if e.o.preauth {
		return nominalCommitsPerPreAuthLife
	}
	return nominalCommitsPerLife
}

// purchaseInterleave is the purchase measurement: the raw commits (side
// 0, no server figures: the server idles in its windows) and the purchase
// lives with mixed's parts (side 1) in alternating windows.
func (e *env) purchaseInterleave(commits, lives op, parts []op) *interleave {
	il := e.interleave(ilSide{op: commits, dbCPU: e.dbCPU()},
		ilSide{op: lives, parts: parts, stats: e.srv.stats, dbCPU: e.dbCPU(), onStart: e.profileHook()})
	il.ramp = min(e.o.Warmup, purchaseRamp)
	il.logPer, il.logPerName = e.nominalPerLife(), "commits per life, nominal"
	return il
}

// setPurchase sets the figures of a purchase measurement: the baseline is
// the raw commits per second over their windows divided by perLife, the
// commits a life makes (counted in the store after the run), in total and
// in each round.
func (r *Result) setPurchase(res ilResult, perLife float64) {
	r.Ours, r.Parts = res.sides[1], res.parts[1]
	b := res.sides[0]
	r.RawCommitRate, r.CommitsPerLife = b.Rate, perLife
	r.BaselineRate = b.Rate / perLife
	b.Rate, b.Unit = r.BaselineRate, "lives/s"
	b.Name = fmt.Sprintf("raw commits / %.2f", perLife)
	b.RoundRates = slices.Clone(b.RoundRates)
	for i := range b.RoundRates {
		b.RoundRates[i] /= perLife
	}
	r.Baseline = b
	r.Rounds = len(res.roundRatios)
	r.RoundRatios = make([]float64, len(res.roundRatios))
	for i := range r.RoundRatios {
		r.RoundRatios[i] = safeRatio(r.Ours.RoundRates[i], b.RoundRates[i])
	}
	if r.BaselineRate > 0 {
		r.Ratio = r.Ours.Rate / r.BaselineRate
	}
}

// startTerminals runs a virtual terminal per device in this process and
// waits until every one is online and linked.
func (e *env) startTerminals(ctx context.Context) (stop func(), err error) {
	return e.startFleet(ctx, func(int) []string { return []string{e.srv.terminal + protocol.Path} }, 50*time.Millisecond, time.Second, time.Minute)
}

// purchaseOp is one ECR's purchase life: POST /purchase (answered once the
// terminal acknowledged it), then GET /transaction/{ref}?wait=30 until the
// final status, which must be APPROVED (with --progress, &afterVersion=V:
// an answer at every change). ECR w drives terminals w, w+M,
// w+2M... in turn. With the preauth scenario, the life is preAuthLife's.
func (e *env) purchaseOp(client *http.Client, recent *refRing, counts *lifeCounts) op {
	c := e.newECRCaller(client, counts)
	life := func(ctx context.Context, terminalID string) error {
		t, err := c.sale(ctx, "/purchase", map[string]any{"terminalId": terminalID, "amount": 1000, "currency": "SEK"}, recent)
		if err != nil {
			return err
		}
		return wantApproved(t, "purchase")
	}
	if e.o.preauth {
		life = func(ctx context.Context, terminalID string) error { return preAuthLife(ctx, c, terminalID, recent) }
	}
	m := e.o.ECRs
	next := make([]int, m)
	return op{name: "instore", unit: "lives/s", workers: m, fn: func(ctx context.Context, w int) error {
		i := w + next[w]*m
		if i >= len(e.devices) {
			next[w], i = 0, w
		}
		next[w]++
		if err := life(ctx, e.devices[i].terminalID); err != nil {
			return err
		}
		counts.lives.Add(1)
		return nil
	}}
}

// ecrCaller sends an ECR's requests of the Online API with the run's
// credentials and counts them.
type ecrCaller struct {
	e      *env
	client *http.Client
	hdr    http.Header
	counts *lifeCounts
}

func (e *env) newECRCaller(client *http.Client, counts *lifeCounts) *ecrCaller {
	hdr := http.Header{}
	e.authorize(hdr)
	hdr.Set("Content-Type", "application/json")
	return &ecrCaller{e: e, client: client, hdr: hdr, counts: counts}
}

// call sends one request and decodes its answer, which must have status
// want (with --keyed, a POST carries a fresh Idempotency-Key).
func (c *ecrCaller) call(ctx context.Context, method, u string, body []byte, want int) (*txView, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header = c.hdr.Clone()
	if c.e.o.Keyed && method == "POST" {
		req.Header.Set("Idempotency-Key", crand.Text())
	}
	c.counts.requests.Add(1)
	b, err := roundTrip(c.client, req, want)
	if err != nil {
		return nil, err
	}
	var t txView
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// sale creates a transaction (POST path of the Online API, 201 once the
// terminal acknowledged it), adds it to recent, and follows it with the
// ?wait long-poll to its final status.
func (c *ecrCaller) sale(ctx context.Context, path string, body any, recent *refRing) (*txView, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	base := c.e.srv.online + "/in-store/api/v1"
	t, err := c.call(ctx, "POST", base+path, b, 201)
	if err != nil {
		return nil, err
	}
	recent.add(t.Ref)
	for t.StatusID == instore.StatusPending {
		q := "?wait=30"
		if c.e.o.Progress {
			q += "&afterVersion=" + strconv.FormatInt(t.Version, 10)
		}
		if t, err = c.call(ctx, "GET", base+"/transaction/"+t.Ref+q, nil, 200); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// wantApproved is nil if t ended APPROVED.
func wantApproved(t *txView, what string) error {
	if t.StatusID != instore.StatusApproved {
		return fmt.Errorf("%s ended with status %d, want APPROVED (0)", what, t.StatusID)
	}
	return nil
}

// lifeCounts count the ECRs' HTTP requests and completed lives of a run
// (warm-up included), for the requests a life takes.
type lifeCounts struct {
	requests, lives atomic.Int64
}

type txView struct {
	Ref         string                    `json:"onlineAPIRefId"`
	StatusID    instore.TransactionStatus `json:"statusId"`
	Version     int64                     `json:"version"`
	TotalAmount int64                     `json:"totalAmount"`
	TipAmount   int64                     `json:"tipAmount"`
	// Authorization is an approved pre-auth's.
	Authorization *struct {
		State            instore.AuthorizationState `json:"state"`
		AuthorizedAmount int64                      `json:"authorizedAmount"`
	} `json:"authorization"`
}

// statusOp reads the status of a recent purchase (GET /transaction/{ref},
// no wait), as an ECR's back office does.
func (e *env) statusOp(host string, recent *refRing) op {
	readers := e.o.Readers
	conns := make([]*rawClient, readers)
	for i := range conns {
		conns[i] = newRawClient(host)
	}
	h := e.authHeaders()
	return op{name: "status reads", unit: "req/s", workers: readers, fn: func(ctx context.Context, w int) error {
		ref := recent.pick()
		if ref == "" {
			time.Sleep(time.Millisecond)
			return errSkip
		}
		st, err := conns[w].do(rawRequest(host, "/in-store/api/v1/transaction/"+ref, h...), requestTimeout)
		if err != nil {
			return err
		}
		if st != 200 {
			return fmt.Errorf("status read: HTTP %d %s", st, truncate(conns[w].body, 200))
		}
		return nil
	}}
}

// refRing keeps the last purchases' references for the status readers.
type refRing struct {
	mu   sync.Mutex
	refs [256]string
	n    int
}

func (r *refRing) add(ref string) {
	r.mu.Lock()
	r.refs[r.n%len(r.refs)] = ref
	r.n++
	r.mu.Unlock()
}

func (r *refRing) pick() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == 0 {
		return ""
	}
	return r.refs[rand.IntN(min(r.n, len(r.refs)))]
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}

// startLives starts what a scenario of purchase lives runs on: the
// server with o.Terminals virtual terminals online and linked, the result
// of scenario, and the HTTP client of the ECRs (a connection kept for
// each); done stops them.
func startLives(ctx context.Context, o *Options, scenario string) (e *env, r *Result, client *http.Client, done func(), err error) {
	if e, err = newEnv(ctx, o); err != nil {
		return nil, nil, nil, nil, err
	}
	r = e.newResult(scenario)
	r.Terminals, r.ECRs = o.Terminals, o.ECRs
	stop, err := e.serveTerminals(ctx, o.Terminals)
	if err != nil {
		e.close()
		return nil, nil, nil, nil, err
	}
	tr := &http.Transport{MaxIdleConnsPerHost: o.ECRs + 8, MaxIdleConns: o.ECRs + 8}
	done = func() {
		tr.CloseIdleConnections()
		stop()
		e.close()
	}
	return e, r, &http.Client{Transport: tr, Timeout: 2 * time.Minute}, done, nil
}

// serveTerminals stores n terminal IDs, starts the server and connects n
// virtual terminals to its gateway; stop disconnects them.
func (e *env) serveTerminals(ctx context.Context, n int) (stop func(), err error) {
	if err := e.seed(ctx, n); err != nil {
		return nil, err
	}
	if err := e.startServer(ctx); err != nil {
		return nil, err
	}
	if e.srv.terminal == "" {
		return nil, errors.New("this scenario needs the terminal gateway's URL (target terminal=ws://...)")
	}
	return e.startTerminals(ctx)
}
