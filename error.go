package instore

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Problem names: the <name> of urn:instore:problem:<name> for errors that are
// not a service error code. Service error codes (WP01...) are names too.
const (
	EUnauthorized         = "unauthorized"
	EForbidden            = "forbidden"
	EValidation           = "validation"
	ENotFound             = "not-found"
	EMethodNotAllowed     = "method-not-allowed"
	EPayloadTooLarge      = "payload-too-large"
	EUnsupportedMediaType = "unsupported-media-type"
	ERateLimited          = "rate-limited"
	EIdempotencyConflict  = "idempotency-conflict"
	ENotReversible        = "not-reversible"
	ENotConfirmable       = "not-confirmable"
	ELinkCodeInvalid      = "link-code-invalid"
	EConflict             = "conflict"
	EInternal             = "internal"
	EUnavailable          = "unavailable"
)

// Service error codes of the errorCodes list.
const (
	WP01 = "WP01"
	WP02 = "WP02"
	WP03 = "WP03"
	WP04 = "WP04"
	WP09 = "WP09"
	WP16 = "WP16"
	WP18 = "WP18"
	WP22 = "WP22"
	WP23 = "WP23"
	WP25 = "WP25"
	WP26 = "WP26"
	WP27 = "WP27"
	WP30 = "WP30"
	WP36 = "WP36"
	WP37 = "WP37"
)

// httpStatus is the one table from an error code to its HTTP status, as the
// Online API contract gives it. WP36 and WP37 are stored on transactions and
// never answer a request, so they are absent.
var httpStatus = map[string]int{
	EUnauthorized:         401,
	EForbidden:            403,
	EValidation:           400,
	ENotFound:             404,
	EMethodNotAllowed:     405,
	EPayloadTooLarge:      413,
	EUnsupportedMediaType: 415,
	ERateLimited:          429,
	EIdempotencyConflict:  422,
	ENotReversible:        409,
	ENotConfirmable:       409,
	ELinkCodeInvalid:      400,
	EConflict:             409,
	EInternal:             500,
	EUnavailable:          503,

	WP01: 409,
	WP02: 409,
	WP03: 403,
	WP04: 404,
	WP09: 409,
	WP16: 403,
	WP18: 409,
	WP22: 400,
	WP23: 409,
	WP25: 504,
	WP26: 400,
	WP27: 400,
	WP30: 409,
}

// HTTPStatus returns the HTTP status for an error code; unknown codes are 500.
func HTTPStatus(code string) int {
	if s, ok := httpStatus[code]; ok {
		return s
	}
	return 500
}

// FieldError names one invalid field of a request by JSON pointer.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Error is the one error type the domain returns to its callers. Code is a
// problem name or a WP code; Detail is safe to show a client; Err is the
// cause, kept for the log and never shown.
type Error struct {
	Code   string
	Detail string
	// Fields lists the invalid fields of a validation error.
	Fields []FieldError
	// OnlineAPIRefID names the transaction an error is about (WP09, WP25, WP30).
	OnlineAPIRefID string
	// Reason refines Code where one code has several causes a client
	// treats differently: for WP09, ReasonTransaction, ReasonUpdate or
	// ReasonBatchClose (batch.go).
	Reason string
	Err    error
}

func (e *Error) Error() string {
	msg := e.Code
	if e.Detail != "" {
		msg += ": " + strings.TrimSuffix(e.Detail, ".")
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// Reasons of WP09 (Error.Reason): the terminal runs a transaction (named
// by OnlineAPIRefID), or installs a software update.
const (
	ReasonTransaction = "TRANSACTION_IN_PROGRESS"
	ReasonUpdate      = "SOFTWARE_UPDATE"
)

// Errorf returns an *Error with a client-safe detail message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Detail: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of err if it is or wraps an *Error, and
// EInternal otherwise: an error the domain did not classify is never the
// client's fault.
func ErrorCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return EInternal
}

// ErrNotFound is returned by stores when a row does not exist.
var ErrNotFound = errors.New("not found")

// ErrConflict is returned by stores when a unique constraint or a guard on
// the current state refused a write.
var ErrConflict = errors.New("conflict")

// ProblemNames lists every problem name a request can be answered with
// (the names of urn:instore:problem:<name>), sorted: the problem names
// above and the service error codes that answer requests.
func ProblemNames() []string {
	names := make([]string, 0, len(httpStatus))
	for n := range httpStatus {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
