package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"time"
)

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
	// accept is the Accept header ("": application/json).
	accept string
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
		var unknownCA *UnknownCAError
		if attempt > c.maxRetries || isAPI && !e.retryable() || errors.As(err, &unknownCA) {
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
	if h.Set("Accept", "application/json"); cl.accept != "" {
		h.Set("Accept", cl.accept)
	}
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
		err = withCAHint(err)
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
