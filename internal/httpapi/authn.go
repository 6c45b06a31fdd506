package httpapi

import (
	"encoding/json"
	"errors"
	"math"
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

// Guard authenticates requests of one surface and applies the per-key rate
// limit.
type Guard struct {
	Auth    *auth.Authenticator
	Surface instore.Surface
	Limiter *RateLimiter
}

// Wrap returns a handler that runs h only for an authenticated request.
func (g *Guard) Wrap(h AuthedFunc) HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		// The clock as the request arrived, read once by the middleware
		// (zero outside it: then each reads the clock).
		now := requestStart(w)
		p, err := g.Auth.AuthenticateAt(r.Context(), g.Surface,
			headerValue(r.Header, "Authorization"), headerValue(r.Header, "Ocp-Apim-Subscription-Key"), now)
		if err != nil {
			return err
		}
		if err := g.Limiter.AllowAt(p.KeyID, now, w); err != nil {
			return err
		}
		return h(w, r, p)
	}
}

// RateLimiter is a token bucket per subscription key.
type RateLimiter struct {
	limit rate.Limit
	burst int
	mu    sync.Mutex
	keys  map[string]*rate.Limiter
}

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

// Allow takes one token for key, or answers rate-limited with Retry-After.
func (l *RateLimiter) Allow(key string, w http.ResponseWriter) error {
	return l.AllowAt(key, time.Time{}, w)
}

// AllowAt is Allow at now, a time just read from time.Now (the request's
// arrival); a zero now reads the clock.
func (l *RateLimiter) AllowAt(key string, now time.Time, w http.ResponseWriter) error {
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
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		return instore.Errorf(instore.ERateLimited, "Rate limit of %g requests per second per subscription key exceeded; retry after %d s.", float64(l.limit), secs)
	}
	return nil
}

// TokenHandler is POST /oauth2/token: the RFC 6749 client credentials grant,
// with the client authenticated by HTTP Basic or by form fields.
func TokenHandler(a *auth.Authenticator, surface instore.Surface) HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if err := ReadForm(r); err != nil {
			return err
		}
		form := r.PostForm
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
