package apitest

import (
	"net/http"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// WebhookSigned reports whether a webhook delivery (its body and headers)
// verifies with one of secrets, checked with the Standard Webhooks
// specification's own library rather than the SDK's client.VerifyWebhook,
// so that a receiver in a test does not trust the code it tests.
func WebhookSigned(body []byte, h http.Header, secrets ...string) bool {
	for _, s := range secrets {
		wh, err := standardwebhooks.NewWebhook(s)
		if err == nil && wh.Verify(body, h) == nil {
			return true
		}
	}
	return false
}

// WebhookSecret reports whether secret is a webhook secret the
// specification's library takes (whsec_ and base64).
func WebhookSecret(secret string) error {
	_, err := standardwebhooks.NewWebhook(secret)
	return err
}
