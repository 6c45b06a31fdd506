// Package auth issues and verifies the service's credentials: client
// secrets, subscription keys and signed access tokens. Secrets are stored
// only as SHA-256 digests and compared as fixed-length digests in constant
// time.
package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
)

// Prefixes of generated secrets. They make a leaked secret recognisable
// (and the log redaction catches them by shape).
const (
	SubscriptionKeyPrefix = "isk_"
	ClientSecretPrefix    = "ics_"
	DeviceSecretPrefix    = "ids_"
)

// NewSecret returns a random secret of 256 bits with the given prefix, and
// its digest for storage.
func NewSecret(prefix string) (secret string, digest []byte) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("auth: crypto/rand failed: " + err.Error())
	}
	secret = prefix + base64.RawURLEncoding.EncodeToString(b[:])
	return secret, Digest(secret)
}

// Digest is the stored form of a secret. The secrets are 256-bit random
// values, so a plain SHA-256 is enough; a slow password hash would only cost
// time on every request.
func Digest(secret string) []byte {
	d := sha256.Sum256([]byte(secret))
	return d[:]
}

// Matches reports, in constant time, whether secret is the one whose
// stored digest is digest: the one check of every stored secret (device
// secrets included: service.Service.SecretMatches).
func Matches(secret string, digest []byte) bool { return Equal(Digest(secret), digest) }

// Equal compares two digests in constant time.
func Equal(a, b []byte) bool {
	return len(a) == sha256.Size && subtle.ConstantTimeCompare(a, b) == 1
}
