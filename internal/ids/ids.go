// Package ids makes the service's identifiers: a short type prefix and a
// UUIDv7, so ids sort by creation time and say what they name.
package ids

import (
	"encoding/hex"

	"github.com/google/uuid"
)

// Prefixes of the service's identifiers. The log redaction recognises them.
const (
	Customer        = "cus"
	Merchant        = "mer"
	Client          = "cli"
	SubscriptionKey = "key"
)

// New returns prefix + "_" + 32 lower-case hex digits of a UUIDv7.
func New(prefix string) string {
	u := uuid.Must(uuid.NewV7())
	b := make([]byte, len(prefix)+1+32)
	n := copy(b, prefix)
	b[n] = '_'
	hex.Encode(b[n+1:], u[:])
	return string(b)
}
