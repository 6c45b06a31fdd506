package client

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
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
