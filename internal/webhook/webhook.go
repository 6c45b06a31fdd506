// Package webhook sends the events of merchants to their webhook endpoints
// (docs/events.md): signed per the Standard Webhooks specification with
// its reference library, at least once, in order per endpoint, retried
// with backoff and jitter (instore.RetrySchedule), each attempt recorded.
// Deliveries are rows of the store, claimed with a lease (exactly one node
// sends each at a time; a node that dies mid-send leaves it to the lease's
// end), so an undelivered event survives any crash and is sent by
// whichever node is alive. Sending never holds a payment: it runs on its
// own goroutines and touches only the deliveries' rows.
package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/instore-dev/instore"
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
	// Workers is how many deliveries one node sends at once.
	Workers = 8
)

// Config configures a Dispatcher.
type Config struct {
	Store  instore.WebhookStore
	Logger *slog.Logger
	// Now is the time of day (the service's clock).
	Now func() time.Time
	// AllowPrivate lets deliveries reach loopback, link-local and private
	// addresses (--webhook-allow-private; demo and sandbox).
	AllowPrivate bool
	// Interval is how often the store is asked for due deliveries (default
	// 1 s).
	Interval time.Duration
}

// Dispatcher sends due deliveries until its context ends.
type Dispatcher struct {
	cfg    Config
	client *http.Client
	poke   chan struct{}
	// Sent counts attempts by outcome (tests, metrics).
	mu      sync.Mutex
	counts  map[string]int
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
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	d := &net.Dialer{Timeout: Timeout}
	if !cfg.AllowPrivate {
		d.Control = refusePrivate
	}
	tr := &http.Transport{DialContext: d.DialContext, TLSHandshakeTimeout: Timeout, ResponseHeaderTimeout: Timeout,
		MaxIdleConnsPerHost: 2, IdleConnTimeout: 90 * time.Second, ForceAttemptHTTP2: true, Proxy: nil}
	return &Dispatcher{cfg: cfg, poke: make(chan struct{}, 1), counts: map[string]int{},
		client: &http.Client{Transport: tr, Timeout: Timeout,
			// A redirect is the endpoint's answer, not a new target.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// refusePrivate refuses a connection to an address that is not public:
// checked on the address actually dialled, so a name that resolves to one
// (or is rebound to one) is refused too.
func refusePrivate(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("webhook: address %q: %w", address, err)
	}
	a := ap.Addr().Unmap()
	if a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() || a.IsMulticast() ||
		a.IsUnspecified() || a.IsInterfaceLocalMulticast() || cgnat.Contains(a) {
		return errors.New("webhook: the endpoint's address is not public (loopback, private or link-local); the operator may allow it with --webhook-allow-private")
	}
	return nil
}

var cgnat = netip.MustParsePrefix("100.64.0.0/10")

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
	sem := make(chan struct{}, Workers)
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-d.poke:
		}
		for ctx.Err() == nil {
			now := d.cfg.Now()
			due, err := d.cfg.Store.ClaimDeliveries(ctx, now, now.Add(Lease), Workers)
			if err != nil && ctx.Err() == nil {
				d.cfg.Logger.Warn("webhook: claim deliveries", "error", err)
			}
			for _, dd := range due {
				sem <- struct{}{}
				d.running.Add(1)
				go func() {
					defer func() { <-sem; d.running.Done() }()
					d.deliver(context.WithoutCancel(ctx), dd)
				}()
			}
			if len(due) < Workers {
				break
			}
		}
	}
}

// deliver makes one attempt of a claimed delivery and records it.
func (d *Dispatcher) deliver(ctx context.Context, dd *instore.DueDelivery) {
	n := dd.Attempts + 1
	start := d.cfg.Now()
	a := instore.WebhookAttempt{N: n, At: start}
	code, excerpt, err := d.send(ctx, dd, start)
	a.DurationMS = int(time.Since(start) / time.Millisecond)
	a.StatusCode, a.Response = code, excerpt
	o := instore.AttemptOutcome{DisableBefore: start.Add(-instore.WebhookDisableAfter)}
	switch {
	case err == nil && code >= 200 && code < 300:
		o.Succeeded = true
	case n > len(instore.RetrySchedule):
		o.GiveUp = true
	default:
		wait := instore.RetrySchedule[n-1]
		// Jitter of ±20 %, so that endpoints that failed together do not
		// come back together.
		wait += time.Duration((rand.Float64()*0.4 - 0.2) * float64(wait))
		o.NextAt = start.Add(wait)
	}
	if err != nil {
		a.Error = err.Error()
	} else if !o.Succeeded {
		a.Error = "the endpoint answered " + strconv.Itoa(code) + "; 2xx expected"
	}
	o.Attempt = a
	outcome := "failed"
	if o.Succeeded {
		outcome = "succeeded"
	}
	d.mu.Lock()
	d.counts[outcome]++
	d.mu.Unlock()
	if rerr := d.cfg.Store.RecordAttempt(ctx, dd, o); rerr != nil {
		// The lease runs out and the delivery is sent again: at least once.
		d.cfg.Logger.Warn("webhook: record attempt", "webhookId", dd.Webhook.ID, "error", rerr)
	} else if o.Succeeded || o.GiveUp {
		// The endpoint's next delivery is its head now: claim it at once
		// rather than at the next tick (a backlog would drain one delivery
		// per endpoint per Interval).
		d.Poke()
	}
	if !o.Succeeded {
		d.cfg.Logger.Info("webhook: delivery failed", "webhookId", dd.Webhook.ID, "eventId", instore.EventID(dd.Event.Seq),
			"attempt", n, "statusCode", code, "giveUp", o.GiveUp)
	}
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
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, dd.Webhook.URL, bytes.NewReader(body))
	if err != nil {
		return 0, "", fmt.Errorf("request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "instore-webhooks/1")
	req.Header.Set("webhook-id", instore.EventID(dd.Event.Seq))
	req.Header.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
	req.Header.Set("webhook-signature", sig)
	resp, err := d.client.Do(req)
	if err != nil {
		return 0, "", errors.New(redact(err.Error(), dd.Webhook.URL))
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

// redact keeps a URL's query (which may hold a token) out of an error.
func redact(msg, u string) string {
	if i := strings.IndexByte(u, '?'); i >= 0 {
		msg = strings.ReplaceAll(msg, u, u[:i]+"?...")
	}
	return msg
}
