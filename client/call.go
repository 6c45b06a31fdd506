package client

import (
	"net/http"
	"runtime/debug"
	"strings"
)

// A CallOption adjusts one call: every method that calls the service takes
// any number of them after its parameters. The options are IdempotencyKey
// and SaveResponse.
type CallOption func(*callOptions)

type callOptions struct {
	key  string
	resp *Response
}

func collect(opts []CallOption) callOptions {
	var o callOptions
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return o
}

// IdempotencyKey sends key as the Idempotency-Key of this call (a POST)
// instead of a random one, on its first attempt and on every retry. An ECR
// that stores the key with the sale before it calls Purchase can repeat
// the call after a crash of its own, or after SaveResponse showed it the
// key of a call that got no answer, and gets the first answer back
// (Response.Replayed), never a second charge. Keys are 1-255 printable
// ASCII characters, scoped to the merchant and remembered 24 hours; a key
// sent again with another body answers 422 idempotency-key-reused. A GET
// ignores the option. Without it every POST gets a key of its own
// (NewIdempotencyKey).
func IdempotencyKey(key string) CallOption {
	return func(o *callOptions) { o.key = key }
}

// SaveResponse stores what the client knows of the call's answer in *r
// when the call returns: on success always; after an error the members
// the client got (an *Error carries the same request id and status).
// For WaitForFinal and AllTransactions it describes the last request.
//
//	var r client.Response
//	tx, err := c.Purchase(ctx, p, client.SaveResponse(&r))
//	log.Printf("purchase %s: request %s, replayed %t", tx.OnlineAPIRefID, r.RequestID, r.Replayed)
func SaveResponse(r *Response) CallOption {
	return func(o *callOptions) { o.resp = r }
}

// Response is the metadata of the answer to a call: what the service said
// besides the body.
type Response struct {
	// StatusCode is the HTTP status of the last answer (0 when none came,
	// as after a network error).
	StatusCode int
	// RequestID is the answer's X-Request-Id: quote it in support
	// requests.
	RequestID string
	// Replayed is true when the answer is the stored answer to an
	// earlier request with the same Idempotency-Key
	// (Idempotent-Replayed: true): nothing new was started.
	Replayed bool
	// IdempotencyKey is the key the call sent (a POST; "" for a GET),
	// given with IdempotencyKey or made by the client. It is set even
	// when no answer came: call again with IdempotencyKey(key) to learn
	// what the first call did.
	IdempotencyKey string
	// Attempts is how many requests the call made: 1, or more after
	// retries.
	Attempts int
	// Header is the last answer's header.
	Header http.Header
}

// modulePath is the module the SDK belongs to.
const modulePath = "github.com/instore-dev/instore"

// Version is the version of the SDK the program was built with, as the go
// command recorded it: the module version of github.com/instore-dev/instore
// (v1.2.3, or a pseudo-version), "devel" when the program is built inside
// the module itself without a version (go test, go run). It is sent in
// the User-Agent, instore-go/<Version>.
var Version = moduleVersion(debug.ReadBuildInfo())

// moduleVersion finds the version of modulePath in bi: a dependency's
// (with its replacement's, when replaced), or the main module's.
func moduleVersion(bi *debug.BuildInfo, ok bool) string {
	if !ok || bi == nil {
		return "devel"
	}
	v := ""
	if bi.Main.Path == modulePath {
		v = bi.Main.Version
	}
	for _, m := range bi.Deps {
		if m.Path != modulePath {
			continue
		}
		v = m.Version
		if m.Replace != nil && m.Replace.Version != "" {
			v = m.Replace.Version
		}
	}
	if v == "" || v == "(devel)" {
		return "devel"
	}
	return v
}

// userAgent is the User-Agent sent: the program's own product token
// (Config.UserAgent) first, when it gave one, then the SDK's.
func userAgent(program string) string {
	sdk := "instore-go/" + Version
	if program = strings.TrimSpace(program); program == "" {
		return sdk
	}
	return program + " " + sdk
}
