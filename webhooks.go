package instore

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Webhook endpoints (docs/events.md): a merchant registers URLs that get
// its events, signed per the Standard Webhooks specification, at least
// once, in order per endpoint, retried with backoff for more than a day
// (internal/webhook sends them).

// Webhook limits.
const (
	MaxWebhooks           = 16   // endpoints per merchant
	MaxWebhookURL         = 2048 // bytes
	MaxWebhookDescription = 200  // characters
	// SecretOverlap is how long a rotated secret keeps signing beside the
	// new one.
	SecretOverlap = 24 * time.Hour
	// WebhookDisableAfter is how long an endpoint may keep failing before
	// it is disabled.
	WebhookDisableAfter = 5 * 24 * time.Hour
)

// Webhook statuses.
const (
	WebhookEnabled  = "enabled"
	WebhookDisabled = "disabled"
)

// Delivery statuses.
const (
	DeliveryPending   = "pending"
	DeliverySucceeded = "succeeded"
	DeliveryFailed    = "failed" // every retry failed: given up
)

// RetrySchedule is the wait after each failed attempt of a delivery
// (before jitter); after the last, the delivery is given up.
var RetrySchedule = []time.Duration{5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour,
	5 * time.Hour, 10 * time.Hour, 10 * time.Hour}

// Webhook is a merchant's endpoint.
type Webhook struct {
	ID             string
	MerchantID     string
	URL            string
	EventTypes     []string // empty: all
	Description    string
	Status         string
	DisabledReason string
	Secret         string
	PreviousSecret string
	PreviousUntil  *time.Time
	FailingSince   *time.Time
	CreatedAt      time.Time
}

// Secrets returns the secrets that sign a delivery at now: the current
// one, and the previous one during its overlap.
func (w *Webhook) Secrets(now time.Time) []string {
	out := []string{w.Secret}
	if w.PreviousSecret != "" && w.PreviousUntil != nil && now.Before(*w.PreviousUntil) {
		out = append(out, w.PreviousSecret)
	}
	return out
}

// WebhookWire is an endpoint as the API shows it; Secret only in the
// answers of its creation and rotation.
type WebhookWire struct {
	WebhookID      string   `json:"webhookId"`
	URL            string   `json:"url"`
	EventTypes     []string `json:"eventTypes"`
	Description    string   `json:"description"`
	Status         string   `json:"status"`
	DisabledReason *string  `json:"disabledReason"`
	CreatedAt      string   `json:"createdAt"`
	Secret         string   `json:"secret,omitempty"`
}

func (w *Webhook) wire(withSecret bool) *WebhookWire {
	v := &WebhookWire{WebhookID: w.ID, URL: w.URL, EventTypes: nonNil(w.EventTypes), Description: w.Description,
		Status: w.Status, CreatedAt: w.CreatedAt.UTC().Format(MicroRFC3339)}
	if w.DisabledReason != "" {
		r := w.DisabledReason
		v.DisabledReason = &r
	}
	if withSecret {
		v.Secret = w.Secret
	}
	return v
}

// WebhookDelivery is one event owed to one endpoint, with its attempts.
type WebhookDelivery struct {
	ID        int64
	WebhookID string
	EventSeq  int64
	EventType string
	Status    string
	Attempts  []WebhookAttempt
	NextAt    time.Time
	CreatedAt time.Time
	DoneAt    *time.Time
}

// WebhookAttempt is one try of a delivery.
type WebhookAttempt struct {
	N          int       `json:"attempt"`
	At         time.Time `json:"at"`
	StatusCode int       `json:"statusCode"`
	DurationMS int       `json:"durationMs"`
	Response   string    `json:"response"`
	Error      string    `json:"error"`
}

// DeliveryWire is a delivery as the API shows it.
type DeliveryWire struct {
	DeliveryID string           `json:"deliveryId"`
	EventID    string           `json:"eventId"`
	EventType  string           `json:"eventType"`
	Status     string           `json:"status"`
	NextAt     *string          `json:"nextAttemptAt"`
	CreatedAt  string           `json:"createdAt"`
	Attempts   []WebhookAttempt `json:"attempts"`
}

// DeliveryID is the API's id of a delivery.
func DeliveryID(id int64) string { return "dlv_" + strconv.FormatInt(id, 10) }

func parseDeliveryID(s string) (int64, bool) {
	n, err := strconv.ParseInt(strings.TrimPrefix(s, "dlv_"), 10, 64)
	return n, err == nil && n > 0 && strings.HasPrefix(s, "dlv_")
}

func (d *WebhookDelivery) wire() DeliveryWire {
	v := DeliveryWire{DeliveryID: DeliveryID(d.ID), EventID: EventID(d.EventSeq), EventType: d.EventType,
		Status: d.Status, CreatedAt: d.CreatedAt.UTC().Format(MicroRFC3339), Attempts: d.Attempts}
	if v.Attempts == nil {
		v.Attempts = []WebhookAttempt{}
	}
	if d.Status == DeliveryPending {
		at := d.NextAt.UTC().Format(MicroRFC3339)
		v.NextAt = &at
	}
	return v
}

// DueDelivery is a delivery claimed to be sent now.
type DueDelivery struct {
	ID       int64
	Attempts int // made so far
	Webhook  Webhook
	Event    StoredEvent
}

// ClaimQuota bounds a claim of deliveries: at most Limit in all, and at
// most PerMerchant of one merchant less those it has in flight at the
// caller already (Busy), so that one merchant's slow endpoints cannot take
// every sender of a node (docs/events.md, Fair sending).
type ClaimQuota struct {
	Limit int
	// PerMerchant: 0 for no bound per merchant.
	PerMerchant int
	// Busy: a merchant's deliveries in flight at the caller.
	Busy map[string]int
}

// Room returns how many deliveries of merchantID q lets a claim take
// besides those taken (already in this claim).
func (q ClaimQuota) Room(merchantID string, taken int) int {
	if q.PerMerchant <= 0 {
		return q.Limit
	}
	return q.PerMerchant - q.Busy[merchantID] - taken
}

// AttemptOutcome is what the store records after an attempt.
type AttemptOutcome struct {
	Attempt WebhookAttempt
	// Succeeded: 2xx. Otherwise NextAt is when to try again, or GiveUp.
	Succeeded bool
	NextAt    time.Time
	GiveUp    bool
	// DisableBefore: an endpoint failing since before it is disabled.
	DisableBefore time.Time
}

// WebhookStore keeps endpoints and deliveries.
type WebhookStore interface {
	CreateWebhook(ctx context.Context, w *Webhook, max int) error
	// Webhook returns a merchant's endpoint (ErrNotFound: none, or deleted).
	Webhook(ctx context.Context, merchantID, id string) (*Webhook, error)
	Webhooks(ctx context.Context, merchantID string) ([]*Webhook, error)
	// UpdateWebhook writes url, types, description, status, reason and
	// secrets.
	UpdateWebhook(ctx context.Context, w *Webhook) error
	// DeleteWebhook deletes an endpoint; its pending deliveries end.
	DeleteWebhook(ctx context.Context, merchantID, id string, at time.Time) error
	// WebhookDeliveries lists an endpoint's deliveries newest first, with
	// ids below before (0: from the newest).
	WebhookDeliveries(ctx context.Context, webhookID string, before int64, limit int) ([]*WebhookDelivery, error)
	WebhookDelivery(ctx context.Context, webhookID string, id int64) (*WebhookDelivery, error)
	// RetryDelivery makes a delivery pending again, due at.
	RetryDelivery(ctx context.Context, webhookID string, id int64, at time.Time) error
	// ClaimDeliveries leases, until leaseUntil, deliveries due at now that
	// head their endpoint's queue (in order per endpoint), each to exactly
	// one caller across nodes, within q: round-robin over the merchants
	// (every merchant's earliest due head before any merchant's second).
	ClaimDeliveries(ctx context.Context, now, leaseUntil time.Time, q ClaimQuota) ([]*DueDelivery, error)
	// RecordAttempt records an attempt of a claimed delivery and its
	// outcome.
	RecordAttempt(ctx context.Context, d *DueDelivery, o AttemptOutcome) error
}

// WebhookRequest is the body of POST /webhooks and PATCH /webhooks/{id}.
type WebhookRequest struct {
	URL         *string   `json:"url"`
	EventTypes  *[]string `json:"eventTypes"`
	Description *string   `json:"description"`
	Status      *string   `json:"status"`
}

// validate checks r; create: url required, status not allowed.
func (s *Service) validateWebhook(r *WebhookRequest, create bool) []FieldError {
	var errs []FieldError
	if r.URL == nil {
		if create {
			errs = append(errs, FieldError{Field: "/url", Message: "is required"})
		}
	} else if msg := s.checkWebhookURL(*r.URL); msg != "" {
		errs = append(errs, FieldError{Field: "/url", Message: msg})
	}
	if r.EventTypes != nil {
		for _, t := range *r.EventTypes {
			if !slices.Contains(EventTypes, t) {
				errs = append(errs, FieldError{Field: "/eventTypes", Message: "must list event types: " + strings.Join(EventTypes, ", ")})
				break
			}
		}
	}
	if r.Description != nil {
		d := *r.Description
		if !utf8.ValidString(d) || utf8.RuneCountInString(d) > MaxWebhookDescription ||
			strings.IndexFunc(d, unicode.IsControl) >= 0 {
			errs = append(errs, FieldError{Field: "/description", Message: fmt.Sprintf("must be at most %d characters, without control characters", MaxWebhookDescription)})
		}
	}
	if r.Status != nil {
		if create {
			errs = append(errs, FieldError{Field: "/status", Message: "is set by PATCH only (a new endpoint is enabled)"})
		} else if *r.Status != WebhookEnabled && *r.Status != WebhookDisabled {
			errs = append(errs, FieldError{Field: "/status", Message: "must be enabled or disabled"})
		}
	}
	return errs
}

// checkWebhookURL returns why u cannot be a target ("" if it can). Its
// address is checked again when each delivery connects (internal/webhook).
func (s *Service) checkWebhookURL(u string) string {
	if len(u) > MaxWebhookURL || strings.IndexFunc(u, unicode.IsControl) >= 0 {
		return fmt.Sprintf("must be an absolute https URL of at most %d bytes", MaxWebhookURL)
	}
	p, err := url.Parse(u)
	if err != nil || p.Host == "" || p.User != nil || p.Fragment != "" {
		return "must be an absolute https URL without credentials or fragment"
	}
	switch p.Scheme {
	case "https":
	case "http":
		if !s.WebhookAllowHTTP {
			return "must be https (http only in the sandbox)"
		}
	default:
		return "must be an absolute https URL"
	}
	// A name is resolved, and its addresses checked, when a delivery
	// connects; an address written in the URL is checked now too, and the
	// names that always mean loopback (RFC 6761).
	if s.WebhookAllowPrivate {
		return ""
	}
	const allow = " (the operator may allow such addresses with --webhook-allow-private)"
	host := strings.TrimSuffix(strings.ToLower(p.Hostname()), ".")
	if a, err := netip.ParseAddr(host); err == nil {
		if err := CheckWebhookAddr(a); err != nil {
			return "must reach the public internet: " + err.Error() + allow
		}
	} else if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return "must reach the public internet: localhost is loopback" + allow
	}
	return ""
}

// NewWebhookSecret returns a new signing secret: whsec_ and the base64 of
// 32 random bytes (the Standard Webhooks format).
func NewWebhookSecret() string {
	b := make([]byte, 32)
	rand.Read(b)
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}

func newWebhookID() string { return "wh_" + strings.ToLower(rand.Text()[:20]) }

// CreateWebhook registers an endpoint of the principal's merchant and
// answers it with its secret, shown this once.
func (s *Service) CreateWebhook(ctx context.Context, p *Principal, r *WebhookRequest) (*WebhookWire, error) {
	if _, err := s.merchant(ctx, p); err != nil {
		return nil, err
	}
	if errs := s.validateWebhook(r, true); errs != nil {
		return nil, fields(errs).err()
	}
	w := &Webhook{ID: newWebhookID(), MerchantID: p.MerchantID, URL: *r.URL, Status: WebhookEnabled,
		Secret: NewWebhookSecret(), CreatedAt: s.now()}
	if r.EventTypes != nil {
		w.EventTypes = *r.EventTypes
	}
	if r.Description != nil {
		w.Description = *r.Description
	}
	if err := s.Store.CreateWebhook(ctx, w, MaxWebhooks); errors.Is(err, ErrConflict) {
		return nil, Errorf(EConflict, "A merchant has at most %d webhook endpoints; delete one first.", MaxWebhooks)
	} else if err != nil {
		return nil, fmt.Errorf("create webhook: %w", err)
	}
	return w.wire(true), nil
}

func (s *Service) webhook(ctx context.Context, p *Principal, id string) (*Webhook, error) {
	if _, err := s.merchant(ctx, p); err != nil {
		return nil, err
	}
	w, err := s.Store.Webhook(ctx, p.MerchantID, id)
	if errors.Is(err, ErrNotFound) {
		return nil, Errorf(ENotFound, "No webhook endpoint with this webhookId.")
	} else if err != nil {
		return nil, fmt.Errorf("webhook: %w", err)
	}
	return w, nil
}

// Webhooks lists the merchant's endpoints.
func (s *Service) Webhooks(ctx context.Context, p *Principal) ([]*WebhookWire, error) {
	if _, err := s.merchant(ctx, p); err != nil {
		return nil, err
	}
	ws, err := s.Store.Webhooks(ctx, p.MerchantID)
	if err != nil {
		return nil, fmt.Errorf("webhooks: %w", err)
	}
	out := make([]*WebhookWire, len(ws))
	for i, w := range ws {
		out[i] = w.wire(false)
	}
	return out, nil
}

// Webhook returns one endpoint (without its secret).
func (s *Service) Webhook(ctx context.Context, p *Principal, id string) (*WebhookWire, error) {
	w, err := s.webhook(ctx, p, id)
	if err != nil {
		return nil, err
	}
	return w.wire(false), nil
}

// UpdateWebhook changes an endpoint (PATCH): enabling it clears the reason
// it was disabled and its failing streak.
func (s *Service) UpdateWebhook(ctx context.Context, p *Principal, id string, r *WebhookRequest) (*WebhookWire, error) {
	if errs := s.validateWebhook(r, false); errs != nil {
		return nil, fields(errs).err()
	}
	w, err := s.webhook(ctx, p, id)
	if err != nil {
		return nil, err
	}
	if r.URL != nil {
		w.URL = *r.URL
	}
	if r.EventTypes != nil {
		w.EventTypes = *r.EventTypes
	}
	if r.Description != nil {
		w.Description = *r.Description
	}
	if r.Status != nil {
		if *r.Status == WebhookEnabled && w.Status != WebhookEnabled {
			w.DisabledReason, w.FailingSince = "", nil
		} else if *r.Status == WebhookDisabled && w.Status != WebhookDisabled {
			w.DisabledReason = "disabled by the merchant"
		}
		w.Status = *r.Status
	}
	if err := s.Store.UpdateWebhook(ctx, w); err != nil {
		return nil, fmt.Errorf("update webhook: %w", err)
	}
	return w.wire(false), nil
}

// RotateWebhookSecret gives an endpoint a new secret; the old one signs
// beside it for SecretOverlap.
func (s *Service) RotateWebhookSecret(ctx context.Context, p *Principal, id string) (*WebhookWire, error) {
	w, err := s.webhook(ctx, p, id)
	if err != nil {
		return nil, err
	}
	until := s.now().Add(SecretOverlap)
	w.PreviousSecret, w.PreviousUntil, w.Secret = w.Secret, &until, NewWebhookSecret()
	if err := s.Store.UpdateWebhook(ctx, w); err != nil {
		return nil, fmt.Errorf("rotate webhook secret: %w", err)
	}
	return w.wire(true), nil
}

// DeleteWebhook deletes an endpoint; what it was still owed is not sent.
func (s *Service) DeleteWebhook(ctx context.Context, p *Principal, id string) error {
	if _, err := s.webhook(ctx, p, id); err != nil {
		return err
	}
	if err := s.Store.DeleteWebhook(ctx, p.MerchantID, id, s.now()); err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("delete webhook: %w", err)
	}
	return nil
}

// WebhookDeliveries lists an endpoint's deliveries, newest first, before
// the cursor (a deliveryId; "" from the newest).
func (s *Service) WebhookDeliveries(ctx context.Context, p *Principal, id, cursor string, limit int) ([]DeliveryWire, *string, error) {
	var before int64
	if cursor != "" {
		n, ok := parseDeliveryID(cursor)
		if !ok {
			return nil, nil, fields{{Field: "cursor", Message: "must be a deliveryId (dlv_ and digits)"}}.err()
		}
		before = n
	}
	if _, err := s.webhook(ctx, p, id); err != nil {
		return nil, nil, err
	}
	ds, err := s.Store.WebhookDeliveries(ctx, id, before, limit)
	if err != nil {
		return nil, nil, fmt.Errorf("webhook deliveries: %w", err)
	}
	out := make([]DeliveryWire, len(ds))
	for i, d := range ds {
		out[i] = d.wire()
	}
	var next *string
	if len(ds) == limit {
		n := DeliveryID(ds[len(ds)-1].ID)
		next = &n
	}
	return out, next, nil
}

// RetryDelivery sends a delivery again now (a failed one, or a pending one
// sooner than its next attempt).
func (s *Service) RetryDelivery(ctx context.Context, p *Principal, id, deliveryID string) (*DeliveryWire, error) {
	if _, err := s.webhook(ctx, p, id); err != nil {
		return nil, err
	}
	n, ok := parseDeliveryID(deliveryID)
	if !ok {
		return nil, Errorf(ENotFound, "No delivery with this deliveryId.")
	}
	if err := s.Store.RetryDelivery(ctx, id, n, s.now()); errors.Is(err, ErrNotFound) {
		return nil, Errorf(ENotFound, "No delivery with this deliveryId.")
	} else if err != nil {
		return nil, fmt.Errorf("retry delivery: %w", err)
	}
	d, err := s.Store.WebhookDelivery(ctx, id, n)
	if err != nil {
		return nil, fmt.Errorf("delivery: %w", err)
	}
	v := d.wire() // the dispatcher's next round (every second) sends it

	return &v, nil
}
