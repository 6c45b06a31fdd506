package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/admin"
	"github.com/instore-dev/instore/internal/auth"
	"github.com/instore-dev/instore/internal/sqlstore"
)

// authFixture is a store with one merchant's Online API client and key,
// and an Authenticator on the system clock with a one-minute cache.
type authFixture struct {
	ad     *admin.Admin
	auth   *auth.Authenticator
	keyID  string
	header http.Header
}

func newAuthFixture(t testing.TB) *authFixture {
	t.Helper()
	ctx := context.Background()
	st, err := sqlstore.Open(ctx, filepath.Join(t.TempDir(), "httpapi.db"), sqlstore.Options{Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ad := admin.New(st)
	cus, err := ad.CreateCustomer(ctx, "c")
	must(t, err)
	mer, err := ad.CreateMerchant(ctx, cus.ID, "m", true)
	must(t, err)
	client, _, err := ad.CreateClient(ctx, instore.SurfaceOnline, mer.ID, "")
	must(t, err)
	keyRec, key, err := ad.CreateKey(ctx, instore.SurfaceOnline, mer.ID)
	must(t, err)
	a, err := auth.New(auth.Config{Store: st, SigningKey: []byte(strings.Repeat("s", 32)), CacheTTL: time.Minute})
	must(t, err)
	tok, _, err := a.Mint(client, time.Hour)
	must(t, err)
	return &authFixture{ad: ad, auth: a, keyID: keyRec.ID,
		header: http.Header{"Authorization": {"Bearer " + tok}, "Ocp-Apim-Subscription-Key": {key}}}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// serveAt runs h as ServeHTTP would, for a request that arrived at start.
func (f *authFixture) serveAt(h HandlerFunc, start time.Time) (int, string) {
	r := httptest.NewRequest("GET", "/x", nil)
	r.Header = f.header.Clone()
	rec := httptest.NewRecorder()
	rw := &responseWriter{ResponseWriter: rec, req: r, info: requestInfo{start: start}}
	if err := h(rw, r); err != nil {
		return 0, err.Error()
	}
	return rec.Code, rec.Header().Get("Retry-After")
}

// TestGuardUsesRequestStart: the guard checks the credentials cache and
// the rate limit at the time the request arrived, as the middleware read
// it, instead of reading the clock again.
func TestGuardUsesRequestStart(t *testing.T) {
	f := newAuthFixture(t)
	ok := func(w http.ResponseWriter, r *http.Request, p *instore.Principal) error {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	g := &Guard{Auth: f.auth, Surface: instore.SurfaceOnline}
	h := g.Wrap(ok)
	now := time.Now()
	if code, err := f.serveAt(h, now); code != http.StatusNoContent {
		t.Fatalf("authenticated request = %d %s, want 204", code, err)
	}
	must(t, f.ad.RevokeKey(context.Background(), f.keyID))
	if code, err := f.serveAt(h, now); code != http.StatusNoContent {
		t.Errorf("revoked key within the cache TTL = %d %s, want 204 from the cache", code, err)
	}
	if code, err := f.serveAt(h, now.Add(2*time.Minute)); code != 0 || !strings.Contains(err, "revoked") {
		t.Errorf("revoked key, request arriving past the cache TTL = %d %s, want it refused", code, err)
	}

	f = newAuthFixture(t)
	g = &Guard{Auth: f.auth, Surface: instore.SurfaceOnline, Limiter: NewRateLimiter(1, 1)}
	h = g.Wrap(ok)
	if code, _ := f.serveAt(h, now); code != http.StatusNoContent {
		t.Fatalf("first request = %d, want 204", code)
	}
	if code, err := f.serveAt(h, now); code != 0 || !strings.Contains(err, "Rate limit") {
		t.Errorf("second request in the same instant = %d %s, want rate limited", code, err)
	}
	if code, err := f.serveAt(h, now.Add(time.Second)); code != http.StatusNoContent {
		t.Errorf("request arriving a second later = %d %s, want 204", code, err)
	}
}

// TestRateLimiterAllowAt: a token per second per key, at the time given;
// a zero time is the clock's.
func TestRateLimiterAllowAt(t *testing.T) {
	l := NewRateLimiter(1, 1)
	t0 := time.Now()
	w := httptest.NewRecorder()
	if err := l.AllowAt("k", t0, w); err != nil {
		t.Fatalf("first: %v", err)
	}
	if err := l.AllowAt("k", t0.Add(500*time.Millisecond), w); err == nil || w.Header().Get("Retry-After") != "1" {
		t.Errorf("half a second later: err = %v, Retry-After %q, want limited, 1", err, w.Header().Get("Retry-After"))
	}
	if err := l.AllowAt("k", t0.Add(time.Second), httptest.NewRecorder()); err != nil {
		t.Errorf("a second later: %v", err)
	}
	if err := l.AllowAt("other", t0, httptest.NewRecorder()); err != nil {
		t.Errorf("another key: %v", err)
	}
	if err := l.Allow("fresh", httptest.NewRecorder()); err != nil {
		t.Errorf("Allow: %v", err)
	}
	if err := l.AllowAt("fresh", time.Time{}, httptest.NewRecorder()); err == nil {
		t.Error("AllowAt with the zero time right after Allow: want limited")
	}
	var none *RateLimiter
	if err := none.AllowAt("k", t0, httptest.NewRecorder()); err != nil {
		t.Errorf("nil limiter: %v", err)
	}
}

// BenchmarkRateLimiter is the limiter's cost per request, all requests on
// one key from every core (the load tool's case).
func BenchmarkRateLimiter(b *testing.B) {
	l := NewRateLimiter(1e9, 1e9)
	w := httptest.NewRecorder()
	now := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := l.AllowAt("key_0123456789abcdef01234567", now, w); err != nil {
				b.Fatal(err)
			}
		}
	})
}
