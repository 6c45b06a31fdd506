package service

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/batch"
	"github.com/instore-dev/instore/lifecycle"
)

// Service runs the Online API's operations on terminals and transactions
// and handles what terminals report. Rules, validation order, error codes
// and state changes live here, once; HTTP handlers and the gateway only
// translate.
type Service struct {
	Store    instore.Store
	Gateway  instore.Gateway
	Metadata *instore.Metadata
	Logger   *slog.Logger
	// SecretMatches checks a device's secret against its stored digest
	// (internal/auth.Matches, the one check of stored secrets); nil
	// refuses every device.
	SecretMatches func(secret string, digest []byte) bool
	// NewRef returns a new onlineAPIRefId (unique, time-sortable).
	NewRef func() string
	// Clock is the service's one time: the time of day (stamps,
	// listings' windows) and the time-outs, waits and sweeps measured on
	// it (nil: the wall clock, wallclock.Clock).
	Clock instore.Clock
	// AckTimeout is how long a purchase waits for the terminal's ack (WP25).
	AckTimeout time.Duration
	// Deadline is how long after the ack a transaction may stay PENDING (WP36).
	Deadline time.Duration
	// CaptureTolerance is how far past the authorised amount a capture may
	// go (0.20: 20 %, for tips; instore.DefaultCaptureTolerance when 0;
	// negative: none).
	CaptureTolerance float64
	// PreAuthValidity is how long an approved pre-auth stays OPEN before
	// the service voids it (instore.DefaultPreAuthValidity when 0).
	PreAuthValidity time.Duration
	// PrintTimeout is how long a print job waits for the terminal (TIMEOUT).
	PrintTimeout time.Duration
	// NewPrintID returns a new printId.
	NewPrintID func() string
	// EffectTTL bounds how long a message owed to a terminal (a cancel, a
	// reversal, a print: the root's effect.go) is kept owed; DefaultEffectTTL when 0.
	EffectTTL time.Duration
	// EncodeEvent writes an event as its streams send it: the HTTP
	// adapter's server-sent message (onlineapi.EncodeStreamMessage). The
	// feed encodes each event once with it (feed.go); nil: the event's
	// JSON.
	EncodeEvent func(*instore.StoredEvent) []byte
	// Observer, if set, is told of every transaction that ends
	// (observe.go).
	Observer instore.Observer
	// Shared says other processes change the store too (several nodes on
	// one PostgreSQL: internal/cluster): a status is then always read
	// from the store, never from what this node last committed.
	Shared bool
	// WebhookAllowHTTP lets webhook endpoints be http:// URLs (sandbox,
	// demo); otherwise https only.
	WebhookAllowHTTP bool
	// WebhookAllowPrivate lets a webhook URL name an address that is not
	// globally routable unicast (--webhook-allow-private; sandbox, demo):
	// otherwise such a literal address is refused at registration
	// (CheckWebhookAddr), as every address is when a delivery connects.
	WebhookAllowPrivate bool
	// Rand is where the Service draws the random parts of the ids it makes
	// (owed messages, updates, link codes, the cursor key; nil:
	// crypto/rand). The deterministic simulation (internal/simulation)
	// gives it a seeded generator.
	Rand io.Reader
	// Go runs f in a goroutine of its own (nil: a go statement): what the
	// Service starts besides an operation (a print after its result's
	// confirm, an update waiting for its terminal). The simulation runs
	// them as tasks it schedules.
	Go func(f func())

	changes changes
	running running
	ev      events
	feed    feed
	// creds holds the device credentials that passed (credentials.go).
	creds credentials
	// offline gathers the ends of sessions into batches (sessions.go);
	// hellos the hellos' reads and writes (sessions.go); devices the
	// reads of devices that authenticate (devices.go).
	offline batch.Batcher[string, struct{}]
	hellos  batch.Batcher[*helloCall, helloSeen]
	devices batch.Batcher[string, *instore.Device]
	// minVersions caches the minimum software versions (minversion.go).
	minVersions minVersions
	// updateWaits holds the terminal IDs whose SCHEDULED update this node
	// saw waiting for a transaction to end (terminalIdle).
	updateWaits sync.Map
	// expiryWaits holds, by terminal ID, the pre-auths (a map of refs)
	// whose expiry VOID this node found the terminal busy for (WP09):
	// tried again as soon as the terminal is idle (terminalIdle), not
	// only at the next sweep.
	// expiring holds the pre-auths whose expiry this node is deciding
	// now (preAuthExpired), one at a time each.
	// (true: asked again meanwhile, so decided again once it is done).
	expiring    map[string]bool
	expiryMu    sync.Mutex
	expiryWaits map[string]map[string]bool
	rulesOnce   sync.Once
	rulesV      lifecycle.Rules
	timersMu    sync.Mutex
	timers      map[string]instore.Timer
	closed      bool
}

// Defaults of the Service's time-outs.
const (
	DefaultAckTimeout = 10 * time.Second
	DefaultDeadline   = 120 * time.Second
)

// Now is the time of day on the service's Clock.
func (s *Service) Now() time.Time { return s.clock().Now() }

// now is Now as the service stamps it: UTC, to the microsecond.
func (s *Service) now() time.Time { return s.Now().UTC().Truncate(time.Microsecond) }

// random fills b from Rand.
func (s *Service) random(b []byte) {
	r := s.Rand
	if r == nil {
		r = rand.Reader
	}
	if _, err := io.ReadFull(r, b); err != nil {
		panic("service: random: " + err.Error()) // crypto/rand never fails
	}
}

// newID is an id created at: prefix and 32 hex digits, the first 12 the
// time in milliseconds, so ids sort by creation, the rest from random.
func (s *Service) newID(prefix string, at time.Time) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(at.UnixMilli())<<16)
	s.random(b[6:])
	return prefix + hex.EncodeToString(b[:])
}

// spawn runs f in its own goroutine (Go).
func (s *Service) spawn(f func()) {
	if s.Go != nil {
		s.Go(f)
		return
	}
	go f()
}

func (s *Service) log() *slog.Logger {
	if s.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Logger
}

func (s *Service) errorID(code string) *int {
	c, ok := s.Metadata.ErrorCode(code)
	if !ok {
		return nil
	}
	id := c.ID
	return &id
}

// Close stops the Service's timers.
func (s *Service) Close() {
	s.timersMu.Lock()
	defer s.timersMu.Unlock()
	s.closed = true
	for _, t := range s.timers {
		t.Stop()
	}
	s.timers = nil
}

// merchant loads the principal's merchant and answers WP03 when inactive.
func (s *Service) merchant(ctx context.Context, p *instore.Principal) (*instore.Merchant, error) {
	m := p.Merchant
	if m == nil || m.ID != p.MerchantID {
		var err error
		if m, err = s.Store.Merchant(ctx, p.MerchantID); err != nil {
			return nil, fmt.Errorf("merchant: %w", err)
		}
	}
	if !m.Active {
		return nil, instore.Errorf(instore.WP03, "The merchant is inactive.")
	}
	return m, nil
}

// terminalOp runs the checks an operation on one terminal ID starts with,
// in the contract's order: the request's own validation, WP03, WP16.
func (s *Service) terminalOp(ctx context.Context, p *instore.Principal, req interface{ Validate() error }, terminalID string) (*instore.Terminal, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	if _, err := s.merchant(ctx, p); err != nil {
		return nil, err
	}
	return s.ownTerminal(ctx, p, terminalID)
}

// terminalIDRequest is the request of an operation that names only a
// terminal ID (CloseBatch, Terminal), for terminalOp: valid when it is 8
// digits.
type terminalIDRequest string

func (id terminalIDRequest) Validate() error {
	if !instore.ValidTerminalID(string(id)) {
		return &instore.Error{Code: instore.EValidation, Detail: "The request is not valid; see errors.", Fields: []instore.FieldError{{Field: "terminalId", Message: "must be 8 digits"}}}
	}
	return nil
}

// ActiveMerchant returns the principal's merchant; WP03 when inactive.
func (s *Service) ActiveMerchant(ctx context.Context, p *instore.Principal) (*instore.Merchant, error) {
	return s.merchant(ctx, p)
}

// ownTerminal loads a terminal ID of the merchant; WP16 when it is not one
// of the merchant's, whether it exists elsewhere or not.
func (s *Service) ownTerminal(ctx context.Context, p *instore.Principal, terminalID string) (*instore.Terminal, error) {
	t, err := s.Store.Terminal(ctx, terminalID)
	return ownedBy(p, t, err)
}

// ownTerminalWithUpdate is ownTerminal that also returns the terminal's
// unfinished software update (nil if none), read with it.
func (s *Service) ownTerminalWithUpdate(ctx context.Context, p *instore.Principal, terminalID string) (*instore.Terminal, *instore.Update, error) {
	t, u, err := s.Store.TerminalWithOpenUpdate(ctx, terminalID)
	if t, err = ownedBy(p, t, err); err != nil {
		return nil, nil, err
	}
	return t, u, nil
}

// ownedBy is the terminal of a read (t, err) if it is the principal's
// merchant's; WP16 if there is none or it is another's.
func ownedBy(p *instore.Principal, t *instore.Terminal, err error) (*instore.Terminal, error) {
	return merchants(p, t, err, func(t *instore.Terminal) string { return t.MerchantID },
		instore.WP16, "The terminal ID is not one of this merchant's.", "terminal")
}

// found says whether a store read that failed with err (nil: none) found
// its row: false and no error when there is none (ErrNotFound), false and
// err wrapped as what when the read failed otherwise.
func found(err error, what string) (bool, error) {
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, instore.ErrNotFound):
		return false, nil
	}
	return false, fmt.Errorf("%s: %w", what, err)
}

// merchants is v, read with err, if it is the principal's merchant's
// (merchantOf says whose it is); the problem code with detail if there is
// none or it is another's, so that a merchant learns nothing of another's;
// what names the read in any other error.
func merchants[T any](p *instore.Principal, v *T, err error, merchantOf func(*T) string, code, detail, what string) (*T, error) {
	if errors.Is(err, instore.ErrNotFound) || err == nil && merchantOf(v) != p.MerchantID {
		return nil, &instore.Error{Code: code, Detail: detail}
	} else if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return v, nil
}

// merchantsByRef reads (read) the record with the reference id for the
// principal's active merchant (WP03 otherwise): not-found with detail when
// id is no reference, there is none or it is another merchant's
// (merchants).
func merchantsByRef[T any](ctx context.Context, s *Service, p *instore.Principal, id string, read func(context.Context, string) (*T, error),
	merchantOf func(*T) string, detail, what string) (*T, error) {
	if _, err := s.merchant(ctx, p); err != nil {
		return nil, err
	}
	if !instore.ValidRef(id) {
		return nil, &instore.Error{Code: instore.ENotFound, Detail: detail}
	}
	v, err := read(ctx, id)
	return merchants(p, v, err, merchantOf, instore.ENotFound, detail, what)
}

// merchantsAll lists (list) the records of the principal's active merchant
// (WP03 otherwise), each as view shows it; what names the read in its
// error.
func merchantsAll[T, V any](ctx context.Context, s *Service, p *instore.Principal, what string, list func(context.Context, string) ([]T, error),
	view func(T) (V, error)) ([]V, error) {
	if _, err := s.merchant(ctx, p); err != nil {
		return nil, err
	}
	xs, err := list(ctx, p.MerchantID)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	out := make([]V, 0, len(xs))
	for _, x := range xs {
		v, err := view(x)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}
