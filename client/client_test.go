package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/client"
	"github.com/instore-dev/instore/internal/testwait"
)

// reply is one scripted answer of a fake server.
type reply struct {
	status int
	header map[string]string
	body   string
}

// script is a fake server answering a scripted reply per request (the last
// one repeats) and recording what it was sent.
type script struct {
	mu      sync.Mutex
	replies []reply
	reqs    []*http.Request
	bodies  []string
}

func (s *script) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	n := len(s.reqs)
	s.reqs = append(s.reqs, r.Clone(context.Background()))
	s.bodies = append(s.bodies, string(b))
	rp := s.replies[min(n, len(s.replies)-1)]
	s.mu.Unlock()
	for k, v := range rp.header {
		w.Header().Set(k, v)
	}
	if w.Header().Get("Content-Type") == "" {
		ct := "application/json"
		if rp.status >= 400 {
			ct = "application/problem+json"
		}
		w.Header().Set("Content-Type", ct)
	}
	w.Header().Set("X-Request-Id", fmt.Sprintf("req_%d", n+1))
	w.WriteHeader(rp.status)
	io.WriteString(w, rp.body)
}

func (s *script) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reqs)
}

func (s *script) headers(name string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, r := range s.reqs {
		out = append(out, r.Header.Get(name))
	}
	return out
}

func newScripted(t *testing.T, cfg client.Config, replies ...reply) (*client.Client, *script) {
	t.Helper()
	s := &script{replies: replies}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	cfg.OnlineAPIURL = srv.URL
	if cfg.Online == (client.Credentials{}) {
		cfg.Online = client.Credentials{SubscriptionKey: "isk_test", AccessToken: "tok_test"}
	}
	if cfg.RetryDelay == 0 {
		cfg.RetryDelay = time.Millisecond
	}
	c, err := client.New(cfg)
	if err != nil {
		t.Fatalf("client.New: %v", err)
	}
	return c, s
}

const txBody = `{"onlineAPIRefId":"tx_1","type":"PURCHASE","terminalId":"10000001","amount":1250,"cashbackAmount":0,"vatAmount":null,"currency":"SEK","paymentMethodId":null,"ecrReference":null,"printReceipt":false,"statusId":14,"status":"PENDING","errorId":null,"errorCode":null,"progress":"ACKNOWLEDGED","version":2,"createdAt":"2026-01-02T03:04:05Z","acknowledgedAt":"2026-01-02T03:04:05Z","completedAt":null,"reverses":null,"reversedBy":null}`

func problem(status int, name string, extra string) string {
	return fmt.Sprintf(`{"type":"urn:instore:problem:%s","title":"t","status":%d,"requestId":"req_x"%s}`, name, status, extra)
}

func TestRetryPolicy(t *testing.T) {
	internal := reply{500, nil, problem(500, "internal", "")}
	cases := []struct {
		name      string
		post      bool
		replies   []reply
		wantCalls int
		wantCode  string // "" for success
	}{
		{"GET 503 then 200", false, []reply{{503, nil, problem(503, "unavailable", "")}, {200, nil, txBody}}, 2, ""},
		{"GET 502 without a problem body then 200", false, []reply{{502, map[string]string{"Content-Type": "text/plain"}, "bad gateway"}, {200, nil, txBody}}, 2, ""},
		{"POST 500 then 201", true, []reply{internal, {201, nil, txBody}}, 2, ""},
		{"POST 504 WP25 is final", true, []reply{{504, nil, problem(504, "WP25", `,"errorId":25,"errorCode":"WP25","onlineAPIRefId":"tx_9"`)}}, 1, "WP25"},
		{"POST 409 WP09 is final", true, []reply{{409, nil, problem(409, "WP09", `,"errorId":9,"errorCode":"WP09"`)}}, 1, "WP09"},
		{"POST replayed 500 is final", true, []reply{{500, map[string]string{"Idempotent-Replayed": "true"}, problem(500, "internal", "")}}, 1, "internal"},
		{"POST 400 validation is final", true, []reply{{400, nil, problem(400, "validation", `,"errors":[{"field":"/amount","message":"is required"}]`)}}, 1, "validation"},
		{"GET 429 with Retry-After 0 then 200", false, []reply{{429, map[string]string{"Retry-After": "0"}, problem(429, "rate-limited", "")}, {200, nil, txBody}}, 2, ""},
		{"GET 429 with a long Retry-After is returned", false, []reply{{429, map[string]string{"Retry-After": "3600"}, problem(429, "rate-limited", "")}}, 1, "rate-limited"},
		{"POST 502 four times gives up", true, []reply{{502, nil, problem(502, "internal", "")}}, 1 + client.DefaultMaxRetries, "internal"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, s := newScripted(t, client.Config{}, tc.replies...)
			var err error
			if tc.post {
				_, err = c.Purchase(context.Background(), client.PurchaseParams{TerminalID: "10000001", Amount: 1250, Currency: "SEK"})
			} else {
				_, err = c.Transaction(context.Background(), "tx_1", 0)
			}
			if got := s.count(); got != tc.wantCalls {
				t.Errorf("requests sent = %d, want %d", got, tc.wantCalls)
			}
			if got := client.ErrorCode(err); got != tc.wantCode {
				t.Errorf("ErrorCode(%v) = %q, want %q", err, got, tc.wantCode)
			}
			keys := s.headers("Idempotency-Key")
			for i, k := range keys {
				if tc.post && (k == "" || k != keys[0]) {
					t.Errorf("POST attempt %d Idempotency-Key = %q, want the first attempt's %q", i+1, k, keys[0])
				}
				if !tc.post && k != "" {
					t.Errorf("GET attempt %d has Idempotency-Key %q", i+1, k)
				}
			}
		})
	}
}

func TestRetryAfterIsHonoured(t *testing.T) {
	limited := reply{429, map[string]string{"Retry-After": "1"}, problem(429, "rate-limited", "")}
	c, s := newScripted(t, client.Config{}, limited, limited, reply{200, nil, txBody})
	// A deadline shorter than Retry-After: the client does not retry
	// early, it gives the 429 back.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := c.Transaction(ctx, "tx_1", 0)
	var e *client.Error
	if !errors.As(err, &e) || e.StatusCode != 429 || e.RetryAfter != time.Second {
		t.Fatalf("Transaction with a deadline before Retry-After = %v, want the 429 with RetryAfter 1s", err)
	}
	if got := s.count(); got != 1 {
		t.Errorf("requests = %d, want 1", got)
	}
	// Without a deadline it waits and retries.
	if _, err := c.Transaction(context.Background(), "tx_1", 0); err != nil {
		t.Fatalf("Transaction after Retry-After: %v", err)
	}
	if got := s.count(); got != 3 {
		t.Errorf("requests = %d, want 3", got)
	}
}

// failFirst fails the first n round trips with a network error, after the
// server has answered them (the answer is lost on the way back).
type failFirst struct {
	n    int
	mu   sync.Mutex
	seen int
	next http.RoundTripper
}

func (f *failFirst) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := f.next.RoundTrip(r)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen++
	if f.seen <= f.n {
		if resp != nil {
			resp.Body.Close()
		}
		return nil, errors.New("connection reset by peer")
	}
	return resp, err
}

func TestNetworkErrorRetriesWithTheSameKey(t *testing.T) {
	cases := []struct {
		name       string
		fail       int
		maxRetries int
		wantCalls  int
		wantErr    bool
	}{
		{"one lost answer", 1, 0, 2, false},
		{"every answer lost", 10, 0, 1 + client.DefaultMaxRetries, true},
		{"retries off", 1, -1, 1, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ff := &failFirst{n: tc.fail, next: http.DefaultTransport}
			c, s := newScripted(t, client.Config{HTTPClient: &http.Client{Transport: ff}, MaxRetries: tc.maxRetries}, reply{201, nil, txBody})
			tx, err := c.Purchase(context.Background(), client.PurchaseParams{TerminalID: "10000001", Amount: 1250, Currency: "SEK"})
			if (err != nil) != tc.wantErr {
				t.Fatalf("Purchase error = %v, want error %v", err, tc.wantErr)
			}
			if err != nil {
				if client.ErrorCode(err) != "" || !strings.Contains(err.Error(), "POST /in-store/api/v1/purchase") || strings.Contains(err.Error(), "127.0.0.1") {
					t.Errorf("network error = %q: want the route, no *Error, no URL", err)
				}
			} else if tx.OnlineAPIRefID != "tx_1" {
				t.Errorf("OnlineAPIRefID = %q, want tx_1", tx.OnlineAPIRefID)
			}
			if got := s.count(); got != tc.wantCalls {
				t.Errorf("requests = %d, want %d", got, tc.wantCalls)
			}
			keys := s.headers("Idempotency-Key")
			for _, k := range keys {
				if k != keys[0] || len(k) < 16 {
					t.Errorf("keys = %q, want one key reused", keys)
					break
				}
			}
		})
	}
}

func TestCallerIdempotencyKey(t *testing.T) {
	c, s := newScripted(t, client.Config{}, reply{201, nil, txBody})
	ctx := client.WithIdempotencyKey(context.Background(), "order-4711")
	for range 2 {
		if _, err := c.Purchase(ctx, client.PurchaseParams{TerminalID: "10000001", Amount: 1250, Currency: "SEK"}); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := s.headers("Idempotency-Key"), []string{"order-4711", "order-4711"}; !cmp.Equal(got, want) {
		t.Errorf("keys = %q, want %q", got, want)
	}
	// Without one, two calls are two requests with two keys.
	c2, s2 := newScripted(t, client.Config{}, reply{201, nil, txBody})
	for range 2 {
		c2.Purchase(context.Background(), client.PurchaseParams{TerminalID: "10000001", Amount: 1250, Currency: "SEK"})
	}
	if k := s2.headers("Idempotency-Key"); k[0] == k[1] {
		t.Errorf("two calls shared the key %q", k[0])
	}
}

func TestCancelledContextStopsRetrying(t *testing.T) {
	c, s := newScripted(t, client.Config{RetryDelay: time.Hour}, reply{503, nil, problem(503, "unavailable", "")})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.Metadata(ctx)
		done <- err
	}()
	testwait.For(t, "the first attempt", func() bool { return s.count() > 0 })
	cancel()
	err := <-done
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Metadata after cancel = %v, want context.Canceled", err)
	}
	if got := s.count(); got != 1 {
		t.Errorf("requests = %d, want 1", got)
	}
}

func TestErrorFields(t *testing.T) {
	body := `{"type":"urn:instore:problem:WP09","title":"Terminal is busy processing previous transaction","status":409,"detail":"The terminal is busy.","requestId":"req_abc","errorId":9,"errorCode":"WP09","onlineAPIRefId":"tx_7"}`
	c, _ := newScripted(t, client.Config{}, reply{409, nil, body})
	_, err := c.Purchase(context.Background(), client.PurchaseParams{TerminalID: "10000001", Amount: 1250, Currency: "SEK"})
	var e *client.Error
	if !errors.As(err, &e) {
		t.Fatalf("Purchase = %v, want *client.Error", err)
	}
	want := &client.Error{
		StatusCode: 409, Type: "urn:instore:problem:WP09", Title: "Terminal is busy processing previous transaction",
		Detail: "The terminal is busy.", RequestID: "req_abc", ErrorID: 9, ErrorCode: "WP09", OnlineAPIRefID: "tx_7",
		Method: "POST", Route: "/in-store/api/v1/purchase",
	}
	if diff := cmp.Diff(want, e); diff != "" {
		t.Errorf("error (-want +got):\n%s", diff)
	}
	if got, want := e.Error(), "client: POST /in-store/api/v1/purchase: 409 WP09 Terminal is busy processing previous transaction: The terminal is busy (requestId req_abc)"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !client.IsCode(fmt.Errorf("wrapped: %w", err), instore.WP09) || client.IsCode(err, instore.WP01) {
		t.Errorf("IsCode does not see WP09 through wrapping")
	}
	if got := e.Problem(); got != "WP09" {
		t.Errorf("Problem() = %q", got)
	}

	c2, _ := newScripted(t, client.Config{}, reply{400, nil, problem(400, "validation", `,"errors":[{"field":"/amount","message":"is required"}]`)})
	_, err = c2.Purchase(context.Background(), client.PurchaseParams{TerminalID: "10000001", Currency: "SEK"})
	if !errors.As(err, &e) || e.Code() != instore.EValidation || !cmp.Equal(e.Errors, []client.FieldError{{Field: "/amount", Message: "is required"}}) {
		t.Errorf("validation error = %+v", err)
	}
}

func TestRequestHeadersAndBody(t *testing.T) {
	c, s := newScripted(t, client.Config{}, reply{201, nil, txBody})
	_, err := c.Purchase(context.Background(), client.PurchaseParams{TerminalID: "10000001", Amount: 1250, Currency: "SEK", PaymentMethodID: client.Int(0)})
	if err != nil {
		t.Fatal(err)
	}
	r := s.reqs[0]
	for h, want := range map[string]string{
		"Authorization": "Bearer tok_test", "Ocp-Apim-Subscription-Key": "isk_test",
		"Content-Type": "application/json", "Accept": "application/json",
	} {
		if got := r.Header.Get(h); got != want {
			t.Errorf("%s = %q, want %q", h, got, want)
		}
	}
	if got, want := s.bodies[0], `{"terminalId":"10000001","amount":1250,"currency":"SEK","paymentMethodId":0}`; got != want {
		t.Errorf("body = %s, want %s", got, want)
	}
}

func TestTransactionDecoding(t *testing.T) {
	c, _ := newScripted(t, client.Config{}, reply{200, nil, txBody})
	tx, err := c.Transaction(context.Background(), "tx_1", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if tx.Final() || tx.Approved() || tx.ErrorCode != "" || tx.ECRReference != "" || tx.Progress != instore.ProgressAcknowledged {
		t.Errorf("decoded %+v", tx)
	}
	if got := string(tx.RawJSON()); got != txBody {
		t.Errorf("RawJSON = %s, want the body as sent", got)
	}
}

func TestWaitQueryParameter(t *testing.T) {
	cases := []struct {
		wait time.Duration
		want string
	}{
		{0, ""},
		{1500 * time.Millisecond, "wait=2"},
		{30 * time.Second, "wait=30"},
		{5 * time.Minute, "wait=60"},
	}
	for _, tc := range cases {
		t.Run(tc.wait.String(), func(t *testing.T) {
			c, s := newScripted(t, client.Config{}, reply{200, nil, txBody})
			c.Transaction(context.Background(), "tx_1", tc.wait)
			if got := s.reqs[0].URL.RawQuery; got != tc.want {
				t.Errorf("query = %q, want %q", got, tc.want)
			}
		})
	}
}

// tokenServer is a fake service with a token endpoint.
type tokenServer struct {
	mu       sync.Mutex
	issued   int
	refuse   map[string]bool // tokens answered 401
	basic    [2]string
	lifetime int
}

func (ts *tokenServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if r.URL.Path == "/oauth2/token" {
		r.ParseForm()
		u, p, _ := r.BasicAuth()
		ts.basic = [2]string{u, p}
		if r.PostForm.Get("grant_type") != "client_credentials" {
			w.WriteHeader(400)
			return
		}
		ts.issued++
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"access_token":"tok_%d","token_type":"Bearer","expires_in":%d}`, ts.issued, ts.lifetime)
		return
	}
	tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if ts.refuse[tok] {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(401)
		io.WriteString(w, problem(401, "unauthorized", ""))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"terminals":[],"token":%q}`, tok)
}

func TestClientCredentialsTokens(t *testing.T) {
	ts := &tokenServer{lifetime: 3600, refuse: map[string]bool{}}
	srv := httptest.NewServer(ts)
	defer srv.Close()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	c, err := client.New(client.Config{
		OnlineAPIURL: srv.URL,
		Online:       client.Credentials{SubscriptionKey: "isk", ClientID: "cli_1", ClientSecret: "s3cr:t&"},
		Now:          func() time.Time { return now },
	})
	if err != nil {
		t.Fatal(err)
	}
	issued := func() int {
		ts.mu.Lock()
		defer ts.mu.Unlock()
		return ts.issued
	}
	steps := []struct {
		name    string
		advance time.Duration
		refuse  string
		want    int
	}{
		{"first call fetches a token", 0, "", 1},
		{"a later call reuses it", 30 * time.Minute, "", 1},
		{"within the renewal margin it is renewed", 29*time.Minute + 30*time.Second, "", 2},
		{"a refused token is replaced once", 0, "tok_2", 3},
	}
	for _, st := range steps {
		now = now.Add(st.advance)
		if st.refuse != "" {
			ts.mu.Lock()
			ts.refuse[st.refuse] = true
			ts.mu.Unlock()
		}
		if _, err := c.Terminals(context.Background()); err != nil {
			t.Fatalf("%s: Terminals: %v", st.name, err)
		}
		if got := issued(); got != st.want {
			t.Errorf("%s: tokens issued = %d, want %d", st.name, got, st.want)
		}
	}
	if got, want := ts.basic, [2]string{"cli_1", "s3cr%3At%26"}; got != want {
		t.Errorf("Basic credentials = %q, want form-encoded %q", got, want)
	}
	// A token that is refused again is an error, not a loop.
	ts.mu.Lock()
	ts.refuse["tok_3"], ts.refuse["tok_4"] = true, true
	ts.mu.Unlock()
	if _, err := c.Terminals(context.Background()); !client.IsCode(err, instore.EUnauthorized) {
		t.Errorf("Terminals with every token refused = %v, want unauthorized", err)
	}
	if got := issued(); got != 4 {
		t.Errorf("tokens issued = %d, want 4", got)
	}
}

func TestLoggerShowsNoSecretsOrIdentifiers(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, nil))
	c, _ := newScripted(t, client.Config{Logger: logger, Online: client.Credentials{SubscriptionKey: "isk_SECRETKEY", AccessToken: "tok_SECRETTOKEN"}},
		reply{503, nil, problem(503, "unavailable", "")}, reply{200, nil, `{"terminalId":"10000001"}`})
	if _, err := c.Terminal(context.Background(), "10000001"); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, s := range []string{"SECRETKEY", "SECRETTOKEN", "10000001"} {
		if strings.Contains(out, s) {
			t.Errorf("log holds %q:\n%s", s, out)
		}
	}
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		delete(m, "time")
		delete(m, "duration")
		lines = append(lines, m)
	}
	want := []map[string]any{
		{"level": "WARN", "msg": "instore request", "method": "GET", "path": "/in-store/api/v1/terminal/{terminalId}", "status": 503.0, "attempt": 1.0, "requestId": "req_1"},
		{"level": "INFO", "msg": "instore request", "method": "GET", "path": "/in-store/api/v1/terminal/{terminalId}", "status": 200.0, "attempt": 2.0, "requestId": "req_2"},
	}
	if diff := cmp.Diff(want, lines); diff != "" {
		t.Errorf("log lines (-want +got):\n%s", diff)
	}
}

// TestImportsOnlyTheRootPackage keeps the SDK public and light: the
// standard library and package instore, nothing internal or third-party.
func TestImportsOnlyTheRootPackage(t *testing.T) {
	files, _ := filepath.Glob("*.go")
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if p != "github.com/instore-dev/instore" && strings.Contains(strings.Split(p, "/")[0], ".") {
				t.Errorf("%s imports %s", name, p)
			}
		}
	}
}

// TestWebhookConcurrencyJSON checks the concurrency member on the wire:
// sent when set (creation, update), left out when zero (creation: the
// service's default) or nil (update: unchanged), and read from answers.
func TestWebhookConcurrencyJSON(t *testing.T) {
	const answer = `{"webhookId":"wh_1","url":"https://example.com/hook","eventTypes":[],"description":"","concurrency":%d,"status":"enabled","disabledReason":null,"createdAt":"2026-01-02T03:04:05Z"}`
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		call func(*client.Client) (*client.Webhook, error)
		want any // the body's concurrency member; nil: absent
	}{
		{"create with 4", func(c *client.Client) (*client.Webhook, error) {
			return c.CreateWebhook(ctx, client.WebhookParams{URL: "https://example.com/hook", Concurrency: 4})
		}, float64(4)},
		{"create with the default", func(c *client.Client) (*client.Webhook, error) {
			return c.CreateWebhook(ctx, client.WebhookParams{URL: "https://example.com/hook"})
		}, nil},
		{"update to 16", func(c *client.Client) (*client.Webhook, error) {
			return c.UpdateWebhook(ctx, "wh_1", client.WebhookUpdate{Concurrency: client.Int(16)})
		}, float64(16)},
		{"update back to 1", func(c *client.Client) (*client.Webhook, error) {
			return c.UpdateWebhook(ctx, "wh_1", client.WebhookUpdate{Concurrency: client.Int(1)})
		}, float64(1)},
		{"update without it", func(c *client.Client) (*client.Webhook, error) {
			return c.UpdateWebhook(ctx, "wh_1", client.WebhookUpdate{Description: client.String("till 2")})
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			answered := 1
			if n, ok := tc.want.(float64); ok {
				answered = int(n)
			}
			c, s := newScripted(t, client.Config{}, reply{200, nil, fmt.Sprintf(answer, answered)})
			wh, err := tc.call(c)
			if err != nil {
				t.Fatal(err)
			}
			var body map[string]any
			if err := json.Unmarshal([]byte(s.bodies[0]), &body); err != nil {
				t.Fatalf("body %q: %v", s.bodies[0], err)
			}
			got, present := body["concurrency"]
			if tc.want == nil && present {
				t.Errorf("body %s sends concurrency %v, want it left out", s.bodies[0], got)
			}
			if tc.want != nil && got != tc.want {
				t.Errorf("body %s: concurrency %v, want %v", s.bodies[0], got, tc.want)
			}
			if wh.Concurrency != answered {
				t.Errorf("Concurrency = %d, want %d from the answer", wh.Concurrency, answered)
			}
			if str, want := wh.String(), fmt.Sprintf("Concurrency:%d ", answered); !strings.Contains(str, want) {
				t.Errorf("String() = %q, want it to show %q", str, want)
			}
		})
	}
}
