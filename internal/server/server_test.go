package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/api"
	"github.com/instore-dev/instore/internal/admin"
	"github.com/instore-dev/instore/internal/apitest"
	"github.com/instore-dev/instore/internal/clocktest"
	"github.com/instore-dev/instore/internal/server"
	"github.com/instore-dev/instore/internal/testlog"
	"github.com/instore-dev/instore/internal/testserver"
)

// env is a running server with one seeded merchant and its credentials.
type env struct {
	srv *server.Server
	// cfg is the server's configuration, which restart starts again.
	cfg    server.Config
	online string
	access string
	logs   *testlog.Buffer
	v      *apitest.Validator
	client *http.Client
	ad     *admin.Admin
	// accessV and accessClient validate Access API responses.
	accessV      *apitest.Validator
	accessClient *http.Client

	customer                     *instore.Customer
	merchantRec                  *instore.Merchant
	clientID, clientSecret, key  string
	token                        string
	secrets                      []string // every secret and identifier that must not be logged
	accessClientID, accessSecret string
	accessKey, accessToken       string
}

var validator, accessValidator *apitest.Validator

func start(t testing.TB, mutate func(*server.Config)) *env {
	t.Helper()
	return startFull(t, mutate, nil, nil)
}

// eachBackend runs f on SQLite and, with INSTORE_TEST_DATABASE_URL, on
// PostgreSQL; store points a server's configuration at the store.
func eachBackend(t *testing.T, f func(t *testing.T, store func(*server.Config))) {
	t.Run("sqlite", func(t *testing.T) { f(t, func(*server.Config) {}) })
	t.Run("postgres", func(t *testing.T) {
		u := freshPostgres(t)
		if u == "" {
			t.Skip("INSTORE_TEST_DATABASE_URL is not set")
		}
		f(t, func(c *server.Config) { c.DatabaseURL = u })
	})
}

// startWrapped is start on the configured store as wrap wraps it.
func startWrapped(t testing.TB, mutate func(*server.Config), wrap func(instore.Store) instore.Store) *env {
	return startFull(t, mutate, wrap, nil)
}

// startWith is start with a function called between New and Start.
func startWith(t testing.TB, mutate func(*server.Config), beforeStart func(*server.Server)) *env {
	return startFull(t, mutate, nil, beforeStart)
}

// startFull is start on the configured store as wrap wraps it (nil: as it
// is), calling beforeStart (if not nil) between New and Start.
func startFull(t testing.TB, mutate func(*server.Config), wrap func(instore.Store) instore.Store, beforeStart func(*server.Server)) *env {
	t.Helper()
	cfg := testserver.Config(t.TempDir())
	cfg.TokenTTL, cfg.AuthCacheTTL = time.Hour, 0
	logs := testserver.Logs(&cfg)
	if mutate != nil {
		mutate(&cfg)
	}
	srv := testserver.StartWith(t, cfg, testserver.Hooks{Wrap: wrap, BeforeStart: beforeStart})
	if validator == nil {
		validator = apitest.NewValidator(t, api.OnlineYAML)
	}
	if accessValidator == nil {
		accessValidator = apitest.NewValidator(t, api.AccessYAML)
	}
	e := &env{srv: srv, cfg: cfg, online: srv.URL("online"), access: srv.URL("access"), logs: logs, v: validator, client: validator.Client(t), ad: admin.New(srv.Store),
		accessV: accessValidator, accessClient: accessValidator.Client(t)}
	shop := apitest.NewShop(t, e.ad, "Shop AB", "Shop AB Kungsgatan", "ecr")
	ops := apitest.NewCredentials(t, e.ad, instore.SurfaceAccess, shop.Customer.ID, "ops")
	e.customer, e.merchantRec = shop.Customer, shop.Merchant
	e.clientID, e.clientSecret, e.key = shop.Online.Client.ID, shop.Online.Secret, shop.Online.Key
	e.accessClientID, e.accessSecret, e.accessKey = ops.Client.ID, ops.Secret, ops.Key
	e.token = e.getToken(t, e.online, e.clientID, e.clientSecret)
	e.accessToken = e.getToken(t, e.access, e.accessClientID, e.accessSecret)
	e.secrets = []string{e.customer.ID, e.merchantRec.ID, e.clientID, e.clientSecret, e.key, e.token,
		e.accessClientID, e.accessSecret, e.accessKey, e.accessToken}
	return e
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// otherMerchant creates a second merchant of the env's customer, with an
// Online API client and key of its own, and returns its token and key.
func (e *env) otherMerchant(t testing.TB) (token, key string) {
	t.Helper()
	ctx := context.Background()
	m, err := e.ad.CreateMerchant(ctx, e.customer.ID, "Other shop", true)
	must(t, err)
	cr := apitest.NewCredentials(t, e.ad, instore.SurfaceOnline, m.ID, "")
	return e.getToken(t, e.online, cr.Client.ID, cr.Secret), cr.Key
}

func (e *env) getToken(t testing.TB, base, id, secret string) string {
	t.Helper()
	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {id}, "client_secret": {secret}}
	resp, body := e.do(t, "POST", base+"/oauth2/token", strings.NewReader(form.Encode()), map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
	if resp.StatusCode != 200 {
		t.Fatalf("POST /oauth2/token = %d %s, want 200", resp.StatusCode, body)
	}
	var tok struct {
		AccessToken string `json:"access_token"`
		TokenType   string `json:"token_type"`
		ExpiresIn   int    `json:"expires_in"`
	}
	must(t, json.Unmarshal(body, &tok))
	if tok.TokenType != "Bearer" || tok.ExpiresIn != 3600 || tok.AccessToken == "" {
		t.Fatalf("token response = %+v, want Bearer, 3600 s", tok)
	}
	return tok.AccessToken
}

func (e *env) do(t testing.TB, method, u string, body io.Reader, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	return e.doCtx(context.Background(), t, method, u, body, hdr)
}

// doCtx is do bounded by ctx.
func (e *env) doCtx(ctx context.Context, t testing.TB, method, u string, body io.Reader, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	must(t, err)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	client := e.client
	switch {
	case strings.HasPrefix(u, e.access):
		client = e.accessClient // validated against the Access API's document
	case !strings.HasPrefix(u, e.online):
		client = http.DefaultClient // the gateway and ops listeners have no document
	}
	return send(t, client, req)
}

// send sends req with client and reads the whole answer.
func send(t testing.TB, client *http.Client, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	must(t, err)
	return resp, b
}

// sendJSON sends body marshalled as JSON (no body when nil, with
// Content-Type when not) to u with the headers hdr, then extra.
func (e *env) sendJSON(t testing.TB, method, u string, body any, hdr, extra map[string]string) reply {
	t.Helper()
	h := map[string]string{}
	maps.Copy(h, hdr)
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		must(t, err)
		r = bytes.NewReader(b)
		h["Content-Type"] = "application/json"
	}
	maps.Copy(h, extra)
	resp, b := e.do(t, method, u, r, h)
	return reply{resp, b}
}

func (e *env) auth(token, key string) map[string]string {
	h := map[string]string{"Accept": "application/json"}
	if token != "" {
		h["Authorization"] = "Bearer " + token
	}
	if key != "" {
		h["Ocp-Apim-Subscription-Key"] = key
	}
	return h
}

func TestMetadata(t *testing.T) {
	e := start(t, nil)
	resp, body := e.do(t, "GET", e.online+"/in-store/api/v1/metadata", nil, e.auth(e.token, e.key))
	if resp.StatusCode != 200 {
		t.Fatalf("GET /metadata = %d %s", resp.StatusCode, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	// Exactly the four properties, in the specification's order.
	keys := apitest.ObjectKeys(t, body)
	if diff := cmp.Diff([]string{"errorCodes", "transactionStatuses", "paymentMethods", "printStatuses"}, keys); diff != "" {
		t.Errorf("metadata properties (-want +got):\n%s", diff)
	}
	var got instore.Metadata
	must(t, json.Unmarshal(body, &got))
	if diff := cmp.Diff(instore.DefaultMetadata(), got); diff != "" {
		t.Errorf("metadata (-want +got):\n%s", diff)
	}
	// Every element has exactly id, code, description.
	var raw map[string][]map[string]any
	must(t, json.Unmarshal(body, &raw))
	for prop, list := range raw {
		for _, el := range list {
			if len(el) != 3 {
				t.Errorf("%s element %v has %d fields, want 3", prop, el, len(el))
			}
		}
	}
	etag := resp.Header.Get("ETag")
	if etag == "" {
		t.Fatal("no ETag")
	}
	h := e.auth(e.token, e.key)
	h["If-None-Match"] = etag
	resp, body = e.do(t, "GET", e.online+"/in-store/api/v1/metadata", nil, h)
	if resp.StatusCode != 304 || len(body) != 0 {
		t.Errorf("GET /metadata If-None-Match = %d %q, want 304 with no body", resp.StatusCode, body)
	}
	h["If-None-Match"] = `"other"`
	resp, _ = e.do(t, "GET", e.online+"/in-store/api/v1/metadata", nil, h)
	if resp.StatusCode != 200 {
		t.Errorf("GET /metadata with a stale ETag = %d, want 200", resp.StatusCode)
	}
	// Without credentials a 304 is never given.
	resp, _ = e.do(t, "GET", e.online+"/in-store/api/v1/metadata", nil, map[string]string{"If-None-Match": etag})
	if resp.StatusCode != 401 {
		t.Errorf("GET /metadata If-None-Match without credentials = %d, want 401", resp.StatusCode)
	}
	resp, body = e.do(t, "GET", e.online+"/in-store/api/v1/openapi.yaml", nil, e.auth(e.token, e.key))
	if resp.StatusCode != 200 || !bytes.Equal(body, api.OnlineYAML) {
		t.Errorf("GET /openapi.yaml = %d (%d bytes), want 200 and the embedded document", resp.StatusCode, len(body))
	}
}

func TestPaymentMethodsOverride(t *testing.T) {
	pm := []instore.Code{{ID: 0, Code: "VIPPS", Description: "Payment through Vipps"}, {ID: 1, Code: "AFFIRM", Description: "Payment through Affirm"}, {ID: 2, Code: "APPLEPAY", Description: "Payment through Apple Pay"}}
	e := start(t, func(c *server.Config) { c.PaymentMethods = pm })
	_, body := e.do(t, "GET", e.online+"/in-store/api/v1/metadata", nil, e.auth(e.token, e.key))
	var got instore.Metadata
	must(t, json.Unmarshal(body, &got))
	if diff := cmp.Diff(pm, got.PaymentMethods); diff != "" {
		t.Errorf("paymentMethods (-want +got):\n%s", diff)
	}
}

// TestUnauthorizedVariants: every way a credential can be wrong answers the
// same 401 problem; only the request id differs.
func TestUnauthorizedVariants(t *testing.T) {
	e := start(t, nil)
	ctx := context.Background()
	// A second merchant with its own credentials.
	token2, key2 := e.otherMerchant(t)
	// Revoked client and key.
	c3, s3, err := e.ad.CreateClient(ctx, instore.SurfaceOnline, e.merchantRec.ID, "")
	must(t, err)
	revokedToken := e.getToken(t, e.online, c3.ID, s3)
	must(t, e.ad.RevokeClient(ctx, c3.ID))
	k4, key4, err := e.ad.CreateKey(ctx, instore.SurfaceOnline, e.merchantRec.ID)
	must(t, err)
	must(t, e.ad.RevokeKey(ctx, k4.ID))
	// Expired token and a token signed with another key.
	client, err := e.srv.Store.APIClient(ctx, e.clientID)
	must(t, err)
	expired, _, err := e.srv.Auth.Mint(client, -time.Minute)
	must(t, err)
	forged := e.token[:strings.LastIndex(e.token, ".")+1] + "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"

	cases := []struct {
		name string
		hdr  map[string]string
	}{
		{"no credentials", e.auth("", "")},
		{"no token", e.auth("", e.key)},
		{"no key", e.auth(e.token, "")},
		{"basic scheme", map[string]string{"Authorization": "Basic " + e.token, "Ocp-Apim-Subscription-Key": e.key}},
		{"empty bearer", map[string]string{"Authorization": "Bearer ", "Ocp-Apim-Subscription-Key": e.key}},
		{"malformed token", e.auth("not.a.jwt", e.key)},
		{"garbage token", e.auth("abc", e.key)},
		{"forged signature", e.auth(forged, e.key)},
		{"expired token", e.auth(expired, e.key)},
		{"revoked client", e.auth(revokedToken, e.key)},
		{"unknown key", e.auth(e.token, "isk_unknown")},
		{"revoked key", e.auth(e.token, key4)},
		{"token and key of different merchants", e.auth(e.token, key2)},
		{"key and token of different merchants", e.auth(token2, e.key)},
		{"access key on online", e.auth(e.token, e.accessKey)},
		{"access token on online", e.auth(e.accessToken, e.key)},
		{"access token and key on online", e.auth(e.accessToken, e.accessKey)},
	}
	var first []byte
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := e.do(t, "GET", e.online+"/in-store/api/v1/metadata", nil, tc.hdr)
			if resp.StatusCode != 401 {
				t.Fatalf("GET /metadata = %d %s, want 401", resp.StatusCode, body)
			}
			if got := resp.Header.Get("WWW-Authenticate"); got != "Bearer" {
				t.Errorf("WWW-Authenticate = %q, want Bearer", got)
			}
			var p map[string]any
			must(t, json.Unmarshal(body, &p))
			if p["requestId"] != resp.Header.Get("X-Request-Id") {
				t.Errorf("requestId %v != X-Request-Id %q", p["requestId"], resp.Header.Get("X-Request-Id"))
			}
			delete(p, "requestId")
			norm, _ := json.Marshal(p)
			if first == nil {
				first = norm
			} else if !bytes.Equal(first, norm) {
				t.Errorf("401 body = %s, want the same as every other variant: %s", norm, first)
			}
		})
	}
	if !strings.Contains(string(first), `"type":"urn:instore:problem:unauthorized"`) {
		t.Errorf("401 body = %s, want type unauthorized", first)
	}
	// The valid pairs still work, also across surfaces.
	if resp, _ := e.do(t, "GET", e.online+"/in-store/api/v1/metadata", nil, e.auth(token2, key2)); resp.StatusCode != 200 {
		t.Errorf("second merchant's own pair = %d, want 200", resp.StatusCode)
	}
}

// TestRevocationWithinCacheTTL: a revoked key still passes from the
// credentials' cache until its TTL has passed on the server's clock, and
// is refused from then on (a fake clock: no wait on real time).
func TestRevocationWithinCacheTTL(t *testing.T) {
	clk := clocktest.New(time.Now())
	e := start(t, func(c *server.Config) { c.AuthCacheTTL, c.Clock = time.Minute, clk })
	ctx := context.Background()
	k, key, err := e.ad.CreateKey(ctx, instore.SurfaceOnline, e.merchantRec.ID)
	must(t, err)
	metadata := func() int {
		resp, _ := e.do(t, "GET", e.online+"/in-store/api/v1/metadata", nil, e.auth(e.token, key))
		return resp.StatusCode
	}
	if got := metadata(); got != 200 {
		t.Fatalf("before revocation = %d, want 200", got)
	}
	must(t, e.ad.RevokeKey(ctx, k.ID))
	clk.Advance(time.Minute - time.Millisecond)
	if got := metadata(); got != 200 {
		t.Fatalf("revoked, within the cache TTL = %d, want 200 (the cached pair)", got)
	}
	clk.Advance(time.Millisecond)
	if got := metadata(); got != 401 {
		t.Fatalf("revoked, once the cache TTL passed = %d, want 401", got)
	}
}

// TestDeactivationWithinCacheTTL: the merchant is read with the cached
// credentials, so deactivating it takes effect within the cache TTL, as a
// revocation does, and then every operation but metadata answers WP03.
func TestDeactivationWithinCacheTTL(t *testing.T) {
	clk := clocktest.New(time.Now())
	e := start(t, func(c *server.Config) { c.AuthCacheTTL, c.Clock = time.Minute, clk })
	terminals := func() (int, string) {
		resp, body := e.do(t, "GET", e.online+"/in-store/api/v1/terminals", nil, e.auth(e.token, e.key))
		return resp.StatusCode, string(body)
	}
	if got, body := terminals(); got != 200 {
		t.Fatalf("before deactivation = %d %s, want 200", got, body)
	}
	must(t, e.ad.SetMerchantActive(context.Background(), e.merchantRec.ID, false))
	clk.Advance(time.Minute - time.Millisecond)
	if got, body := terminals(); got != 200 {
		t.Fatalf("deactivated, within the cache TTL = %d %s, want 200 (the cached merchant)", got, body)
	}
	clk.Advance(time.Millisecond)
	if got, body := terminals(); got != 403 || !strings.Contains(body, `"errorCode":"WP03"`) {
		t.Fatalf("deactivated, once the cache TTL passed = %d %s, want 403 WP03", got, body)
	}
	if resp, _ := e.do(t, "GET", e.online+"/in-store/api/v1/metadata", nil, e.auth(e.token, e.key)); resp.StatusCode != 200 {
		t.Errorf("inactive merchant GET /metadata = %d, want 200", resp.StatusCode)
	}
}

func TestInactiveMerchantReadsMetadataAndGetsTokens(t *testing.T) {
	e := start(t, nil)
	must(t, e.ad.SetMerchantActive(context.Background(), e.merchantRec.ID, false))
	tok := e.getToken(t, e.online, e.clientID, e.clientSecret)
	if resp, body := e.do(t, "GET", e.online+"/in-store/api/v1/metadata", nil, e.auth(tok, e.key)); resp.StatusCode != 200 {
		t.Errorf("inactive merchant GET /metadata = %d %s, want 200", resp.StatusCode, body)
	}
}

func TestTokenEndpoint(t *testing.T) {
	e := start(t, nil)
	form := func(v url.Values) io.Reader { return strings.NewReader(v.Encode()) }
	formCT := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
	basic := func(id, secret string) map[string]string {
		req, _ := http.NewRequest("POST", "/", nil)
		req.SetBasicAuth(url.QueryEscape(id), url.QueryEscape(secret))
		return map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Authorization": req.Header.Get("Authorization")}
	}
	cases := []struct {
		name       string
		body       io.Reader
		hdr        map[string]string
		wantStatus int
		wantOAuth  string
	}{
		{"form", form(url.Values{"grant_type": {"client_credentials"}, "client_id": {e.clientID}, "client_secret": {e.clientSecret}}), formCT, 200, ""},
		{"basic", form(url.Values{"grant_type": {"client_credentials"}}), basic(e.clientID, e.clientSecret), 200, ""},
		{"wrong secret", form(url.Values{"grant_type": {"client_credentials"}, "client_id": {e.clientID}, "client_secret": {"ics_wrong"}}), formCT, 401, "invalid_client"},
		{"unknown client", form(url.Values{"grant_type": {"client_credentials"}, "client_id": {"cli_x"}, "client_secret": {"x"}}), formCT, 401, "invalid_client"},
		{"basic wrong secret", form(url.Values{"grant_type": {"client_credentials"}}), basic(e.clientID, "nope"), 401, "invalid_client"},
		{"access client on online", form(url.Values{"grant_type": {"client_credentials"}, "client_id": {e.accessClientID}, "client_secret": {e.accessSecret}}), formCT, 401, "invalid_client"},
		{"no grant type", form(url.Values{"client_id": {e.clientID}, "client_secret": {e.clientSecret}}), formCT, 400, "invalid_request"},
		{"password grant", form(url.Values{"grant_type": {"password"}, "client_id": {e.clientID}, "client_secret": {e.clientSecret}}), formCT, 400, "unsupported_grant_type"},
		{"both basic and form", form(url.Values{"grant_type": {"client_credentials"}, "client_id": {e.clientID}, "client_secret": {e.clientSecret}}), basic(e.clientID, e.clientSecret), 400, "invalid_request"},
		{"json body", strings.NewReader(`{"grant_type":"client_credentials"}`), map[string]string{"Content-Type": "application/json"}, 415, ""},
		{"too large", strings.NewReader("grant_type=" + strings.Repeat("a", 70000)), formCT, 413, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := e.do(t, "POST", e.online+"/oauth2/token", tc.body, tc.hdr)
			if resp.StatusCode != tc.wantStatus {
				t.Fatalf("POST /oauth2/token = %d %s, want %d", resp.StatusCode, body, tc.wantStatus)
			}
			if tc.wantOAuth != "" {
				var p map[string]any
				json.Unmarshal(body, &p)
				if p["error"] != tc.wantOAuth {
					t.Errorf("error = %v, want %q (body %s)", p["error"], tc.wantOAuth, body)
				}
			}
		})
	}
	// The Access API's token endpoint issues tokens for access clients only.
	e.getToken(t, e.access, e.accessClientID, e.accessSecret)
	resp, _ := e.do(t, "POST", e.access+"/oauth2/token", form(url.Values{"grant_type": {"client_credentials"}, "client_id": {e.clientID}, "client_secret": {e.clientSecret}}), formCT)
	if resp.StatusCode != 401 {
		t.Errorf("online client on the Access API token endpoint = %d, want 401", resp.StatusCode)
	}
}

func TestRateLimit(t *testing.T) {
	e := start(t, func(c *server.Config) { c.RateLimit, c.RateBurst = 0.01, 2 })
	var last *http.Response
	var body []byte
	for i := 0; i < 3; i++ {
		last, body = e.do(t, "GET", e.online+"/in-store/api/v1/metadata", nil, e.auth(e.token, e.key))
	}
	if last.StatusCode != 429 || last.Header.Get("Retry-After") == "" {
		t.Fatalf("third request over a burst of 2 = %d (Retry-After %q) %s, want 429 with Retry-After", last.StatusCode, last.Header.Get("Retry-After"), body)
	}
}

func TestRoutingProblems(t *testing.T) {
	e := start(t, nil)
	e.routeProblems(t, e.online, e.auth(e.token, e.key), []routeProblem{
		{"GET", "/in-store/api/v1/nothing", 404},
		{"GET", "/", 404},
		{"POST", "/in-store/api/v1/metadata", 405},
		{"DELETE", "/oauth2/token", 405},
	})
}

// routeProblem is a request with no body and the status of the problem it
// is answered with.
type routeProblem struct {
	method, path string
	want         int
}

// routeProblems sends each case's request to the listener at base with
// the headers hdr and checks it is answered with a problem of its status.
func (e *env) routeProblems(t *testing.T, base string, hdr map[string]string, cases []routeProblem) {
	t.Helper()
	for _, tc := range cases {
		resp, body := e.do(t, tc.method, base+tc.path, nil, hdr)
		if resp.StatusCode != tc.want || resp.Header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s %s = %d %s %s, want a %d problem", tc.method, tc.path, resp.StatusCode, resp.Header.Get("Content-Type"), body, tc.want)
		}
	}
}

// TestLogsHoldNoSecrets runs a scenario through every path that logs and
// proves no token, key, secret, merchant, customer or client id appears.
func TestLogsHoldNoSecrets(t *testing.T) {
	e := start(t, nil)
	meta := e.online + "/in-store/api/v1/metadata"
	e.do(t, "GET", meta, nil, e.auth(e.token, e.key))
	e.do(t, "GET", meta, nil, e.auth(e.token, e.accessKey))
	e.do(t, "GET", meta, nil, e.auth(e.accessToken, e.key))
	e.do(t, "GET", meta, nil, e.auth(e.token+"x", e.key+"x"))
	e.do(t, "GET", e.online+"/in-store/api/v1/terminal/"+e.merchantRec.ID, nil, e.auth(e.token, e.key))
	e.do(t, "POST", e.online+"/oauth2/token", strings.NewReader(url.Values{"grant_type": {"client_credentials"}, "client_id": {e.clientID}, "client_secret": {"wrong" + e.clientSecret}}.Encode()), map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
	e.getToken(t, e.online, e.clientID, e.clientSecret)
	e.do(t, "GET", e.online+"/in-store/api/v1/metadata?merchantId="+e.merchantRec.ID, nil, map[string]string{"Authorization": "Bearer " + e.token, "X-Request-Id": "r1"})
	e.srv.Close()
	logs := e.logs.String()
	if !strings.Contains(logs, `"msg":"request"`) {
		t.Fatalf("no access log lines captured:\n%s", logs)
	}
	for _, s := range e.secrets {
		if strings.Contains(logs, s) {
			t.Errorf("logs contain a secret or identifier %.12s...:\n%s", s, logs)
		}
	}
}

func TestGracefulShutdownFinishesInFlight(t *testing.T) {
	e := start(t, nil)
	// A request in flight while Close runs still gets its answer.
	done := make(chan int)
	go func() {
		resp, _ := e.do(t, "GET", e.online+"/in-store/api/v1/metadata", nil, e.auth(e.token, e.key))
		done <- resp.StatusCode
	}()
	code := <-done
	must(t, e.srv.Close())
	if code != 200 {
		t.Errorf("in-flight request = %d, want 200", code)
	}
	if _, err := http.Get(e.online + "/in-store/api/v1/metadata"); err == nil {
		t.Errorf("listener still accepts after Close")
	}
}

func TestCoverage(t *testing.T) {
	// Runs last in this file: every operation of the document was exercised.
	if validator == nil {
		t.Skip("no test ran against the server")
	}
	for op, seen := range validator.Covered() {
		if !seen {
			t.Errorf("operation %s of api/online-api.yaml got no validated response in these tests", op)
		}
	}
}
