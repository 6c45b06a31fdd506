package client

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/instore-dev/instore"
)

// Webhook statuses (Webhook.Status, WebhookUpdate.Status).
const (
	WebhookEnabled  = instore.WebhookEnabled
	WebhookDisabled = instore.WebhookDisabled
)

// Delivery statuses (WebhookDelivery.Status).
const (
	DeliveryPending   = instore.DeliveryPending
	DeliverySucceeded = instore.DeliverySucceeded
	DeliveryFailed    = instore.DeliveryFailed
)

// Webhook is a webhook endpoint of the merchant: a URL that gets its
// events (all, or those of EventTypes), signed as the Standard Webhooks
// specification says (VerifyWebhook checks them).
//
// Secret is set only in the answers of CreateWebhook and
// RotateWebhookSecret, the only times the service shows it: store it
// then. A Webhook prints (String, %v, %+v, slog) without it.
type Webhook struct {
	WebhookID string `json:"webhookId"`
	URL       string `json:"url"`
	// EventTypes are the types delivered (instore.EventTransactionFinal...);
	// empty: every type.
	EventTypes  []instore.EventType `json:"eventTypes"`
	Description string              `json:"description"`
	// Concurrency is how many deliveries of the endpoint may be in flight
	// at once, 1 to 16: 1 (the default, and every endpoint made before
	// the setting) sends one at a time, in order per endpoint; 2 to 16
	// keep the order per terminal (the events of one terminal one after
	// another, different terminals' in any order relative to each other).
	Concurrency int `json:"concurrency"`
	// Status is WebhookEnabled or WebhookDisabled: by the merchant
	// (UpdateWebhook), or by the service after 5 days of failed
	// deliveries, with DisabledReason saying why.
	Status         instore.WebhookStatus `json:"status"`
	DisabledReason string                `json:"disabledReason"`
	CreatedAt      time.Time             `json:"createdAt"`
	// Secret is the signing secret, whsec_ and base64: the HMAC key is
	// the base64-decoded part after whsec_.
	Secret string `json:"secret,omitempty"`
}

// String shows the endpoint without its secret (whether one is set only).
func (w Webhook) String() string {
	secret := "unset"
	if w.Secret != "" {
		secret = "set"
	}
	return fmt.Sprintf("Webhook{WebhookID:%s URL:%s EventTypes:%v Description:%q Concurrency:%d Status:%s DisabledReason:%q CreatedAt:%s Secret:%s}",
		w.WebhookID, w.URL, w.EventTypes, w.Description, w.Concurrency, w.Status, w.DisabledReason, w.CreatedAt.Format(time.RFC3339Nano), secret)
}

// GoString is String, for %#v.
func (w Webhook) GoString() string { return w.String() }

// LogValue is String, for log/slog.
func (w Webhook) LogValue() slog.Value { return slog.StringValue(w.String()) }

// WebhookParams is the body of POST /in-store/api/v1/webhooks.
type WebhookParams struct {
	// URL is an absolute https URL (http in the sandbox) of at most 2048
	// bytes, without credentials or fragment. The service refuses
	// addresses that are not globally routable unicast (loopback, private,
	// link-local, documentation, the IANA special-purpose blocks: a 400 if
	// the URL writes one, a failed attempt if a name resolves to one)
	// unless its operator allows them (the sandbox and the demo do).
	URL string `json:"url"`
	// EventTypes are the event types to deliver; none: every type.
	EventTypes []instore.EventType `json:"eventTypes,omitempty"`
	// Description is free text, at most 200 characters.
	Description string `json:"description,omitempty"`
	// Concurrency is how many deliveries may be in flight at once, 1 to
	// 16; 0 is not sent: the service's default, 1. With 1 deliveries go
	// one at a time, in order per endpoint. With 2 to 16 up to that many
	// go at once and the order is kept per terminal: the events of one
	// terminalId one after another (each once the one before succeeded or
	// was given up), different terminals' in any order relative to each
	// other, events without a terminal in order among themselves. A failed
	// delivery still holds every later one until it succeeds or is given
	// up. Outside 1-16: a validation error naming /concurrency.
	Concurrency int `json:"concurrency,omitempty"`
}

// WebhookUpdate is the body of PATCH /in-store/api/v1/webhooks/{webhookId}:
// nil (or "") members are left as they are.
type WebhookUpdate struct {
	URL *string `json:"url,omitempty"`
	// EventTypes replaces the types delivered; &[]instore.EventType{} means every
	// type.
	EventTypes  *[]instore.EventType `json:"eventTypes,omitempty"`
	Description *string              `json:"description,omitempty"`
	// Concurrency sets how many deliveries may be in flight at once, 1 to
	// 16 (Int(4)): 1 in order per endpoint, 2 to 16 in order per terminal
	// (WebhookParams.Concurrency).
	Concurrency *int `json:"concurrency,omitempty"`
	// Status is WebhookEnabled or WebhookDisabled. Enabling an endpoint
	// the service disabled clears DisabledReason, and what it is owed is
	// sent again, in order (per endpoint, or per terminal with a
	// Concurrency above 1).
	Status instore.WebhookStatus `json:"status,omitempty"`
}

// String returns a pointer to v, for optional members such as
// WebhookUpdate.URL.
func String(v string) *string { return &v }

// WebhookDelivery is one event owed to one endpoint, with every attempt
// to send it.
type WebhookDelivery struct {
	DeliveryID string `json:"deliveryId"`
	// EventID is the event's id, also the delivery's webhook-id header.
	EventID   string            `json:"eventId"`
	EventType instore.EventType `json:"eventType"`
	// Status is DeliveryPending, DeliverySucceeded or DeliveryFailed
	// (every retry failed: given up).
	Status instore.DeliveryState `json:"status"`
	// NextAttemptAt is when a pending delivery is tried next; nil
	// otherwise.
	NextAttemptAt *time.Time `json:"nextAttemptAt"`
	CreatedAt     time.Time  `json:"createdAt"`
	// Attempts are the attempts made, oldest first.
	Attempts []WebhookAttempt `json:"attempts"`
}

// WebhookAttempt is one attempt of a delivery: when, the HTTP status the
// endpoint answered (0 when none: see Error), how long it took, the first
// 512 bytes of its answer, and why it failed.
type WebhookAttempt = instore.WebhookAttempt

// DeliveryQuery selects a page of WebhookDeliveries. Zero members are not
// sent.
type DeliveryQuery struct {
	// Cursor continues a listing (DeliveryPage.NextCursor).
	Cursor string
	// Limit is the page size, 1 to 100 (default 50).
	Limit int
}

func (q DeliveryQuery) at(cursor string) DeliveryQuery { q.Cursor = cursor; return q }

// DeliveryPage is one page of an endpoint's deliveries, newest first.
type DeliveryPage struct {
	Deliveries []*WebhookDelivery `json:"deliveries"`
	// NextCursor continues the listing; "" on the last page.
	NextCursor string `json:"nextCursor"`
}

func (p *DeliveryPage) items() ([]*WebhookDelivery, string) { return p.Deliveries, p.NextCursor }

func webhookPath(id string) string { return Prefix + "/webhooks/" + url.PathEscape(id) }

const webhookRoute = Prefix + "/webhooks/{webhookId}"

// CreateWebhook registers an endpoint that gets the merchant's events and
// returns it with its signing Secret, shown here and by
// RotateWebhookSecret only. Deliveries come at least once (deduplicate by
// the event id), in order per endpoint (or per terminal with a
// Concurrency above 1), retried for about 28 hours. Errors: validation
// (URL, event types, description, concurrency), WP03, conflict (16
// endpoints already).
func (c *Client) CreateWebhook(ctx context.Context, p WebhookParams, opts ...CallOption) (*Webhook, error) {
	return postAs[Webhook](ctx, c, Prefix+"/webhooks", p, opts)
}

// Webhooks lists the merchant's endpoints, oldest first, without their
// secrets.
func (c *Client) Webhooks(ctx context.Context, opts ...CallOption) ([]*Webhook, error) {
	return getList[*Webhook](ctx, c, Prefix+"/webhooks", Prefix+"/webhooks", "webhooks", opts)
}

// Webhook returns an endpoint, without its secret: its Status and, when
// disabled, DisabledReason. Errors: WP03, not-found.
func (c *Client) Webhook(ctx context.Context, webhookID string, opts ...CallOption) (*Webhook, error) {
	return getAs[Webhook](ctx, c, webhookPath(webhookID), webhookRoute, nil, opts)
}

// UpdateWebhook changes an endpoint's URL, event types, description,
// concurrency or status, and returns it. Errors: validation, WP03, not-found.
func (c *Client) UpdateWebhook(ctx context.Context, webhookID string, u WebhookUpdate, opts ...CallOption) (*Webhook, error) {
	return callAs[Webhook](ctx, c, call{s: c.online, method: http.MethodPatch, path: webhookPath(webhookID), route: webhookRoute, body: u, opts: opts})
}

// DeleteWebhook deletes an endpoint; what it was still owed is not sent.
// Errors: WP03, not-found; a not-found answer to a retry, after an
// attempt whose answer was lost, is success (the first attempt deleted
// it).
func (c *Client) DeleteWebhook(ctx context.Context, webhookID string, opts ...CallOption) error {
	var r Response
	user := collect(opts).resp
	opts = append(opts[:len(opts):len(opts)], SaveResponse(&r))
	_, err := c.do(ctx, call{s: c.online, method: http.MethodDelete, path: webhookPath(webhookID), route: webhookRoute, opts: opts}, nil)
	if user != nil {
		*user = r
	}
	if err != nil && r.Attempts > 1 && IsCode(err, instore.ENotFound) {
		return nil
	}
	return err
}

// RotateWebhookSecret gives an endpoint a new signing secret and returns
// the endpoint with it. For 24 hours the old secret signs beside the new
// one (two signatures per delivery), so a receiver can switch over
// without refusing a delivery: VerifyWebhook with either succeeds.
// Errors: WP03, not-found.
func (c *Client) RotateWebhookSecret(ctx context.Context, webhookID string, opts ...CallOption) (*Webhook, error) {
	return postAt[Webhook](ctx, c, webhookPath(webhookID)+"/rotate-secret", webhookRoute+"/rotate-secret", nil, opts)
}

// WebhookDeliveries returns one page of an endpoint's deliveries, newest
// first, each with its attempts. Errors: validation (cursor, limit), WP03,
// not-found.
func (c *Client) WebhookDeliveries(ctx context.Context, webhookID string, q DeliveryQuery, opts ...CallOption) (*DeliveryPage, error) {
	v := url.Values{}
	if q.Cursor != "" {
		v.Set("cursor", q.Cursor)
	}
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	var page DeliveryPage
	if err := c.get(ctx, webhookPath(webhookID)+"/deliveries", webhookRoute+"/deliveries", v, &page, opts); err != nil {
		return nil, err
	}
	if page.Deliveries == nil {
		page.Deliveries = []*WebhookDelivery{}
	}
	return &page, nil
}

// AllWebhookDeliveries iterates over every delivery of an endpoint from
// q.Cursor on, newest first, fetching pages as it goes; it stops after
// the first error, which it yields.
func (c *Client) AllWebhookDeliveries(ctx context.Context, webhookID string, q DeliveryQuery, opts ...CallOption) iter.Seq2[*WebhookDelivery, error] {
	return listAll(ctx, func(ctx context.Context, q DeliveryQuery, opts ...CallOption) (*DeliveryPage, error) {
		return c.WebhookDeliveries(ctx, webhookID, q, opts...)
	}, q, opts)
}

// RetryWebhookDelivery makes a delivery due now (a failed one, or a
// pending one sooner than its next attempt) and returns it, pending; the
// service sends it within about a second, then the endpoint's later
// deliveries in their order. Errors: WP03, not-found.
func (c *Client) RetryWebhookDelivery(ctx context.Context, webhookID, deliveryID string, opts ...CallOption) (*WebhookDelivery, error) {
	if deliveryID == "" {
		return nil, errors.New("client: retry webhook delivery: no delivery id")
	}
	return postAt[WebhookDelivery](ctx, c, webhookPath(webhookID)+"/deliveries/"+url.PathEscape(deliveryID)+"/retry",
		webhookRoute+"/deliveries/{deliveryId}/retry", nil, opts)
}
