// Package httpapi is the HTTP plumbing the service's surfaces share:
// problem details (RFC 9457), request ids, the access log, metrics, panic
// recovery, body limits and strict JSON decoding. Handlers return errors;
// the client-safe message is kept apart from the logged cause.
package httpapi

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/instore-dev/instore"
)

// ProblemContentType is the media type of every error body.
const ProblemContentType = "application/problem+json"

// Problem is an RFC 9457 problem details body.
type Problem struct {
	Type           string               `json:"type"`
	Title          string               `json:"title"`
	Status         int                  `json:"status"`
	Detail         string               `json:"detail,omitempty"`
	RequestID      string               `json:"requestId"`
	ErrorID        *int                 `json:"errorId,omitempty"`
	ErrorCode      string               `json:"errorCode,omitempty"`
	OnlineAPIRefID string               `json:"onlineAPIRefId,omitempty"`
	Reason         string               `json:"reason,omitempty"`
	Errors         []instore.FieldError `json:"errors,omitempty"`
	// OAuthError and OAuthErrorDescription are the RFC 6749 members the
	// token endpoint adds, so OAuth client libraries understand the answer.
	OAuthError            string `json:"error,omitempty"`
	OAuthErrorDescription string `json:"error_description,omitempty"`
}

// titles of the problem names; WP codes take their description instead.
var titles = map[string]string{
	instore.EUnauthorized:         "Unauthorized",
	instore.EForbidden:            "Forbidden",
	instore.EValidation:           "Request validation failed",
	instore.ENotFound:             "Not found",
	instore.EMethodNotAllowed:     "Method not allowed",
	instore.EPayloadTooLarge:      "Payload too large",
	instore.EUnsupportedMediaType: "Unsupported media type",
	instore.ERateLimited:          "Too many requests",
	instore.EIdempotencyConflict:  "Idempotency key reused with a different request",
	instore.ENotReversible:        "Transaction cannot be reversed",
	instore.ENotConfirmable:       "Transaction cannot be confirmed",
	instore.ELinkCodeInvalid:      "Link code invalid",
	instore.EConflict:             "Conflict",
	instore.EInternal:             "Internal server error",
	instore.EUnavailable:          "Service unavailable",
}

const internalDetail = "An internal error occurred. Quote the requestId when you report it."

// NewProblem builds the problem body for err. Errors the domain did not
// classify become a generic internal problem that reveals nothing.
func NewProblem(err error, requestID string, meta *instore.Metadata) *Problem {
	var e *instore.Error
	if !errors.As(err, &e) {
		e = &instore.Error{Code: instore.EInternal}
	}
	p := &Problem{
		Type:           "urn:instore:problem:" + e.Code,
		Title:          titles[e.Code],
		Status:         instore.HTTPStatus(e.Code),
		Detail:         e.Detail,
		RequestID:      requestID,
		OnlineAPIRefID: e.OnlineAPIRefID,
		Reason:         e.Reason,
		Errors:         e.Fields,
	}
	if c, ok := meta.ErrorCode(e.Code); ok {
		id := c.ID
		p.ErrorID, p.ErrorCode, p.Title = &id, c.Code, c.Description
	}
	if p.Title == "" {
		p.Title = titles[instore.EInternal]
	}
	if p.Status >= 500 && p.Detail == "" || e.Code == instore.EInternal {
		p.Detail = internalDetail
	}
	return p
}

// UnavailableRetryAfter is the Retry-After, in seconds, of a 503 that sets
// none of its own: the service cannot serve for now (its store has no
// primary, it starts or drains) and a retry soon may find it back.
const UnavailableRetryAfter = "2"

// WriteProblem writes p. A 401 carries WWW-Authenticate, a 429 Retry-After
// when the error says how long, a 503 Retry-After (UnavailableRetryAfter
// unless set).
func WriteProblem(w http.ResponseWriter, p *Problem) {
	h := w.Header()
	h.Set("Content-Type", ProblemContentType)
	h.Set("Cache-Control", "no-store")
	h.Del("ETag")
	if p.Status == http.StatusUnauthorized && h.Get("WWW-Authenticate") == "" {
		h.Set("WWW-Authenticate", "Bearer")
	}
	if p.Status == http.StatusServiceUnavailable && h.Get("Retry-After") == "" {
		h.Set("Retry-After", UnavailableRetryAfter)
	}
	b, err := json.Marshal(p)
	if err != nil { // cannot happen with these field types
		b = []byte(`{"type":"urn:instore:problem:internal","title":"Internal server error","status":500}`)
	}
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(p.Status)
	w.Write(b)
}

// Error answers a request with the problem for err and records err as the
// request's cause so the access log shows it (the client never sees it).
func (a *API) Error(w http.ResponseWriter, r *http.Request, err error) {
	info := infoFrom(w)
	rid := ""
	if info != nil {
		rid = info.RequestID
		info.Err = err
	}
	if a.Unavailable != nil && instore.ErrorCode(err) == instore.EInternal && a.Unavailable(err) {
		err = &instore.Error{Code: instore.EUnavailable, Detail: a.UnavailableDetail, Err: err}
	}
	p := NewProblem(err, rid, a.Metadata)
	p.OAuthError, p.OAuthErrorDescription = oauthCode(err)
	if p.Status >= 500 {
		a.Logger.LogAttrs(r.Context(), slog.LevelError, "request failed",
			slog.String("requestId", rid), slog.String("error", err.Error()))
	}
	WriteProblem(w, p)
}

// WriteJSON answers status with v as a JSON body and its Content-Length
// (the answers of the API surfaces that are not problems).
func WriteJSON(w http.ResponseWriter, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	w.Write(b)
	return nil
}
