package service

import (
	"crypto/sha256"
	"crypto/subtle"
	"sync"

	"github.com/instore-dev/instore"
)

// maxCredentials bounds the credentials cache: past it, the cache starts
// again empty (a fleet larger than this authenticates from the store
// more often, never wrongly).
const maxCredentials = 1 << 20

// credentials caches the device credentials that passed, so that a
// reconnecting fleet does not read every device's row again: a device's
// secret digest is written once, when the device is created, and no
// device is ever deleted (internal/sqlstore: no statement changes
// secret_hash or deletes a device), so a serial number and secret that
// matched the stored digest once match it for good. What is kept per
// device is a SHA-256 of the secret (not the secret) and its model, about
// 100 bytes; a secret that does not match the cached digest is checked
// against the store, as before.
type credentials struct {
	mu sync.Mutex
	m  map[string]passedCredential
}

type passedCredential struct {
	digest [sha256.Size]byte
	model  string
}

// passed returns the device whose serial and secret passed before (its
// serial number and model only), or nil.
func (c *credentials) passed(serial, secret string) *instore.Device {
	c.mu.Lock()
	p, ok := c.m[serial]
	c.mu.Unlock()
	if !ok {
		return nil
	}
	d := sha256.Sum256([]byte(secret))
	if subtle.ConstantTimeCompare(d[:], p.digest[:]) != 1 {
		return nil
	}
	return &instore.Device{SerialNumber: serial, Model: p.model}
}

// pass records that d's serial number and secret passed.
func (c *credentials) pass(d *instore.Device, secret string) {
	p := passedCredential{digest: sha256.Sum256([]byte(secret)), model: d.Model}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxCredentials {
		c.m = map[string]passedCredential{}
	}
	c.m[d.SerialNumber] = p
}
