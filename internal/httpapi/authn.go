package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/auth"
)

// AuthedFunc is a handler of an authenticated route.
type AuthedFunc func(w http.ResponseWriter, r *http.Request, p *instore.Principal) error

// Guard authenticates requests of one surface and applies the rate limit
// per API client, before authentication reads the store.
type Guard struct {
	Auth    *auth.Authenticator
	Surface instore.Surface
	Limiter *RateLimiter
}

// Wrap returns a handler that runs h only for an authenticated request.
// Each credential header must come once: a second Authorization or
// Ocp-Apim-Subscription-Key is a validation error, not a choice of one.
func (g *Guard) Wrap(h AuthedFunc) HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		authz, key := r.Header["Authorization"], r.Header["Ocp-Apim-Subscription-Key"]
		if err := once("Authorization", authz, "Ocp-Apim-Subscription-Key", key); err != nil {
			return err
		}
		// The clock as the request arrived, read once by the middleware
		// (zero outside it: then each reads the clock).
		now := requestStart(w)
		var limit auth.Limiter
		if g.Limiter != nil {
			limit = g.Limiter
		}
		p, err := g.Auth.AuthenticateLimited(r.Context(), g.Surface, first(authz), first(key), now, limit)
		if err != nil {
			setRetryAfter(w, err)
			return err
		}
		return h(w, r, p)
	}
}

// once refuses a header given more than once: names and values in pairs.
func once(name1 string, v1 []string, name2 string, v2 []string) error {
	var fs []instore.FieldError
	if len(v1) > 1 {
		fs = append(fs, instore.FieldError{Field: name1, Message: "must be sent once"})
	}
	if len(v2) > 1 {
		fs = append(fs, instore.FieldError{Field: name2, Message: "must be sent once"})
	}
	if fs != nil {
		return validation(fs...)
	}
	return nil
}

func first(v []string) string {
	if len(v) > 0 {
		return v[0]
	}
	return ""
}

// RateLimiter is a token bucket per key: the Guard's key is the API client
// of the request's token (auth.Limiter).
type RateLimiter struct {
	limit rate.Limit
	burst int
	mu    sync.Mutex
	keys  map[string]*rate.Limiter
}

var _ auth.Limiter = (*RateLimiter)(nil)

// NewRateLimiter allows perSecond requests per key with bursts of burst.
// perSecond <= 0 disables limiting (nil limiter).
func NewRateLimiter(perSecond float64, burst int) *RateLimiter {
	if perSecond <= 0 {
		return nil
	}
	if burst < 1 {
		burst = int(math.Ceil(perSecond))
	}
	return &RateLimiter{limit: rate.Limit(perSecond), burst: burst, keys: map[string]*rate.Limiter{}}
}

// rateLimited is the error of a request over the limit: rate-limited, and
// the seconds to wait for Retry-After.
type rateLimited struct {
	err        *instore.Error
	retryAfter int
}

func (e *rateLimited) Error() string { return e.err.Error() }
func (e *rateLimited) Unwrap() error { return e.err }

// setRetryAfter sets Retry-After when err is a rate limit's.
func setRetryAfter(w http.ResponseWriter, err error) {
	var rl *rateLimited
	if errors.As(err, &rl) {
		w.Header().Set("Retry-After", strconv.Itoa(rl.retryAfter))
	}
}

// Allow takes one token for key, or answers rate-limited with Retry-After.
func (l *RateLimiter) Allow(key string, w http.ResponseWriter) error {
	return l.AllowAt(key, time.Time{}, w)
}

// AllowAt is Allow at now, a time just read from time.Now (the request's
// arrival); a zero now reads the clock.
func (l *RateLimiter) AllowAt(key string, now time.Time, w http.ResponseWriter) error {
	err := l.Limit(key, now)
	setRetryAfter(w, err)
	return err
}

// Limit takes one token for key at now (zero: the clock's), or returns a
// rate-limited error that says when to retry.
func (l *RateLimiter) Limit(key string, now time.Time) error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	lim, ok := l.keys[key]
	if !ok {
		if len(l.keys) >= 100000 {
			clear(l.keys)
		}
		lim = rate.NewLimiter(l.limit, l.burst)
		l.keys[key] = lim
	}
	l.mu.Unlock()
	if now.IsZero() {
		now = time.Now()
	}
	rsv := lim.ReserveN(now, 1)
	if d := rsv.DelayFrom(now); d > 0 {
		rsv.CancelAt(now)
		secs := int(math.Ceil(d.Seconds()))
		return &rateLimited{retryAfter: secs, err: instore.Errorf(instore.ERateLimited,
			"Rate limit of %g requests per second exceeded; retry after %d s.", float64(l.limit), secs)}
	}
	return nil
}

// LimitPeer applies l to h per peer address (the connection's IP, before
// any proxy), for an endpoint that must look up the store before it knows
// the client: the token endpoint. A nil l does not limit.
func LimitPeer(l *RateLimiter, h HandlerFunc) HandlerFunc {
	if l == nil {
		return h
	}
	return func(w http.ResponseWriter, r *http.Request) error {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			host = r.RemoteAddr
		}
		if err := l.Allow("peer "+host, w); err != nil {
			return err
		}
		return h(w, r)
	}
}

// TokenHandler is POST /oauth2/token: the RFC 6749 client credentials grant,
// with the client authenticated by HTTP Basic or by form fields. A
// parameter given twice (RFC 6749 3.2), a second Authorization header and
// a client_id that cannot be one (auth.ValidClientID) are invalid_request
// (400), before any read of the store.
func TokenHandler(a *auth.Authenticator, surface instore.Surface) HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if err := ReadForm(r); err != nil {
			return err
		}
		form := r.PostForm
		for _, name := range []string{"grant_type", "client_id", "client_secret"} {
			if len(form[name]) > 1 {
				return oauthError("invalid_request", name+" is given more than once", instore.EValidation, "/"+name)
			}
		}
		if len(r.Header["Authorization"]) > 1 {
			return oauthError("invalid_request", "the Authorization header is given more than once", instore.EValidation, "Authorization")
		}
		if gt := form.Get("grant_type"); gt != "client_credentials" {
			if gt == "" {
				return oauthError("invalid_request", "grant_type is required", instore.EValidation, "/grant_type")
			}
			return oauthError("unsupported_grant_type", "only client_credentials is supported", instore.EValidation, "/grant_type")
		}
		id, secret, basic := r.BasicAuth()
		if basic {
			if form.Has("client_id") || form.Has("client_secret") {
				return oauthError("invalid_request", "send client credentials either by HTTP Basic or in the form, not both", instore.EValidation, "")
			}
			// RFC 6749 2.3.1: both are form-urlencoded inside Basic.
			var e1, e2 error
			id, e1 = url.QueryUnescape(id)
			secret, e2 = url.QueryUnescape(secret)
			if e1 != nil || e2 != nil {
				return oauthError("invalid_request", "malformed Basic credentials", instore.EValidation, "")
			}
		} else {
			id, secret = form.Get("client_id"), form.Get("client_secret")
		}
		if id != "" && !auth.ValidClientID(id) {
			return oauthError("invalid_request", fmt.Sprintf("client_id must be 1-%d printable ASCII characters", auth.MaxClientIDLen), instore.EValidation, "/client_id")
		}
		tok, _, err := a.IssueToken(r.Context(), surface, id, secret)
		if err != nil {
			var e *instore.Error
			if errors.As(err, &e) && e.Code == instore.EUnauthorized {
				w.Header().Set("WWW-Authenticate", `Basic realm="instore"`)
				return &oauthErr{err: &instore.Error{Code: instore.EUnauthorized, Detail: "Client authentication failed.", Err: e.Err}, oauth: "invalid_client"}
			}
			return err
		}
		body, _ := json.Marshal(struct {
			AccessToken string `json:"access_token"`
			TokenType   string `json:"token_type"`
			ExpiresIn   int64  `json:"expires_in"`
		}{tok, "Bearer", int64(a.TokenTTL() / time.Second)})
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Cache-Control", "no-store")
		h.Set("Pragma", "no-cache")
		w.Write(body)
		return nil
	}
}

// oauthErr is a problem that also carries the RFC 6749 error code.
type oauthErr struct {
	err   *instore.Error
	oauth string
}

func (e *oauthErr) Error() string { return e.err.Error() }
func (e *oauthErr) Unwrap() error { return e.err }

func oauthError(code, desc, problem, field string) error {
	e := &oauthErr{err: &instore.Error{Code: problem, Detail: desc}, oauth: code}
	if field != "" {
		e.err.Fields = []instore.FieldError{{Field: field, Message: desc}}
	}
	return e
}

// oauthCode returns the RFC 6749 error code carried by err, if any.
func oauthCode(err error) (string, string) {
	var e *oauthErr
	if errors.As(err, &e) {
		return e.oauth, e.err.Detail
	}
	return "", ""
}
