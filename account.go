package instore

import "time"

// Surface names an API surface. Credentials belong to exactly one surface:
// an Access API key is refused on the Online API and the reverse.
type Surface string

const (
	// SurfaceOnline is the Online API (/in-store/api/v1); its credentials
	// belong to a merchant.
	SurfaceOnline Surface = "online"
	// SurfaceAccess is Access API 2.0; its credentials belong to a customer.
	SurfaceAccess Surface = "access"
)

// Valid reports whether s is a known surface.
func (s Surface) Valid() bool { return s == SurfaceOnline || s == SurfaceAccess }

// Customer owns terminal devices and terminal IDs; merchants belong to one.
type Customer struct {
	ID        string    `json:"customerId"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"createdAt"`
}

// Merchant is an Online API account. An inactive merchant may still read
// metadata and obtain tokens; every other operation answers WP03.
type Merchant struct {
	ID         string    `json:"merchantId"`
	CustomerID string    `json:"customerId"`
	Name       string    `json:"name"`
	Active     bool      `json:"active"`
	CreatedAt  time.Time `json:"createdAt"`
}

// APIClient is an OAuth 2.0 client (client credentials grant). Online
// clients belong to a merchant, Access clients to a customer. Only the
// SHA-256 digest of the secret is stored.
type APIClient struct {
	ID         string     `json:"clientId"`
	Surface    Surface    `json:"surface"`
	CustomerID string     `json:"customerId"`
	MerchantID string     `json:"merchantId,omitempty"`
	Name       string     `json:"name"`
	SecretHash []byte     `json:"-"`
	CreatedAt  time.Time  `json:"createdAt"`
	RevokedAt  *time.Time `json:"revokedAt,omitempty"`
}

// SubscriptionKey is the Ocp-Apim-Subscription-Key credential. Online keys
// belong to a merchant, Access keys to a customer. Only the SHA-256 digest
// of the key is stored; Prefix (the first characters) lets an operator tell
// keys apart without revealing them.
type SubscriptionKey struct {
	ID         string     `json:"keyId"`
	Surface    Surface    `json:"surface"`
	CustomerID string     `json:"customerId"`
	MerchantID string     `json:"merchantId,omitempty"`
	Prefix     string     `json:"prefix"`
	Hash       []byte     `json:"-"`
	CreatedAt  time.Time  `json:"createdAt"`
	RevokedAt  *time.Time `json:"revokedAt,omitempty"`
}

// Principal is who an authenticated request acts for.
type Principal struct {
	Surface    Surface
	ClientID   string
	CustomerID string
	// MerchantID is set on the Online API.
	MerchantID string
	// KeyID is the subscription key used. (Rate limits count per client,
	// ClientID, taken before the key is looked up.)
	KeyID string
	// Merchant is the merchant (Online API) as authentication read it, kept
	// with the verified credentials for as long as they are cached, so that
	// a request does not read it again; deactivating a merchant takes
	// effect within that time, like revoking a key. Nil: not read, the
	// service reads it.
	Merchant *Merchant
}
