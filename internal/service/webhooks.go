package service

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
	"unicode"
	"unicode/utf8"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/lifecycle"
)

func parseDeliveryID(s string) (int64, bool) {
	n, err := strconv.ParseInt(strings.TrimPrefix(s, "dlv_"), 10, 64)
	return n, err == nil && n > 0 && strings.HasPrefix(s, "dlv_")
}

// validate checks r; create: url required, status not allowed.
func (s *Service) validateWebhook(r *instore.WebhookRequest, create bool) []instore.FieldError {
	var errs []instore.FieldError
	if r.URL == nil {
		if create {
			errs = append(errs, instore.FieldError{Field: "/url", Message: "is required"})
		}
	} else if msg := s.checkWebhookURL(*r.URL); msg != "" {
		errs = append(errs, instore.FieldError{Field: "/url", Message: msg})
	}
	if r.EventTypes != nil {
		for i, t := range *r.EventTypes {
			if !slices.Contains(instore.EventTypes, t) {
				errs = append(errs, instore.FieldError{Field: "/eventTypes", Message: "must list event types: " + instore.EventTypeList()})
				break
			}
			if slices.Contains((*r.EventTypes)[:i], t) {
				errs = append(errs, instore.FieldError{Field: "/eventTypes", Message: "must list each event type once: " + string(t) + " is listed twice"})
				break
			}
		}
	}
	if r.Description != nil {
		d := *r.Description
		if !utf8.ValidString(d) || utf8.RuneCountInString(d) > instore.MaxWebhookDescription ||
			strings.IndexFunc(d, unicode.IsControl) >= 0 {
			errs = append(errs, instore.FieldError{Field: "/description", Message: fmt.Sprintf("must be at most %d characters, without control characters", instore.MaxWebhookDescription)})
		}
	}
	if r.Concurrency != nil && (*r.Concurrency < 1 || *r.Concurrency > instore.MaxWebhookConcurrency) {
		errs = append(errs, instore.FieldError{Field: "/concurrency", Message: fmt.Sprintf("must be an integer from 1 to %d", instore.MaxWebhookConcurrency)})
	}
	if r.Status != nil {
		if create {
			errs = append(errs, instore.FieldError{Field: "/status", Message: "is set by PATCH only (a new endpoint is enabled)"})
		} else if *r.Status != instore.WebhookEnabled && *r.Status != instore.WebhookDisabled {
			errs = append(errs, instore.FieldError{Field: "/status", Message: "must be enabled or disabled"})
		}
	}
	return errs
}

// httpInSandbox words, in a URL's error, that http is taken too where it
// is (the sandbox, WebhookAllowHTTP).
func (s *Service) httpInSandbox() string {
	if s.WebhookAllowHTTP {
		return " (or http)"
	}
	return ""
}

// checkWebhookURL returns why u cannot be a target ("" if it can). Its
// address is checked again when each delivery connects (internal/webhook).
func (s *Service) checkWebhookURL(u string) string {
	if len(u) > instore.MaxWebhookURL || strings.IndexFunc(u, unicode.IsControl) >= 0 {
		return fmt.Sprintf("must be an absolute https URL%s of at most %d bytes", s.httpInSandbox(), instore.MaxWebhookURL)
	}
	p, err := url.Parse(u)
	if err != nil || p.Host == "" || p.User != nil || p.Fragment != "" {
		return "must be an absolute https URL" + s.httpInSandbox() + " without credentials or fragment"
	}
	if port := p.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return "must have a port from 1 to 65535, or none"
		}
	} else if strings.HasSuffix(p.Host, ":") {
		return "must have a port from 1 to 65535, or none"
	}
	switch p.Scheme {
	case "https":
	case "http":
		if !s.WebhookAllowHTTP {
			return "must be https (http only in the sandbox)"
		}
	default:
		return "must be an absolute https URL" + s.httpInSandbox()
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
		if err := instore.CheckWebhookAddr(a); err != nil {
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
func (s *Service) CreateWebhook(ctx context.Context, p *instore.Principal, r *instore.WebhookRequest) (*instore.WebhookWire, error) {
	if _, err := s.merchant(ctx, p); err != nil {
		return nil, err
	}
	if errs := s.validateWebhook(r, true); errs != nil {
		return nil, instore.FieldErrors(errs).Err()
	}
	w := &instore.Webhook{ID: newWebhookID(), MerchantID: p.MerchantID, Status: instore.WebhookEnabled,
		Secret: NewWebhookSecret(), CreatedAt: s.now(), Concurrency: 1}
	r.Apply(w)
	if err := s.Store.CreateWebhook(ctx, w, instore.MaxWebhooks); errors.Is(err, instore.ErrConflict) {
		return nil, instore.Errorf(instore.EConflict, "A merchant has at most %d webhook endpoints; delete one first.", instore.MaxWebhooks)
	} else if err != nil {
		return nil, fmt.Errorf("create webhook: %w", err)
	}
	return w.Wire(true), nil
}

func (s *Service) webhook(ctx context.Context, p *instore.Principal, id string) (*instore.Webhook, error) {
	if _, err := s.merchant(ctx, p); err != nil {
		return nil, err
	}
	if !instore.ValidRef(id) {
		return nil, webhookErr("webhook", instore.ErrNotFound)
	}
	w, err := s.Store.Webhook(ctx, p.MerchantID, id)
	if err != nil {
		return nil, webhookErr("webhook", err)
	}
	return w, nil
}

// webhookErr is the answer to a store error of the operation op on an
// endpoint: ErrNotFound is the contract's 404.
func webhookErr(op string, err error) error {
	if errors.Is(err, instore.ErrNotFound) {
		return instore.Errorf(instore.ENotFound, "No webhook endpoint with this webhookId.")
	}
	return fmt.Errorf("%s: %w", op, err)
}

// Webhooks lists the merchant's endpoints.
func (s *Service) Webhooks(ctx context.Context, p *instore.Principal) ([]*instore.WebhookWire, error) {
	return merchantsAll(ctx, s, p, "webhooks", s.Store.Webhooks, func(w *instore.Webhook) (*instore.WebhookWire, error) {
		return w.Wire(false), nil
	})
}

// Webhook returns one endpoint (without its secret).
func (s *Service) Webhook(ctx context.Context, p *instore.Principal, id string) (*instore.WebhookWire, error) {
	w, err := s.webhook(ctx, p, id)
	if err != nil {
		return nil, err
	}
	return w.Wire(false), nil
}

// UpdateWebhook changes an endpoint (PATCH) by lifecycle.NextWebhook:
// enabling it clears the reason it was disabled and its failing streak.
func (s *Service) UpdateWebhook(ctx context.Context, p *instore.Principal, id string, r *instore.WebhookRequest) (*instore.WebhookWire, error) {
	if errs := s.validateWebhook(r, false); errs != nil {
		return nil, instore.FieldErrors(errs).Err()
	}
	return s.changeWebhook(ctx, p, id, lifecycle.WebhookEvent{Kind: lifecycle.WebhookPatched, Request: r})
}

// RotateWebhookSecret gives an endpoint a new secret; the old one signs
// beside it for SecretOverlap.
func (s *Service) RotateWebhookSecret(ctx context.Context, p *instore.Principal, id string) (*instore.WebhookWire, error) {
	return s.changeWebhook(ctx, p, id, lifecycle.WebhookEvent{Kind: lifecycle.WebhookRotated, Secret: NewWebhookSecret(), At: s.now()})
}

// changeWebhook applies e to an endpoint of the principal's merchant as
// the store last committed it (Store.ChangeWebhook), so that a change made
// meanwhile by another request or the dispatcher is kept, and answers the
// endpoint written, with its secret after a rotation.
func (s *Service) changeWebhook(ctx context.Context, p *instore.Principal, id string, e lifecycle.WebhookEvent) (*instore.WebhookWire, error) {
	if _, err := s.merchant(ctx, p); err != nil {
		return nil, err
	}
	if !instore.ValidRef(id) {
		return nil, webhookErr("change webhook", instore.ErrNotFound)
	}
	w, err := s.Store.ChangeWebhook(ctx, p.MerchantID, id, func(w *instore.Webhook) error {
		*w = lifecycle.NextWebhook(*w, e)
		return nil
	})
	if err != nil {
		return nil, webhookErr("change webhook", err)
	}
	return w.Wire(e.Kind == lifecycle.WebhookRotated), nil
}

// DeleteWebhook deletes an endpoint; what it was still owed is not sent.
func (s *Service) DeleteWebhook(ctx context.Context, p *instore.Principal, id string) error {
	if _, err := s.webhook(ctx, p, id); err != nil {
		return err
	}
	if err := s.Store.DeleteWebhook(ctx, p.MerchantID, id, s.now()); err != nil && !errors.Is(err, instore.ErrNotFound) {
		return fmt.Errorf("delete webhook: %w", err)
	}
	return nil
}

// WebhookDeliveries lists an endpoint's deliveries, newest first, before
// the cursor (a deliveryId; "" from the newest).
func (s *Service) WebhookDeliveries(ctx context.Context, p *instore.Principal, id, cursor string, limit int) ([]instore.DeliveryWire, *string, error) {
	var before int64
	if cursor != "" {
		n, ok := parseDeliveryID(cursor)
		if !ok {
			return nil, nil, instore.FieldErrors{{Field: "cursor", Message: "must be a deliveryId (dlv_ and digits)"}}.Err()
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
	out := make([]instore.DeliveryWire, len(ds))
	for i, d := range ds {
		out[i] = d.Wire()
	}
	var next *string
	if len(ds) == limit {
		n := instore.DeliveryID(ds[len(ds)-1].ID)
		next = &n
	}
	return out, next, nil
}

// RetryDelivery sends a delivery again now (a failed one, or a pending one
// sooner than its next attempt).
func (s *Service) RetryDelivery(ctx context.Context, p *instore.Principal, id, deliveryID string) (*instore.DeliveryWire, error) {
	if _, err := s.webhook(ctx, p, id); err != nil {
		return nil, err
	}
	n, ok := parseDeliveryID(deliveryID)
	if !ok {
		return nil, instore.Errorf(instore.ENotFound, "No delivery with this deliveryId.")
	}
	if err := s.Store.RetryDelivery(ctx, id, n, s.now()); errors.Is(err, instore.ErrNotFound) {
		return nil, instore.Errorf(instore.ENotFound, "No delivery with this deliveryId.")
	} else if err != nil {
		return nil, fmt.Errorf("retry delivery: %w", err)
	}
	d, err := s.Store.WebhookDelivery(ctx, id, n)
	if err != nil {
		return nil, fmt.Errorf("delivery: %w", err)
	}
	v := d.Wire() // the dispatcher's next round (every second) sends it

	return &v, nil
}
