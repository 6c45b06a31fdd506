package instore

import (
	"context"
	"strconv"
	"time"
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
	// MaxWebhookConcurrency bounds an endpoint's Concurrency: how many of
	// its deliveries one sender has in flight at once.
	MaxWebhookConcurrency = 16
	// SecretOverlap is how long a rotated secret keeps signing beside the
	// new one.
	SecretOverlap = 24 * time.Hour
	// WebhookDisableAfter is how long an endpoint may keep failing before
	// it is disabled.
	WebhookDisableAfter = 5 * 24 * time.Hour
)

// WebhookStatus is the status of a webhook endpoint.
type WebhookStatus string

// Webhook statuses.
const (
	WebhookEnabled  WebhookStatus = "enabled"
	WebhookDisabled WebhookStatus = "disabled"
)

// DeliveryState is the status of a webhook delivery.
type DeliveryState string

// Delivery statuses.
const (
	DeliveryPending   DeliveryState = "pending"
	DeliverySucceeded DeliveryState = "succeeded"
	DeliveryFailed    DeliveryState = "failed" // every retry failed: given up
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
	EventTypes     []EventType // empty: all
	Description    string
	Status         WebhookStatus
	DisabledReason string
	Secret         string
	PreviousSecret string
	PreviousUntil  *time.Time
	FailingSince   *time.Time
	CreatedAt      time.Time
	// Concurrency is how many deliveries of the endpoint may be in flight
	// at once (1 to MaxWebhookConcurrency): 1, one at a time in the
	// events' order (in order per endpoint); more, the order is kept per
	// terminal (DeliveryOrderKey), docs/events.md.
	Concurrency int
}

// InFlight is how many of w's deliveries may be in flight at once: its
// Concurrency, at least 1.
func (w *Webhook) InFlight() int { return max(1, w.Concurrency) }

// DeliveryOrderKey is what orders an endpoint's deliveries when several
// may be in flight (Webhook.Concurrency above 1): the deliveries of one
// key go one after another in the events' order, those of different keys
// at once. It is the event's terminal: a terminal runs one transaction at
// a time, and its events (transactions, session, print jobs, updates,
// batches) keep their order; events of no terminal share the key "".
func DeliveryOrderKey(e *StoredEvent) string { return e.TerminalID }

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
	WebhookID      string        `json:"webhookId"`
	URL            string        `json:"url"`
	EventTypes     []EventType   `json:"eventTypes"`
	Description    string        `json:"description"`
	Status         WebhookStatus `json:"status"`
	DisabledReason *string       `json:"disabledReason"`
	CreatedAt      string        `json:"createdAt"`
	Concurrency    int           `json:"concurrency"`
	Secret         string        `json:"secret,omitempty"`
}

// Wire is w as the API answers it; withSecret adds its signing secret
// (shown when it is created or rotated).
func (w *Webhook) Wire(withSecret bool) *WebhookWire {
	v := &WebhookWire{WebhookID: w.ID, URL: w.URL, EventTypes: nonNil(w.EventTypes), Description: w.Description,
		Status: w.Status, CreatedAt: w.CreatedAt.UTC().Format(MicroRFC3339), Concurrency: w.InFlight()}
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
	EventType EventType
	Status    DeliveryState
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
	EventType  EventType        `json:"eventType"`
	Status     DeliveryState    `json:"status"`
	NextAt     *string          `json:"nextAttemptAt"`
	CreatedAt  string           `json:"createdAt"`
	Attempts   []WebhookAttempt `json:"attempts"`
}

// DeliveryID is the API's id of a delivery.
func DeliveryID(id int64) string { return "dlv_" + strconv.FormatInt(id, 10) }

// Wire is d as the API answers it.
func (d *WebhookDelivery) Wire() DeliveryWire {
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
	// Run is how many consecutive due deliveries of an endpoint a claim
	// leases together, its head first (0 or 1: the head only): a run is
	// sent one delivery after another, in order, and recorded together
	// (RecordAttempts). Limit, PerMerchant and Busy count runs (an
	// endpoint's sender each), not deliveries. An endpoint with several
	// deliveries in flight gets a longer run (RunOf).
	Run int
}

// RunScale bounds how many times Run an endpoint's run may be (RunOf).
const RunScale = 4

// RunOf is the run a claim leases of an endpoint with inFlight deliveries
// in flight at once (Webhook.InFlight): Run times inFlight, at most
// RunScale times. Its lanes send it in about the time one lane sends
// Run, so a run's claim and record (a few statements each, slow while the
// database is busy with sales) are spread over that many more deliveries:
// on PostgreSQL at a node's peak, runs of 512 kept transaction.final
// endpoints in pace where runs of 128 did not (docs/benchmarks.md).
func (q ClaimQuota) RunOf(inFlight int) int {
	return max(1, q.Run) * min(max(1, inFlight), RunScale)
}

// Room returns how many deliveries of merchantID q lets a claim take
// besides those taken (already in this claim).
func (q ClaimQuota) Room(merchantID string, taken int) int {
	if q.PerMerchant <= 0 {
		return q.Limit
	}
	return q.PerMerchant - q.Busy[merchantID] - taken
}

// AttemptRecord is what the store records of a claimed delivery: its
// attempt and what follows (Outcome), or, with Outcome nil, that it was
// not attempted and its lease is given back (a run ends early: its
// delivery before failed and is retried later, or the lease would run
// out before its attempt ended).
type AttemptRecord struct {
	Delivery *DueDelivery
	Outcome  *AttemptOutcome
}

// AttemptOutcome is what the store records after an attempt.
type AttemptOutcome struct {
	Attempt WebhookAttempt
	// Succeeded: 2xx. Otherwise NextAt is when to try again, or GiveUp.
	Succeeded bool
	NextAt    time.Time
	GiveUp    bool
	// DisableBefore: an endpoint failing since before it is disabled, with
	// DisableReason.
	DisableBefore time.Time
	DisableReason string
}

// WebhookStore keeps endpoints and deliveries.
type WebhookStore interface {
	CreateWebhook(ctx context.Context, w *Webhook, max int) error
	// Webhook returns a merchant's endpoint (ErrNotFound: none, or deleted).
	Webhook(ctx context.Context, merchantID, id string) (*Webhook, error)
	Webhooks(ctx context.Context, merchantID string) ([]*Webhook, error)
	// ChangeWebhook changes a merchant's endpoint in one write
	// transaction: it reads the endpoint as last committed (locked until
	// the transaction ends), calls change with it, and writes what change
	// leaves in its url, types, description, status, reason, secrets,
	// failing time and concurrency, so that no change committed meanwhile
	// (another PATCH, a rotation, the dispatcher's disabling) is undone. It
	// returns the endpoint written; ErrNotFound when there is none (or it
	// is deleted), change's error (nothing written) when it fails. change
	// runs inside the transaction: it decides and calls nothing (no store
	// call, no I/O), so that the row is locked only for as long as that.
	ChangeWebhook(ctx context.Context, merchantID, id string, change func(*Webhook) error) (*Webhook, error)
	// DeleteWebhook deletes an endpoint; its pending deliveries end.
	DeleteWebhook(ctx context.Context, merchantID, id string, at time.Time) error
	// WebhookDeliveries lists an endpoint's deliveries newest first, with
	// ids below before (0: from the newest).
	WebhookDeliveries(ctx context.Context, webhookID string, before int64, limit int) ([]*WebhookDelivery, error)
	WebhookDelivery(ctx context.Context, webhookID string, id int64) (*WebhookDelivery, error)
	// RetryDelivery makes a delivery pending again, due at.
	RetryDelivery(ctx context.Context, webhookID string, id int64, at time.Time) error
	// ClaimDeliveries leases, until leaseUntil, deliveries due at now that
	// head their endpoint's queue, each with up to q.Run-1 consecutive due
	// deliveries behind it (a run: adjacent in the answer, in order), each
	// to exactly one caller across nodes, within q: round-robin over the
	// merchants (every merchant's earliest due head before any merchant's
	// second).
	ClaimDeliveries(ctx context.Context, now, leaseUntil time.Time, q ClaimQuota) ([]*DueDelivery, error)
	// RecordAttempts records, in one transaction, the attempts of claimed
	// deliveries and their outcomes, in the order given, and gives back
	// the leases of those not attempted.
	RecordAttempts(ctx context.Context, rs []AttemptRecord) error
}

// WebhookRequest is the body of POST /webhooks and PATCH /webhooks/{id}.
type WebhookRequest struct {
	URL         *string        `json:"url"`
	EventTypes  *[]EventType   `json:"eventTypes"`
	Description *string        `json:"description"`
	Status      *WebhookStatus `json:"status"`
	Concurrency *int           `json:"concurrency"`
}

// Apply sets on w the fields r gives (a creation's or a PATCH's; Status
// apart, whose change has its own rules, lifecycle.NextWebhook): an absent
// field leaves w's.
func (r *WebhookRequest) Apply(w *Webhook) {
	if r.URL != nil {
		w.URL = *r.URL
	}
	if r.EventTypes != nil {
		w.EventTypes = *r.EventTypes
	}
	if r.Description != nil {
		w.Description = *r.Description
	}
	if r.Concurrency != nil {
		w.Concurrency = *r.Concurrency
	}
}
