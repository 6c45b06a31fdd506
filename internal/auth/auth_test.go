package auth_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/admin"
	"github.com/instore-dev/instore/internal/auth"
	"github.com/instore-dev/instore/internal/clocktest"
	"github.com/instore-dev/instore/internal/sqlstore"
	"github.com/instore-dev/instore/internal/wallclock"
)

type fixture struct {
	store         *sqlstore.DB
	ad            *admin.Admin
	client        *instore.APIClient
	secret        string
	keyRec        *instore.SubscriptionKey
	key           string
	accessClient  *instore.APIClient
	accessSecret  string
	accessKey     string
	merchant      *instore.Merchant
	otherMerchant *instore.Merchant
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	ctx := context.Background()
	st, err := sqlstore.Open(ctx, filepath.Join(t.TempDir(), "auth.db"), sqlstore.Options{Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := &fixture{store: st, ad: admin.New(st)}
	cus, err := f.ad.CreateCustomer(ctx, "c")
	check(t, err)
	f.merchant, err = f.ad.CreateMerchant(ctx, cus.ID, "m", true)
	check(t, err)
	f.otherMerchant, err = f.ad.CreateMerchant(ctx, cus.ID, "m2", true)
	check(t, err)
	f.client, f.secret, err = f.ad.CreateClient(ctx, instore.SurfaceOnline, f.merchant.ID, "")
	check(t, err)
	f.keyRec, f.key, err = f.ad.CreateKey(ctx, instore.SurfaceOnline, f.merchant.ID)
	check(t, err)
	f.accessClient, f.accessSecret, err = f.ad.CreateClient(ctx, instore.SurfaceAccess, cus.ID, "")
	check(t, err)
	_, f.accessKey, err = f.ad.CreateKey(ctx, instore.SurfaceAccess, cus.ID)
	check(t, err)
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
	tok, exp, err := a.IssueToken(ctx, instore.SurfaceOnline, f.client.ID, f.secret)
	check(t, err)
	if d := time.Until(exp); d < 59*time.Minute || d > time.Hour {
		t.Errorf("token expires in %s, want 1 h", d)
	}
	p, err := a.Authenticate(ctx, instore.SurfaceOnline, "Bearer "+tok, f.key)
	check(t, err)
	if p.MerchantID != f.merchant.ID || p.ClientID != f.client.ID || p.KeyID != f.keyRec.ID || p.Surface != instore.SurfaceOnline {
		t.Errorf("Authenticate = %+v", p)
	}
	for name, fn := range map[string]func() error{
		"wrong secret": func() error {
			_, _, err := a.IssueToken(ctx, instore.SurfaceOnline, f.client.ID, f.secret+"x")
			return err
		},
		"unknown client": func() error { _, _, err := a.IssueToken(ctx, instore.SurfaceOnline, "cli_none", f.secret); return err },
		"other surface":  func() error { _, _, err := a.IssueToken(ctx, instore.SurfaceAccess, f.client.ID, f.secret); return err },
		"empty secret":   func() error { _, _, err := a.IssueToken(ctx, instore.SurfaceOnline, f.client.ID, ""); return err },
		"token on access": func() error {
			_, err := a.Authenticate(ctx, instore.SurfaceAccess, "Bearer "+tok, f.accessKey)
			return err
		},
		"online key access": func() error {
			_, err := a.Authenticate(ctx, instore.SurfaceOnline, "Bearer "+tok, f.accessKey)
			return err
		},
	} {
		if err := fn(); !isUnauthorized(err) {
			t.Errorf("%s: err = %v, want unauthorized", name, err)
		}
	}
	// A token signed by another key is refused.
	b, err := auth.New(auth.Config{Store: f.store, SigningKey: []byte(strings.Repeat("o", 32))})
	check(t, err)
	other, _, err := b.Mint(f.client, time.Hour)
	check(t, err)
	if _, err := a.Authenticate(ctx, instore.SurfaceOnline, "Bearer "+other, f.key); !isUnauthorized(err) {
		t.Errorf("token of another signing key: err = %v, want unauthorized", err)
	}
	// The unauthorized error never says which credential failed.
	_, err1 := a.Authenticate(ctx, instore.SurfaceOnline, "Bearer "+other, f.key)
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
	tok, _, err := cached.Mint(f.client, 2*time.Minute)
	check(t, err)
	hdr := "Bearer " + tok
	for _, a := range []*auth.Authenticator{cached, uncached} {
		if _, err := a.Authenticate(ctx, instore.SurfaceOnline, hdr, f.key); err != nil {
			t.Fatalf("Authenticate: %v", err)
		}
	}
	check(t, f.ad.RevokeKey(ctx, f.keyRec.ID))
	if _, err := uncached.Authenticate(ctx, instore.SurfaceOnline, hdr, f.key); !isUnauthorized(err) {
		t.Errorf("uncached after revocation: err = %v, want unauthorized", err)
	}
	if _, err := cached.Authenticate(ctx, instore.SurfaceOnline, hdr, f.key); err != nil {
		t.Errorf("within the cache TTL the verified pair is trusted: err = %v", err)
	}
	clk.Advance(61 * time.Second)
	if _, err := cached.Authenticate(ctx, instore.SurfaceOnline, hdr, f.key); !isUnauthorized(err) {
		t.Errorf("after the cache TTL a revoked key is refused: err = %v", err)
	}
}

func TestCacheNeverOutlivesToken(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	clk := clocktest.New(time.Now())
	a := f.authn(t, time.Hour, clk)
	tok, _, err := a.Mint(f.client, 2*time.Minute)
	check(t, err)
	if _, err := a.Authenticate(ctx, instore.SurfaceOnline, "Bearer "+tok, f.key); err != nil {
		t.Fatal(err)
	}
	clk.Advance(3 * time.Minute)
	if _, err := a.Authenticate(ctx, instore.SurfaceOnline, "Bearer "+tok, f.key); !isUnauthorized(err) {
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
	tok, _, err := systems[0].Mint(f.client, time.Hour)
	check(t, err)
	hdr := "Bearer " + tok
	for _, a := range append(systems, own) {
		if _, err := a.AuthenticateAt(ctx, instore.SurfaceOnline, hdr, f.key, time.Now()); err != nil {
			t.Fatalf("AuthenticateAt: %v", err)
		}
	}
	check(t, f.ad.RevokeKey(ctx, f.keyRec.ID))
	for _, system := range systems {
		if _, err := system.AuthenticateAt(ctx, instore.SurfaceOnline, hdr, f.key, time.Now()); err != nil {
			t.Errorf("within the cache TTL: err = %v, want the cached pair", err)
		}
		if _, err := system.AuthenticateAt(ctx, instore.SurfaceOnline, hdr, f.key, time.Time{}); err != nil {
			t.Errorf("zero time, within the cache TTL: err = %v, want the cached pair", err)
		}
		if _, err := system.AuthenticateAt(ctx, instore.SurfaceOnline, hdr, f.key, time.Now().Add(61*time.Second)); !isUnauthorized(err) {
			t.Errorf("at a time past the cache TTL: err = %v, want the revoked key refused", err)
		}
	}
	// Its own clock has not moved: the far time is not its time.
	if _, err := own.AuthenticateAt(ctx, instore.SurfaceOnline, hdr, f.key, time.Now().Add(time.Hour)); err != nil {
		t.Errorf("own clock within the cache TTL, a later time passed: err = %v, want the cached pair", err)
	}
	clk.Advance(61 * time.Second)
	if _, err := own.AuthenticateAt(ctx, instore.SurfaceOnline, hdr, f.key, time.Now()); !isUnauthorized(err) {
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
			tok, _, err := a.Mint(f.client, time.Hour)
			check(b, err)
			hdr := "Bearer " + tok
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := a.Authenticate(ctx, instore.SurfaceOnline, hdr, f.key); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
