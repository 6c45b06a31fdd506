package auth_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/admin"
	"github.com/instore-dev/instore/internal/apitest"
	"github.com/instore-dev/instore/internal/auth"
	"github.com/instore-dev/instore/internal/clocktest"
	"github.com/instore-dev/instore/internal/sqlstore"
	"github.com/instore-dev/instore/internal/testwait"
	"github.com/instore-dev/instore/internal/wallclock"
)

// fixture is a store with a customer, its merchant with Online API
// credentials, another merchant, and the customer's Access API
// credentials.
type fixture struct {
	store         *sqlstore.DB
	ad            *admin.Admin
	online        apitest.Credentials // the merchant's
	access        apitest.Credentials // the customer's
	merchant      *instore.Merchant
	otherMerchant *instore.Merchant
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	st := apitest.SQLite(t, "NORMAL")
	f := &fixture{store: st, ad: admin.New(st)}
	shop := apitest.NewShop(t, f.ad, "c", "m", "")
	f.merchant, f.online = shop.Merchant, shop.Online
	var err error
	f.otherMerchant, err = f.ad.CreateMerchant(context.Background(), shop.Customer.ID, "m2", true)
	check(t, err)
	f.access = apitest.NewCredentials(t, f.ad, instore.SurfaceAccess, shop.Customer.ID, "")
	return f
}

func check(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) authn(t testing.TB, cacheTTL time.Duration, clock instore.Clock) *auth.Authenticator {
	t.Helper()
	a, err := auth.New(auth.Config{Store: f.store, SigningKey: []byte(strings.Repeat("s", 32)), CacheTTL: cacheTTL, Clock: clock})
	check(t, err)
	return a
}

func isUnauthorized(err error) bool { return instore.ErrorCode(err) == instore.EUnauthorized }

func TestSecrets(t *testing.T) {
	s, d := auth.NewSecret(auth.SubscriptionKeyPrefix)
	if !strings.HasPrefix(s, "isk_") || len(s) != 4+43 {
		t.Errorf("NewSecret = %q, want isk_ + 43 base64url characters", s)
	}
	if !auth.Equal(d, auth.Digest(s)) || auth.Equal(d, auth.Digest(s+"x")) || auth.Equal(d[:16], d[:16]) {
		t.Errorf("Equal/Digest disagree")
	}
	s2, _ := auth.NewSecret(auth.SubscriptionKeyPrefix)
	if s == s2 {
		t.Errorf("NewSecret returned the same secret twice")
	}
}

func TestBearerToken(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"Bearer abc", "abc", true},
		{"bearer abc", "abc", true},
		{"BEARER  abc ", "abc", true},
		{"Bearer", "", false},
		{"Bearer ", "", false},
		{"Basic abc", "", false},
		{"Bearer a b", "", false},
		{"Bearer a\tb", "", false},
		{"Bearer \ta\t", "a", true},
		{"Bearer " + strings.Repeat("a", 5000), "", false},
		{"", "", false},
	} {
		got, ok := auth.BearerToken(tc.in)
		if got != tc.want && tc.ok || ok != tc.ok {
			t.Errorf("BearerToken(%.20q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestIssueAndAuthenticate(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	a := f.authn(t, 0, nil)
	tok, exp, err := a.IssueToken(ctx, instore.SurfaceOnline, f.online.Client.ID, f.online.Secret)
	check(t, err)
	if d := time.Until(exp); d < 59*time.Minute || d > time.Hour {
		t.Errorf("token expires in %s, want 1 h", d)
	}
	p, err := a.Authenticate(ctx, instore.SurfaceOnline, "Bearer "+tok, f.online.Key)
	check(t, err)
	if p.MerchantID != f.merchant.ID || p.ClientID != f.online.Client.ID || p.KeyID != f.online.KeyRec.ID || p.Surface != instore.SurfaceOnline {
		t.Errorf("Authenticate = %+v", p)
	}
	issue := func(surface instore.Surface, clientID, secret string) func() error {
		return func() error { _, _, err := a.IssueToken(ctx, surface, clientID, secret); return err }
	}
	authenticate := func(surface instore.Surface, key string) func() error {
		return func() error { _, err := a.Authenticate(ctx, surface, "Bearer "+tok, key); return err }
	}
	clientID, secret := f.online.Client.ID, f.online.Secret
	for name, fn := range map[string]func() error{
		"wrong secret":      issue(instore.SurfaceOnline, clientID, secret+"x"),
		"unknown client":    issue(instore.SurfaceOnline, "cli_none", secret),
		"other surface":     issue(instore.SurfaceAccess, clientID, secret),
		"empty secret":      issue(instore.SurfaceOnline, clientID, ""),
		"token on access":   authenticate(instore.SurfaceAccess, f.access.Key),
		"online key access": authenticate(instore.SurfaceOnline, f.access.Key),
	} {
		if err := fn(); !isUnauthorized(err) {
			t.Errorf("%s: err = %v, want unauthorized", name, err)
		}
	}
	// A token signed by another key is refused.
	b, err := auth.New(auth.Config{Store: f.store, SigningKey: []byte(strings.Repeat("o", 32))})
	check(t, err)
	other, _, err := b.Mint(f.online.Client, time.Hour)
	check(t, err)
	if _, err := a.Authenticate(ctx, instore.SurfaceOnline, "Bearer "+other, f.online.Key); !isUnauthorized(err) {
		t.Errorf("token of another signing key: err = %v, want unauthorized", err)
	}
	// The unauthorized error never says which credential failed.
	_, err1 := a.Authenticate(ctx, instore.SurfaceOnline, "Bearer "+other, f.online.Key)
	_, err2 := a.Authenticate(ctx, instore.SurfaceOnline, "Bearer "+tok, "isk_nope")
	var e1, e2 *instore.Error
	errors.As(err1, &e1)
	errors.As(err2, &e2)
	if e1.Detail != e2.Detail {
		t.Errorf("details differ: %q vs %q", e1.Detail, e2.Detail)
	}
}

func TestCacheAndRevocation(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	clk := clocktest.New(time.Now())
	cached := f.authn(t, time.Minute, clk)
	uncached := f.authn(t, 0, clk)
	tok, _, err := cached.Mint(f.online.Client, 2*time.Minute)
	check(t, err)
	hdr := "Bearer " + tok
	for _, a := range []*auth.Authenticator{cached, uncached} {
		if _, err := a.Authenticate(ctx, instore.SurfaceOnline, hdr, f.online.Key); err != nil {
			t.Fatalf("Authenticate: %v", err)
		}
	}
	check(t, f.ad.RevokeKey(ctx, f.online.KeyRec.ID))
	if _, err := uncached.Authenticate(ctx, instore.SurfaceOnline, hdr, f.online.Key); !isUnauthorized(err) {
		t.Errorf("uncached after revocation: err = %v, want unauthorized", err)
	}
	if _, err := cached.Authenticate(ctx, instore.SurfaceOnline, hdr, f.online.Key); err != nil {
		t.Errorf("within the cache TTL the verified pair is trusted: err = %v", err)
	}
	clk.Advance(61 * time.Second)
	if _, err := cached.Authenticate(ctx, instore.SurfaceOnline, hdr, f.online.Key); !isUnauthorized(err) {
		t.Errorf("after the cache TTL a revoked key is refused: err = %v", err)
	}
}

func TestCacheNeverOutlivesToken(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	clk := clocktest.New(time.Now())
	a := f.authn(t, time.Hour, clk)
	tok, _, err := a.Mint(f.online.Client, 2*time.Minute)
	check(t, err)
	if _, err := a.Authenticate(ctx, instore.SurfaceOnline, "Bearer "+tok, f.online.Key); err != nil {
		t.Fatal(err)
	}
	clk.Advance(3 * time.Minute)
	if _, err := a.Authenticate(ctx, instore.SurfaceOnline, "Bearer "+tok, f.online.Key); !isUnauthorized(err) {
		t.Errorf("expired token served from the cache: err = %v", err)
	}
}

// TestAuthenticateAt: on the system clock, the cache is checked at the time
// the caller passes (the request's arrival); an Authenticator with a clock
// of its own keeps to it, and a zero time means now.
func TestAuthenticateAt(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	// No clock, or the wall clock given as wallclock.Clock (as the
	// server gives it): both are the system clock.
	systems := []*auth.Authenticator{f.authn(t, time.Minute, nil), f.authn(t, time.Minute, wallclock.Clock{})}
	clk := clocktest.New(time.Now())
	own := f.authn(t, time.Minute, clk)
	tok, _, err := systems[0].Mint(f.online.Client, time.Hour)
	check(t, err)
	hdr := "Bearer " + tok
	for _, a := range append(systems, own) {
		if _, err := a.AuthenticateAt(ctx, instore.SurfaceOnline, hdr, f.online.Key, time.Now()); err != nil {
			t.Fatalf("AuthenticateAt: %v", err)
		}
	}
	check(t, f.ad.RevokeKey(ctx, f.online.KeyRec.ID))
	for _, system := range systems {
		if _, err := system.AuthenticateAt(ctx, instore.SurfaceOnline, hdr, f.online.Key, time.Now()); err != nil {
			t.Errorf("within the cache TTL: err = %v, want the cached pair", err)
		}
		if _, err := system.AuthenticateAt(ctx, instore.SurfaceOnline, hdr, f.online.Key, time.Time{}); err != nil {
			t.Errorf("zero time, within the cache TTL: err = %v, want the cached pair", err)
		}
		if _, err := system.AuthenticateAt(ctx, instore.SurfaceOnline, hdr, f.online.Key, time.Now().Add(61*time.Second)); !isUnauthorized(err) {
			t.Errorf("at a time past the cache TTL: err = %v, want the revoked key refused", err)
		}
	}
	// Its own clock has not moved: the far time is not its time.
	if _, err := own.AuthenticateAt(ctx, instore.SurfaceOnline, hdr, f.online.Key, time.Now().Add(time.Hour)); err != nil {
		t.Errorf("own clock within the cache TTL, a later time passed: err = %v, want the cached pair", err)
	}
	clk.Advance(61 * time.Second)
	if _, err := own.AuthenticateAt(ctx, instore.SurfaceOnline, hdr, f.online.Key, time.Now()); !isUnauthorized(err) {
		t.Errorf("own clock past the cache TTL, an earlier time passed: err = %v, want the revoked key refused", err)
	}
}

func TestLoadSigningKey(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	k1, err := auth.LoadSigningKey(ctx, f.store, nil)
	check(t, err)
	k2, err := auth.LoadSigningKey(ctx, f.store, nil)
	check(t, err)
	if len(k1) != 32 || string(k1) != string(k2) {
		t.Errorf("generated key not kept: %d bytes, equal %v", len(k1), string(k1) == string(k2))
	}
	if _, err := auth.LoadSigningKey(ctx, f.store, []byte("short")); err == nil {
		t.Errorf("short configured key accepted")
	}
	k3, err := auth.LoadSigningKey(ctx, f.store, []byte(strings.Repeat("c", 32)))
	check(t, err)
	if string(k3) != strings.Repeat("c", 32) {
		t.Errorf("configured key not used")
	}
}

// BenchmarkAuthenticate measures request authentication with the cache
// (the steady state) and without it (JWT verification and two store
// lookups per request).
func BenchmarkAuthenticate(b *testing.B) {
	f := newFixture(b)
	ctx := context.Background()
	for _, bc := range []struct {
		name string
		ttl  time.Duration
	}{{"cached", time.Minute}, {"uncached", 0}} {
		b.Run(bc.name, func(b *testing.B) {
			a := f.authn(b, bc.ttl, nil)
			tok, _, err := a.Mint(f.online.Client, time.Hour)
			check(b, err)
			hdr := "Bearer " + tok
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := a.Authenticate(ctx, instore.SurfaceOnline, hdr, f.online.Key); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// heldStore holds the first APIClient read until released and counts the
// reads.
type heldStore struct {
	instore.Store
	reads   atomic.Int32
	entered chan struct{}
	release chan struct{}
}

func (s *heldStore) APIClient(ctx context.Context, id string) (*instore.APIClient, error) {
	if s.reads.Add(1) == 1 {
		close(s.entered)
		<-s.release
	}
	return s.Store.APIClient(ctx, id)
}

// TestConcurrentMissesReadOnce: requests that miss the cache with the
// same credentials while their read is under way (a node's ECRs coming
// back after a failover) share it: one read of the client for eleven
// requests, each authenticated, each counted by the rate limit; a
// revoked key still fails every request that shares its read.
func TestConcurrentMissesReadOnce(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	hs := &heldStore{Store: f.store, entered: make(chan struct{}), release: make(chan struct{})}
	a, err := auth.New(auth.Config{Store: hs, SigningKey: []byte(strings.Repeat("s", 32))}) // no cache
	check(t, err)
	tok, _, err := a.Mint(f.online.Client, time.Minute)
	check(t, err)
	var limited atomic.Int32
	limit := limiterFunc(func(string, time.Time) error { limited.Add(1); return nil })
	errs := make(chan error, 11)
	auth1 := func() {
		_, err := a.AuthenticateLimited(ctx, instore.SurfaceOnline, "Bearer "+tok, f.online.Key, time.Time{}, limit)
		errs <- err
	}
	go auth1()
	<-hs.entered
	for range 10 {
		go auth1()
	}
	testwait.ForNil(t, "ten requests waiting for the read under way", func() error {
		buf := make([]byte, 1<<20)
		if n := strings.Count(string(buf[:runtime.Stack(buf, true)]), "singleflight.(*Group).Do"); n < 11 {
			return fmt.Errorf("%d in it", n)
		}
		return nil
	})
	close(hs.release)
	for range 11 {
		if err := <-errs; err != nil {
			t.Errorf("a request: %v", err)
		}
	}
	if hs.reads.Load() != 1 || limited.Load() != 11 {
		t.Errorf("%d reads of the client and %d requests limited, want 1 and 11", hs.reads.Load(), limited.Load())
	}
	check(t, f.ad.RevokeKey(ctx, f.online.KeyRec.ID))
	if _, err := a.Authenticate(ctx, instore.SurfaceOnline, "Bearer "+tok, f.online.Key); !isUnauthorized(err) {
		t.Errorf("after the revocation: %v, want unauthorized", err)
	}
}

type limiterFunc func(string, time.Time) error

func (f limiterFunc) Limit(id string, at time.Time) error { return f(id, at) }
