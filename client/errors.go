package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/instore-dev/instore"
)

// ProblemTypePrefix starts the type of every problem the service answers:
// urn:instore:problem:<name>, where name is a problem name of package
// instore (instore.EValidation...) or a service error code (instore.WP09...).
const ProblemTypePrefix = "urn:instore:problem:"

// FieldError names one invalid field of a request: a JSON pointer into
// the body (/amount) or the name of a query, path or header parameter.
type FieldError = instore.FieldError

// Error is an answer of the service other than 2xx: its RFC 9457 problem
// details plus what the client knows of the call. Get it with errors.As:
//
//	var e *client.Error
//	if errors.As(err, &e) && e.ErrorCode == instore.WP23 { ... }
type Error struct {
	// StatusCode is the HTTP status.
	StatusCode int
	// Type is the problem type, urn:instore:problem:<name>.
	Type string
	// Title is short; for a service error code it is the code's
	// description of the errorCodes list.
	Title string
	// Detail explains this occurrence; it is safe to show.
	Detail string
	// RequestID is the X-Request-Id of the answer; quote it in support
	// requests.
	RequestID string
	// ErrorID and ErrorCode are the errorCodes entry (1 and "WP01" ...)
	// when one applies; 0 and "" otherwise.
	ErrorID   int
	ErrorCode string
	// OnlineAPIRefID names the transaction the error is about (WP09: the
	// one occupying the terminal; WP25, WP30).
	OnlineAPIRefID string
	// Errors lists the invalid fields of a validation problem.
	Errors []FieldError
	// RetryAfter is the wait a 429 (or 503) asked for.
	RetryAfter time.Duration
	// Replayed is true when the answer is the stored answer to an earlier
	// request with the same Idempotency-Key (Idempotent-Replayed: true).
	Replayed bool
	// Method and Route name the call, with the path as a template
	// (/in-store/api/v1/terminal/{terminalId}).
	Method, Route string
}

// problemJSON is the wire form of a problem.
type problemJSON struct {
	Type             string       `json:"type"`
	Title            string       `json:"title"`
	Status           int          `json:"status"`
	Detail           string       `json:"detail"`
	RequestID        string       `json:"requestId"`
	ErrorID          *int         `json:"errorId"`
	ErrorCode        string       `json:"errorCode"`
	OnlineAPIRefID   string       `json:"onlineAPIRefId"`
	Errors           []FieldError `json:"errors"`
	OAuthError       string       `json:"error"`
	OAuthDescription string       `json:"error_description"`
}

func newError(cl call, resp *http.Response, body []byte, now time.Time) *Error {
	e := &Error{
		StatusCode: resp.StatusCode, Method: cl.method, Route: cl.route,
		RequestID:  resp.Header.Get("X-Request-Id"),
		RetryAfter: retryAfter(resp.Header.Get("Retry-After"), now),
		Replayed:   strings.EqualFold(resp.Header.Get("Idempotent-Replayed"), "true"),
	}
	var p problemJSON
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if (mt == "application/problem+json" || mt == "application/json") && json.Unmarshal(body, &p) == nil {
		e.Type, e.Title, e.Detail, e.ErrorCode, e.OnlineAPIRefID, e.Errors = p.Type, p.Title, p.Detail, p.ErrorCode, p.OnlineAPIRefID, p.Errors
		if p.ErrorID != nil {
			e.ErrorID = *p.ErrorID
		}
		if p.RequestID != "" {
			e.RequestID = p.RequestID
		}
		if e.Detail == "" && p.OAuthDescription != "" {
			e.Detail = p.OAuthDescription
		}
	}
	if e.Title == "" {
		e.Title = http.StatusText(resp.StatusCode)
	}
	return e
}

// Error reads "client: POST /in-store/api/v1/purchase: 409 WP09 Terminal
// is busy processing previous transaction: <detail> (requestId ...)".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("client: ")
	if e.Method != "" {
		fmt.Fprintf(&b, "%s %s: ", e.Method, e.Route)
	}
	fmt.Fprintf(&b, "%d ", e.StatusCode)
	if e.ErrorCode != "" {
		b.WriteString(e.ErrorCode + " ")
	} else if p := e.Problem(); p != "" {
		b.WriteString(p + ": ")
	}
	b.WriteString(e.Title)
	if e.Detail != "" && e.Detail != e.Title {
		b.WriteString(": " + strings.TrimSuffix(e.Detail, "."))
	}
	for i, f := range e.Errors {
		if i == 0 {
			b.WriteString(" (")
		} else {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s %s", f.Field, f.Message)
		if i == len(e.Errors)-1 {
			b.WriteString(")")
		}
	}
	if e.RequestID != "" {
		fmt.Fprintf(&b, " (requestId %s)", e.RequestID)
	}
	return b.String()
}

// Problem returns the name of the problem type: "validation",
// "unauthorized", "WP09"...; "" when the answer was not a problem.
func (e *Error) Problem() string {
	return strings.TrimPrefix(e.Type, ProblemTypePrefix)
}

// Code returns the service error code when one applies, the problem name
// otherwise.
func (e *Error) Code() string {
	if e.ErrorCode != "" {
		return e.ErrorCode
	}
	return e.Problem()
}

// retryable reports whether sending the call again may get another
// answer: 429, and 5xx that is neither a service error code (WP25 is the
// transaction's final word) nor the replay of a stored answer.
func (e *Error) retryable() bool {
	switch {
	case e.StatusCode == http.StatusTooManyRequests:
		return true
	case e.StatusCode >= 500:
		return e.ErrorCode == "" && !e.Replayed
	}
	return false
}

// ErrorCode returns the service error code (WP01...) or problem name
// (validation, not-found...) of err when it is or wraps an *Error, and ""
// otherwise (a network error, a cancelled context).
func ErrorCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code()
	}
	return ""
}

// IsCode reports whether err is or wraps an *Error with this service error
// code or problem name, e.g. IsCode(err, instore.WP09).
func IsCode(err error, code string) bool {
	return code != "" && ErrorCode(err) == code
}
