package auth

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/sync/singleflight"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/keysetting"
	"github.com/instore-dev/instore/internal/wallclock"
)

const (
	issuer = "instore"
	// signingKeySetting is the store setting that keeps a generated key.
	signingKeySetting = "token_signing_key"
	// MinSigningKeyBytes is the shortest accepted HMAC key.
	MinSigningKeyBytes = 32
	// maxCacheEntries bounds the verified-credentials cache.
	maxCacheEntries = 10000
	// maxCredentialLen bounds what is read of a token or key header.
	maxCredentialLen = 4096
)

// errUnauthorized is what every failed authentication returns to the client:
// the body never says which credential failed. The cause goes in Err, for
// the log only.
func errUnauthorized(cause string) error {
	return &instore.Error{
		Code:   instore.EUnauthorized,
		Detail: "The access token or the subscription key is missing or invalid.",
		Err:    errors.New(cause),
	}
}

// Config configures an Authenticator.
type Config struct {
	Store instore.Store
	// SigningKey signs access tokens (HS256); at least 32 bytes.
	SigningKey []byte
	// TokenTTL is the lifetime of issued tokens (default 1 h).
	TokenTTL time.Duration
	// CacheTTL is how long a verified credential pair is trusted without
	// asking the store again: revoking a client or key, or deactivating a
	// merchant, takes effect within it. Zero disables the cache.
	CacheTTL time.Duration
	// Clock is the time of day tokens are issued and checked at, and the
	// cache's entries expire at (nil: the wall clock, wallclock.Clock).
	Clock instore.Clock
	// SeparateReads makes each request read its credentials itself instead
	// of sharing the read of a concurrent one with the same (the
	// simulation: its tasks run one at a time and cannot wait for one
	// another).
	SeparateReads bool
}

// Authenticator issues access tokens and authenticates requests.
type Authenticator struct {
	store    instore.Store
	key      []byte
	tokenTTL time.Duration
	cacheTTL time.Duration
	now      func() time.Time
	// systemClock is set when the clock is the wall clock: AuthenticateAt
	// may then use the time its caller read.
	systemClock bool
	parser      map[instore.Surface]*jwt.Parser

	mu    sync.RWMutex
	cache map[credPair]cacheEntry
	// loads shares the credentials' reads of concurrent misses (verify),
	// unless separate.
	loads    singleflight.Group
	separate bool
}

type credPair struct{ token, key string }

type cacheEntry struct {
	principal *instore.Principal
	until     time.Time
}

// New returns an Authenticator.
func New(cfg Config) (*Authenticator, error) {
	if cfg.Store == nil {
		return nil, errors.New("auth: no store")
	}
	if len(cfg.SigningKey) < MinSigningKeyBytes {
		return nil, fmt.Errorf("auth: signing key must be at least %d bytes", MinSigningKeyBytes)
	}
	if cfg.TokenTTL <= 0 {
		cfg.TokenTTL = time.Hour
	}
	if cfg.Clock == nil {
		cfg.Clock = wallclock.Clock{}
	}
	systemClock := cfg.Clock == instore.Clock(wallclock.Clock{})
	a := &Authenticator{
		store:       cfg.Store,
		key:         cfg.SigningKey,
		tokenTTL:    cfg.TokenTTL,
		cacheTTL:    cfg.CacheTTL,
		now:         cfg.Clock.Now,
		systemClock: systemClock,
		separate:    cfg.SeparateReads,
		parser:      map[instore.Surface]*jwt.Parser{},
		cache:       map[credPair]cacheEntry{},
	}
	for _, s := range []instore.Surface{instore.SurfaceOnline, instore.SurfaceAccess} {
		a.parser[s] = jwt.NewParser(
			jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
			jwt.WithAudience(string(s)),
			jwt.WithIssuer(issuer),
			jwt.WithExpirationRequired(),
			jwt.WithTimeFunc(func() time.Time { return a.now() }),
		)
	}
	return a, nil
}

// TokenTTL is the lifetime of tokens issued by IssueToken.
func (a *Authenticator) TokenTTL() time.Duration { return a.tokenTTL }

// LoadSigningKey returns the configured key if there is one, and otherwise
// the key kept in the store, generating it at first start (the first node to
// start wins; every node then signs with the same key).
func LoadSigningKey(ctx context.Context, store instore.Store, configured []byte) ([]byte, error) {
	if len(configured) > 0 {
		if len(configured) < MinSigningKeyBytes {
			return nil, fmt.Errorf("token signing key must be at least %d bytes", MinSigningKeyBytes)
		}
		return configured, nil
	}
	return keysetting.Key{
		Setting: signingKeySetting, Name: "token signing key", MinBytes: MinSigningKeyBytes,
		Invalid: "token signing key in the store is invalid",
		Random:  keysetting.CryptoRandom,
	}.Init(ctx, store)
}

// MaxClientIDLen bounds a client id.
const MaxClientIDLen = 255

// ValidClientID reports whether id can be a client id: 1-255 printable
// ASCII characters (RFC 6749's VSCHAR, %x20-7E). Anything else (a NUL,
// bytes that are not UTF-8, which PostgreSQL refuses) names no client and
// is never looked up.
func ValidClientID(id string) bool {
	if id == "" || len(id) > MaxClientIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x20 || id[i] > 0x7e {
			return false
		}
	}
	return true
}

// IssueToken checks a client's credentials (client credentials grant) and
// returns a signed access token for the client's surface.
func (a *Authenticator) IssueToken(ctx context.Context, surface instore.Surface, clientID, secret string) (token string, expires time.Time, err error) {
	if !ValidClientID(clientID) || secret == "" || len(secret) > 255 {
		return "", time.Time{}, errUnauthorized("client id or secret missing, malformed or too long")
	}
	c, err := a.store.APIClient(ctx, clientID)
	if errors.Is(err, instore.ErrNotFound) {
		// Spend the same digest work as a known client would.
		Equal(Digest(secret), make([]byte, 32))
		return "", time.Time{}, errUnauthorized("unknown client")
	} else if err != nil {
		return "", time.Time{}, err
	}
	if !Equal(Digest(secret), c.SecretHash) {
		return "", time.Time{}, errUnauthorized("wrong client secret")
	}
	if c.RevokedAt != nil {
		return "", time.Time{}, errUnauthorized("client revoked")
	}
	if c.Surface != surface {
		return "", time.Time{}, errUnauthorized("client of another surface")
	}
	return a.Mint(c, a.tokenTTL)
}

// Mint signs a token for a client without checking its secret: for IssueToken
// and for the demo, which hands out a ready token.
func (a *Authenticator) Mint(c *instore.APIClient, ttl time.Duration) (string, time.Time, error) {
	now := a.now().Truncate(time.Second)
	exp := now.Add(ttl)
	var jti [12]byte
	rand.Read(jti[:])
	claims := jwt.RegisteredClaims{
		Issuer:    issuer,
		Subject:   c.ID,
		Audience:  jwt.ClaimStrings{string(c.Surface)},
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(exp),
		ID:        base64.RawURLEncoding.EncodeToString(jti[:]),
	}
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(a.key)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("sign token: %w", err)
	}
	return s, exp, nil
}

// BearerToken extracts the token of an Authorization header value; the
// scheme is case-insensitive.
func BearerToken(header string) (string, bool) {
	const scheme = "bearer "
	if len(header) <= len(scheme) || !strings.EqualFold(header[:len(scheme)], scheme) {
		return "", false
	}
	tok := strings.TrimSpace(header[len(scheme):])
	// Two IndexByte scans are several times faster than ContainsAny on a
	// token of a few hundred bytes, read on every request.
	return tok, tok != "" && len(tok) <= maxCredentialLen && strings.IndexByte(tok, ' ') < 0 && strings.IndexByte(tok, '\t') < 0
}

// Authenticate checks the Authorization header value and the subscription
// key of a request to the given surface. Every failure is the same
// unauthorized error; the cause is kept for the log.
func (a *Authenticator) Authenticate(ctx context.Context, surface instore.Surface, authorization, subscriptionKey string) (*instore.Principal, error) {
	return a.AuthenticateAt(ctx, surface, authorization, subscriptionKey, time.Time{})
}

// AuthenticateAt is Authenticate at now, a time the caller has just read
// from time.Now (an HTTP server reads it as a request arrives), which
// spares reading the clock again for the verified-credentials cache. It
// is used only when the Authenticator runs on the system clock (no
// Config.Clock, or wallclock.Clock); with a clock of its own, or a zero
// now, it reads its clock as Authenticate does. A token's signature and expiry are always checked
// against the Authenticator's clock.
func (a *Authenticator) AuthenticateAt(ctx context.Context, surface instore.Surface, authorization, subscriptionKey string, now time.Time) (*instore.Principal, error) {
	return a.AuthenticateLimited(ctx, surface, authorization, subscriptionKey, now, nil)
}

// Limiter is a rate limit per API client that authentication applies
// before it reads the store.
type Limiter interface {
	// Limit takes one request of clientID's allowance at now (the zero
	// time: the clock's), or returns the error to answer with.
	Limit(clientID string, now time.Time) error
}

// AuthenticateLimited is AuthenticateAt that takes a request of the token's
// client from limit (nil: none) before anything is read from the store:
// once the token's signature, audience and expiry are verified, or the
// credentials were found in the cache. A request over the limit is
// answered with limit's error, whatever its subscription key, and costs
// no read; one whose token does not verify is unauthorized without a read
// either. Keyed by the signed client id, the limit cannot be escaped with
// made-up keys or tokens, and its buckets are bounded by the number of
// clients. now is passed to limit as given.
func (a *Authenticator) AuthenticateLimited(ctx context.Context, surface instore.Surface, authorization, subscriptionKey string, now time.Time, limit Limiter) (*instore.Principal, error) {
	token, ok := BearerToken(authorization)
	if !ok {
		return nil, errUnauthorized("Authorization header missing or malformed")
	}
	if subscriptionKey == "" || len(subscriptionKey) > maxCredentialLen {
		return nil, errUnauthorized("subscription key missing or malformed")
	}
	arrived := now
	if !a.systemClock || now.IsZero() {
		now = a.now()
	}
	pair := credPair{token, subscriptionKey}
	if a.cacheTTL > 0 {
		a.mu.RLock()
		e, hit := a.cache[pair]
		a.mu.RUnlock()
		if hit && now.Before(e.until) && e.principal.Surface == surface {
			if limit != nil {
				if err := limit.Limit(e.principal.ClientID, arrived); err != nil {
					return nil, err
				}
			}
			return e.principal, nil
		}
	}
	p, exp, err := a.verify(ctx, surface, token, subscriptionKey, limit, arrived)
	if err != nil {
		return nil, err
	}
	if a.cacheTTL > 0 {
		until := now.Add(a.cacheTTL)
		if exp.Before(until) {
			until = exp
		}
		a.mu.Lock()
		if len(a.cache) >= maxCacheEntries {
			clear(a.cache)
		}
		a.cache[pair] = cacheEntry{principal: p, until: until}
		a.mu.Unlock()
	}
	return p, nil
}

// VerifyToken checks a token's signature, audience and expiry and returns
// its client id; it does not consult the store.
func (a *Authenticator) VerifyToken(surface instore.Surface, token string) (clientID string, err error) {
	var claims jwt.RegisteredClaims
	if _, err := a.parser[surface].ParseWithClaims(token, &claims, func(*jwt.Token) (any, error) { return a.key, nil }); err != nil {
		return "", err
	}
	return claims.Subject, nil
}

func (a *Authenticator) verify(ctx context.Context, surface instore.Surface, token, subscriptionKey string, limit Limiter, now time.Time) (*instore.Principal, time.Time, error) {
	var claims jwt.RegisteredClaims
	_, err := a.parser[surface].ParseWithClaims(token, &claims, func(*jwt.Token) (any, error) { return a.key, nil })
	if err != nil {
		switch {
		case errors.Is(err, jwt.ErrTokenExpired):
			return nil, time.Time{}, errUnauthorized("token expired")
		case errors.Is(err, jwt.ErrTokenInvalidAudience):
			return nil, time.Time{}, errUnauthorized("token of another surface")
		default:
			return nil, time.Time{}, errUnauthorized("token invalid")
		}
	}
	if limit != nil {
		if err := limit.Limit(claims.Subject, now); err != nil {
			return nil, time.Time{}, err
		}
	}
	// The reads of the credentials are shared by the requests that miss
	// the cache with the same ones at once (a node's ECRs coming back after
	// a failover, the cache cold): one set of reads, not one each waiting
	// for a connection of the store. The limit above stays per request.
	if a.separate {
		p, err := a.load(ctx, surface, claims.Subject, subscriptionKey)
		return p, claims.ExpiresAt.Time, err
	}
	v, err, _ := a.loads.Do(string(surface)+"\x00"+claims.Subject+"\x00"+subscriptionKey, func() (any, error) {
		// Every waiting request's: not cut short by the end of the first.
		return a.load(context.WithoutCancel(ctx), surface, claims.Subject, subscriptionKey)
	})
	if err != nil {
		return nil, time.Time{}, err
	}
	return v.(*instore.Principal), claims.ExpiresAt.Time, nil
}

// load reads the client subject's and the subscription key's rows (and
// the merchant's) and returns the principal they make, or why they do
// not authenticate.
func (a *Authenticator) load(ctx context.Context, surface instore.Surface, subject, subscriptionKey string) (*instore.Principal, error) {
	client, err := a.store.APIClient(ctx, subject)
	if errors.Is(err, instore.ErrNotFound) {
		return nil, errUnauthorized("token of an unknown client")
	} else if err != nil {
		return nil, fmt.Errorf("authenticate: %w", err)
	}
	if client.RevokedAt != nil {
		return nil, errUnauthorized("token of a revoked client")
	}
	if client.Surface != surface {
		return nil, errUnauthorized("token of another surface")
	}
	digest := Digest(subscriptionKey)
	key, err := a.store.SubscriptionKeyByHash(ctx, digest)
	if errors.Is(err, instore.ErrNotFound) {
		return nil, errUnauthorized("unknown subscription key")
	} else if err != nil {
		return nil, fmt.Errorf("authenticate: %w", err)
	}
	if !Equal(digest, key.Hash) {
		return nil, errUnauthorized("unknown subscription key")
	}
	if key.RevokedAt != nil {
		return nil, errUnauthorized("subscription key revoked")
	}
	if key.Surface != surface {
		return nil, errUnauthorized("subscription key of another surface")
	}
	if key.CustomerID != client.CustomerID || key.MerchantID != client.MerchantID {
		return nil, errUnauthorized("token and subscription key of different accounts")
	}
	p := &instore.Principal{
		Surface:    surface,
		ClientID:   client.ID,
		CustomerID: client.CustomerID,
		MerchantID: client.MerchantID,
		KeyID:      key.ID,
	}
	if client.MerchantID != "" {
		// Read once with the credentials and cached with them: requests
		// check that the merchant is active (WP03) without a read of their own.
		m, err := a.store.Merchant(ctx, client.MerchantID)
		if errors.Is(err, instore.ErrNotFound) {
			return nil, errUnauthorized("client of an unknown merchant")
		} else if err != nil {
			return nil, fmt.Errorf("authenticate: %w", err)
		}
		p.Merchant = m
	}
	return p, nil
}
