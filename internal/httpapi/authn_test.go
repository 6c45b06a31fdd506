package httpapi

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/admin"
	"github.com/instore-dev/instore/internal/apitest"
	"github.com/instore-dev/instore/internal/auth"
)

// authFixture is a store with one merchant's Online API client and key,
// and an Authenticator on the system clock with a one-minute cache.
type authFixture struct {
	ad       *admin.Admin
	auth     *auth.Authenticator
	store    *apitest.CountingStore
	keyID    string
	clientID string
	secret   string
	header   http.Header
}

func newAuthFixture(t testing.TB) *authFixture {
	t.Helper()
	st := apitest.SQLite(t, "NORMAL")
	ad := admin.New(st)
	online := apitest.NewShop(t, ad, "c", "m", "").Online
	counting := &apitest.CountingStore{Store: st}
	a, err := auth.New(auth.Config{Store: counting, SigningKey: []byte(strings.Repeat("s", 32)), CacheTTL: time.Minute})
	must(t, err)
	tok, _, err := a.Mint(online.Client, time.Hour)
	must(t, err)
	return &authFixture{ad: ad, auth: a, store: counting, keyID: online.KeyRec.ID, clientID: online.Client.ID, secret: online.Secret,
		header: http.Header{"Authorization": {"Bearer " + tok}, "Ocp-Apim-Subscription-Key": {online.Key}}}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// serveAt runs h as ServeHTTP would, for a request that arrived at start.
func (f *authFixture) serveAt(h HandlerFunc, start time.Time) (int, string) {
	return f.serveWith(h, start, f.header)
}

// serveWith is serveAt with the request's headers.
func (f *authFixture) serveWith(h HandlerFunc, start time.Time, header http.Header) (int, string) {
	r := httptest.NewRequest("GET", "/x", nil)
	r.Header = header.Clone()
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

func noContent(w http.ResponseWriter, r *http.Request, p *instore.Principal) error {
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// TestGuardRepeatedHeaders: a second Authorization or subscription key
// header is a validation error (encoding/json would have read the first),
// before any read of the store.
func TestGuardRepeatedHeaders(t *testing.T) {
	f := newAuthFixture(t)
	h := (&Guard{Auth: f.auth, Surface: instore.SurfaceOnline}).Wrap(noContent)
	authz, key := f.header["Authorization"][0], f.header["Ocp-Apim-Subscription-Key"][0]
	tests := []struct {
		name   string
		header http.Header
		want   []instore.FieldError
	}{
		{"two tokens", http.Header{"Authorization": {authz, "Bearer x"}, "Ocp-Apim-Subscription-Key": {key}},
			[]instore.FieldError{{Field: "Authorization", Message: "must be sent once"}}},
		{"the same token twice", http.Header{"Authorization": {authz, authz}, "Ocp-Apim-Subscription-Key": {key}},
			[]instore.FieldError{{Field: "Authorization", Message: "must be sent once"}}},
		{"two keys", http.Header{"Authorization": {authz}, "Ocp-Apim-Subscription-Key": {"isk_other", key}},
			[]instore.FieldError{{Field: "Ocp-Apim-Subscription-Key", Message: "must be sent once"}}},
		{"both twice", http.Header{"Authorization": {authz, authz}, "Ocp-Apim-Subscription-Key": {key, key}},
			[]instore.FieldError{{Field: "Authorization", Message: "must be sent once"}, {Field: "Ocp-Apim-Subscription-Key", Message: "must be sent once"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/x", nil)
			r.Header = tt.header
			err := h(httptest.NewRecorder(), r)
			var e *instore.Error
			if !errors.As(err, &e) || e.Code != instore.EValidation {
				t.Fatalf("Wrap(%v) = %v, want a validation error", tt.header, err)
			}
			if diff := cmp.Diff(tt.want, e.Fields); diff != "" {
				t.Errorf("fields (-want +got):\n%s", diff)
			}
		})
	}
	if n := f.store.AuthReads.Load(); n != 0 {
		t.Errorf("store reads = %d, want 0", n)
	}
	if code, err := f.serveAt(h, time.Now()); code != http.StatusNoContent {
		t.Errorf("one of each = %d %s, want 204", code, err)
	}
}

// TestGuardLimitsBeforeTheStore: the rate limit is taken per API client
// before authentication reads the store, so that requests with a valid
// token and made-up subscription keys (each a cache miss) cost no read
// once the client is over its limit, and requests with made-up tokens
// cost none at all.
func TestGuardLimitsBeforeTheStore(t *testing.T) {
	f := newAuthFixture(t)
	const burst = 5
	h := (&Guard{Auth: f.auth, Surface: instore.SurfaceOnline, Limiter: NewRateLimiter(1, burst)}).Wrap(noContent)
	now := time.Now()
	randomKey := func(i int) http.Header {
		return http.Header{"Authorization": f.header["Authorization"], "Ocp-Apim-Subscription-Key": {fmt.Sprintf("isk_random%d", i)}}
	}
	for i := range burst {
		if code, err := f.serveWith(h, now, randomKey(i)); code != 0 || !strings.Contains(err, "subscription key") {
			t.Fatalf("random key %d within the burst = %d %s, want unauthorized", i, code, err)
		}
	}
	within := f.store.AuthReads.Load()
	if within == 0 {
		t.Fatal("no store read within the burst: the test counts nothing")
	}
	for i := burst; i < 200; i++ {
		if code, err := f.serveWith(h, now, randomKey(i)); code != 0 || !strings.Contains(err, "Rate limit") {
			t.Fatalf("random key %d over the limit = %d %s, want rate limited", i, code, err)
		}
	}
	if n := f.store.AuthReads.Load(); n != within {
		t.Errorf("store reads over the limit = %d, want 0", n-within)
	}
	// The valid pair is over its client's limit too; a second later it
	// passes.
	if code, err := f.serveAt(h, now); code != 0 || !strings.Contains(err, "Rate limit") {
		t.Errorf("valid credentials of the limited client = %d %s, want rate limited", code, err)
	}
	if code, err := f.serveAt(h, now.Add(time.Second)); code != http.StatusNoContent {
		t.Errorf("valid credentials a second later = %d %s, want 204", code, err)
	}
	// Made-up tokens never reach the store nor the limiter.
	before := f.store.AuthReads.Load()
	for i := range 50 {
		hdr := http.Header{"Authorization": {fmt.Sprintf("Bearer e30.e30.%d", i)}, "Ocp-Apim-Subscription-Key": {"isk_x"}}
		if code, err := f.serveWith(h, now, hdr); code != 0 || !strings.Contains(err, "access token or the subscription key") {
			t.Fatalf("made-up token = %d %s, want unauthorized", code, err)
		}
	}
	if n := f.store.AuthReads.Load(); n != before {
		t.Errorf("store reads for made-up tokens = %d, want 0", n-before)
	}
}

// TestTokenHandlerRefusesBeforeTheStore: a client_id that cannot be one
// (NUL, bytes that are not UTF-8: PostgreSQL refused them with a 500), a
// parameter given twice and two Authorization headers are invalid_request
// without a read of the store.
func TestTokenHandlerRefusesBeforeTheStore(t *testing.T) {
	f := newAuthFixture(t)
	h := TokenHandler(f.auth, instore.SurfaceOnline)
	basic := func(id, secret string) string {
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(id+":"+secret))
	}
	tests := []struct {
		name   string
		form   string
		authz  []string
		status int
		field  string
	}{
		{"NUL in client_id", "grant_type=client_credentials&client_id=cli%00x&client_secret=s", nil, 400, "/client_id"},
		{"invalid UTF-8 in client_id", "grant_type=client_credentials&client_id=cli%FF&client_secret=s", nil, 400, "/client_id"},
		{"tab in client_id", "grant_type=client_credentials&client_id=cli%09&client_secret=s", nil, 400, "/client_id"},
		{"client_id too long", "grant_type=client_credentials&client_id=" + strings.Repeat("a", 256) + "&client_secret=s", nil, 400, "/client_id"},
		{"NUL in a Basic client id", "grant_type=client_credentials", []string{basic("cli%00x", "s")}, 400, "/client_id"},
		{"raw NUL in a Basic client id", "grant_type=client_credentials", []string{basic("cli\x00x", "s")}, 400, "/client_id"},
		{"client_id twice", "grant_type=client_credentials&client_id=" + f.clientID + "&client_id=cli_other&client_secret=" + f.secret, nil, 400, "/client_id"},
		{"client_secret twice", "grant_type=client_credentials&client_id=" + f.clientID + "&client_secret=" + f.secret + "&client_secret=x", nil, 400, "/client_secret"},
		{"grant_type twice", "grant_type=client_credentials&grant_type=client_credentials&client_id=" + f.clientID + "&client_secret=" + f.secret, nil, 400, "/grant_type"},
		{"two Authorization headers", "grant_type=client_credentials", []string{basic(f.clientID, f.secret), basic(f.clientID, f.secret)}, 400, "Authorization"},
		{"no client", "grant_type=client_credentials", nil, 401, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/oauth2/token", strings.NewReader(tt.form))
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			r.Header["Authorization"] = tt.authz
			err := h(httptest.NewRecorder(), r)
			p := NewProblem(err, "req", &instore.Metadata{})
			if p.Status != tt.status {
				t.Fatalf("POST /oauth2/token %s = %v (%d), want %d", tt.name, err, p.Status, tt.status)
			}
			if code, _ := oauthCode(err); tt.status == 400 && code != "invalid_request" {
				t.Errorf("OAuth error = %q, want invalid_request", code)
			}
			var e *instore.Error
			if tt.field != "" && (!errors.As(err, &e) || len(e.Fields) != 1 || e.Fields[0].Field != tt.field) {
				t.Errorf("error %v, want one field %s", err, tt.field)
			}
		})
	}
	if n := f.store.AuthReads.Load(); n != 0 {
		t.Errorf("store reads = %d, want 0", n)
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
