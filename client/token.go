package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

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
