package client

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Headers of a webhook delivery (Standard Webhooks).
const (
	HeaderWebhookID        = "webhook-id"
	HeaderWebhookTimestamp = "webhook-timestamp"
	HeaderWebhookSignature = "webhook-signature"
)

// WebhookTolerance is how far a delivery's webhook-timestamp may be from
// the receiver's clock, either way: an older delivery is refused as a
// possible replay.
const WebhookTolerance = 5 * time.Minute

// Errors of VerifyWebhook, for errors.Is.
var (
	// ErrWebhookSignature: no signature of the delivery matches the
	// secret (a forged or altered delivery, or another secret), or its
	// headers are missing or malformed.
	ErrWebhookSignature = errors.New("webhook signature does not verify")
	// ErrWebhookTimestamp: the delivery's timestamp is more than
	// WebhookTolerance away from now.
	ErrWebhookTimestamp = errors.New("webhook timestamp outside the tolerance")
)

// VerifyWebhook checks a webhook delivery as the Standard Webhooks
// specification signs it and returns its event. secret is the webhook's
// signing secret as the service shows it once, whsec_ and base64: the
// HMAC key is the base64-decoded part after whsec_ (pass the whole
// string here; VerifyWebhook decodes it);
// header and body are the request's headers and its body exactly as
// received (read the body whole before decoding anything). It checks
// that webhook-timestamp is within WebhookTolerance of now and that one of
// the v1 signatures of webhook-signature (several, separated by spaces,
// while the secret is being rotated) is the HMAC-SHA256 of
// "{webhook-id}.{webhook-timestamp}.{body}" with the secret, compared in
// constant time; then it decodes the body. Answer 2xx only after it
// succeeds; a delivery may come more than once (retries): deduplicate by
// the event's id, which is also its webhook-id.
//
//	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
//	ev, err := client.VerifyWebhook(secret, r.Header, body)
//	if err != nil {
//		http.Error(w, "bad signature", http.StatusBadRequest)
//		return
//	}
func VerifyWebhook(secret string, header http.Header, body []byte) (*Event, error) {
	return verifyWebhook(secret, header, body, time.Now())
}

func verifyWebhook(secret string, header http.Header, body []byte, now time.Time) (*Event, error) {
	key, err := webhookKey(secret)
	if err != nil {
		return nil, err
	}
	id, ts, sigs := header.Get(HeaderWebhookID), header.Get(HeaderWebhookTimestamp), header.Get(HeaderWebhookSignature)
	if id == "" || ts == "" || sigs == "" {
		return nil, fmt.Errorf("client: webhook: missing %s, %s or %s: %w", HeaderWebhookID, HeaderWebhookTimestamp, HeaderWebhookSignature, ErrWebhookSignature)
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("client: webhook: %s %q is not a Unix time: %w", HeaderWebhookTimestamp, ts, ErrWebhookSignature)
	}
	at := time.Unix(sec, 0)
	if d := now.Sub(at); d > WebhookTolerance || d < -WebhookTolerance {
		return nil, fmt.Errorf("client: webhook: %s is %s from now: %w", HeaderWebhookTimestamp, d.Round(time.Second), ErrWebhookTimestamp)
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	want := mac.Sum(nil)
	ok := false
	for _, s := range strings.Fields(sigs) {
		v, sig, found := strings.Cut(s, ",")
		if !found || v != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(sig)
		if err == nil && hmac.Equal(got, want) {
			ok = true
		}
	}
	if !ok {
		return nil, fmt.Errorf("client: webhook %s: %w", id, ErrWebhookSignature)
	}
	var ev Event
	if err := json.Unmarshal(body, &ev); err != nil {
		return nil, fmt.Errorf("client: webhook %s: decode event: %w", id, err)
	}
	if ev.ID == "" || ev.Type == "" {
		return nil, fmt.Errorf("client: webhook %s: the body is no event (no id or type)", id)
	}
	return &ev, nil
}

// webhookKey decodes a signing secret: whsec_ and base64.
func webhookKey(secret string) ([]byte, error) {
	s, ok := strings.CutPrefix(strings.TrimSpace(secret), "whsec_")
	if !ok {
		return nil, errors.New("client: webhook: the secret is not of the form whsec_<base64>")
	}
	key, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(key) == 0 {
		return nil, errors.New("client: webhook: the secret is not of the form whsec_<base64>")
	}
	return key, nil
}
