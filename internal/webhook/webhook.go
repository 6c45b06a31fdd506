// Package webhook sends the events of merchants to their webhook endpoints
// (docs/events.md): signed per the Standard Webhooks specification with
// its reference library, at least once, in order per endpoint, retried
// with backoff and jitter (instore.RetrySchedule), each attempt recorded;
// with an endpoint's Concurrency above 1, in order per terminal, several
// at once.
// Deliveries are rows of the store, claimed with a lease (exactly one node
// sends each at a time; a node that dies mid-send leaves it to the lease's
// end), so an undelivered event survives any crash and is sent by
// whichever node is alive. An endpoint's deliveries are claimed in runs
// (its head and up to Run-1 behind it), sent one after another (or in
// lanes per terminal) and recorded together. Sending never holds a payment: it runs on its own
// goroutines and touches only the deliveries' rows.
package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/wallclock"
	"github.com/instore-dev/instore/lifecycle"
)

// Limits of a delivery.
const (
	// Timeout bounds one attempt: connect, send, answer (2xx within it is
	// success).
	Timeout = 10 * time.Second
	// Lease is how long a claimed delivery is this node's; past it, another
	// node may send it again (at least once).
	Lease = 30 * time.Second
	// MaxExcerpt bounds the answer kept with an attempt.
	MaxExcerpt = 512
	// Workers is how many endpoints' runs of deliveries one node sends at
	// once (a sender each).
	Workers = 64
	// Run is how many consecutive deliveries of an endpoint a sender
	// claims at once and sends one after another, in order, recording them
	// together: an endpoint's pace is a run per claim and commit, not a
	// delivery (docs/events.md). An endpoint with several deliveries in
	// flight gets a run up to instore.RunScale times longer
	// (instore.ClaimQuota.RunOf).
	Run = 128
	// PerMerchant is how many senders one merchant's endpoints may hold:
	// fewer than Workers, so that a merchant whose endpoints hang (each
	// holds its sender up to Timeout) leaves the others' deliveries free
	// senders (docs/events.md, Fair sending). 8 was every merchant's
	// together before: one merchant sends as fast as it did.
	PerMerchant = 8
	// leaseMargin is the time left for the record of a run after its last
	// attempt's time-out, before the lease ends: a run's attempt after its
	// first begins only with Timeout+leaseMargin left.
	leaseMargin = 5 * time.Second
)

// Config configures a Dispatcher.
type Config struct {
	Store  instore.WebhookStore
	Logger *slog.Logger
	// Clock is the time of day of the claims and attempts, the service's
	// (nil: the wall clock, wallclock.Clock). The polling interval and
	// the attempts' time-outs stay on real time.
	Clock instore.Clock
	// AllowPrivate lets deliveries reach addresses that are not globally
	// routable unicast (--webhook-allow-private; demo and sandbox).
	AllowPrivate bool
	// Interval is how often the store is asked for due deliveries (default
	// 1 s).
	Interval time.Duration
	// Timeout bounds one attempt (default Timeout).
	Timeout time.Duration
	// Transport carries the requests (nil: an HTTP transport whose dialer
	// refuses private addresses unless AllowPrivate; the simulation's
	// receivers are one).
	Transport http.RoundTripper
	// Rand draws the retries' jitter in [0, 1) (nil: math/rand/v2's
	// Float64; the simulation's is its seed's).
	Rand func() float64
	// Synchronous makes a round send what it claims in the calling
	// goroutine, one delivery after another, and claim again until
	// nothing is due (Round, called by the simulation's scheduler; the
	// server's rounds start a goroutine per delivery).
	Synchronous bool
}

// Dispatcher sends due deliveries until its context ends.
type Dispatcher struct {
	cfg    Config
	client *http.Client
	poke   chan struct{}
	mu     sync.Mutex
	// counts counts attempts by outcome (tests, metrics).
	counts map[string]int
	// sending counts the deliveries in flight, busy those of each merchant.
	sending int
	busy    map[string]int
	running sync.WaitGroup
}

// New returns a Dispatcher.
func New(cfg Config) *Dispatcher {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = wallclock.Clock{}
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = Timeout
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Float64
	}
	tr := cfg.Transport
	if tr == nil {
		tr = guardedTransport(cfg)
	}
	return &Dispatcher{cfg: cfg, poke: make(chan struct{}, 1), counts: map[string]int{}, busy: map[string]int{},
		client: &http.Client{Transport: tr, Timeout: cfg.Timeout,
			// A redirect is the endpoint's answer, not a new target.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// guardedTransport is the HTTP transport of the deliveries: its dialer
// refuses private addresses unless cfg.AllowPrivate.
func guardedTransport(cfg Config) *http.Transport {
	d := &net.Dialer{Timeout: cfg.Timeout}
	if !cfg.AllowPrivate {
		d.Control = refusePrivate
	}
	return &http.Transport{DialContext: d.DialContext, TLSHandshakeTimeout: cfg.Timeout, ResponseHeaderTimeout: cfg.Timeout,
		MaxIdleConnsPerHost: Workers * instore.MaxWebhookConcurrency, IdleConnTimeout: 90 * time.Second, ForceAttemptHTTP2: true, Proxy: nil}
}

// refusePrivate refuses a connection to an address that is not globally
// routable unicast (instore.CheckWebhookAddr): checked in the dialer's
// Control, on the address actually dialled, so a name that resolves to
// one (or is rebound to one after the registration) is refused too.
func refusePrivate(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("webhook: address %q: %w", address, err)
	}
	if err := instore.CheckWebhookAddr(ap.Addr()); err != nil {
		return fmt.Errorf("webhook: the endpoint's address is refused: %w; the operator may allow it with --webhook-allow-private", err)
	}
	return nil
}

// Poke makes the dispatcher look for due deliveries now (new events were
// numbered).
func (d *Dispatcher) Poke() {
	select {
	case d.poke <- struct{}{}:
	default:
	}
}

// Counts returns the attempts made so far by outcome ("succeeded",
// "failed").
func (d *Dispatcher) Counts() map[string]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string]int, len(d.counts))
	for k, v := range d.counts {
		out[k] = v
	}
	return out
}

// Run sends due deliveries until ctx ends, then waits for the attempts in
// flight (each bounded by Timeout).
func (d *Dispatcher) Run(ctx context.Context) {
	defer d.running.Wait()
	tick := time.NewTicker(d.cfg.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-d.poke:
		}
		d.round(ctx)
	}
}

// Round claims the due deliveries and sends them, as one of Run's rounds
// does; with Config.Synchronous, in the calling goroutine, until nothing
// is due.
func (d *Dispatcher) Round(ctx context.Context) { d.round(ctx) }

// round claims as many runs of due deliveries as there are free senders
// (an endpoint's run each: its head and up to Run-1 deliveries behind
// it), at most PerMerchant in flight of one merchant, and starts sending
// each. It claims only what it starts at once: a claimed delivery never
// waits for a sender (holding its lease) behind another merchant's slow
// ones. A sender that ends pokes the next round. A synchronous round
// sends each itself, then claims again while anything was due.
func (d *Dispatcher) round(ctx context.Context) {
	for ctx.Err() == nil {
		d.mu.Lock()
		q := instore.ClaimQuota{Limit: Workers - d.sending, PerMerchant: PerMerchant, Busy: maps.Clone(d.busy), Run: Run}
		d.mu.Unlock()
		if q.Limit <= 0 {
			return
		}
		now := d.cfg.Clock.Now()
		leaseUntil := now.Add(Lease)
		due, err := d.cfg.Store.ClaimDeliveries(ctx, now, leaseUntil, q)
		if err != nil && ctx.Err() == nil {
			d.cfg.Logger.Warn("webhook: claim deliveries", "error", err)
		}
		runs := splitRuns(due)
		for _, run := range runs {
			m := run[0].Webhook.MerchantID
			d.mu.Lock()
			d.sending++
			d.busy[m]++
			d.mu.Unlock()
			if d.cfg.Synchronous {
				d.sendRun(context.WithoutCancel(ctx), run, leaseUntil)
				d.sent(m)
				continue
			}
			d.running.Add(1)
			go func() {
				defer func() {
					d.sent(m)
					d.running.Done()
					// A sender is free: what waited for one (or for its
					// merchant's share) is claimed at once, and so is the
					// endpoint's next run.
					d.Poke()
				}()
				d.sendRun(context.WithoutCancel(ctx), run, leaseUntil)
			}()
		}
		if len(runs) == 0 || !d.cfg.Synchronous && len(runs) < q.Limit {
			return
		}
	}
}

// splitRuns splits claimed deliveries into their endpoints' runs (each
// adjacent and in order in the claim).
func splitRuns(due []*instore.DueDelivery) [][]*instore.DueDelivery {
	var runs [][]*instore.DueDelivery
	for i, dd := range due {
		if i == 0 || dd.Webhook.ID != due[i-1].Webhook.ID {
			runs = append(runs, nil)
		}
		runs[len(runs)-1] = append(runs[len(runs)-1], dd)
	}
	return runs
}

// sent frees the sender of a run of merchant m.
func (d *Dispatcher) sent(m string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.sending--
	if d.busy[m]--; d.busy[m] <= 0 {
		delete(d.busy, m)
	}
}

// attempt makes one attempt of a claimed delivery and returns what
// follows (lifecycle.NextDelivery): succeeded, the next attempt's time,
// or given up; the endpoint disabled once failing long enough.
func (d *Dispatcher) attempt(ctx context.Context, dd *instore.DueDelivery) instore.AttemptOutcome {
	n := dd.Attempts + 1
	start := d.cfg.Clock.Now()
	a := instore.WebhookAttempt{N: n, At: start}
	began := time.Now() // the attempt's duration is on real time, as its time-out
	code, excerpt, err := d.send(ctx, dd, start)
	a.DurationMS = int(time.Since(began) / time.Millisecond)
	a.StatusCode, a.Response = code, excerpt
	st := lifecycle.NextDelivery(lifecycle.DeliveryPending, lifecycle.DeliveryEvent{Kind: lifecycle.DeliveryAnswered, At: start,
		Attempts: dd.Attempts, Code: code, Err: err, Rand: d.cfg.Rand()})
	o := instore.AttemptOutcome{Succeeded: st.Succeeded, NextAt: st.NextAt, GiveUp: st.GiveUp,
		DisableBefore: st.DisableBefore, DisableReason: st.DisableReason}
	a.Error = st.Failure
	o.Attempt = a
	outcome := "failed"
	if o.Succeeded {
		outcome = "succeeded"
	}
	d.mu.Lock()
	d.counts[outcome]++
	d.mu.Unlock()
	if !o.Succeeded {
		d.cfg.Logger.Info("webhook: delivery failed", "webhookId", dd.Webhook.ID, "eventId", instore.EventID(dd.Event.Seq),
			"attempt", n, "statusCode", code, "giveUp", o.GiveUp)
	}
	return o
}

// send POSTs the event to the endpoint, signed, and returns the answer's
// status and excerpt.
func (d *Dispatcher) send(ctx context.Context, dd *instore.DueDelivery, now time.Time) (int, string, error) {
	body, err := json.Marshal(dd.Event.Wire())
	if err != nil {
		return 0, "", err
	}
	sig, err := Sign(dd.Webhook.Secrets(now), instore.EventID(dd.Event.Seq), now, body)
	if err != nil {
		return 0, "", err
	}
	ctx, cancel := context.WithTimeout(ctx, d.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, dd.Webhook.URL, bytes.NewReader(body))
	if err != nil {
		return 0, "", errors.New("request: " + redact(err, dd.Webhook.URL))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "instore-webhooks/1")
	req.Header.Set("webhook-id", instore.EventID(dd.Event.Seq))
	req.Header.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
	req.Header.Set("webhook-signature", sig)
	resp, err := d.client.Do(req)
	if err != nil {
		return 0, "", errors.New(redact(err, dd.Webhook.URL))
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, MaxExcerpt))
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // reuse the connection if it is short
	return resp.StatusCode, excerpt(b), nil
}

// Sign returns the webhook-signature header of a delivery: one v1
// signature per secret (two during a rotation's overlap), separated by
// spaces, as the Standard Webhooks specification says.
func Sign(secrets []string, id string, at time.Time, body []byte) (string, error) {
	var sigs []string
	for _, s := range secrets {
		wh, err := standardwebhooks.NewWebhook(s)
		if err != nil {
			return "", fmt.Errorf("webhook secret: %w", err)
		}
		sig, err := wh.Sign(id, at, body)
		if err != nil {
			return "", err
		}
		sigs = append(sigs, sig)
	}
	return strings.Join(sigs, " "), nil
}

// excerpt is the start of an answer as valid UTF-8 text.
func excerpt(b []byte) string {
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 && r != '\n' && r != '\t' || r == 0x7f {
			return -1
		}
		return r
	}, s)
}

// RedactURL is u as an attempt's error or a log line may show it: scheme,
// host and path, its userinfo and query (which may hold a token) and its
// fragment replaced by "...", however the URL is written (an uppercase
// scheme, escapes); "(the endpoint's URL)" if it does not parse.
func RedactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(the endpoint's URL)"
	}
	out := &url.URL{Scheme: p.Scheme, Host: p.Host, Path: p.Path, RawPath: p.RawPath, Opaque: p.Opaque}
	if p.User != nil {
		out.User = url.User("...")
	}
	s := out.String()
	if p.RawQuery != "" || p.ForceQuery {
		s += "?..."
	}
	if p.Fragment != "" || p.RawFragment != "" {
		s += "#..."
	}
	return s
}

// redact returns err's message, an error that may name the endpoint's URL
// u, with u shown as RedactURL shows it: the URL of a *url.Error replaced,
// then every form of u the message may still hold (as written, as
// net/http writes it again: scheme in lower case, password as ***) and
// what is left of its secret parts replaced too.
func redact(err error, u string) string {
	safe := RedactURL(u)
	if ue, ok := errors.AsType[*url.Error](err); ok {
		ue.URL = safe
	}
	msg := err.Error()
	whole := []string{u}
	var parts []string
	if p, err := url.Parse(u); err == nil {
		whole = append(whole, p.String(), p.Redacted())
		if p.User != nil {
			parts = append(parts, p.User.String()+"@", p.User.Username()+":***@")
		}
		if p.RawQuery != "" {
			parts = append(parts, "?"+p.RawQuery)
		}
		if p.Fragment != "" {
			parts = append(parts, "#"+p.EscapedFragment(), "#"+p.Fragment)
		}
	}
	// Longest first: a whole URL before its parts.
	longest := func(a, b string) int { return len(b) - len(a) }
	slices.SortFunc(whole, longest)
	slices.SortFunc(parts, longest)
	for _, f := range whole {
		if f != "" && f != safe {
			msg = strings.ReplaceAll(msg, f, safe)
		}
	}
	for _, f := range parts {
		if f != "" {
			msg = strings.ReplaceAll(msg, f, "...")
		}
	}
	return msg
}
