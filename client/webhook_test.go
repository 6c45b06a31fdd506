package client_test

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/client"
)

func newSecret(t *testing.T) string {
	t.Helper()
	b := make([]byte, 24)
	rand.Read(b)
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}

// signed returns the headers of a delivery of body signed with secret at
// at, by the reference library of Standard Webhooks.
func signed(t *testing.T, secret, id string, at time.Time, body []byte) http.Header {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := wh.Sign(id, at, body)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set("Webhook-Id", id)
	h.Set("Webhook-Timestamp", strconv.FormatInt(at.Unix(), 10))
	h.Set("Webhook-Signature", sig)
	return h
}

func TestVerifyWebhook(t *testing.T) {
	secret, other := newSecret(t), newSecret(t)
	id := "evt_0000000000000042"
	body := []byte(`{"id":"evt_0000000000000042","type":"transaction.final","createdAt":"2026-01-02T03:04:05.000000Z","data":` + txBody + `}`)
	now := time.Now()

	ev, err := client.VerifyWebhook(secret, signed(t, secret, id, now, body), body)
	if err != nil {
		t.Fatalf("VerifyWebhook of a delivery the library signed: %v", err)
	}
	if ev.ID != id || ev.Type != instore.EventTransactionFinal {
		t.Errorf("event = %s %s", ev.ID, ev.Type)
	}
	if tx, err := ev.Transaction(); err != nil || tx.OnlineAPIRefID != "tx_1" {
		t.Errorf("event's transaction = %+v, %v", tx, err)
	}

	// During a rotation the delivery carries a signature per secret.
	h := signed(t, secret, id, now, body)
	old := signed(t, other, id, now, body).Get("Webhook-Signature")
	h.Set("Webhook-Signature", old+" "+h.Get("Webhook-Signature"))
	if _, err := client.VerifyWebhook(secret, h, body); err != nil {
		t.Errorf("VerifyWebhook with two signatures, the second of the secret: %v", err)
	}
	if _, err := client.VerifyWebhook(other, h, body); err != nil {
		t.Errorf("VerifyWebhook with two signatures, the first of the secret: %v", err)
	}

	tampered := []byte(string(body[:len(body)-2]) + ` }`)
	noID := signed(t, secret, id, now, body)
	noID.Del("Webhook-Id")
	notUnix := signed(t, secret, id, now, body)
	notUnix.Set("Webhook-Timestamp", now.Format(time.RFC3339))
	v2 := signed(t, secret, id, now, body)
	v2.Set("Webhook-Signature", "v2,"+v2.Get("Webhook-Signature")[3:])
	notEvent := []byte(`{"hello":"world"}`)
	cases := []struct {
		name   string
		secret string
		header http.Header
		body   []byte
		want   error // nil: any error
	}{
		{"a tampered body", secret, signed(t, secret, id, now, body), tampered, client.ErrWebhookSignature},
		{"another secret", other, signed(t, secret, id, now, body), body, client.ErrWebhookSignature},
		{"another webhook-id", secret, func() http.Header {
			h := signed(t, secret, id, now, body)
			h.Set("Webhook-Id", "evt_0000000000000043")
			return h
		}(), body, client.ErrWebhookSignature},
		{"a timestamp 6 minutes old", secret, signed(t, secret, id, now.Add(-6*time.Minute), body), body, client.ErrWebhookTimestamp},
		{"a timestamp 6 minutes ahead", secret, signed(t, secret, id, now.Add(6*time.Minute), body), body, client.ErrWebhookTimestamp},
		{"a signature of another timestamp", secret, func() http.Header {
			h := signed(t, secret, id, now.Add(-time.Minute), body)
			h.Set("Webhook-Timestamp", strconv.FormatInt(now.Unix(), 10))
			return h
		}(), body, client.ErrWebhookSignature},
		{"no webhook-id", secret, noID, body, client.ErrWebhookSignature},
		{"a timestamp not in Unix seconds", secret, notUnix, body, client.ErrWebhookSignature},
		{"an unknown signature version", secret, v2, body, client.ErrWebhookSignature},
		{"a secret without whsec_", secret[len("whsec_"):], signed(t, secret, id, now, body), body, nil},
		{"a signed body that is no event", secret, signed(t, secret, id, now, notEvent), notEvent, nil},
	}
	for _, tc := range cases {
		ev, err := client.VerifyWebhook(tc.secret, tc.header, tc.body)
		if err == nil {
			t.Errorf("%s: VerifyWebhook = %s, want an error", tc.name, ev.ID)
			continue
		}
		if tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: VerifyWebhook = %v, want %v", tc.name, err, tc.want)
		}
		// The reference library agrees about the signature.
		if wh, werr := standardwebhooks.NewWebhook(tc.secret); werr == nil && tc.want != nil {
			if werr := wh.Verify(tc.body, tc.header); werr == nil {
				t.Errorf("%s: the reference library accepts what VerifyWebhook refused", tc.name)
			}
		}
	}
}
