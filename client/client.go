package client

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Defaults of Config.
const (
	// DefaultMaxRetries is how many times a failed call is retried when it
	// is safe to (four attempts in all).
	DefaultMaxRetries = 3
	// DefaultRetryDelay is the backoff before the first retry; it doubles
	// with every retry up to MaxRetryDelay, with jitter.
	DefaultRetryDelay = 250 * time.Millisecond
	// MaxRetryDelay caps the backoff between two attempts.
	MaxRetryDelay = 8 * time.Second
	// MaxRetryAfter is the longest Retry-After the client waits for on its
	// own; a longer one is returned to the caller as the *Error.
	MaxRetryAfter = 60 * time.Second
	// DefaultTimeout bounds one attempt of a call (a long-poll gets its
	// wait on top). The service holds a purchase until the terminal
	// acknowledges it (10 s by default) and an idempotent retry until the
	// first request ends (30 s by default), so the bound is generous; a
	// context deadline bounds the whole call. Against a service whose
	// operator raised its waits (--ack-timeout, --print-timeout,
	// --idempotency-wait: the service logs its write timeout at start),
	// set Timeout above that write timeout.
	DefaultTimeout = 100 * time.Second
	// maxBody is the largest response body read.
	maxBody = 8 << 20
)

// Environment variables FromEnv reads. The Online API's names are those of
// the `instore ecr` command line and of `instore demo --env`; Access API
// 2.0 has its own base URL and credentials, so its names carry
// INSTORE_ACCESS_API_. Every secret may also be given as a file holding it,
// named by the variable with _FILE appended (INSTORE_CLIENT_SECRET_FILE),
// the form secret managers and container orchestrators provide.
const (
	EnvOnlineAPIURL    = "INSTORE_ONLINE_API_URL"
	EnvSubscriptionKey = "INSTORE_SUBSCRIPTION_KEY"
	EnvAccessToken     = "INSTORE_ACCESS_TOKEN"
	EnvClientID        = "INSTORE_CLIENT_ID"
	EnvClientSecret    = "INSTORE_CLIENT_SECRET"

	EnvAccessAPIURL             = "INSTORE_ACCESS_API_URL"
	EnvAccessAPISubscriptionKey = "INSTORE_ACCESS_API_SUBSCRIPTION_KEY"
	EnvAccessAPIToken           = "INSTORE_ACCESS_API_TOKEN"
	EnvAccessAPIClientID        = "INSTORE_ACCESS_API_CLIENT_ID"
	EnvAccessAPIClientSecret    = "INSTORE_ACCESS_API_CLIENT_SECRET"
)

// Credentials authenticate calls to one surface: its subscription key
// (Ocp-Apim-Subscription-Key) and a bearer token, given either as a static
// AccessToken or obtained with ClientID and ClientSecret (OAuth 2.0 client
// credentials). When both are given the client credentials win, because
// the tokens they obtain are renewed before they expire.
//
// Credentials print as which members are set, never their values, so that
// a stray fmt.Println or log line cannot leak them.
type Credentials struct {
	SubscriptionKey string
	AccessToken     string
	ClientID        string
	ClientSecret    string
}

// String shows which members are set, never their values.
func (c Credentials) String() string {
	set := func(s string) string {
		if s == "" {
			return "unset"
		}
		return "set"
	}
	return fmt.Sprintf("Credentials{SubscriptionKey:%s AccessToken:%s ClientID:%s ClientSecret:%s}",
		set(c.SubscriptionKey), set(c.AccessToken), set(c.ClientID), set(c.ClientSecret))
}

// GoString is String, for %#v.
func (c Credentials) GoString() string { return c.String() }

// LogValue is String, for log/slog.
func (c Credentials) LogValue() slog.Value { return slog.StringValue(c.String()) }

func (c Credentials) check(surface string) error {
	switch {
	case c.SubscriptionKey == "":
		return fmt.Errorf("client: %s: no subscription key", surface)
	case c.ClientID != "" && c.ClientSecret == "" || c.ClientID == "" && c.ClientSecret != "":
		return fmt.Errorf("client: %s: a client ID needs its client secret and the reverse", surface)
	case c.ClientID == "" && c.AccessToken == "":
		return fmt.Errorf("client: %s: no access token and no client credentials", surface)
	}
	return nil
}

// Config configures a Client. At least one of OnlineAPIURL and
// AccessAPIURL is set; each URL set needs its Credentials.
type Config struct {
	// OnlineAPIURL is the service's base URL, such as
	// http://127.0.0.1:8080, without the /in-store/api/v1 prefix (which
	// the client adds).
	OnlineAPIURL string
	// Online authenticates Online API and sandbox control API calls.
	Online Credentials

	// AccessAPIURL is the base URL of Access API 2.0, such as
	// http://127.0.0.1:8081; it differs from the Online API's.
	AccessAPIURL string
	// Access authenticates Access API calls: customer credentials, not
	// a merchant's.
	Access Credentials

	// HTTPClient sends the requests (default: a client of its own with no
	// overall timeout; Timeout bounds each attempt instead).
	HTTPClient *http.Client
	// Logger, when set, gets one line per attempt: method, path template
	// (never the path itself, which holds terminal IDs), status, duration,
	// attempt and request id. Nothing else, and never a credential.
	Logger *slog.Logger
	// MaxRetries is how often a call is retried when it is safe to:
	// 0 means DefaultMaxRetries, a negative number none.
	MaxRetries int
	// RetryDelay is the backoff before the first retry (default
	// DefaultRetryDelay); it doubles with each retry, with jitter.
	RetryDelay time.Duration
	// Timeout bounds each attempt (default DefaultTimeout); a long-poll
	// adds its wait.
	Timeout time.Duration
	// UserAgent names the program, such as "till/2.1": the User-Agent
	// sent is it followed by the SDK's own "instore-go/<Version>" (only
	// the SDK's when empty), so the service's operator sees both.
	UserAgent string
	// Now is the clock the token cache uses (default time.Now); tests set
	// it to see tokens renewed without waiting an hour.
	Now func() time.Time
}

// Client calls the instore service. It is safe for concurrent use by
// multiple goroutines; make one and share it.
type Client struct {
	online, access *surface

	hc         *http.Client
	logger     *slog.Logger
	maxRetries int
	retryDelay time.Duration
	timeout    time.Duration
	userAgent  string
	now        func() time.Time
}

// surface is one API surface: its base URL and credentials.
type surface struct {
	name   string
	base   string
	key    string
	tokens *tokenSource
}

// New returns a Client for cfg. It checks the configuration only; nothing
// is sent until the first call.
func New(cfg Config) (*Client, error) {
	c := &Client{
		hc: cfg.HTTPClient, logger: cfg.Logger, maxRetries: cfg.MaxRetries, retryDelay: cfg.RetryDelay,
		timeout: cfg.Timeout, userAgent: cfg.UserAgent, now: cfg.Now,
	}
	if c.hc == nil {
		c.hc = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	switch {
	case c.maxRetries == 0:
		c.maxRetries = DefaultMaxRetries
	case c.maxRetries < 0:
		c.maxRetries = 0
	}
	if c.retryDelay <= 0 {
		c.retryDelay = DefaultRetryDelay
	}
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	c.userAgent = userAgent(c.userAgent)
	if c.now == nil {
		c.now = time.Now
	}
	if cfg.OnlineAPIURL == "" && cfg.AccessAPIURL == "" {
		return nil, errors.New("client: no base URL: set OnlineAPIURL, AccessAPIURL or both")
	}
	var err error
	if cfg.OnlineAPIURL != "" {
		if c.online, err = c.newSurface("Online API", cfg.OnlineAPIURL, cfg.Online); err != nil {
			return nil, err
		}
	}
	if cfg.AccessAPIURL != "" {
		if c.access, err = c.newSurface("Access API", cfg.AccessAPIURL, cfg.Access); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func (c *Client) newSurface(name, base string, cr Credentials) (*surface, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("client: %s: base URL %q is not an http:// or https:// URL", name, base)
	}
	if u.User != nil {
		return nil, fmt.Errorf("client: %s: the base URL must not hold credentials", name)
	}
	if err := cr.check(name); err != nil {
		return nil, err
	}
	s := &surface{name: name, base: strings.TrimSuffix(u.String(), "/"), key: cr.SubscriptionKey}
	s.tokens = &tokenSource{static: cr.AccessToken, id: cr.ClientID, secret: cr.ClientSecret}
	if cr.ClientID != "" {
		s.tokens.static = ""
	}
	return s, nil
}

// FromEnv returns a Client configured by ConfigFromEnv.
func FromEnv() (*Client, error) {
	cfg, err := ConfigFromEnv()
	if err != nil {
		return nil, err
	}
	return New(cfg)
}

// ConfigFromEnv reads the base URLs and credentials from the environment
// (the Env constants), so that they live outside the code as the
// integration rules ask. Adjust the result (Logger, HTTPClient) and pass it
// to New.
func ConfigFromEnv() (Config, error) {
	var cfg Config
	var err error
	get := func(name string, secret bool) string {
		if err != nil {
			return ""
		}
		if v, ok := os.LookupEnv(name); ok || !secret {
			return strings.TrimSpace(v)
		}
		path, ok := os.LookupEnv(name + "_FILE")
		if !ok {
			return ""
		}
		b, rerr := os.ReadFile(path)
		if rerr != nil {
			err = fmt.Errorf("client: %s_FILE: %w", name, rerr)
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	cfg.OnlineAPIURL = get(EnvOnlineAPIURL, false)
	cfg.Online = Credentials{
		SubscriptionKey: get(EnvSubscriptionKey, true), AccessToken: get(EnvAccessToken, true),
		ClientID: get(EnvClientID, false), ClientSecret: get(EnvClientSecret, true),
	}
	cfg.AccessAPIURL = get(EnvAccessAPIURL, false)
	cfg.Access = Credentials{
		SubscriptionKey: get(EnvAccessAPISubscriptionKey, true), AccessToken: get(EnvAccessAPIToken, true),
		ClientID: get(EnvAccessAPIClientID, false), ClientSecret: get(EnvAccessAPIClientSecret, true),
	}
	if err != nil {
		return Config{}, err
	}
	if cfg.OnlineAPIURL == "" && cfg.AccessAPIURL == "" {
		return Config{}, fmt.Errorf("client: neither %s nor %s is set", EnvOnlineAPIURL, EnvAccessAPIURL)
	}
	return cfg, nil
}

type idempotencyKeyCtx struct{}

// WithIdempotencyKey returns a context whose POST calls use key as their
// Idempotency-Key instead of a random one. The IdempotencyKey call option
// wins over it.
//
// Deprecated: pass IdempotencyKey(key) to the one call it belongs to: a
// context reaches every POST made with it, and two different calls
// sharing a key is an error (422 idempotency-key-reused).
func WithIdempotencyKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, idempotencyKeyCtx{}, key)
}

// NewIdempotencyKey returns a random key of the form IdempotencyKey
// takes: what the client sends when the caller gives none.
func NewIdempotencyKey() string {
	var b [16]byte
	crand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// call is one logical API call; do runs it with retries.
type call struct {
	s      *surface
	method string
	// path is the escaped path; route its template for logs and errors.
	path, route string
	query       url.Values
	body        any        // JSON-encoded when set
	form        url.Values // form-encoded when set (token requests)
	noAuth      bool
	// wait extends the attempt timeout for a long-poll.
	wait time.Duration
	// basicUser and basicPass authenticate a token request.
	basicUser, basicPass string
	// opts are the caller's options of this call.
	opts []CallOption
}

// response is an answer, 2xx or not.
type response struct {
	status int
	header http.Header
	body   []byte
}

// do runs cl until it succeeds, fails for good or runs out of retries, and
// decodes a 2xx JSON body into out (when out is not nil). It fills the
// caller's SaveResponse, whatever the outcome.
func (c *Client) do(ctx context.Context, cl call, out any) (*response, error) {
	o := collect(cl.opts)
	var last *response
	attempts := 0
	key := ""
	if o.resp != nil {
		defer func() {
			r := Response{IdempotencyKey: key, Attempts: attempts}
			if last != nil {
				r.StatusCode, r.Header = last.status, last.header
				r.RequestID = last.header.Get("X-Request-Id")
				r.Replayed = strings.EqualFold(last.header.Get("Idempotent-Replayed"), "true")
			}
			*o.resp = r
		}()
	}
	if cl.s == nil {
		return nil, fmt.Errorf("client: %s %s: no %s base URL configured", cl.method, cl.route, surfaceOf(cl.route))
	}
	var body []byte
	var contentType string
	switch {
	case cl.body != nil:
		b, err := json.Marshal(cl.body)
		if err != nil {
			return nil, fmt.Errorf("client: %s %s: encode body: %w", cl.method, cl.route, err)
		}
		body, contentType = b, "application/json"
	case cl.form != nil:
		body, contentType = []byte(cl.form.Encode()), "application/x-www-form-urlencoded"
	}
	// Every POST carries a key, the same on every attempt of this call:
	// the caller's IdempotencyKey, else the context's, else a new one. A
	// token request (which the service does not deduplicate) never takes
	// the caller's key: that belongs to the operation.
	if cl.method == http.MethodPost {
		if !cl.noAuth {
			if key = o.key; key == "" {
				key, _ = ctx.Value(idempotencyKeyCtx{}).(string)
			}
		}
		if key == "" {
			key = NewIdempotencyKey()
		}
	}
	u := cl.s.base + cl.path
	if len(cl.query) > 0 {
		u += "?" + cl.query.Encode()
	}
	reauthed := false
	for attempt := 1; ; attempt++ {
		tok := ""
		if !cl.noAuth {
			var err error
			if tok, err = cl.s.tokens.token(ctx, c, cl.s); err != nil {
				return nil, err // retried already, inside
			}
		}
		resp, err := c.attempt(ctx, cl, u, body, contentType, key, tok, attempt)
		attempts++
		if resp != nil {
			last = resp
		}
		if err == nil {
			if out != nil && len(resp.body) > 0 {
				if err := json.Unmarshal(resp.body, out); err != nil {
					return nil, fmt.Errorf("client: %s %s: decode answer: %w", cl.method, cl.route, err)
				}
			}
			return resp, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("client: %s %s: %w", cl.method, cl.route, context.Cause(ctx))
		}
		var e *Error
		isAPI := errors.As(err, &e)
		if isAPI && e.StatusCode == http.StatusUnauthorized && !cl.noAuth && !reauthed && cl.s.tokens.renewable() {
			// The cached token may have been revoked or its signing key
			// rotated: fetch a new one once. Nothing was done by the
			// refused request, so this is safe for a POST.
			reauthed = true
			cl.s.tokens.invalidate()
			attempt--
			continue
		}
		if attempt > c.maxRetries || isAPI && !e.retryable() {
			return nil, err
		}
		delay := c.backoff(attempt)
		if isAPI && e.RetryAfter > 0 {
			if e.RetryAfter > MaxRetryAfter {
				return nil, err
			}
			delay = e.RetryAfter
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < delay {
			return nil, err
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("client: %s %s: %w (last attempt: %v)", cl.method, cl.route, context.Cause(ctx), err)
		case <-t.C:
		}
	}
}

func surfaceOf(route string) string {
	if strings.HasPrefix(route, "/in-store/") || strings.HasPrefix(route, "/sandbox/") {
		return "Online API"
	}
	return "Access API"
}

// backoff is the delay before retry n (1-based): exponential with equal
// jitter, so retries of many clients spread out but never come at once.
func (c *Client) backoff(n int) time.Duration {
	d := c.retryDelay << (n - 1)
	if d > MaxRetryDelay || d <= 0 {
		d = MaxRetryDelay
	}
	return d/2 + rand.N(d/2+1)
}

// attempt sends one request and returns the answer it got. A network error
// comes back wrapped with the method and route (never the URL, which may
// hold a terminal ID); an answer other than 2xx as an *Error, with the
// answer.
func (c *Client) attempt(ctx context.Context, cl call, u string, body []byte, contentType, key, tok string, n int) (*response, error) {
	actx, cancel := context.WithTimeout(ctx, c.timeout+cl.wait)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(actx, cl.method, u, rd)
	if err != nil {
		return nil, fmt.Errorf("client: %s %s: %w", cl.method, cl.route, err)
	}
	h := req.Header
	h.Set("Accept", "application/json")
	h.Set("User-Agent", c.userAgent)
	if contentType != "" {
		h.Set("Content-Type", contentType)
	}
	if key != "" {
		h.Set("Idempotency-Key", key)
	}
	if cl.basicUser != "" {
		// RFC 6749 2.3.1: both are form-urlencoded inside Basic.
		req.SetBasicAuth(url.QueryEscape(cl.basicUser), url.QueryEscape(cl.basicPass))
	}
	if !cl.noAuth {
		h.Set("Authorization", "Bearer "+tok)
		h.Set("Ocp-Apim-Subscription-Key", cl.s.key)
	}
	start := time.Now()
	resp, err := c.hc.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // its message repeats the URL
		}
		c.log(ctx, cl, 0, time.Since(start), "", n, err)
		return nil, fmt.Errorf("client: %s %s: %w", cl.method, cl.route, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	rid := resp.Header.Get("X-Request-Id")
	c.log(ctx, cl, resp.StatusCode, time.Since(start), rid, n, err)
	if err != nil {
		return nil, fmt.Errorf("client: %s %s: read answer: %w", cl.method, cl.route, err)
	}
	ans := &response{status: resp.StatusCode, header: resp.Header, body: b}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return ans, nil
	}
	return ans, newError(cl, resp, b, c.now())
}

func (c *Client) log(ctx context.Context, cl call, status int, d time.Duration, rid string, attempt int, err error) {
	if c.logger == nil {
		return
	}
	level := slog.LevelInfo
	if err != nil || status >= 500 {
		level = slog.LevelWarn
	}
	attrs := []slog.Attr{
		slog.String("method", cl.method), slog.String("path", cl.route), slog.Int("status", status),
		slog.Duration("duration", d), slog.Int("attempt", attempt), slog.String("requestId", rid),
	}
	if err != nil {
		attrs = append(attrs, slog.String("error", err.Error()))
	}
	c.logger.LogAttrs(ctx, level, "instore request", attrs...)
}

// tokenSource hands out the bearer token of a surface: a static one, or
// one obtained with client credentials, cached until shortly before it
// expires.
type tokenSource struct {
	static     string
	id, secret string

	mu  sync.Mutex
	tok string
	exp time.Time
}

func (ts *tokenSource) renewable() bool { return ts.id != "" }

func (ts *tokenSource) invalidate() {
	ts.mu.Lock()
	ts.tok = ""
	ts.mu.Unlock()
}

// tokenAnswer is the body of a successful POST /oauth2/token.
type tokenAnswer struct {
	AccessToken string `json:"access_token"`
	TokenType   string `json:"token_type"`
	ExpiresIn   int64  `json:"expires_in"`
}

// token returns a valid token, fetching one when the cached one is missing
// or within its renewal margin: a tenth of its lifetime, at most a minute.
func (ts *tokenSource) token(ctx context.Context, c *Client, s *surface) (string, error) {
	if ts.static != "" {
		return ts.static, nil
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	now := c.now()
	if ts.tok != "" && now.Before(ts.exp) {
		return ts.tok, nil
	}
	var ans tokenAnswer
	_, err := c.do(ctx, call{
		s: s, method: http.MethodPost, path: "/oauth2/token", route: "/oauth2/token",
		form: url.Values{"grant_type": {"client_credentials"}}, noAuth: true,
		basicUser: ts.id, basicPass: ts.secret,
	}, &ans)
	if err != nil {
		return "", fmt.Errorf("client: %s token: %w", s.name, err)
	}
	if ans.AccessToken == "" || !strings.EqualFold(ans.TokenType, "Bearer") {
		return "", fmt.Errorf("client: %s token: the answer holds no bearer token", s.name)
	}
	life := time.Duration(ans.ExpiresIn) * time.Second
	if life <= 0 {
		life = time.Minute
	}
	margin := min(life/10, time.Minute)
	ts.tok, ts.exp = ans.AccessToken, now.Add(life-margin)
	return ts.tok, nil
}

// retryAfter parses a Retry-After header: seconds or an HTTP date.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
